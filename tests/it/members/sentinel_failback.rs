//! A failback under a connection that stayed open (the cluster model's finding 1, on a
//! Sentinel group): a primary demoted, resynchronised in full from its promoted replica
//! (losing a key only it had) and promoted back keeps its `run_id`, its epoch marker (the
//! replica had it) and every client connection. A client that verified the primary before,
//! and said nothing through the failover and the failback, reads back the same epoch on the
//! same connection: only the replication id, read back after the grant, shows that the
//! server is not the one it verified.
//!
//! Three members: the group G (a primary, node 0, and one replica, node 1) and two single
//! masters, m1 and m2. A reaches G and m1; C reaches G and m2. Both verify G first (a lock
//! taken and released), then the sentinels are stopped (they would step in: a primary that
//! reports itself a replica is, to them, down) and the operator's failover and failback run
//! by hand, with `REPLICAOF`, which keeps client connections open:
//! 1. node 1 is promoted (it has the marker, and no `r`);
//! 2. A takes `r` on G (node 0, still the primary it verified) and m1;
//! 3. node 0 becomes node 1's replica: its offset is past the point where node 1 left, so it
//!    resynchronises in full and loses `r`;
//! 4. node 0 is promoted again (a new replication id).
//!
//! Then C, on its idle connection to node 0, asks for `r`: node 0 grants it (the key is
//! gone) and reads back the epoch C verified.
//! - With the replication id read back after every grant, G's grant does not count (C gets
//!   m2 only) and G is verified again, as a failover; `r` goes to C only after A releases.
//!   Probes like C, each with its own idle connection, take the other ways a grant is
//!   counted through a group — the scripted kinds (read-write, semaphore, fenced,
//!   multi-resource) and `WAIT` for a fixed count (the identity in the same round trip) or
//!   for every replica (the identity first) — and each is refused for the same reason.
//! - Negative control (`Group::without_identity_per_grant`, `--cfg redquorum_unsafe`): C is
//!   granted `r` on G and m2 while A holds it on m1 and (so A believes) G.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use redquorum::{
    Error, Group, Lock, LockOptions, NodeFailure, Redlock, Replicas, RetryPolicy, Vote,
};
use redquorum_testkit::{Checker, Hold, LocalCluster, ReplyExt, Report, SentinelGroup};

const TTL: Duration = Duration::from_secs(8);
/// Where nothing listens: the single master a client cannot reach.
const NOWHERE: &str = "redis://127.0.0.1:1";
const KEY: &str = "redquorum:lock:r";

fn member(group: &SentinelGroup, identity_per_grant: bool) -> Group {
    let g = Group::sentinel(group.sentinel_urls(), group.master_name());
    if identity_per_grant {
        return g;
    }
    #[cfg(redquorum_unsafe)]
    return g.without_identity_per_grant();
    #[cfg(not(redquorum_unsafe))]
    panic!("the negative control needs --cfg redquorum_unsafe")
}

/// A client over G and `singles` (the group first).
fn client(group: Group, singles: [String; 2]) -> Redlock {
    Redlock::builder()
        .member(group)
        .nodes(singles)
        .ttl(TTL)
        // Each client reads the ttl records of one single master: too few readers to
        // believe, so the declared longest ttl stands in (`guard::losses` is about readers).
        .deployment_max_ttl(TTL)
        .node_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(2))
        .retry(RetryPolicy::once())
        .build()
        .expect("valid")
}

async fn all_votes(lock: &Lock) {
    wait_until(PATIENCE, "every reachable member's vote", || async {
        lock.stats().pending_count() == 0
    })
    .await;
}

/// Takes and releases `name` until G's grant counts: G verified on this client's connection.
async fn verify_group(c: &Redlock, name: &str) {
    eventually(PATIENCE, "the group verified", || async {
        let lock = c.try_lock(name).await.ok()?;
        all_votes(&lock).await;
        let counted = lock.stats().votes()[0].vote == Vote::Granted;
        let _ = lock.release().await;
        counted.then_some(())
    })
    .await;
}

/// `INFO replication`'s `field` on data node `i`.
fn replication(group: &SentinelGroup, i: usize, field: &str) -> Option<String> {
    let reply = group.cmd(i, &["INFO", "replication"]).ok()?;
    reply.info_field(field).map(|v| v.trim().to_owned())
}

fn replicaof(group: &SentinelGroup, i: usize, primary: Option<usize>) {
    let port = primary.map(|p| group.port(p).to_string());
    let args: Vec<&str> = match &port {
        Some(port) => vec!["REPLICAOF", "127.0.0.1", port],
        None => vec!["REPLICAOF", "NO", "ONE"],
    };
    group.cmd(i, &args).expect("REPLICAOF");
}

/// A client like C (its own idle connection to node 0) and the way its grant is counted.
struct Probe {
    name: &'static str,
    client: Redlock,
    resources: &'static [&'static str],
    options: LockOptions,
}

impl Probe {
    fn new(
        group: &SentinelGroup,
        singles: &LocalCluster,
        name: &'static str,
        wait: Option<Replicas>,
    ) -> Self {
        let mut g = member(group, true);
        if let Some(wait) = wait {
            g = g.wait_replicas(wait);
        }
        Self {
            name,
            client: client(g, [NOWHERE.to_owned(), singles.url(1)]),
            resources: &[],
            options: LockOptions::new(),
        }
    }

    fn on(mut self, resources: &'static [&'static str], options: LockOptions) -> Self {
        self.resources = resources;
        self.options = options;
        self
    }

    async fn attempt(&self) -> Result<Lock, Error> {
        self.client
            .lock_with(self.resources.iter().copied(), self.options)
            .await
    }
}

/// Every probe: one per way a grant through a group is counted besides C's `SET NX`.
fn probes(group: &SentinelGroup, singles: &LocalCluster) -> Vec<Probe> {
    vec![
        Probe::new(group, singles, "write hold", None).on(&["p-rw"], LockOptions::new().write()),
        // One permit: a quorum of two of three (more permits need every member).
        Probe::new(group, singles, "semaphore permit", None)
            .on(&["p-sem"], LockOptions::new().permits(1)),
        Probe::new(group, singles, "fenced", None)
            .on(&["p-fenced"], LockOptions::new().fencing(true)),
        Probe::new(group, singles, "multi-resource", None)
            .on(&["p-m1", "p-m2"], LockOptions::new()),
        Probe::new(
            group,
            singles,
            "WAIT for one replica",
            Some(Replicas::AtLeast(1)),
        )
        .on(&["p-wait-one"], LockOptions::new()),
        Probe::new(
            group,
            singles,
            "WAIT for every replica",
            Some(Replicas::All),
        )
        .on(&["p-wait-all"], LockOptions::new()),
    ]
}

/// What C's first attempt at `r` after the failback did.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Refused; G's failure.
    Refused(Option<NodeFailure>),
    /// Granted while A's lock was still valid.
    Granted { while_a_valid: bool },
}

/// G's failure in a refused attempt; `None` if it was granted (and is released).
async fn group_failure(attempt: Result<Lock, Error>) -> Option<NodeFailure> {
    match attempt {
        Ok(lock) => {
            let _ = lock.release().await;
            None
        }
        Err(err) => err
            .node_failures()
            .into_iter()
            .find_map(|(i, f)| (i == 0).then(|| f.clone())),
    }
}

/// Runs the scenario; returns C's first attempt, each probe's G failure (with the
/// identity read back: not for the negative control) and the checker's report.
pub(crate) async fn failback(
    name: &'static str,
    identity_per_grant: bool,
) -> (Outcome, Vec<(&'static str, Option<NodeFailure>)>, Report) {
    let group = Arc::new(
        SentinelGroup::builder()
            .replicas(1)
            .start()
            .expect("a sentinel group"),
    );
    assert_eq!(group.primary().expect("a primary"), 0);
    let singles = LocalCluster::start(2).expect("two masters");
    let checker = Checker::start(name).expect("referee").min_hand_overs(1);
    let admin = Redlock::builder()
        .member(member(&group, true))
        .nodes(singles.urls())
        .build()
        .expect("valid");
    commission_members(&admin).await;
    wait_until(PATIENCE, "the marker on the replica", || async {
        group
            .cmd(1, &["EXISTS", "redquorum:guard"])
            .is_ok_and(|reply| reply.as_int() == Some(1))
    })
    .await;
    let a = client(
        member(&group, identity_per_grant),
        [singles.url(0), NOWHERE.to_owned()],
    );
    let c = client(
        member(&group, identity_per_grant),
        [NOWHERE.to_owned(), singles.url(1)],
    );
    let probes = if identity_per_grant {
        probes(&group, &singles)
    } else {
        Vec::new()
    };
    verify_group(&a, "warm-a").await;
    verify_group(&c, "warm-c").await;
    for probe in &probes {
        verify_group(&probe.client, &format!("warm-{}", probe.name)).await;
    }
    let verified_replid = replication(&group, 0, "master_replid").expect("a replication id");

    // The sentinels stop watching; the operator's failover begins: node 1 is promoted.
    for j in 0..group.sentinel_count() {
        group.kill_sentinel(j).expect("sentinel stopped");
    }
    replicaof(&group, 1, None);

    // A takes r on node 0 (still the primary A verified) and m1.
    let lock_a = eventually(PATIENCE, "A granted r", || async {
        a.try_lock("r").await.ok()
    })
    .await;
    let acquired_a = Instant::now();
    all_votes(&lock_a).await;
    assert_eq!(
        lock_a.stats().votes()[0].vote,
        Vote::Granted,
        "A's grant on G counted: {:?}",
        lock_a.stats()
    );
    let mut session_a = checker.referee().session().await.expect("referee");
    let read_a = session_a.read("r").await.expect("read");

    // Node 0 follows node 1, resynchronises in full (losing r), and is promoted back.
    replicaof(&group, 0, Some(1));
    wait_until(PATIENCE, "node 0 resynchronised from node 1", || async {
        replication(&group, 0, "master_link_status").as_deref() == Some("up")
    })
    .await;
    assert_eq!(
        group.cmd(0, &["EXISTS", KEY]).expect("EXISTS").as_int(),
        Some(0),
        "the full resynchronisation dropped A's key"
    );
    assert_eq!(
        group
            .cmd(0, &["EXISTS", "redquorum:guard"])
            .expect("EXISTS")
            .as_int(),
        Some(1),
        "the marker came back from node 1"
    );
    replicaof(&group, 0, None);
    replicaof(&group, 1, Some(0));
    assert_ne!(
        replication(&group, 0, "master_replid"),
        Some(verified_replid),
        "a promotion draws a new replication id"
    );

    // C, on the connection it verified node 0 on, asks for r.
    let outcome = match c.try_lock("r").await {
        Ok(lock_c) => {
            let acquired_c = Instant::now();
            let while_a_valid = !lock_a.is_expired();
            let mut session_c = checker.referee().session().await.expect("referee");
            let read_c = session_c.read("r").await.expect("read");
            session_c.write("r", read_c).await.expect("write");
            let deadline_c = lock_c.deadline().into_std();
            let released_c = Instant::now();
            let _ = lock_c.release().await;
            checker
                .recorder()
                .record(Hold::new(1, "r", acquired_c, deadline_c, released_c));
            Outcome::Granted { while_a_valid }
        }
        Err(err) => Outcome::Refused(group_failure(Err(err)).await),
    };
    let mut probed = Vec::new();
    for probe in &probes {
        probed.push((probe.name, group_failure(probe.attempt().await).await));
    }

    // A finishes its critical section and releases.
    if !lock_a.is_expired() {
        session_a.write("r", read_a).await.expect("write");
    }
    let deadline_a = lock_a.deadline().into_std();
    let released_a = Instant::now();
    let _ = lock_a.release().await;
    checker
        .recorder()
        .record(Hold::new(0, "r", acquired_a, deadline_a, released_a));

    if let Outcome::Refused(_) = outcome {
        // G is verified again as a failover (a new epoch, out for the longest ttl); then C
        // gets r on G and m2.
        let lock_c = eventually(TTL * 4 + PATIENCE, "C granted r", || async {
            c.try_lock("r").await.ok()
        })
        .await;
        let acquired_c = Instant::now();
        let mut session_c = checker.referee().session().await.expect("referee");
        let read_c = session_c.read("r").await.expect("read");
        session_c.write("r", read_c).await.expect("write");
        let deadline_c = lock_c.deadline().into_std();
        let released_c = Instant::now();
        let _ = lock_c.release().await;
        checker
            .recorder()
            .record(Hold::new(1, "r", acquired_c, deadline_c, released_c));
    }
    let report = checker
        .report_with(format!("C's first attempt: {outcome:?}"))
        .expect("referee");
    (outcome, probed, report)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failback_under_an_idle_connection_is_seen_by_the_next_grant() {
    let (outcome, probed, report) = failback("failback: identity read back per grant", true).await;
    match &outcome {
        Outcome::Refused(Some(NodeFailure::Quarantined { reason, .. })) => assert!(
            reason.contains("replication id"),
            "G's grant was refused for its replication id: {reason}"
        ),
        Outcome::Granted { while_a_valid } => panic!(
            "C's grant on G must not count after the failback (A's lock valid: {while_a_valid})"
        ),
        other => panic!("G's vote must be refused as quarantined: {other:?}"),
    }
    assert_eq!(probed.len(), 6);
    for (name, failure) in probed {
        assert!(
            matches!(&failure, Some(NodeFailure::Quarantined { reason, .. }) if reason.contains("replication id")),
            "{name}: G's grant must not count after the failback: {failure:?}"
        );
    }
    report.assert_safe();
}

/// A demoted primary that takes writes (`replica-read-only no`) answers a grant as a
/// primary would, and keeps its replication id until its resync ends; only its role tells.
/// C verified node 0 as the primary; node 0 becomes node 1's replica while C's connection
/// sits idle; C's grant there must not count, and G's connection is replaced (the sentinels,
/// stopped here, are asked again, so G's next vote fails to connect).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writable_replica_under_an_idle_connection_never_counts() {
    let group = Arc::new(
        SentinelGroup::builder()
            .replicas(1)
            .start()
            .expect("a sentinel group"),
    );
    let singles = LocalCluster::start(2).expect("two masters");
    let admin = Redlock::builder()
        .member(member(&group, true))
        .nodes(singles.urls())
        .build()
        .expect("valid");
    commission_members(&admin).await;
    let c = client(member(&group, true), [NOWHERE.to_owned(), singles.url(1)]);
    verify_group(&c, "warm-c").await;
    for j in 0..group.sentinel_count() {
        group.kill_sentinel(j).expect("sentinel stopped");
    }
    replicaof(&group, 1, None);
    group
        .cmd(0, &["CONFIG", "SET", "replica-read-only", "no"])
        .expect("CONFIG SET");
    replicaof(&group, 0, Some(1));
    assert_eq!(
        replication(&group, 0, "role").as_deref(),
        Some("slave"),
        "node 0 is a replica"
    );
    let first = group_failure(c.try_lock("w").await).await;
    assert!(
        matches!(&first, Some(NodeFailure::Quarantined { reason, .. }) if reason.contains("is a replica")),
        "a grant on a replica must not count: {first:?}"
    );
    let next = group_failure(c.try_lock("w").await).await;
    assert!(
        next.is_some(),
        "G's next vote fails too (its connection was replaced, and no sentinel answers)"
    );
}
