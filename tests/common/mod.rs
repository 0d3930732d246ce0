//! Helpers shared by the integration tests: clusters of real masters, clients with short
//! timings, direct inspection of keys, and bounded waiting on conditions.

#![allow(dead_code, unreachable_pub)]

pub mod chaos;
pub mod hold;
pub mod inspect;
pub mod scenario;

use std::future::Future;
use std::time::Duration;

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redquorum::{Redlock, RedlockBuilder, RetryPolicy};
use redquorum_testkit::LocalCluster;

/// Five masters unless said otherwise.
pub fn cluster(n: usize) -> LocalCluster {
    LocalCluster::start(n).expect("start redis-server masters (is redis-server installed?)")
}

/// A builder over `urls` with timings that stay deterministic on a loaded 2-core machine.
///
/// The restart guard is off: the test kit's masters are seconds old, and the guard
/// (rightly) does not count a master up for less than a ttl. `restart_guard.rs` tests it.
pub fn builder(urls: Vec<String>) -> RedlockBuilder {
    Redlock::builder()
        .nodes(urls)
        .ttl(Duration::from_secs(5))
        .node_timeout(Duration::from_millis(500))
        .retry(RetryPolicy::once())
        .restart_guard(false)
}

pub fn client(cluster: &LocalCluster) -> Redlock {
    builder(cluster.urls()).build().expect("valid config")
}

/// A direct connection to one master, for inspecting keys.
pub async fn conn(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect to a live master")
}

/// The value of `key` on master `i`, or `None`.
pub async fn get(cluster: &LocalCluster, i: usize, key: &str) -> Option<String> {
    conn(&cluster.url(i)).await.get(key).await.expect("GET")
}

/// The PTTL of `key` on master `i` (-2 when missing).
pub async fn pttl(cluster: &LocalCluster, i: usize, key: &str) -> i64 {
    conn(&cluster.url(i)).await.pttl(key).await.expect("PTTL")
}

/// How many of `nodes` hold `key` with `value`.
pub async fn holders(cluster: &LocalCluster, nodes: &[usize], key: &str, value: &str) -> usize {
    let mut n = 0;
    for &i in nodes {
        if get(cluster, i, key).await.as_deref() == Some(value) {
            n += 1;
        }
    }
    n
}

/// Whether `key` exists on any of `nodes`.
pub async fn exists_anywhere(cluster: &LocalCluster, nodes: &[usize], key: &str) -> bool {
    for &i in nodes {
        if get(cluster, i, key).await.is_some() {
            return true;
        }
    }
    false
}

/// Polls `condition` until it holds or `limit` passes; panics with `what` on timeout.
pub async fn wait_until<F, Fut>(limit: Duration, what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if condition().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub fn all(n: usize) -> Vec<usize> {
    (0..n).collect()
}

/// Polls `attempt` until it yields a value or `limit` passes; panics with `what` on timeout.
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut attempt: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = attempt().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Commissions every master of `cluster` for the restart guard (they are new: the test kit
/// just started them), so that guarded clients count them at once. The guard's epochs are
/// shared, so one client commissioning is enough for every client.
pub async fn commission(cluster: &LocalCluster) {
    let redlock = builder(cluster.urls())
        .restart_guard(true)
        .build()
        .expect("valid config");
    for i in 0..cluster.len() {
        redlock
            .commission(i, false)
            .await
            .unwrap_or_else(|e| panic!("commission master {i}: {e}"));
    }
}
