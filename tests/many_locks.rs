//! Ten thousand kept-alive locks in one process: renewals are batched into one round trip
//! per master per tick, and every lock stays held.

mod common;

use std::time::Duration;

use common::inspect::*;
use common::*;
use futures::StreamExt;
use redquorum::{KeepAliveOptions, LockOptions, RenewalStats};
use redquorum_testkit::LocalCluster;

const LOCKS: usize = 10_000;
/// Renewal intervals the locks are held for.
const INTERVALS: u64 = 3;

/// `EVALSHA` calls (extensions) each master has executed.
async fn evalsha_calls(masters: &LocalCluster) -> Vec<u64> {
    let mut calls = Vec::with_capacity(masters.len());
    for i in 0..masters.len() {
        calls.push(command_calls(masters, i, "evalsha").await);
    }
    calls
}

/// Ticks, round trips and renewals between two snapshots.
fn since(now: &RenewalStats, then: &RenewalStats) -> (u64, Vec<u64>, u64) {
    let round_trips = now
        .round_trips
        .iter()
        .zip(&then.round_trips)
        .map(|(n, t)| n - t)
        .collect();
    (
        now.ticks - then.ticks,
        round_trips,
        now.renewed - then.renewed,
    )
}

/// The locks are held until every one of them has been renewed in each of several renewal
/// intervals (a minute at most), however long the machine takes to get there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_held_locks_renew_in_one_round_trip_per_master_per_tick() {
    let masters = cluster(5);
    let redlock = builder(masters.urls())
        .ttl(Duration::from_secs(6))
        .node_timeout(Duration::from_millis(1000))
        .build()
        .expect("valid");
    redlock.connect().await;
    let options = KeepAliveOptions::new().renew_after(Duration::from_secs(1));
    let held: Vec<_> = futures::stream::iter(0..LOCKS)
        .map(|i| {
            let redlock = redlock.clone();
            async move {
                let lock = redlock
                    .lock_with([format!("many-{i}")], LockOptions::new())
                    .await
                    .expect("free resource");
                let keep = lock.keep_alive_with(options).expect("valid");
                (lock, keep)
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let calls_before = evalsha_calls(&masters).await;
    let before = redlock.renewal_stats();

    // Every lock renewed in each of several intervals. A snapshot of the counters is taken
    // while the renewal task may be between bumping the tick count and the per-master
    // round trips, so the wait also asks for a snapshot in which they agree; were there
    // ever more (or fewer) round trips than ticks, the totals would never agree again.
    let stats = eventually(
        Duration::from_secs(60),
        "every lock renewed in several intervals, one round trip per master per tick",
        || {
            let stats = redlock.renewal_stats();
            let (ticks, round_trips, renewed) = since(&stats, &before);
            let done = ticks >= INTERVALS
                && renewed >= INTERVALS * LOCKS as u64
                && round_trips.iter().all(|&r| r == ticks);
            async move { done.then_some(stats) }
        },
    )
    .await;
    let (ticks, round_trips, renewed) = since(&stats, &before);
    for (node, trips) in round_trips.iter().enumerate() {
        assert_eq!(*trips, ticks, "master {node}: one round trip per tick");
    }
    // Every lock was renewed in each interval, many per round trip.
    assert!(renewed >= INTERVALS * LOCKS as u64, "{stats:?}");
    assert!(
        renewed / ticks >= 1000,
        "batches average {} locks",
        renewed / ticks
    );
    assert_eq!(stats.lost, 0);
    assert_eq!(stats.scheduled, LOCKS);
    // The masters ran those extensions (EVALSHA, pipelined): each renewal counted needed
    // a quorum of them.
    let ran: Vec<u64> = evalsha_calls(&masters)
        .await
        .iter()
        .zip(&calls_before)
        .map(|(now, before)| now - before)
        .collect();
    assert!(
        ran.iter().sum::<u64>() >= 3 * renewed,
        "{ran:?} for {renewed} renewals"
    );
    // And every lock is still held.
    for (lock, _) in &held {
        assert!(lock.remaining() > Duration::from_secs(3), "{lock:?}");
    }
    for i in 0..5 {
        assert_eq!(dbsize(&masters, i).await, LOCKS as i64, "master {i}");
    }
    println!(
        "{LOCKS} locks: {ticks} ticks, {renewed} renewals, {} per round trip",
        renewed / ticks
    );
}
