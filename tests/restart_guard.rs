//! The restart guard on real masters: young masters and masters restarted empty do not
//! count toward a quorum until the ttl has passed since they came up.

mod common;

use std::time::Duration;

use common::*;
use redquorum::{NodeFailure, Redlock, Vote};

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

#[tokio::test]
async fn masters_younger_than_the_ttl_and_masters_restarted_empty_do_not_count() {
    let masters = cluster(5);
    let ttl = Duration::from_secs(3);
    let redlock = guarded(masters.urls(), ttl);

    // Just started: every master is younger than the ttl.
    let err = redlock
        .try_lock("guarded")
        .await
        .expect_err("no master counts yet");
    assert!(err.is_no_quorum(), "{err}");
    assert!(
        err.node_failures()
            .iter()
            .all(|(_, f)| matches!(f, NodeFailure::Quarantined { .. })),
        "{err}"
    );
    assert!(
        !exists_anywhere(&masters, &all(5), "redquorum:lock:guarded").await,
        "the failed attempt released"
    );

    // Once they have been up for a ttl (uptime is reported in whole seconds: one more).
    let lock = eventually(
        ttl + Duration::from_secs(3),
        "the masters to count",
        || async { redlock.try_lock("guarded").await.ok() },
    )
    .await;
    lock.release().await.expect("released");

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
                .expect("four older masters grant");
            wait_until(Duration::from_secs(1), "all votes", || async {
                lock.stats().pending_count() == 0
            })
            .await;
            let vote = lock.stats().votes()[0].vote.clone();
            lock.release().await.expect("released");
            (!matches!(vote, Vote::Failed(NodeFailure::Connection(_)))).then_some(vote)
        },
    )
    .await;
    assert!(
        quarantined(&vote),
        "a master restarted empty must not count: {vote:?}"
    );
    let health = redlock
        .health_with(Duration::from_millis(50))
        .await
        .expect("not strict");
    assert!(health.nodes[0].quarantined.is_some());
    assert!(health.nodes[1].quarantined.is_none());

    // It counts again a ttl after it came up.
    wait_until(
        ttl + Duration::from_secs(3),
        "master 0 to count again",
        || async {
            let lock = redlock.try_lock("guarded").await.expect("granted");
            wait_until(Duration::from_secs(1), "all votes", || async {
                lock.stats().pending_count() == 0
            })
            .await;
            let counts = lock.stats().votes()[0].vote == Vote::Granted;
            lock.release().await.expect("released");
            counts
        },
    )
    .await;
}

#[tokio::test]
async fn a_master_whose_data_vanished_while_up_is_quarantined_for_a_full_ttl() {
    let masters = cluster(3);
    let ttl = Duration::from_secs(2);
    let redlock = guarded(masters.urls(), ttl);
    let lock = eventually(
        ttl + Duration::from_secs(3),
        "the masters to count",
        || async { redlock.try_lock("flushed").await.ok() },
    )
    .await;
    lock.release().await.expect("released");
    masters.cmd(2, &["FLUSHALL"]).expect("FLUSHALL");
    let lock = redlock.try_lock("flushed").await.expect("two of three");
    wait_until(Duration::from_secs(1), "all votes", || async {
        lock.stats().pending_count() == 0
    })
    .await;
    assert!(
        quarantined(&lock.stats().votes()[2].vote),
        "{:?}",
        lock.stats()
    );
    lock.release().await.expect("released");
}
