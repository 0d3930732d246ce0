//! Releases survive cancellation: once `release()` (or `with_lock`'s release) has started,
//! the deletes reach every master even when the caller's future is dropped. Each test
//! waits (bounded, far below the 30 s ttl) for the keys to be gone.
//!
//! Every reply reaches the client through a proxy that holds it for at least 100 ms, so a
//! release can never finish within the one poll a test gives it, however the machine
//! schedules the test: the race is forced, not hoped for.

mod common;

use std::time::Duration;

use common::*;
use redquorum::Redlock;
use redquorum_testkit::{Direction, Fault, LinkSet};

const TTL: Duration = Duration::from_secs(30);
/// Far below the ttl: a release that was never sent leaves the keys for 30 s.
const GONE_WITHIN: Duration = Duration::from_secs(10);

/// A client whose every reply arrives at least 100 ms late (the links it talks through).
fn slow_replies_client(masters: &redquorum_testkit::LocalCluster) -> (Redlock, LinkSet) {
    let links = masters.links().expect("links");
    links.set_all(
        Direction::ToClient,
        Fault::delay(Duration::from_millis(100)),
    );
    let redlock = builder(links.urls()).ttl(TTL).build().expect("valid");
    (redlock, links)
}

async fn gone_everywhere(masters: &redquorum_testkit::LocalCluster, key: &str) {
    wait_until(
        GONE_WITHIN,
        "the lock's keys to be deleted everywhere",
        || async { !exists_anywhere(masters, &all(masters.len()), key).await },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_whose_future_is_dropped_at_once_still_deletes_the_keys() {
    let masters = cluster(3);
    let (redlock, _links) = slow_replies_client(&masters);
    for round in 0..3 {
        let lock = redlock.try_lock("dropped").await.expect("free");
        assert!(exists_anywhere(&masters, &all(3), "redquorum:lock:dropped").await);
        // Polled exactly once, then dropped.
        let outcome = futures::FutureExt::now_or_never(lock.release());
        assert!(
            outcome.is_none(),
            "round {round}: a release needs the network"
        );
        gone_everywhere(&masters, "redquorum:lock:dropped").await;
        // A caller's timeout that is already due when the release starts.
        let lock = redlock.try_lock("dropped").await.expect("free");
        let _ = tokio::time::timeout(Duration::ZERO, lock.release()).await;
        gone_everywhere(&masters, "redquorum:lock:dropped").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_with_lock_dropped_right_after_its_body_returned_still_releases() {
    let masters = cluster(3);
    let (redlock, _links) = slow_replies_client(&masters);
    let (returned, body_done) = tokio::sync::oneshot::channel::<()>();
    let scope = redlock.with_lock(["scoped"], |_lease| async move {
        let _ = returned.send(());
        Ok::<_, redquorum::Error>(())
    });
    // Run the scope until its body has returned, then drop it wherever it is.
    tokio::select! {
        biased;
        _ = body_done => {}
        _ = scope => panic!("the scope finished before it could be dropped"),
    }
    gone_everywhere(&masters, "redquorum:lock:scoped").await;
}
