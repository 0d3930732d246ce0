//! A Sentinel group as one quorum member, on real servers (a primary, two replicas, three
//! sentinels): locking through the primary the sentinels name, following it across a
//! failover — which the restart guard treats as a restart — and `WAIT` for replicas.

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use redquorum::{
    EpochCause, Group, GuardStatus, NodeFailure, Redlock, Replicas, RetryPolicy, Vote,
};
use redquorum_testkit::{LocalCluster, SentinelGroup};

fn group() -> Arc<SentinelGroup> {
    Arc::new(SentinelGroup::builder().start().expect("a sentinel group"))
}

fn sentinel_url(g: &SentinelGroup) -> String {
    let hosts: Vec<String> = g
        .sentinel_urls()
        .iter()
        .map(|u| u.trim_start_matches("redis://").to_owned())
        .collect();
    format!("redis+sentinel://{}/{}", hosts.join(","), g.master_name())
}

fn client(group_url: String, singles: &LocalCluster, ttl: Duration, guard: bool) -> Redlock {
    let mut urls = vec![group_url];
    urls.extend(singles.urls());
    builder(urls)
        .ttl(ttl)
        .node_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_secs(2))
        .restart_guard(guard)
        .retry(RetryPolicy::once())
        .build()
        .expect("valid")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_group_votes_once_through_its_primary() {
    let g = group();
    let singles = cluster(2);
    let redlock = client(sentinel_url(&g), &singles, Duration::from_secs(5), false);
    assert_eq!(redlock.nodes(), 3, "a group is one member");
    let lock = eventually(Duration::from_secs(10), "a lock", || async {
        redlock.try_lock("through-sentinel").await.ok()
    })
    .await;
    wait_until(Duration::from_secs(5), "every vote", || async {
        lock.stats().pending_count() == 0
    })
    .await;
    assert_eq!(
        lock.stats().votes()[0].vote,
        Vote::Granted,
        "{:?}",
        lock.stats()
    );
    let primary = g.primary().expect("a primary");
    let value: Option<String> = redis::AsyncCommands::get(
        &mut conn(&g.url(primary)).await,
        "redquorum:lock:through-sentinel",
    )
    .await
    .expect("GET");
    assert_eq!(
        value.as_deref(),
        Some(lock.value()),
        "the key is on the group's primary"
    );
    lock.extend().await.expect("extended");
    lock.release().await.expect("released");
    let report = redlock
        .health_with(Duration::from_millis(50))
        .await
        .expect("not strict");
    assert_eq!(report.nodes[0].role.as_deref(), Some("master"));
    assert_eq!(report.nodes[0].replicas, Some(2));
    assert_eq!(
        report.nodes[0].primary.as_deref(),
        Some(format!("127.0.0.1:{}", g.port(primary)).as_str())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_is_a_restart_for_the_restart_guard() {
    let g = group();
    let singles = cluster(2);
    let ttl = Duration::from_secs(15);
    let a = client(sentinel_url(&g), &singles, ttl, true);
    for member in 0..3 {
        eventually(
            Duration::from_secs(10),
            "the member commissioned",
            || async { a.commission(member, false).await.ok() },
        )
        .await;
    }
    let lock = eventually(Duration::from_secs(10), "a lock", || async {
        a.try_lock("failover").await.ok()
    })
    .await;
    let before = g.primary().expect("a primary");
    let after = tokio::task::spawn_blocking({
        let g = g.clone();
        move || g.failover()
    })
    .await
    .expect("join")
    .expect("a failover");
    assert_ne!(before, after);
    // The group now answers from another server: its grants do not count for a ttl, for a
    // client that knew the old primary and for one that never did. (Until the sentinels
    // demote it, the old primary may still take writes: Sentinel's own window, which
    // `min-replicas-to-write` on the primaries closes; the test waits until each client's
    // connection has moved to the new primary.)
    let new_primary = format!("127.0.0.1:{}", g.port(after));
    let b = client(sentinel_url(&g), &singles, Duration::from_secs(2), true);
    for (name, c) in [("A", &a), ("B", &b)] {
        let vote = eventually(
            Duration::from_secs(20),
            "the new primary's vote",
            || async {
                let on_new = c.health_with(Duration::from_millis(10)).await.ok()?.nodes[0]
                    .primary
                    .as_deref()
                    == Some(new_primary.as_str());
                if !on_new {
                    let _ = c.try_lock(&format!("move-{name}")).await.map(drop);
                    return None;
                }
                let err = match c.try_lock(&format!("probe-{name}")).await {
                    Ok(l) => {
                        wait_until(Duration::from_secs(5), "votes", || async {
                            l.stats().pending_count() == 0
                        })
                        .await;
                        let vote = l.stats().votes()[0].vote.clone();
                        let _ = l.release().await;
                        return Some(vote);
                    }
                    Err(e) => e,
                };
                let vote = err.stats()?.votes()[0].vote.clone();
                (!matches!(
                    vote,
                    Vote::Failed(NodeFailure::Connection(_) | NodeFailure::Timeout(_))
                ))
                .then_some(vote)
            },
        )
        .await;
        assert!(
            matches!(vote, Vote::Failed(NodeFailure::Quarantined { .. })),
            "client {name}: a failed-over group must not count: {vote:?}"
        );
        let report = c
            .health_with(Duration::from_millis(50))
            .await
            .expect("not strict");
        match &report.nodes[0].guard {
            GuardStatus::Quarantined { cause, .. } => {
                assert_eq!(*cause, EpochCause::Restarted, "client {name}");
            }
            other => panic!("client {name}: the group must be quarantined: {other}"),
        }
    }
    // A's lock is still held on the two single masters: no one else gets it meanwhile.
    assert!(
        !lock.is_expired(),
        "A's lock must still be held for this to mean anything"
    );
    let err = b.try_lock("failover").await.expect_err("A holds it");
    assert!(err.is_contended() || err.is_no_quorum(), "{err}");
    let _ = lock.release().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_waits_for_its_replicas_when_asked() {
    let g = group();
    let singles = cluster(2);
    let hosts: Vec<String> = g.sentinel_urls();
    let mut urls = singles.urls();
    urls.truncate(2);
    let redlock = Redlock::builder()
        .member(Group::sentinel(hosts, g.master_name()).wait_replicas(Replicas::All))
        .nodes(urls)
        .ttl(Duration::from_secs(5))
        .node_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_secs(2))
        .restart_guard(false)
        .retry(RetryPolicy::once())
        .build()
        .expect("valid");
    let lock = eventually(Duration::from_secs(10), "a lock", || async {
        redlock.try_lock("replicated").await.ok()
    })
    .await;
    wait_until(Duration::from_secs(5), "votes", || async {
        lock.stats().pending_count() == 0
    })
    .await;
    assert_eq!(
        lock.stats().votes()[0].vote,
        Vote::Granted,
        "both replicas acknowledged"
    );
    lock.release().await.expect("released");
    // Cut the primary off from its replicas: its grants no longer count.
    let primary = g.primary().expect("a primary");
    g.partition_replicas(primary).expect("partition");
    let vote = eventually(Duration::from_secs(10), "an unreplicated grant", || async {
        let lock = redlock.try_lock("unreplicated").await.ok()?;
        wait_until(Duration::from_secs(5), "votes", || async {
            lock.stats().pending_count() == 0
        })
        .await;
        let vote = lock.stats().votes()[0].vote.clone();
        let _ = lock.release().await;
        matches!(vote, Vote::Failed(NodeFailure::NotReplicated { .. })).then_some(vote)
    })
    .await;
    assert!(
        matches!(
            vote,
            Vote::Failed(NodeFailure::NotReplicated {
                acknowledged: 0,
                needed: 2
            })
        ),
        "{vote:?}"
    );
    g.heal_replicas(primary).expect("heal");
}
