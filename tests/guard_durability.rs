//! Durability that cannot be stale (issue 19, finding 3), on real masters. Master 0 persists
//! every write (`appendonly yes`, `appendfsync always`) and a client has verified it as
//! durable. An operator switches it to `appendfsync everysec` at run time; a crash could now
//! lose a second of acknowledged grants, and a restart reads `always` from the server's
//! configuration again — so the marker surviving the restart no longer proves anything.
//! Once a client has looked at the master's persistence again, the epoch is no longer
//! durable (`durable` 0 in the marker), and the next restart is a loss: a new epoch
//! (`restarted`), kept out for the longest ttl. Before guard v3 nobody looked again, and the
//! restarted master counted at once.
//!
//! A look happens on a health check, on an acquisition that refreshes a ttl record, and on
//! a renewal of a kept-alive lock; each test below is one of them. The restart is graceful
//! (`SIGTERM`: the server writes its AOF out before it exits) so that the withdrawal itself
//! is on disk: with `everysec` a kill could lose it, which is the window the design note
//! names as what remains (a switch, grants and a crash all between two looks).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use redquorum::{EpochCause, GuardStatus, Lock, NodeFailure, Redlock, RetryPolicy, Vote};
use redquorum_testkit::{LocalCluster, Persistence, ReplyExt};

/// Long enough that the quarantine after the restart is still running when the test looks.
const TTL: Duration = Duration::from_secs(10);

/// Three masters, 0 persisting every write, commissioned.
async fn masters() -> Arc<LocalCluster> {
    let masters = Arc::new(
        LocalCluster::builder()
            .nodes(3)
            .persistence_of(0, Persistence::AofAlways)
            .start()
            .expect("start masters"),
    );
    commission(&masters).await;
    masters
}

fn guarded(masters: &LocalCluster, ttl: Duration) -> Redlock {
    builder(masters.urls())
        .ttl(ttl)
        .node_timeout(Duration::from_millis(300))
        .restart_guard(true)
        .retry(RetryPolicy::once())
        .build()
        .expect("valid")
}

async fn all_votes(lock: &Lock) {
    wait_until(PATIENCE, "every master's vote", || async {
        lock.stats().pending_count() == 0
    })
    .await;
}

/// A field of master 0's epoch marker.
async fn marker_field(masters: &LocalCluster, field: &str) -> Option<String> {
    common::inspect::cmd(masters, 0, &["HGET", "redquorum:guard", field])
        .await
        .as_str()
        .map(str::to_owned)
}

async fn status(redlock: &Redlock, i: usize) -> GuardStatus {
    redlock
        .health_with(Duration::from_millis(20))
        .await
        .expect("not strict")
        .nodes[i]
        .guard
        .clone()
}

/// Locks through every master until master 0's grant counted: the client has verified it
/// (durable, since it persists every write), and its marker says so.
async fn verified_durable(masters: &LocalCluster, redlock: &Redlock) -> String {
    eventually(PATIENCE, "a lock counted by master 0", || async {
        let lock = redlock.try_lock("warm").await.ok()?;
        all_votes(&lock).await;
        let counted = lock.stats().votes()[0].vote == Vote::Granted;
        lock.release().await.expect("released");
        counted.then_some(())
    })
    .await;
    assert_eq!(
        marker_field(masters, "durable").await.as_deref(),
        Some("1"),
        "master 0 was verified as durable"
    );
    marker_field(masters, "epoch").await.expect("an epoch")
}

/// Switches master 0 to `appendfsync everysec` at run time.
async fn switch_to_everysec(masters: &LocalCluster) {
    let reply =
        common::inspect::cmd(masters, 0, &["CONFIG", "SET", "appendfsync", "everysec"]).await;
    assert_eq!(reply.as_str(), Some("OK"), "{reply:?}");
}

/// Restarts master 0 gracefully; it reads `appendfsync always` from its options again.
async fn restart_gracefully(masters: &Arc<LocalCluster>) {
    let m = masters.clone();
    tokio::task::spawn_blocking(move || {
        m.stop(0).expect("SIGTERM");
        m.restart(0).expect("restart with the AOF");
    })
    .await
    .expect("join");
    let fsync = common::inspect::cmd(masters, 0, &["CONFIG", "GET", "appendfsync"]).await;
    assert_eq!(
        match &fsync {
            redis::Value::Array(items) => items.get(1).and_then(|v| v.as_str()),
            _ => None,
        },
        Some("always"),
        "the restarted master persists every write again: {fsync:?}"
    );
}

/// After the restart: master 0's grant does not count, its epoch is a new one begun by a
/// restart, and the guard says so.
async fn treated_as_a_loss(masters: &LocalCluster, redlock: &Redlock, old_epoch: &str) {
    let vote = eventually(PATIENCE, "master 0 reached again", || async {
        let lock = redlock.try_lock("after").await.ok()?;
        all_votes(&lock).await;
        let vote = lock.stats().votes()[0].vote.clone();
        lock.release().await.expect("released");
        (!matches!(
            vote,
            Vote::Failed(NodeFailure::Connection(_) | NodeFailure::Timeout(_))
        ))
        .then_some(vote)
    })
    .await;
    assert!(
        matches!(vote, Vote::Failed(NodeFailure::Quarantined { .. })),
        "a master whose durability was withdrawn must not count at once after a restart: {vote:?}"
    );
    let epoch = marker_field(masters, "epoch").await;
    assert_ne!(epoch.as_deref(), Some(old_epoch), "a new epoch began");
    assert_eq!(
        marker_field(masters, "cause").await.as_deref(),
        Some("restarted")
    );
    let seen = status(redlock, 0).await;
    assert!(
        matches!(
            seen,
            GuardStatus::Quarantined {
                cause: EpochCause::Restarted,
                ..
            } | GuardStatus::Counted {
                cause: EpochCause::Restarted
            }
        ),
        "{seen:?}"
    );
}

/// Waits until master 0's marker says its epoch is no longer durable, running `look` (what
/// makes the client look at the master's persistence) before each check.
async fn withdrawn<F, Fut>(masters: &LocalCluster, what: &str, mut look: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    wait_until(PATIENCE, what, || {
        let looked = look();
        async move {
            looked.await;
            marker_field(masters, "durable").await.as_deref() == Some("0")
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_health_check_sees_appendfsync_switched_at_run_time_and_the_restart_is_a_loss() {
    let masters = masters().await;
    let redlock = guarded(&masters, TTL);
    let epoch = verified_durable(&masters, &redlock).await;
    switch_to_everysec(&masters).await;
    withdrawn(
        &masters,
        "a health check to withdraw the durability",
        || async {
            let _ = redlock.health_with(Duration::from_millis(20)).await;
        },
    )
    .await;
    restart_gracefully(&masters).await;
    treated_as_a_loss(&masters, &redlock, &epoch).await;
}

/// Acquisitions alone: a record refresh (due a quarter ttl after the last one) looks at the
/// master's persistence too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locking_sees_appendfsync_switched_at_run_time_and_the_restart_is_a_loss() {
    let masters = masters().await;
    let redlock = guarded(&masters, TTL);
    let epoch = verified_durable(&masters, &redlock).await;
    switch_to_everysec(&masters).await;
    withdrawn(
        &masters,
        "acquisitions to withdraw the durability",
        || async {
            if let Ok(lock) = redlock.try_lock("busy").await {
                let _ = lock.release().await;
            }
        },
    )
    .await;
    restart_gracefully(&masters).await;
    treated_as_a_loss(&masters, &redlock, &epoch).await;
}

/// A holder that only renews: its keep-alive's renewals write to the master, so they look at
/// its persistence too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_see_appendfsync_switched_at_run_time_and_the_restart_is_a_loss() {
    let masters = masters().await;
    let redlock = guarded(&masters, TTL);
    let epoch = verified_durable(&masters, &redlock).await;
    let lock = redlock.try_lock("held").await.expect("granted");
    let keep = lock.keep_alive().expect("keep-alive");
    switch_to_everysec(&masters).await;
    // Nothing but the keep-alive touches the masters now.
    withdrawn(&masters, "renewals to withdraw the durability", || async {}).await;
    keep.stop().await;
    let _ = lock.release().await;
    restart_gracefully(&masters).await;
    treated_as_a_loss(&masters, &redlock, &epoch).await;
}
