//! A failover that loses a lock key, with and without the rule that a failover is a
//! restart. Three members — a Sentinel group (primary and one replica, `appendfsync always`)
//! and two single masters. A holds the lock on the group and one single master; the group's
//! replica is cut off from its primary before the grant, so it never gets A's key; then it
//! is promoted. B reaches the group and the other single master:
//! - with the rule, the group's new primary is kept out for the longest ttl, and B is
//!   refused while A holds the lock;
//! - without it (negative control: the new primary is taken for a durable restart of the
//!   same server), the new primary counts at once and B is granted the lock A holds.
//!
//! Needs the `internals` feature for the negative control (`make test` runs it).

#![cfg(feature = "internals")]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use redquorum::{Group, Redlock, RetryPolicy};
use redquorum_testkit::{
    Checker, Direction, Fault, Hold, LinkSet, LocalCluster, Persistence, ReplyExt, Report,
    SentinelGroup,
};

const TTL: Duration = Duration::from_secs(10);

fn member(group: &SentinelGroup, rule: bool) -> Group {
    let g = Group::sentinel(group.sentinel_urls(), group.master_name());
    if rule { g } else { g.without_failover_rule() }
}

fn client(group: Group, singles: &LinkSet) -> Redlock {
    Redlock::builder()
        .member(group)
        .nodes(singles.urls())
        .ttl(TTL)
        .node_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_secs(2))
        .retry(RetryPolicy::once())
        .build()
        .expect("valid")
}

async fn scenario(name: &'static str, rule: bool) -> Report {
    let group = Arc::new(
        SentinelGroup::builder()
            .replicas(1)
            .persistence(Persistence::AofAlways)
            .start()
            .expect("a sentinel group"),
    );
    let singles = LocalCluster::builder()
        .nodes(2)
        .persistence(Persistence::AofAlways)
        .start()
        .expect("two masters");
    let checker = Checker::start(name).expect("referee").min_hand_overs(1);
    // A reaches the group and single 0; B the group and single 1.
    let a_links = singles.links().expect("proxies");
    a_links.link(1).set(Direction::Both, Fault::Blackhole);
    let b_links = singles.links().expect("proxies");
    b_links.link(0).set(Direction::Both, Fault::Blackhole);
    let a = client(member(&group, rule), &a_links);
    let b = client(member(&group, rule), &b_links);
    // New servers: commissioned (the group's marker reaches its replica before the cut).
    let admin = Redlock::builder()
        .member(member(&group, rule))
        .nodes(singles.urls())
        .build()
        .expect("valid");
    for m in 0..3 {
        eventually(Duration::from_secs(10), "commissioned", || async {
            admin.commission(m, false).await.ok()
        })
        .await;
    }
    let primary = group.primary().expect("a primary");
    wait_until(
        Duration::from_secs(10),
        "the marker on the replica",
        || async {
            let replica = 1 - primary;
            group
                .cmd(replica, &["EXISTS", "redquorum:guard"])
                .is_ok_and(|r| r.as_int() == Some(1))
        },
    )
    .await;
    // Both clients know every member they reach.
    for (c, name) in [(&a, "a-warm"), (&b, "b-warm")] {
        let lock = eventually(Duration::from_secs(10), "a first lock", || async {
            c.try_lock(name).await.ok()
        })
        .await;
        lock.release().await.expect("released");
    }
    group
        .partition_replicas(primary)
        .expect("cut the replica off");
    let lock_a = a
        .try_lock("shared")
        .await
        .expect("A on the group and single 0");
    let acquired_a = Instant::now();
    let promoted = tokio::task::spawn_blocking({
        let group = group.clone();
        move || group.failover()
    })
    .await
    .expect("join")
    .expect("the replica that missed A's key is promoted");
    assert_ne!(promoted, primary);
    // B tries until it is granted or A's lock runs out.
    let mut session = checker.referee().session().await.expect("referee");
    let granted_b = eventually(TTL * 2, "B granted, or A's lock over", || async {
        if lock_a.is_expired() {
            return Some(None);
        }
        match b.try_lock("shared").await {
            Ok(lock) => Some(Some(lock)),
            Err(_) => None,
        }
    })
    .await;
    if let Some(lock_b) = granted_b {
        let acquired_b = Instant::now();
        let read = session.read("shared").await.expect("read");
        session.write("shared", read).await.expect("write");
        let deadline = lock_b.deadline().into_std();
        let released = Instant::now();
        let _ = lock_b.release().await;
        checker
            .recorder()
            .record(Hold::new(1, "shared", acquired_b, deadline, released));
    }
    let read = session.read("shared").await.expect("read");
    session.write("shared", read).await.expect("write");
    let deadline_a = lock_a.deadline().into_std();
    let released_a = Instant::now();
    let _ = lock_a.release().await;
    checker
        .recorder()
        .record(Hold::new(0, "shared", acquired_a, deadline_a, released_a));
    group.heal_replicas(primary).expect("heal");
    checker.report().expect("referee")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_failover_rule_a_lossy_failover_hands_nothing_over() {
    let report = scenario("failover that loses a key, rule on", true).await;
    assert_eq!(report.overlaps(), 0, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_without_the_failover_rule_the_promoted_replica_grants_again() {
    let report = scenario("negative: failover that loses a key, rule off", false).await;
    report.assert_overlap_found();
}
