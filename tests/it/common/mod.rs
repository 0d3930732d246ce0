//! Helpers shared by the integration tests: clusters of real masters, clients with short
//! timings, and bounded waiting on conditions. Looking at the masters from outside the
//! library (keys, `INFO`, the proxies' taps) is in [`inspect`].
//!
//! # Waiting
//! A test never sleeps for a fixed time to let something happen, and never asserts on how
//! long something took: it waits for the event itself with [`eventually`] (or
//! [`wait_until`]), bounded by a generous budget ([`PATIENCE`] unless the test has a reason
//! for another), and fails with what it was waiting for when the budget runs out. On an idle
//! machine every wait ends within milliseconds; the budget is only there so that a broken
//! build fails instead of hanging, which is why it can be generous.

#![allow(dead_code, unreachable_pub)]

pub mod chaos;
pub mod hold;
pub mod inspect;
pub mod scenario;

use std::future::Future;
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redquorum::{Redlock, RedlockBuilder, RetryPolicy};
use redquorum_testkit::LocalCluster;

/// The budget of a wait for something that should happen at once (a release reaching every
/// master, a vote arriving): far beyond what a loaded 2-core machine needs.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// How often [`eventually`] tries again.
const POLL: Duration = Duration::from_millis(10);

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

/// A direct connection to one master, for writing keys behind the library's back.
pub async fn conn(url: &str) -> MultiplexedConnection {
    redis::Client::open(url)
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect to a live master")
}

/// How many of `nodes` hold `key` with `value`.
pub async fn holders(cluster: &LocalCluster, nodes: &[usize], key: &str, value: &str) -> usize {
    let mut n = 0;
    for &i in nodes {
        if inspect::value_of(cluster, i, key).await.as_deref() == Some(value) {
            n += 1;
        }
    }
    n
}

/// Whether `key` exists on any of `nodes`.
pub async fn exists_anywhere(cluster: &LocalCluster, nodes: &[usize], key: &str) -> bool {
    for &i in nodes {
        if inspect::value_of(cluster, i, key).await.is_some() {
            return true;
        }
    }
    false
}

pub fn all(n: usize) -> Vec<usize> {
    (0..n).collect()
}

/// The one bounded polling loop: tries `attempt` every 10 ms until it yields a value, and
/// returns it; `None` once `limit` has passed without one (for a caller that explains the
/// failure itself: [`eventually`] and [`wait_until`] panic with what they waited for).
///
/// It polls on the caller's runtime, which keeps running meanwhile (a failed attempt's
/// cleanup and the last answers of a release are tasks on it).
pub async fn poll_within<T, F, Fut>(limit: Duration, mut attempt: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(value) = attempt().await {
            return Some(value);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Commissions every master of `cluster` for the restart guard (they are new: the test kit
/// just started them), so that guarded clients count them at once. The guard's epochs are
/// shared, so one client commissioning is enough for every client. A single master has no
/// other member to confirm it is new: it is commissioned with `force`.
pub async fn commission(cluster: &LocalCluster) {
    let redlock = builder(cluster.urls())
        .restart_guard(true)
        .build()
        .expect("valid config");
    for i in 0..cluster.len() {
        redlock
            .commission(i, cluster.len() == 1)
            .await
            .unwrap_or_else(|e| panic!("commission master {i}: {e}"));
    }
}

/// Commissions every member of `redlock` (groups included), each retried until it answers
/// (a Sentinel group's primary may still be settling), within [`PATIENCE`].
pub async fn commission_members(redlock: &Redlock) {
    for m in 0..redlock.nodes() {
        eventually(PATIENCE, "a member commissioned", || async {
            redlock.commission(m, false).await.ok()
        })
        .await;
    }
}

/// Tries `attempt` until it yields a value and returns it; panics with `what` once `limit`
/// has passed without one.
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, attempt: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    poll_within(limit, attempt)
        .await
        .unwrap_or_else(|| panic!("timed out after {limit:?} waiting for: {what}"))
}

/// [`eventually`] for a condition: returns once `condition` holds.
pub async fn wait_until<F, Fut>(limit: Duration, what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    eventually(limit, what, || {
        let check = condition();
        async move { check.await.then_some(()) }
    })
    .await;
}
