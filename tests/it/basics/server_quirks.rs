//! Script cache flushes, passwords, and masters that answer with errors.

use std::time::Duration;

use crate::common::inspect::*;
use crate::common::*;
use redis::AsyncCommands;
use redquorum::{ConfigError, Error, LockOptions, NodeFailure, Redlock};
use redquorum_testkit::LocalCluster;

async fn flush_scripts(masters: &LocalCluster) {
    for i in 0..masters.len() {
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query_async(&mut conn(&masters.url(i)).await)
            .await
            .expect("SCRIPT FLUSH");
    }
}

#[tokio::test]
async fn a_flushed_script_cache_is_transparent() {
    let masters = cluster(3);
    let redlock = client(&masters);
    redlock
        .try_lock("warm")
        .await
        .expect("free")
        .release()
        .await
        .expect("released");
    flush_scripts(&masters).await;
    let lock = redlock
        .try_lock("after-flush")
        .await
        .expect("scripts are reloaded");
    assert_eq!(lock.stats().granted() + lock.stats().pending_count(), 3);
    flush_scripts(&masters).await;
    lock.extend().await.expect("extend reloads too");
    lock.release()
        .await
        .expect("release is a self-contained EVAL");
    // `release` returns once a quorum has deleted the key; the last master follows.
    wait_until(PATIENCE, "the key to be gone everywhere", || async {
        !exists_anywhere(&masters, &all(3), "redquorum:lock:after-flush").await
    })
    .await;
    assert_eq!(
        expired_everywhere(&masters).await,
        0,
        "released, not run out by its ttl"
    );
    // Several resources take the acquire script (one resource is a plain SET NX PX).
    let both = redlock
        .lock_with(["flushed-a", "flushed-b"], LockOptions::new())
        .await
        .expect("the acquire script is reloaded");
    assert_eq!(both.stats().granted() + both.stats().pending_count(), 3);
    both.release().await.expect("released");
}

#[tokio::test]
async fn passwords_work_and_a_wrong_one_is_a_typed_auth_failure() {
    let masters = LocalCluster::builder()
        .nodes(3)
        .password("s3cret-pw")
        .start()
        .expect("start password-protected masters");
    let good = client(&masters);
    good.try_lock("auth")
        .await
        .expect("right password")
        .release()
        .await
        .expect("released");

    let wrong: Vec<String> = masters
        .urls()
        .iter()
        .map(|u| u.replace("s3cret-pw", "wrong-pw"))
        .collect();
    let bad = builder(wrong).build().expect("valid config");
    let err = bad.try_lock("auth").await.expect_err("wrong password");
    assert!(err.is_no_quorum(), "{err}");
    for (_, failure) in err.node_failures() {
        assert!(matches!(failure, NodeFailure::Auth(_)), "{failure:?}");
    }
    let shown = format!("{err} {err:?} {bad:?}");
    assert!(
        !shown.contains("wrong-pw") && !shown.contains("s3cret-pw"),
        "{shown}"
    );
}

#[tokio::test]
async fn a_key_of_the_wrong_type_or_a_read_only_master_is_a_failed_vote_not_a_crash() {
    let masters = cluster(3);
    let replicas = cluster(2);
    let key = "redquorum:lock:odd";
    let redlock = client(&masters);
    let lock = redlock.try_lock("odd").await.expect("free");
    wait_until(PATIENCE, "every vote", || async {
        lock.stats().pending_count() == 0
    })
    .await;
    // Master 0's key becomes a list (some other program's data), master 1 dies: the
    // extension needs master 0, whose script GET raises WRONGTYPE. That is one master's
    // typed failure, never a crash, and the list is left alone.
    let mut c0 = conn(&masters.url(0)).await;
    let _: () = c0.del(key).await.expect("DEL");
    let _: () = c0.rpush(key, "x").await.expect("RPUSH");
    masters.kill(1).expect("kill");
    let err = lock.extend().await.expect_err("only master 2 can extend");
    assert!(
        matches!(err, redquorum::Error::ExtendFailed { .. }),
        "{err}"
    );
    match err.node_failures().iter().find(|(i, _)| *i == 0) {
        Some((_, NodeFailure::Server { code, .. })) => assert_eq!(code, "WRONGTYPE"),
        other => panic!("expected WRONGTYPE from master 0, got {other:?} in {err}"),
    }
    lock.release().await.expect("still valid");
    let len: i64 = c0.llen(key).await.expect("LLEN");
    assert_eq!(len, 1);

    // A replica answers writes with READONLY.
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(replicas.port(0))
        .query_async(&mut conn(&replicas.url(1)).await)
        .await
        .expect("REPLICAOF");
    let err = Redlock::builder()
        .node(replicas.url(1))
        .ttl(Duration::from_secs(5))
        .node_timeout(Duration::from_millis(500))
        .build()
        .expect("valid")
        .lock_with(
            ["ro"],
            LockOptions::new().retry(redquorum::RetryPolicy::once()),
        )
        .await
        .expect_err("a replica cannot grant");
    match err.node_failures().first() {
        Some((0, NodeFailure::Server { code, .. })) => assert_eq!(code, "READONLY"),
        other => panic!("expected READONLY, got {other:?} from {err}"),
    }
}

#[tokio::test]
async fn bad_arguments_are_typed_errors() {
    let redlock = Redlock::builder()
        .node("redis://127.0.0.1:1")
        .build()
        .expect("valid, no I/O at build");
    let err = redlock.try_lock("").await.expect_err("empty name");
    assert!(
        matches!(err, Error::Config(ConfigError::EmptyResource { index: 0 })),
        "{err}"
    );
    let err = redlock
        .lock_with(Vec::<String>::new(), LockOptions::new())
        .await
        .expect_err("no resources");
    assert!(matches!(err, Error::Config(ConfigError::NoResources)));
    let err = redlock
        .lock_with(["x"], LockOptions::new().ttl(Duration::from_millis(60)))
        .await
        .expect_err("node timeout 50 ms is not well below 60 ms");
    assert!(
        matches!(err, Error::Config(ConfigError::NodeTimeoutTooLong { .. })),
        "{err}"
    );
    let err = redlock
        .lock_with(
            ["x"],
            LockOptions::new().retry(redquorum::RetryPolicy::new().attempts(0)),
        )
        .await
        .expect_err("zero attempts");
    assert!(matches!(err, Error::Config(ConfigError::ZeroAttempts)));
}
