//! Review of the waiting change (issue 23): a waiting `lock()` subscribes on every master
//! before its waiting attempt and again after each wake, each subscription bounded by the
//! connect timeout only — not by the caller's deadline. With one master unreachable without
//! a refusal (blackholed: the TCP connect succeeds, nothing answers), every subscription try
//! to it costs the whole connect timeout, and a `lock()` bounded by `RetryPolicy::timeout`
//! overruns its deadline by that much (each hand-over cycle pays it too).

use std::time::{Duration, Instant};

use crate::common::*;
use redquorum::RetryPolicy;
use redquorum_testkit::{Direction, Fault};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "reproduces: a waiting lock() overruns its deadline by the connect timeout while a master is blackholed"]
async fn a_waiting_lock_returns_by_its_deadline_with_a_master_blackholed() {
    let masters = cluster(3);
    let holder = client(&masters);
    let _held = holder.try_lock("deadline").await.expect("free");
    let links = masters.links().expect("links");
    let waiter = builder(links.urls())
        .node_timeout(Duration::from_millis(200))
        .connect_timeout(Duration::from_secs(4))
        .build()
        .expect("valid");
    // Connections made everywhere first.
    let warm = waiter.try_lock("warm-up").await.expect("free");
    warm.release().await.expect("released");
    links.link(2).set(Direction::Both, Fault::Blackhole);
    let limit = Duration::from_secs(1);
    let started = Instant::now();
    let outcome = waiter
        .lock_with(
            ["deadline"],
            redquorum::LockOptions::new().retry(
                RetryPolicy::new()
                    .unlimited_attempts()
                    .timeout(limit)
                    .delay(Duration::from_millis(50), Duration::ZERO),
            ),
        )
        .await;
    let elapsed = started.elapsed();
    println!("outcome after {elapsed:?}: {outcome:?}");
    assert!(outcome.is_err(), "the lock is held");
    assert!(
        elapsed < limit + Duration::from_secs(1),
        "a lock() with a {limit:?} timeout returned after {elapsed:?}"
    );
}
