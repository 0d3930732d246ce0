//! The restart guard on real masters, one client at a time: new masters are kept out unless
//! commissioned (or for a declared longest ttl from first sight), and a master that lost its data (restarted
//! empty, flushed while up) is kept out for a ttl from the loss. The multi-client cases are
//! in `guard_clients.rs`, the chaos scenario in `guard_chaos.rs`.

use std::time::Duration;

use crate::common::*;
use redquorum::{EpochCause, GuardStatus, Lock, NodeFailure, Redlock, Vote};

fn guarded(urls: Vec<String>, ttl: Duration) -> Redlock {
    builder(urls)
        .ttl(ttl)
        .node_timeout(Duration::from_millis(300))
        .restart_guard(true)
        .build()
        .expect("valid")
}

fn quarantined(vote: &Vote) -> bool {
    matches!(vote, Vote::Failed(NodeFailure::Quarantined { .. }))
}

async fn all_votes(lock: &Lock) {
    wait_until(Duration::from_secs(2), "all votes", || async {
        lock.stats().pending_count() == 0
    })
    .await;
}

/// Master `i`'s guard status as `redlock` sees it now.
async fn status(redlock: &Redlock, i: usize) -> GuardStatus {
    redlock
        .health_with(Duration::from_millis(20))
        .await
        .expect("not strict")
        .nodes[i]
        .guard
        .clone()
}

/// New masters nobody commissioned: each may be a master whose data was just deleted, and
/// no other master can vouch for what it lost (none is vouched for either), so they stay out
/// — until a declared `deployment_max_ttl` has passed from first sight, for a client that
/// declares one. Commissioned masters count at once, for a client that never saw them.
#[tokio::test]
async fn new_masters_stay_out_until_commissioned_or_a_declared_longest_ttl_after_first_sight() {
    let masters = cluster(5);
    let ttl = Duration::from_secs(2);
    let redlock = guarded(masters.urls(), ttl);

    // No client has seen them: every master is kept out, and says why — once every master
    // answered in time (on a loaded machine an attempt may also see a timeout; it must
    // never be granted).
    eventually(
        PATIENCE,
        "an attempt refused by every master as quarantined",
        || async {
            let err = redlock
                .try_lock("guarded")
                .await
                .expect_err("no master counts yet");
            assert!(err.is_no_quorum(), "{err}");
            err.node_failures()
                .iter()
                .all(|(_, f)| matches!(f, NodeFailure::Quarantined { .. }))
                .then_some(())
        },
    )
    .await;
    assert!(
        !exists_anywhere(&masters, &all(5), "redquorum:lock:guarded").await,
        "the failed attempt released"
    );
    let unverified = eventually(PATIENCE, "master 0's verdict", || async {
        match status(&redlock, 0).await {
            GuardStatus::Unverified {
                reason: Some(reason),
            } => Some(reason),
            _ => None,
        }
    })
    .await;
    assert!(unverified.contains("believed"), "{unverified}");

    // With the deployment's longest ttl declared, they count that long after first sight.
    let declared = builder(masters.urls())
        .ttl(ttl)
        .node_timeout(Duration::from_millis(300))
        .restart_guard(true)
        .deployment_max_ttl(ttl)
        .build()
        .expect("valid");
    let lock = eventually(
        ttl * 5,
        "the masters to count a declared longest ttl after first sight",
        || async { declared.try_lock("guarded").await.ok() },
    )
    .await;
    lock.release().await.expect("released");

    // Commissioned masters count at once, for a client that never saw them.
    let others = cluster(3);
    commission(&others).await;
    let fresh = guarded(others.urls(), Duration::from_secs(30));
    let lock = fresh
        .try_lock("at-once")
        .await
        .expect("commissioned masters count");
    lock.release().await.expect("released");
}

#[tokio::test]
async fn a_master_restarted_empty_is_kept_out_for_a_ttl_from_its_restart() {
    let masters = cluster(5);
    commission(&masters).await;
    // Long enough that reaching master 0 again (a reconnect) never outlasts it.
    let ttl = Duration::from_secs(5);
    let redlock = guarded(masters.urls(), ttl);
    let lock = redlock.try_lock("guarded").await.expect("commissioned");
    lock.release().await.expect("released");
    // The client has verified master 0 (a quorum of the others may have decided that lock
    // first): only then does it know the epoch a restart loses, and call the loss by name.
    wait_until(PATIENCE, "master 0 verified by the client", || async {
        status(&redlock, 0).await.counts()
    })
    .await;

    // Master 0 restarts without persistence and rejoins at once.
    masters.kill(0).expect("kill");
    masters.restart(0).expect("restart, empty");
    let vote = eventually(
        Duration::from_secs(5),
        "master 0 to be reached again",
        || async {
            let lock = redlock
                .try_lock("guarded")
                .await
                .expect("four masters grant");
            all_votes(&lock).await;
            let vote = lock.stats().votes()[0].vote.clone();
            lock.release().await.expect("released");
            (!matches!(
                vote,
                Vote::Failed(NodeFailure::Connection(_) | NodeFailure::Timeout(_))
            ))
            .then_some(vote)
        },
    )
    .await;
    assert!(
        quarantined(&vote),
        "a master restarted empty must not count: {vote:?}"
    );
    // Health names the new epoch's cause; whether its quarantine still runs when health
    // reads it depends on how long the machine took to get here (the vote above showed it).
    let seen = status(&redlock, 0).await;
    assert!(
        matches!(
            seen,
            GuardStatus::Quarantined {
                cause: EpochCause::DataLost,
                ..
            } | GuardStatus::Counted {
                cause: EpochCause::DataLost
            }
        ),
        "{seen:?}"
    );
    assert!(status(&redlock, 1).await.counts());

    // It counts again a ttl after it came back.
    wait_until(ttl * 5, "master 0 to count again", || async {
        let lock = redlock.try_lock("guarded").await.expect("granted");
        all_votes(&lock).await;
        let counts = lock.stats().votes()[0].vote == Vote::Granted;
        lock.release().await.expect("released");
        counts
    })
    .await;
}

#[tokio::test]
async fn a_master_whose_data_vanished_while_up_is_kept_out() {
    let masters = cluster(3);
    commission(&masters).await;
    let ttl = Duration::from_secs(2);
    let redlock = guarded(masters.urls(), ttl);
    let lock = redlock.try_lock("flushed").await.expect("commissioned");
    lock.release().await.expect("released");
    masters.cmd(2, &["FLUSHALL"]).expect("FLUSHALL");
    let lock = redlock.try_lock("flushed").await.expect("two of three");
    all_votes(&lock).await;
    assert!(
        quarantined(&lock.stats().votes()[2].vote),
        "{:?}",
        lock.stats()
    );
    lock.release().await.expect("released");
}
