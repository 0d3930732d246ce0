//! The Sentinel split-brain window and a kept-alive lock (issue 19, finding 2), on a real
//! Sentinel group: a primary, two replicas, three sentinels.
//!
//! Three members: the group G (with `wait_replicas(AtLeast(1))`) and two single masters, m1
//! and m2. Holder D reaches G and m1; B reaches G and m2 (each the other single master by an
//! address where nothing listens). D acquires `r` on G and m1 — its grant on G waits for a
//! replica — and keeps it alive (a renewal counts before anything is cut). Then G's primary is cut off: its replicas cannot replicate
//! from it, and the sentinels fail it over but cannot demote it (its `SLAVEOF` is renamed
//! away; see `SentinelGroupBuilder::undemotable`), so D, still connected to it, keeps
//! renewing there, while the promoted replica has `r` with the expiry last replicated. B
//! asks the sentinels and reaches the new primary, which the restart guard keeps out for the
//! longest ttl after the failover; after that B can be granted `r` on G and m2.
//!
//! - With `WAIT` after renewals, D's renewals on the old primary are acknowledged by no
//!   replica and do not count: D has only m1, its lock runs out, and its lease's `lost()`
//!   says so **before** B is granted `r`.
//! - Negative control (`Group::without_wait_on_extensions`, `--cfg redquorum_unsafe`): D's
//!   renewals count on the old primary and m1, its lock stays valid for as long as it likes,
//!   and B is granted `r` while D still holds it.
//!
//! The test observes the order of the two events (D told it lost the lock, B granted it)
//! and what D's lease says at B's grant; the checker sees the holds and the referee's
//! read-modify-writes.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::common::*;
use redquorum::{Group, Lease, Lock, LossReason, Redlock, Replicas, RetryPolicy, Vote};
use redquorum_testkit::{Checker, Hold, LocalCluster, ReplyExt, Report, Role, SentinelGroup};

const TTL: Duration = Duration::from_secs(3);
/// Where nothing listens: the single master a client cannot reach.
const NOWHERE: &str = "redis://127.0.0.1:1";
/// The group's first primary, which the sentinels cannot demote.
const OLD_PRIMARY: usize = 0;

fn member(group: &SentinelGroup, wait_on_extensions: bool) -> Group {
    let g = Group::sentinel(group.sentinel_urls(), group.master_name())
        .wait_replicas(Replicas::AtLeast(1));
    if wait_on_extensions {
        return g;
    }
    #[cfg(redquorum_unsafe)]
    return g.without_wait_on_extensions();
    #[cfg(not(redquorum_unsafe))]
    panic!("the negative control needs --cfg redquorum_unsafe")
}

/// A client over G and `singles` (the group first).
fn client(group: Group, singles: [String; 2]) -> Redlock {
    Redlock::builder()
        .member(group)
        .nodes(singles)
        .ttl(TTL)
        // B reads the ttl records of m2 only (m1 is out of its reach): too few readers to
        // believe on their own, so the declared longest ttl stands in (not what this test is
        // about; `guard_losses.rs` is).
        .deployment_max_ttl(TTL)
        .node_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_secs(2))
        .retry(RetryPolicy::once())
        .build()
        .expect("valid")
}

/// What happened, in the order it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// D's lease resolved `lost()`.
    DLost(LossReason),
    /// B was granted `r`; whether D's lease said lost at that moment.
    BGranted { d_lease_lost: bool },
}

#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<Event>>>);

impl Log {
    fn push(&self, e: Event) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(e);
    }

    fn events(&self) -> Vec<Event> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

async fn all_votes(lock: &Lock) {
    wait_until(PATIENCE, "every reachable member's vote", || async {
        lock.stats().pending_count() == 0
    })
    .await;
}

/// Runs the scenario; returns the events and the checker's report.
pub(crate) async fn split_brain(
    name: &'static str,
    wait_on_extensions: bool,
) -> (Vec<Event>, Report) {
    let group = Arc::new(
        SentinelGroup::builder()
            .replicas(2)
            .undemotable(OLD_PRIMARY)
            .start()
            .expect("a sentinel group"),
    );
    assert_eq!(group.primary().expect("a primary"), OLD_PRIMARY);
    let singles = LocalCluster::start(2).expect("two masters");
    let checker = Checker::start(name).expect("referee").min_hand_overs(1);
    // Every member commissioned (new servers); the group's marker reaches its replicas.
    let admin = Redlock::builder()
        .member(member(&group, true))
        .nodes(singles.urls())
        .build()
        .expect("valid");
    commission_members(&admin).await;
    wait_until(PATIENCE, "the marker on both replicas", || async {
        [1, 2].iter().all(|&r| {
            group
                .cmd(r, &["EXISTS", "redquorum:guard"])
                .is_ok_and(|reply| reply.as_int() == Some(1))
        })
    })
    .await;

    // D holds r on G and m1, kept alive; its grant on G waited for a replica.
    let d = client(
        member(&group, wait_on_extensions),
        [singles.url(0), NOWHERE.to_owned()],
    );
    let lock_d = eventually(PATIENCE, "D granted r", || async {
        d.try_lock("r").await.ok()
    })
    .await;
    let acquired_d = Instant::now();
    all_votes(&lock_d).await;
    assert_eq!(
        lock_d.stats().votes()[0].vote,
        Vote::Granted,
        "D's grant on G counted (a replica acknowledged it): {:?}",
        lock_d.stats()
    );
    let keep = lock_d.keep_alive().expect("keep-alive");
    let lease: Lease = keep.lease().with_margin(TTL / 10);
    let mut session_d = checker.referee().session().await.expect("referee");
    let read_d = session_d.read("r").await.expect("read");
    let log = Log::default();
    // Kept alive through G while its replicas acknowledge: a renewal counted.
    wait_until(PATIENCE, "a renewal of D's lock", || async {
        d.renewal_stats().renewed >= 1
    })
    .await;
    let watcher = tokio::spawn({
        let (lease, log) = (lease.clone(), log.clone());
        async move { log.push(Event::DLost(lease.lost().await)) }
    });

    // G's primary is cut off from its replicas and failed over; it stays a primary, and D
    // stays connected to it.
    let promoted = tokio::task::spawn_blocking({
        let group = group.clone();
        move || {
            group.partition_replicas(OLD_PRIMARY)?;
            group.failover()
        }
    })
    .await
    .expect("join")
    .expect("a replica promoted");
    assert_ne!(promoted, OLD_PRIMARY);
    assert_eq!(
        group.role(OLD_PRIMARY).expect("role"),
        Role::Primary,
        "the old primary was not demoted"
    );

    // B reaches the new primary and m2, and tries until it is granted r.
    let b = client(member(&group, true), [NOWHERE.to_owned(), singles.url(1)]);
    let lock_b = eventually(TTL * 10 + PATIENCE, "B granted r", || async {
        let lock = b.try_lock("r").await.ok()?;
        // The first thing done with the grant: what D's lease says now.
        log.push(Event::BGranted {
            d_lease_lost: lease.is_lost(),
        });
        Some(lock)
    })
    .await;
    let acquired_b = Instant::now();
    let mut session_b = checker.referee().session().await.expect("referee");
    let read_b = session_b.read("r").await.expect("read");
    session_b.write("r", read_b).await.expect("write");
    let deadline_b = lock_b.deadline().into_std();
    let released_b = Instant::now();
    let _ = lock_b.release().await;
    checker
        .recorder()
        .record(Hold::new(1, "r", acquired_b, deadline_b, released_b));

    // D finishes its critical section, if its lease still lets it.
    if lease.check().is_ok() {
        session_d.write("r", read_d).await.expect("write");
    }
    let deadline_d = lease.deadline().into_std();
    let released_d = Instant::now();
    keep.stop().await;
    let _ = lock_d.release().await;
    checker
        .recorder()
        .record(Hold::new(0, "r", acquired_d, deadline_d, released_d));
    watcher.abort();
    let report = checker
        .report_with(format!(
            "events: {:?}; D's renewals: {} renewed, {} failed",
            log.events(),
            d.renewal_stats().renewed,
            d.renewal_stats().failed
        ))
        .expect("referee");
    (log.events(), report)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_cut_off_with_an_old_primary_is_told_it_lost_the_lock_before_anyone_gets_it() {
    let (events, report) = split_brain("split brain: WAIT after renewals", true).await;
    assert!(
        matches!(
            events.as_slice(),
            [Event::DLost(_), Event::BGranted { d_lease_lost: true }]
        ),
        "D is told it lost r before B is granted it: {events:?}"
    );
    report.assert_safe();
}
