//! Ten thousand kept-alive locks in one process: renewals are batched into one round trip
//! per master per tick, and every lock stays held.

use std::time::Duration;

use crate::common::inspect::*;
use crate::common::*;
use futures::StreamExt;
use redquorum::{KeepAliveOptions, LockOptions, RenewalStats, Vote};
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

/// The locks are held until every one of them has been renewed since the hold began, and
/// there were several intervals' worth of renewals (two minutes at most), however long the
/// machine takes to get there.
///
/// The ttl is long next to the renewal interval: on a loaded machine a master may fall
/// behind a batch of ten thousand extensions per second, and its queue of them grows (a
/// timed-out batch is still on the wire); its keys must not run out meanwhile, since this
/// test is about batching, not about how many renewals a machine can take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_held_locks_renew_in_one_round_trip_per_master_per_tick() {
    let masters = cluster(5);
    let redlock = builder(masters.urls())
        .ttl(Duration::from_secs(12))
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
    let deadlines_before: Vec<_> = held.iter().map(|(lock, _)| lock.deadline()).collect();
    let not_renewed = || {
        held.iter()
            .zip(&deadlines_before)
            .filter(|((lock, _), before)| lock.deadline() <= **before)
            .count()
    };

    // A snapshot of the counters may be taken while the renewal task is between bumping
    // the tick count and the per-master round trips, so the wait also asks for a snapshot
    // in which they agree; were there ever more (or fewer) round trips than ticks, the
    // totals would never agree again.
    let budget = Duration::from_secs(120);
    let done = poll_within(budget, || {
        let stats = redlock.renewal_stats();
        let (ticks, round_trips, renewed) = since(&stats, &before);
        let done = ticks >= INTERVALS
            && renewed >= INTERVALS * LOCKS as u64
            && round_trips.iter().all(|&r| r == ticks)
            && not_renewed() == 0;
        async move { done.then_some(stats) }
    })
    .await;
    let Some(stats) = done else {
        let stats = redlock.renewal_stats();
        let (ticks, round_trips, renewed) = since(&stats, &before);
        panic!(
            "within {budget:?}: {ticks} ticks, round trips {round_trips:?}, {renewed} renewals, \
             {} locks not renewed since the hold began: {stats:?}",
            not_renewed()
        );
    };
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
    // And every lock is still held, each renewed (its deadline pushed back) since then.
    for ((lock, _), before) in held.iter().zip(&deadlines_before) {
        assert!(!lock.is_expired() && lock.deadline() > *before, "{lock:?}");
    }
    for i in 0..5 {
        let keys = dbsize(&masters, i).await;
        if keys != LOCKS as i64 {
            let not_granted = held
                .iter()
                .filter(|(lock, _)| !matches!(lock.stats().votes()[i].vote, Vote::Granted))
                .count();
            panic!(
                "master {i} holds {keys} keys of {LOCKS}: {} expired by their ttl, {not_granted} \
                 acquisitions not granted there",
                expired_keys(&masters, i).await
            );
        }
    }
    println!(
        "{LOCKS} locks: {ticks} ticks, {renewed} renewals, {} per round trip",
        renewed / ticks
    );
}
