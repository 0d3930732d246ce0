//! Found by the review of the waiting change (issue 23): a waiting `lock()` subscribes on
//! every master before its waiting attempt and again after each wake. With one master
//! unreachable without a refusal (blackholed: the TCP connect succeeds, nothing answers),
//! a subscription try to it costs the whole connect timeout; bounded only by that, a
//! `lock()` with a `RetryPolicy::timeout` overran its deadline by it. Subscriptions are now
//! bounded by the caller's deadline. The connect timeout here (30 s) is far beyond the
//! test's bound (10 s), which is far beyond the deadline (1 s): no luck or speed involved.

use std::time::{Duration, Instant};

use crate::common::*;
use redquorum::RetryPolicy;
use redquorum_testkit::{Direction, Fault};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_lock_returns_by_its_deadline_with_a_master_blackholed() {
    let masters = cluster(3);
    let holder = client(&masters);
    let _held = holder.try_lock("deadline").await.expect("free");
    let links = masters.links().expect("links");
    let waiter = builder(links.urls())
        .node_timeout(Duration::from_millis(200))
        .connect_timeout(Duration::from_secs(30))
        .build()
        .expect("valid");
    // Connections made everywhere first.
    let warm = waiter.try_lock("warm-up").await.expect("free");
    warm.release().await.expect("released");
    links.link(2).set(Direction::Both, Fault::Blackhole);
    let limit = Duration::from_secs(1);
    let started = Instant::now();
    let outcome = tokio::time::timeout(
        Duration::from_secs(10),
        waiter.lock_with(
            ["deadline"],
            redquorum::LockOptions::new().retry(
                RetryPolicy::new()
                    .unlimited_attempts()
                    .timeout(limit)
                    .delay(Duration::from_millis(50), Duration::ZERO),
            ),
        ),
    )
    .await
    .expect("a lock() with a 1 s timeout returns long before the 30 s connect timeout");
    println!("outcome after {:?}: {outcome:?}", started.elapsed());
    assert!(outcome.is_err(), "the lock is held");
}
