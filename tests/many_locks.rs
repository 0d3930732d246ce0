//! Ten thousand kept-alive locks in one process: renewals are batched into one round trip
//! per master per tick, and every lock stays held.

mod common;

use std::time::Duration;

use common::*;
use futures::StreamExt;
use redquorum::{KeepAliveOptions, LockOptions};
use redquorum_testkit::LocalCluster;

const LOCKS: usize = 10_000;

/// `calls` of `cmdstat_evalsha` in INFO commandstats.
fn evalsha_calls(masters: &LocalCluster, i: usize) -> u64 {
    let info = masters.cmd(i, &["INFO", "commandstats"]).expect("INFO");
    let text = info.as_str().expect("bulk string").to_owned();
    text.lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

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
    let calls_before: Vec<u64> = (0..5).map(|i| evalsha_calls(&masters, i)).collect();
    let before = redlock.renewal_stats();

    // Hold for several renewal intervals.
    tokio::time::sleep(Duration::from_secs(4)).await;

    let stats = redlock.renewal_stats();
    let ticks = stats.ticks - before.ticks;
    let renewed = stats.renewed - before.renewed;
    assert!(ticks >= 3, "{stats:?}");
    for (node, (now, then)) in stats
        .round_trips
        .iter()
        .zip(&before.round_trips)
        .enumerate()
    {
        assert_eq!(now - then, ticks, "master {node}: one round trip per tick");
    }
    // Every lock was renewed in each interval, many per round trip.
    assert!(renewed >= 3 * LOCKS as u64, "{stats:?}");
    assert!(
        renewed / ticks >= 1000,
        "batches average {} locks",
        renewed / ticks
    );
    assert_eq!(stats.lost, 0);
    assert_eq!(stats.scheduled, LOCKS);
    // The masters ran those extensions (EVALSHA, pipelined): each renewal counted needed
    // a quorum of them.
    let ran: Vec<u64> = calls_before
        .iter()
        .enumerate()
        .map(|(i, before)| evalsha_calls(&masters, i) - before)
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
        let n = masters
            .cmd(i, &["DBSIZE"])
            .expect("DBSIZE")
            .as_int()
            .expect("int");
        assert_eq!(n, LOCKS as i64, "master {i}");
    }
    println!(
        "{LOCKS} locks: {ticks} ticks, {renewed} renewals, {} per round trip",
        renewed / ticks
    );
}
