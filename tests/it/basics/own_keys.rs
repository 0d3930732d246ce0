//! The keys redquorum keeps for itself (epoch markers, ttl records, fence counters) on real
//! masters: never written over an application's data, even with an empty key prefix, and
//! fence counters that expire when asked to.

use std::time::Duration;

use crate::common::inspect::pttl_of;
use crate::common::*;
use redis::AsyncCommands;
use redquorum::{LockOptions, NodeFailure, Vote};

#[tokio::test]
async fn an_empty_prefix_never_overwrites_application_keys() {
    let masters = cluster(3);
    // An application's data exactly where redquorum's own keys go with an empty prefix.
    for i in 0..3 {
        let mut c = conn(&masters.url(i)).await;
        let _: () = c.set("guard", "app").await.expect("SET");
        let _: () = c.hset("ttls", "app", "1").await.expect("HSET");
        let _: () = c.set("fence:stock", 7).await.expect("SET");
    }
    let redlock = builder(masters.urls())
        .key_prefix("")
        .restart_guard(true)
        .fencing(true)
        .build()
        .expect("valid");
    let err = redlock
        .commission(0, false)
        .await
        .expect_err("the marker's key holds the application's data");
    assert!(
        matches!(
            err,
            redquorum::Error::Node {
                failure: NodeFailure::ForeignKey { .. } | NodeFailure::Server { .. },
                ..
            }
        ),
        "{err}"
    );
    let err = redlock
        .lock_with(["stock"], LockOptions::new())
        .await
        .expect_err("no master can grant");
    let stats = err.stats().expect("votes");
    assert!(
        stats.votes().iter().all(|v| matches!(
            &v.vote,
            Vote::Failed(NodeFailure::ForeignKey { .. }) | Vote::Pending
        )),
        "{stats:?}"
    );
    assert!(err.to_string().contains("key_prefix"), "{err}");
    for i in 0..3 {
        let mut c = conn(&masters.url(i)).await;
        let guard: String = c.get("guard").await.expect("GET");
        let ttls: Vec<(String, String)> = c.hgetall("ttls").await.expect("HGETALL");
        let fence: i64 = c.get("fence:stock").await.expect("GET");
        let lock: bool = c.exists("lock:stock").await.expect("EXISTS");
        assert_eq!(guard, "app");
        assert_eq!(ttls, [("app".to_owned(), "1".to_owned())]);
        assert_eq!(fence, 7);
        assert!(!lock, "no lock key may be left behind on master {i}");
    }
}

/// Each master's PTTL of `resource`'s fence counter (-2: none, -1: no expiry), read once
/// the lock's keys are gone from every master.
async fn settled_counters(masters: &redquorum_testkit::LocalCluster, resource: &str) -> Vec<i64> {
    let key = format!("redquorum:lock:{resource}");
    wait_until(PATIENCE, "the lock released on every master", || async {
        !exists_anywhere(masters, &all(masters.len()), &key).await
    })
    .await;
    let mut counters = Vec::new();
    for i in 0..masters.len() {
        counters.push(pttl_of(masters, i, &format!("redquorum:fence:{resource}")).await);
    }
    counters
}

#[tokio::test]
async fn fence_counters_expire_when_bounded() {
    let masters = cluster(3);
    let keep = Duration::from_secs(60);
    let redlock = builder(masters.urls())
        .fencing(true)
        .fence_counter_ttl(keep)
        .build()
        .expect("valid");
    let lock = redlock.lock("bounded").await.expect("free");
    assert_eq!(lock.fencing_token(), Some(1));
    lock.release().await.expect("released");
    // A master whose grant came after the quorum's may still be releasing; once every lock
    // key is gone, every counter that will exist does (a connection keeps its order).
    let counters = settled_counters(&masters, "bounded").await;
    assert!(
        counters.iter().all(|&p| p == -2 || (p > 0 && p <= 60_000)),
        "bounded counters: {counters:?}"
    );
    assert!(
        counters.iter().filter(|&&p| p > 0).count() >= 2,
        "{counters:?}"
    );
    // Unbounded (the default): counters never expire.
    let unbounded = builder(masters.urls())
        .fencing(true)
        .build()
        .expect("valid");
    let lock = unbounded.lock("forever").await.expect("free");
    lock.release().await.expect("released");
    let counters = settled_counters(&masters, "forever").await;
    assert!(counters.iter().all(|&p| p == -2 || p == -1), "{counters:?}");
    assert!(
        counters.iter().filter(|&&p| p == -1).count() >= 2,
        "{counters:?}"
    );
    // A bound below the ttl is refused when the client is built.
    let err = builder(masters.urls())
        .fence_counter_ttl(Duration::from_millis(10))
        .build()
        .expect_err("too short");
    assert!(err.to_string().contains("fence_counter_ttl"), "{err}");
}
