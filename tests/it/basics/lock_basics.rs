//! Acquire, contention, release, extension and multi-resource locks on five real masters.

use std::time::Duration;

use crate::common::inspect::*;
use crate::common::*;
use redis::AsyncCommands;
use redquorum::rules::{drift_allowance, validity_window};
use redquorum::{DEFAULT_DRIFT_FACTOR, Error, Instant, LockOptions, RetryPolicy, Vote};

#[tokio::test]
async fn a_lock_is_held_by_a_quorum_refuses_others_and_is_gone_after_release() {
    let masters = cluster(5);
    let a = client(&masters);
    let b = client(&masters);

    let ttl = Duration::from_secs(5);
    let called = Instant::now();
    let lock = a.try_lock("orders").await.expect("free resource");
    let returned = Instant::now();
    let key = "redquorum:lock:orders";
    assert_eq!(lock.keys(), [key]);
    // Valid for the ttl less the drift allowance, counted from the start of the round,
    // which lies between the call and its return.
    let window = validity_window(ttl, drift_allowance(ttl, DEFAULT_DRIFT_FACTOR));
    assert!(
        lock.deadline() >= called + window && lock.deadline() <= returned + window,
        "deadline {:?} after the call, window {window:?}, the call took {:?}",
        lock.deadline() - called,
        returned - called
    );
    assert!(lock.remaining() < ttl);
    assert!(lock.stats().granted() >= 3);
    assert!(holders(&masters, &all(5), key, lock.value()).await >= 3);
    for i in 0..5 {
        let pttl = pttl_of(&masters, i, key).await;
        assert!(
            pttl == -2 || (0 < pttl && pttl <= 5000),
            "node {i}: pttl {pttl}"
        );
    }

    let refused = b.try_lock("orders").await.expect_err("held by a");
    assert!(refused.is_contended(), "{refused}");
    assert!(refused.is_retryable());
    let stats = refused.stats().expect("votes are reported");
    assert_eq!(stats.nodes(), 5);
    assert!(stats.taken() >= 3);
    // The refused attempt cleaned up after itself: only a's value is anywhere.
    for i in 0..5 {
        let v = value_of(&masters, i, key).await;
        assert!(
            v.is_none() || v.as_deref() == Some(lock.value()),
            "node {i}: {v:?}"
        );
    }

    let outcome = lock.release().await.expect("released in time");
    // It returns once a quorum has answered; the rest are seen through in the background.
    assert!(outcome.released() >= 3);
    assert_eq!(
        outcome.released() + outcome.not_held() + outcome.pending(),
        5
    );
    assert!(outcome.failures().is_empty());
    wait_until(PATIENCE, "the key to be gone everywhere", || async {
        !exists_anywhere(&masters, &all(5), key).await
    })
    .await;
    assert_eq!(
        expired_everywhere(&masters).await,
        0,
        "released, not run out by its ttl"
    );

    let lock = b.try_lock("orders").await.expect("free again");
    lock.release().await.expect("released");
}

#[tokio::test]
async fn a_conflict_on_any_resource_refuses_the_whole_lock_and_leaves_no_partial_keys() {
    let masters = cluster(5);
    let a = client(&masters);
    let b = client(&masters);
    let held = a.try_lock("b").await.expect("free");

    let err = b
        .lock_with(
            ["a", "b", "c"],
            LockOptions::new().retry(RetryPolicy::once()),
        )
        .await
        .expect_err("b is taken");
    assert!(err.is_contended(), "{err}");
    // The failed attempt's cleanup runs in the background; nothing may be left to run out.
    for key in ["redquorum:lock:a", "redquorum:lock:c"] {
        wait_until(PATIENCE, &format!("{key} to be gone"), || async {
            !exists_anywhere(&masters, &all(5), key).await
        })
        .await;
    }
    assert_eq!(
        expired_everywhere(&masters).await,
        0,
        "partial keys were left behind"
    );

    held.release().await.expect("released");
    let all_three = b
        .lock_with(["c", "a", "b", "a"], LockOptions::new())
        .await
        .expect("all free now");
    assert_eq!(all_three.resources(), ["a", "b", "c"]);
    for key in all_three.keys() {
        assert!(holders(&masters, &all(5), key, all_three.value()).await >= 3);
    }
    all_three.release().await.expect("released");
    for key in ["redquorum:lock:a", "redquorum:lock:b", "redquorum:lock:c"] {
        wait_until(PATIENCE, &format!("{key} to be released"), || async {
            !exists_anywhere(&masters, &all(5), key).await
        })
        .await;
    }
    assert_eq!(
        expired_everywhere(&masters).await,
        0,
        "released, not run out by their ttl"
    );
}

#[tokio::test]
async fn extend_pushes_the_expiry_back_on_a_quorum() {
    let masters = cluster(5);
    let a = client(&masters);
    let lock = a
        .lock_with(["job"], LockOptions::new().ttl(Duration::from_secs(2)))
        .await
        .expect("free");
    let first_deadline = lock.deadline();
    let key = "redquorum:lock:job";
    tokio::time::sleep(Duration::from_millis(300)).await;

    let sent = Instant::now();
    let extended = lock
        .extend_with(Duration::from_secs(8))
        .await
        .expect("extended");
    assert!(extended.deadline() > first_deadline + Duration::from_secs(5));
    assert_eq!(lock.deadline(), extended.deadline());
    assert!(extended.stats().granted() >= 3);
    let mut raised = 0;
    for i in 0..5 {
        let pttl = pttl_of(&masters, i, key).await;
        // Set to 8000 ms no earlier than `sent`; read just now: it can have aged at most
        // this much since (plus Redis's millisecond rounding).
        let aged = i64::try_from(sent.elapsed().as_millis()).unwrap_or(i64::MAX) + 2;
        if pttl <= 8000 && pttl >= 8000 - aged {
            raised += 1;
        }
    }
    assert!(raised >= 3, "only {raised} masters hold the extended ttl");
    lock.release().await.expect("released");
}

#[tokio::test]
async fn a_stale_handle_never_touches_the_new_holders_keys() {
    let masters = cluster(5);
    let a = client(&masters);
    // A node timeout no loaded machine reaches: every vote of the new holder is a grant
    // (none given up and cleaned away), so all five keys below are its own.
    let b = builder(masters.urls())
        .node_timeout(Duration::from_secs(2))
        .build()
        .expect("valid");
    let key = "redquorum:lock:stale";

    // Expired client-side: refused without sending anything.
    let stale = a
        .lock_with(
            ["stale"],
            LockOptions::new().ttl(Duration::from_millis(1200)),
        )
        .await
        .expect("free");
    wait_until(PATIENCE, "a's keys to expire", || async {
        !exists_anywhere(&masters, &all(5), key).await
    })
    .await;
    let fresh = b.try_lock("stale").await.expect("free after expiry");
    wait_until(PATIENCE, "every grant of the new holder", || async {
        fresh.stats().pending_count() == 0
    })
    .await;
    let before: Vec<i64> = pttls(&masters, key).await;
    assert!(matches!(stale.extend().await, Err(Error::Expired { .. })));
    let err = stale.release().await.expect_err("the lock had expired");
    assert!(err.is_lost(), "{err}");
    assert_eq!(holders(&masters, &all(5), key, fresh.value()).await, 5);
    let after = pttls(&masters, key).await;
    for (i, (b, a)) in before.iter().zip(&after).enumerate() {
        assert!(a <= b, "node {i}: pttl went from {b} to {a}");
    }
    fresh.release().await.expect("released");
}

#[tokio::test]
async fn an_extension_that_finds_another_value_reports_the_loss_and_changes_nothing() {
    let masters = cluster(5);
    let a = client(&masters);
    let lock = a.try_lock("taken-over").await.expect("free");
    let key = "redquorum:lock:taken-over";
    // Someone else's value on every master (as after a restart without persistence).
    for i in 0..5 {
        let _: () = conn(&masters.url(i))
            .await
            .set_ex(key, "someone-else", 60)
            .await
            .expect("SET");
    }
    let before = pttls(&masters, key).await;
    let err = lock.extend().await.expect_err("not ours any more");
    assert!(matches!(err, Error::Lost { .. }), "{err}");
    assert!(lock.is_expired(), "a lost lock has no validity left");
    let after = pttls(&masters, key).await;
    for (b, a) in before.iter().zip(&after) {
        assert!(a <= b);
    }
    assert!(lock.release().await.is_err());
    assert_eq!(holders(&masters, &all(5), key, "someone-else").await, 5);
}

#[tokio::test]
async fn votes_and_latencies_are_reported_per_master() {
    let masters = cluster(3);
    // No vote given up on a loaded machine: all three must be grants.
    let redlock = builder(masters.urls())
        .node_timeout(Duration::from_secs(2))
        .build()
        .expect("valid");
    let lock = redlock.try_lock("stats").await.expect("free");
    let stats = lock.stats();
    assert_eq!(stats.quorum(), 2);
    assert_eq!(stats.attempt(), 1);
    wait_until(PATIENCE, "late votes to be recorded", || async {
        lock.stats().pending_count() == 0
    })
    .await;
    for vote in lock.stats().votes() {
        assert_eq!(vote.vote, Vote::Granted);
        assert!(vote.latency.is_some());
    }
    lock.release().await.expect("released");
}
