//! A Sentinel group believed as a reader of ttl records only while it is the group's
//! primary. The restart guard, verifying a member that lost its data, reads every other
//! member's ttl records and believes only some; a group's primary cut off from its
//! replicas after a failover keeps its identity and old epoch, and a verifier that
//! connected before may still reach it — but it misses every record written on the new
//! primary. So a group is believed only once every replica the sentinels name acknowledged,
//! after the read, on the same connection (`WAIT`).
//!
//! Three members: G (a primary and two replicas) and m1, m2. The replicas stop answering
//! with their links left open, as behind a partition (no failover is needed to show the
//! rule: the primary cannot tell the two apart), then m1 is flushed. Verifying m1 needs two believed readers of the other two.
//! - With the rule: G is not believed, m2 alone is too few, and m1 stays out (no deployment
//!   bound is declared) with the reason.
//! - Negative control (`Group::without_confirmed_readers`, `--cfg redquorum_unsafe`): G is
//!   believed, and m1's quarantine is worked out from G's and m2's records.

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use redquorum::{Group, NodeFailure, Redlock, RetryPolicy};
use redquorum_testkit::{LocalCluster, ReplyExt, SentinelGroup};

fn member(group: &SentinelGroup, confirmed: bool) -> Group {
    let g = Group::sentinel(group.sentinel_urls(), group.master_name());
    if confirmed {
        return g;
    }
    #[cfg(redquorum_unsafe)]
    return g.without_confirmed_readers();
    #[cfg(not(redquorum_unsafe))]
    panic!("the negative control needs --cfg redquorum_unsafe")
}

/// Whether every replica of `primary` acknowledged its whole replication stream.
fn caught_up(group: &SentinelGroup, primary: usize) -> bool {
    let Ok(reply) = group.cmd(primary, &["INFO", "replication"]) else {
        return false;
    };
    let Some(offset) = reply.info_field("master_repl_offset") else {
        return false;
    };
    let replicas: Vec<&str> = (0..4)
        .filter_map(|k| reply.info_field(&format!("slave{k}")))
        .collect();
    replicas.len() == 2
        && replicas
            .iter()
            .all(|line| line.split(',').any(|kv| kv == format!("offset={offset}")))
}

/// Runs the scenario; returns m1's failure after its first loss (G's replicas answering)
/// and after its second (G's replicas silent).
pub(crate) async fn cut_off_reader(confirmed: bool) -> (NodeFailure, NodeFailure) {
    let group = Arc::new(SentinelGroup::builder().start().expect("a sentinel group"));
    let singles = LocalCluster::start(2).expect("two masters");
    let v = Redlock::builder()
        .member(member(&group, confirmed))
        .nodes(singles.urls())
        .ttl(Duration::from_secs(2))
        .node_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_secs(2))
        .retry(RetryPolicy::once())
        .build()
        .expect("valid");
    commission_members(&v).await;
    eventually(PATIENCE, "a lock through every member", || async {
        let lock = v.try_lock("warm").await.ok()?;
        wait_until(PATIENCE, "every vote", || async {
            lock.stats().pending_count() == 0
        })
        .await;
        let all = lock
            .stats()
            .votes()
            .iter()
            .all(|v| v.vote == redquorum::Vote::Granted);
        let _ = lock.release().await;
        all.then_some(())
    })
    .await;
    // While G's replicas answer, G is believed: m1, flushed, is out for a quarantine
    // worked out from G's and m2's records.
    singles.cmd(0, &["FLUSHALL"]).expect("FLUSHALL");
    let answering = m1_verdict(&v).await;
    let primary = group.primary().expect("a primary");
    // First every replica acknowledges everything written so far, so that a `WAIT` after a
    // read that wrote nothing would be answered at once by every replica.
    wait_until(PATIENCE, "the replicas caught up", || async {
        caught_up(&group, primary)
    })
    .await;
    // The replicas stop answering (SIGSTOP) but their links stay open, as in a network
    // partition: the primary still counts them connected, and a `WAIT` that followed no
    // write of the reader's connection would count them too.
    for r in group.replicas_of(primary).expect("replicas") {
        group.pause(r).expect("replica paused");
    }
    singles.cmd(0, &["FLUSHALL"]).expect("FLUSHALL");
    (answering, m1_verdict(&v).await)
}

/// m1's failure once the verification that its lost marker starts has concluded.
async fn m1_verdict(v: &Redlock) -> NodeFailure {
    eventually(PATIENCE, "m1's verification", || async {
        // G and m2 may grant without m1: its vote is read either way.
        let failure = match v.try_lock("x").await {
            Ok(lock) => {
                wait_until(PATIENCE, "every vote", || async {
                    lock.stats().pending_count() == 0
                })
                .await;
                let vote = lock.stats().votes()[1].vote.clone();
                let _ = lock.release().await;
                match vote {
                    redquorum::Vote::Failed(f) => f,
                    _ => return None,
                }
            }
            Err(err) => err
                .node_failures()
                .into_iter()
                .find_map(|(i, f)| (i == 1).then(|| f.clone()))?,
        };
        match &failure {
            NodeFailure::Quarantined { reason, .. } if reason.contains("being verified") => None,
            NodeFailure::Quarantined { reason, .. } if reason.contains("not been verified") => None,
            // Still verifying when the vote's time ran out.
            NodeFailure::Timeout(_) => None,
            _ => Some(failure),
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_cut_off_from_its_replicas_is_not_believed_as_a_reader() {
    let (answering, silent) = cut_off_reader(true).await;
    assert!(
        matches!(
            &answering,
            NodeFailure::Quarantined {
                remaining: Some(_),
                ..
            }
        ),
        "while its replicas answer, G is believed and m1's quarantine is worked out: {answering:?}"
    );
    assert!(
        matches!(&silent, NodeFailure::Quarantined { reason, remaining: None }
            if reason.contains("2 of the other masters answered but only 1")),
        "m1 stays out: G is not believed, m2 alone is too few: {silent:?}"
    );
}
