//! Dead, paused and misbehaving masters: the quorum goes on without a minority, fails with
//! details without a majority, and leaves nothing behind.

use std::time::Duration;

use crate::common::inspect::*;
use crate::common::*;
use redquorum::{Error, Instant, NodeFailure, RetryPolicy, Vote};

#[tokio::test]
async fn two_dead_masters_of_five_do_not_stop_the_lock() {
    let masters = cluster(5);
    masters.kill(1).expect("kill");
    masters.kill(3).expect("kill");
    // The client is built and locks while the minority is already down (their votes fail
    // at once, refused; the node timeout is long so that a loaded machine does not turn
    // one of the three live masters' votes into a failure too).
    let redlock = builder(masters.urls())
        .node_timeout(Duration::from_secs(2))
        .build()
        .expect("valid");
    let lock = redlock
        .try_lock("minority-down")
        .await
        .expect("3 of 5 grant");
    assert_eq!(lock.stats().granted(), 3);
    let outcome = lock.release().await.expect("released");
    assert_eq!(outcome.released(), 3);
    assert_eq!(outcome.failures().len() + outcome.pending(), 2);
}

#[tokio::test]
async fn three_dead_masters_of_five_give_no_quorum_with_details_and_no_leftovers() {
    let masters = cluster(5);
    let redlock = client(&masters);
    for i in [0, 2, 4] {
        masters.kill(i).expect("kill");
    }
    let err = redlock
        .try_lock("majority-down")
        .await
        .expect_err("no quorum");
    assert!(err.is_no_quorum(), "{err}");
    assert!(err.is_retryable());
    let failed: Vec<usize> = err.node_failures().iter().map(|(i, _)| *i).collect();
    assert_eq!(failed, [0, 2, 4]);
    for (_, failure) in err.node_failures() {
        assert!(
            matches!(
                failure,
                NodeFailure::Connection(_) | NodeFailure::Timeout(_)
            ),
            "{failure:?}"
        );
    }
    assert!(err.to_string().contains("no quorum"), "{err}");
    // The two live masters granted, then were released by the failed attempt's cleanup.
    wait_until(PATIENCE, "cleanup on the live masters", || async {
        !exists_anywhere(&masters, &[1, 3], "redquorum:lock:majority-down").await
    })
    .await;
    for i in [1, 3] {
        assert_eq!(
            expired_keys(&masters, i).await,
            0,
            "released, not run out by its ttl"
        );
    }
}

async fn connect_all(redlock: &redquorum::Redlock) {
    for r in redlock.connect().await {
        assert!(r.is_ok(), "{r:?}");
    }
}

#[tokio::test]
async fn a_paused_master_does_not_hold_the_call_back() {
    let masters = cluster(5);
    // A node timeout far beyond what the four other votes need, however loaded the
    // machine: the paused master's vote must still be pending at the decision.
    let redlock = builder(masters.urls())
        .ttl(Duration::from_secs(30))
        .node_timeout(Duration::from_secs(10))
        .build()
        .expect("valid");
    connect_all(&redlock).await;
    masters.pause(2).expect("SIGSTOP");
    let lock = redlock.try_lock("paused").await.expect("4 of 5 answer");
    let stats = lock.stats();
    // Still pending at the decision: the call came back before the paused master's node
    // timeout, which would have turned its vote into a failure.
    assert_eq!(stats.votes()[2].vote, Vote::Pending, "{stats:?}");
    masters.resume(2).expect("SIGCONT");
    lock.release().await.expect("released");
    wait_until(PATIENCE, "no key anywhere", || async {
        !exists_anywhere(&masters, &all(5), "redquorum:lock:paused").await
    })
    .await;
}

#[tokio::test]
async fn a_failed_extension_leaves_the_lock_valid_until_its_old_deadline() {
    let masters = cluster(5);
    // A node timeout no loaded machine reaches: every master's vote is a grant, none is
    // given up and cleaned away (the count on masters 3 and 4 below must be two).
    let redlock = builder(masters.urls())
        .ttl(Duration::from_secs(30))
        .node_timeout(Duration::from_secs(2))
        .build()
        .expect("valid");
    let lock = redlock.try_lock("extend-fails").await.expect("free");
    let deadline = lock.deadline();
    wait_until(
        PATIENCE,
        "the late votes on masters 3 and 4 land",
        || async {
            holders(
                &masters,
                &[3, 4],
                "redquorum:lock:extend-fails",
                lock.value(),
            )
            .await
                == 2
        },
    )
    .await;
    for i in [0, 1, 2] {
        masters.kill(i).expect("kill");
    }
    let err = lock.extend().await.expect_err("no quorum to extend");
    assert!(matches!(err, Error::ExtendFailed { .. }), "{err}");
    assert!(err.is_retryable());
    assert_eq!(lock.deadline(), deadline);
    assert!(!lock.is_expired());
    // What is left counts down to that old deadline.
    let asked = Instant::now();
    let left = lock.remaining();
    assert!(!left.is_zero() && asked + left <= deadline, "{left:?}");
    // The keys on the live masters were not released by the failed extension.
    assert_eq!(
        holders(
            &masters,
            &[3, 4],
            "redquorum:lock:extend-fails",
            lock.value()
        )
        .await,
        2
    );
    lock.release()
        .await
        .expect("still valid, released where reachable");
}

/// The attempt is dropped once the live masters have granted, while the paused majority
/// keeps it undecided: their node timeout (ten seconds, the decision's earliest moment) is
/// far beyond the time the test needs to see the grants. The ttl is longer still, so a key
/// left behind could not run out during the test.
#[tokio::test]
async fn dropping_a_lock_future_while_a_master_is_paused_leaves_no_key() {
    let masters = cluster(5);
    let node_timeout = Duration::from_secs(10);
    let redlock = builder(masters.urls())
        .ttl(Duration::from_secs(60))
        .node_timeout(node_timeout)
        .retry(RetryPolicy::new().attempts(5))
        .build()
        .expect("valid");
    connect_all(&redlock).await;
    masters.pause(0).expect("SIGSTOP");
    masters.pause(1).expect("SIGSTOP");
    masters.pause(2).expect("SIGSTOP");
    // Three masters paused: the attempt cannot decide before the node timeout; drop it
    // while the live masters have granted.
    let key = "redquorum:lock:cancelled";
    let attempt = redlock.lock("cancelled");
    tokio::select! {
        r = attempt => panic!("decided before the node timeout: {r:?}"),
        () = wait_until(node_timeout / 2, "grants on the live masters", || async {
            exists_anywhere(&masters, &[3], key).await && exists_anywhere(&masters, &[4], key).await
        }) => {}
    }
    wait_until(
        PATIENCE,
        "the cancelled attempt to be cleaned up",
        || async { !exists_anywhere(&masters, &[3, 4], key).await },
    )
    .await;
    for i in 0..3 {
        masters.resume(i).expect("SIGCONT");
    }
    // The paused masters processed the acquire, then the release sent after it.
    wait_until(PATIENCE, "no key on the resumed masters", || async {
        !exists_anywhere(&masters, &all(5), key).await
    })
    .await;
}
