//! Thousands of kept-alive locks in one process: renewals travel in pipelined batches (one
//! round trip per master per batch, many renewals each), bounded so that each is answered
//! well within the node timeout, and every lock stays held.

use std::time::Duration;

use crate::common::inspect::*;
use crate::common::*;
use futures::StreamExt;
use redis::AsyncCommands;
use redquorum::{
    KeepAlive, KeepAliveOptions, Lock, LockOptions, LossReason, Redlock, RenewalStats, RetryPolicy,
    Vote,
};
use redquorum_testkit::LocalCluster;

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

/// `count` locks named `{prefix}-{i}`, each kept alive with `options`.
async fn hold(
    redlock: &Redlock,
    prefix: &str,
    count: usize,
    options: KeepAliveOptions,
) -> Vec<(Lock, KeepAlive)> {
    futures::stream::iter(0..count)
        .map(|i| {
            let redlock = redlock.clone();
            async move {
                let lock = redlock
                    .lock_with([format!("{prefix}-{i}")], LockOptions::new())
                    .await
                    .expect("free resource");
                let keep = lock.keep_alive_with(options).expect("valid");
                (lock, keep)
            }
        })
        .buffer_unordered(64)
        .collect()
        .await
}

/// The locks are held until every one of them has been renewed since the hold began, and
/// there were several intervals' worth of renewals (two minutes at most), however long the
/// machine takes to get there.
///
/// The node timeout is long here: this test is about batching, not about how many renewals
/// a loaded machine can take in time (the next one is).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_held_locks_renew_in_pipelined_batches() {
    const LOCKS: usize = 10_000;
    /// Renewal intervals the locks are held for.
    const INTERVALS: u64 = 3;
    let masters = cluster(5);
    let redlock = builder(masters.urls())
        .ttl(Duration::from_secs(12))
        .node_timeout(Duration::from_millis(1000))
        // Ten thousand acquisitions on a loaded machine: some need another attempt.
        .retry(RetryPolicy::new().attempts(20))
        .build()
        .expect("valid");
    redlock.connect().await;
    let options = KeepAliveOptions::new().renew_after(Duration::from_secs(1));
    let held = hold(&redlock, "many", LOCKS, options).await;
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
    // the batch count and the per-master round trips, so the wait also asks for a snapshot
    // in which they agree; were there ever more (or fewer) round trips than batches, the
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
            "within {budget:?}: {ticks} batches, round trips {round_trips:?}, {renewed} renewals, \
             {} locks not renewed since the hold began: {stats:?}",
            not_renewed()
        );
    };
    let (ticks, round_trips, renewed) = since(&stats, &before);
    for (node, trips) in round_trips.iter().enumerate() {
        assert_eq!(*trips, ticks, "master {node}: one round trip per batch");
    }
    // Every lock was renewed in each interval, many per round trip, never more than a
    // batch's bound.
    assert!(renewed >= INTERVALS * LOCKS as u64, "{stats:?}");
    assert!(
        renewed / ticks >= 100,
        "batches average {} locks",
        renewed / ticks
    );
    assert!(stats.batch_size <= 1024, "{stats:?}");
    assert_eq!((stats.lost, stats.failed), (0, 0), "{stats:?}");
    assert_eq!(stats.scheduled, LOCKS);
    // The masters ran those extensions (EVALSHA, pipelined, up to 256 plain locks in one
    // `extend_many.lua` call): each renewal counted needed a quorum of them, and one call
    // renewed many locks.
    let ran: Vec<u64> = evalsha_calls(&masters)
        .await
        .iter()
        .zip(&calls_before)
        .map(|(now, before)| now - before)
        .collect();
    assert!(
        ran.iter().sum::<u64>() >= 3 * renewed.div_ceil(256),
        "{ran:?} for {renewed} renewals"
    );
    assert!(
        ran.iter().all(|&calls| calls <= renewed / 10),
        "{ran:?} calls for {renewed} renewals: not batched"
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
        "{LOCKS} locks: {ticks} batches, {renewed} renewals, {} per round trip",
        renewed / ticks
    );
}

/// Five thousand kept-alive locks with a 10 ms node timeout. One pipeline of all their
/// extensions needs a master at least 19 ms (at its best, about 4 µs each), so renewal in a
/// single batch per tick — what redquorum did before batches were bounded — times out every
/// time and loses every lock at its first deadline. Bounded batches keep them all, renewal
/// period after renewal period.
///
/// Nothing here depends on how fast the machine is: on a slow one the batches only get
/// smaller, and late answers still count. The ttl (6 s, renewal every 2 s) leaves seconds
/// for retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_thousand_locks_stay_held_with_a_ten_millisecond_node_timeout() {
    const LOCKS: usize = 5_000;
    /// Renewals of each lock the test waits for.
    const RENEWALS: u32 = 3;
    let every = Duration::from_secs(2);
    let masters = cluster(5);
    let redlock = builder(masters.urls())
        .ttl(Duration::from_secs(6))
        .node_timeout(Duration::from_millis(10))
        // Acquisitions have 10 ms too: on a loaded machine some need another attempt.
        .retry(RetryPolicy::new().attempts(20))
        .build()
        .expect("valid");
    redlock.connect().await;
    let held = hold(&redlock, "short", LOCKS, KeepAliveOptions::new()).await;
    let deadlines_before: Vec<_> = held.iter().map(|(lock, _)| lock.deadline()).collect();
    // Renewed RENEWALS times pushes a deadline back by at least RENEWALS intervals, less
    // the slack by which a renewal may go early (a quarter of one).
    let pushed = (every - every / 4) * RENEWALS;
    let lagging = || {
        held.iter()
            .zip(&deadlines_before)
            .filter(|((lock, _), before)| lock.deadline() < **before + pushed)
            .count()
    };
    let budget = Duration::from_secs(120);
    let outcome = poll_within(budget, || {
        let lost = held.iter().filter(|(lock, _)| lock.is_expired()).count();
        let done = if lost > 0 {
            Some(Err(lost))
        } else {
            (lagging() == 0).then_some(Ok(()))
        };
        async move { done }
    })
    .await;
    let stats = redlock.renewal_stats();
    match outcome {
        Some(Ok(())) => {}
        Some(Err(lost)) => panic!("{lost} of {LOCKS} locks lost: {stats:?}"),
        None => panic!(
            "within {budget:?}, {} of {LOCKS} locks not renewed {RENEWALS} times: {stats:?}",
            lagging()
        ),
    }
    assert_eq!(stats.lost, 0, "{stats:?}");
    assert!(held.iter().all(|(lock, _)| !lock.is_expired()));
    // (A late renewal pushes a deadline a little further: the waits above may have taken
    // one renewal fewer per lock.)
    assert!(
        stats.renewed >= u64::from(RENEWALS - 1) * LOCKS as u64,
        "{stats:?}"
    );
    println!("{LOCKS} locks, node timeout 10 ms: {stats:?}");
}

/// Two thousand kept-alive locks renewed together (`extend_many.lua`, many locks per call),
/// and one of them stolen mid-hold: its key overwritten with another value on every master.
/// Its renewal is refused — that lock alone is lost, signalled as not ours — the thief's key
/// is left as it is (value and no expiry), and every other lock of the same calls stays
/// held, renewal after renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stolen_lock_among_many_renewed_together_is_lost_alone() {
    const LOCKS: usize = 2_000;
    const STOLEN: usize = 1_234;
    let masters = cluster(5);
    // Timings with room for a loaded machine (renewal every 2 s, a second per master):
    // nothing here is about speed.
    let redlock = builder(masters.urls())
        .ttl(Duration::from_secs(6))
        .node_timeout(Duration::from_millis(1000))
        .retry(RetryPolicy::new().attempts(20))
        .build()
        .expect("valid");
    redlock.connect().await;
    let held = hold(&redlock, "stolen", LOCKS, KeepAliveOptions::new()).await;
    // Renewed at least once together before the theft.
    let before = redlock.renewal_stats();
    let renewed_once = poll_within(Duration::from_secs(60), || {
        let done = redlock.renewal_stats().renewed >= before.renewed + LOCKS as u64;
        async move { done.then_some(()) }
    })
    .await;
    assert!(renewed_once.is_some(), "{:?}", redlock.renewal_stats());

    // `hold` collects the locks as they come: find the one on the resource to steal.
    let resource = format!("stolen-{STOLEN}");
    let stolen = held
        .iter()
        .position(|(lock, _)| lock.resources() == [resource.as_str()])
        .expect("the lock on the resource to steal");
    let key = format!("redquorum:lock:{resource}");
    for i in 0..5 {
        let _: () = conn(&masters.url(i))
            .await
            .set(&key, "thief")
            .await
            .expect("SET");
    }
    let lease = held[stolen].1.lease();
    let reason = tokio::time::timeout(Duration::from_secs(30), lease.lost())
        .await
        .expect("the stolen lock's loss is signalled");
    assert!(
        matches!(reason, LossReason::NotOurs { masters } if masters >= 3),
        "{reason:?}"
    );
    // The others: renewed twice more since (each deadline pushed back by more than an
    // interval), none lost.
    let deadlines: Vec<_> = held.iter().map(|(lock, _)| lock.deadline()).collect();
    let every = Duration::from_secs(2);
    let lagging = || {
        held.iter()
            .zip(&deadlines)
            .enumerate()
            .filter(|(i, ((lock, _), before))| {
                *i != stolen && lock.deadline() < **before + every + every / 2
            })
            .count()
    };
    let others = poll_within(Duration::from_secs(90), || {
        let lost = held
            .iter()
            .enumerate()
            .filter(|(i, (lock, _))| *i != stolen && lock.is_expired())
            .count();
        let done = if lost > 0 {
            Some(Err(lost))
        } else {
            (lagging() == 0).then_some(Ok(()))
        };
        async move { done }
    })
    .await;
    let stats = redlock.renewal_stats();
    match others {
        Some(Ok(())) => {}
        Some(Err(lost)) => panic!("{lost} other locks lost: {stats:?}"),
        None => panic!("{} other locks not renewed: {stats:?}", lagging()),
    }
    assert_eq!(stats.lost, 1, "{stats:?}");
    assert!(held[stolen].0.is_expired());
    // The thief's key: its value, and no expiry added by our renewals.
    assert_eq!(holders(&masters, &all(5), &key, "thief").await, 5);
    for (i, pttl) in pttls(&masters, &key).await.into_iter().enumerate() {
        assert_eq!(pttl, -1, "master {i}: the stolen key's expiry was changed");
    }
}
