//! Releases survive cancellation: once `release()` (or `with_lock`'s release) has started,
//! the deletes reach every master even when the caller's future is dropped. Each test
//! waits (bounded, far below the 30 s ttl) for the keys to be gone.
//!
//! Every reply reaches the client through a proxy that holds it for at least 100 ms, so a
//! release can never finish within the one poll a test gives it, however the machine
//! schedules the test: the race is forced, not hoped for.
//!
//! A release is also never overtaken by its acquire: when the connection that carried the
//! acquire was given up while the acquire was still on its way, the release goes out on the
//! new connection, and must still be run after it (or the acquire not at all).

use std::time::Duration;

use crate::common::inspect::{cmd, count_releases, lock_key, settle};
use crate::common::*;
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

/// How long master 0's link holds the acquire: far longer than the client needs to notice
/// the close, reconnect and release (checked below), far shorter than the ttl.
const HELD: Duration = Duration::from_secs(8);

/// The acquire to master 0 is written on a connection that is then closed towards the
/// client while the link still holds the acquire (a middlebox giving up on it, or bytes in
/// the server's socket buffer). The client reconnects and releases on the new connection,
/// where nothing is held: that release reaches the server first. Before, the acquire ran
/// after it and left the key for a whole ttl; a release must be run after any acquire of
/// its lock that the server may still run. Both releases: of a granted lock
/// (`release()`), and the cleanup of a failed attempt.
#[tokio::test]
async fn a_release_is_not_overtaken_by_its_acquire_on_an_abandoned_connection() {
    let masters = cluster(3);
    let links = masters.links().expect("links");
    let ttl = Duration::from_secs(60);
    let redlock = builder(links.urls())
        .ttl(ttl)
        .node_timeout(Duration::from_secs(1))
        .build()
        .expect("valid");
    // Connections made everywhere.
    let warm = redlock.lock("warm-up").await.expect("free");
    warm.release().await.expect("released");
    let link = links.link(0);
    link.set_tap(true);
    for granted in [true, false] {
        let resource = format!("overtaken-{granted}");
        let key = lock_key(&resource);
        if !granted {
            // Masters 1 and 2 refuse: the attempt fails whatever master 0 answers (the
            // member sends its acquire once more on the new connection, issue 23 item 5,
            // and master 0 may grant that one).
            cmd(&masters, 1, &["SET", &key, "someone-else", "PX", "60000"]).await;
            cmd(&masters, 2, &["SET", &key, "someone-else", "PX", "60000"]).await;
        }
        link.clear_tap();
        let accepted = link.stats().connections_accepted;
        // Master 0's acquire is held on its way; the others answer at once.
        link.set(Direction::ToServer, Fault::delay(HELD));
        let attempt = {
            let (redlock, resource) = (redlock.clone(), resource.clone());
            tokio::spawn(async move { redlock.try_lock(&resource).await })
        };
        wait_until(PATIENCE, "master 0's acquire held by its link", || async {
            link.stats().to_server.held_chunks >= 1
        })
        .await;
        // Its connection is closed towards the client, which replaces it; what the client
        // sends from now on passes at once.
        link.set(Direction::ToServer, Fault::Pass);
        link.close_to_client();
        wait_until(PATIENCE, "the client to reconnect to master 0", || async {
            link.stats().connections_accepted > accepted
        })
        .await;
        let outcome = attempt.await.expect("no panic");
        match (granted, outcome) {
            (true, Ok(lock)) => {
                lock.release().await.expect("released in time");
            }
            // The attempt's cleanup releases it.
            (false, Err(e)) => assert!(!e.is_lost(), "{e}"),
            (_, other) => panic!("granted by 1 and 2: {granted}; got {other:?}"),
        }
        wait_until(PATIENCE, "the release written to master 0", || async {
            count_releases(link) >= 1
        })
        .await;
        assert!(
            link.stats().to_server.held_chunks >= 1,
            "the release must go out while the acquire is still held (a stall of {HELD:?}?)"
        );
        // The acquire comes due: written to master 0 (and run there) or thrown away.
        wait_until(PATIENCE, "master 0's acquire to leave its link", || async {
            link.stats().to_server.held_chunks == 0
        })
        .await;
        settle(&masters, 0).await;
        wait_until(
            GONE_WITHIN,
            "no key of the released lock on master 0",
            || async { !exists_anywhere(&masters, &[0], &key).await },
        )
        .await;
    }
}
