//! The restart guard: a master that may have lost lock keys does not count toward a quorum
//! until every lock those keys could have belonged to has run out — for every client.
//!
//! Redlock is safe only if a master that lost its data (a restart without persistence, a
//! flush) stays out for at least the longest ttl in use. The guard enforces that:
//!
//! - **One epoch per master, shared.** Each master carries a marker (`{prefix}guard`): its
//!   *epoch* — one unbroken history of its data — with `since`, the master time from which
//!   keys may be missing. The first client to verify a master after it lost data begins a new
//!   epoch, atomically (`scripts/guard.lua`); everyone else reads that epoch. Nobody rewrites
//!   an epoch into another one it did not derive from what it read, so no client can "heal" a
//!   master for the others.
//! - **Per connection.** A server that restarts breaks every connection to it, so a grant
//!   counts only on a connection that was verified after it was made, and only while the
//!   epoch read back with the grant is the verified one.
//! - **The deployment's longest ttl.** Every acquisition and extension records its ttl on the
//!   masters it writes (`{prefix}ttls`, entries that outlive the keys they cover). A master in
//!   a new epoch is kept out until `since` plus the longest ttl recorded on the masters, read
//!   from at least `N − Q + 1` **trusted** others (some of them hold every live lock's
//!   record), and never less than this client's own longest ttl. A reader is trusted only if
//!   it cannot have lost the records it is asked about (`rules::reader_trusted`): its marker
//!   belongs to the live server and its epoch began at least twice the longest possible ttl
//!   ago (a commissioned master's at time 0). Too few trusted readers: the master stays out
//!   until they answer, for a declared `deployment_max_ttl`, or for the hard maximum ttl.
//!   `model/notes/guard-v3.md` has the argument.
//! - **Persistence-aware.** A restart of a master that persists every write before answering
//!   (`appendonly yes`, `appendfsync always`, read with `CONFIG GET`), whose marker survived,
//!   lost nothing: it keeps its epoch and counts at once for everybody — as long as every
//!   observation since the epoch began said so. Observations: each verification, each record
//!   refresh, renewal and health check; one that says otherwise withdraws the epoch's
//!   durability (`scripts/withdraw.lua`).
//! - **Commissioning.** A master with no marker is new, or was flushed: it is kept out for
//!   the longest ttl from first sight, unless an operator commissions it
//!   ([`Redlock::commission`](crate::Redlock::commission)). Every verified master is
//!   remembered on the others (`scripts/members.lua`), so a master in service whose data
//!   was deleted cannot be commissioned as new.
//!
//! Grants from a quarantined master do not count; it still receives releases and
//! extensions.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use redis::Value;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::config::validated::{Config, MAX_TTL};
use crate::error::node_failure::{NodeFailure, classify, unexpected};
use crate::member::connection::{Connection, Live};
use crate::member::node::{Info, Node, config_value};
use crate::metrics;
use crate::protocol::scripts;
use crate::report::{EpochCause, GuardStatus};
use crate::rules;
use crate::stats::{AttemptStats, Vote};
use crate::value::LockValue;

/// Bound on one verification (INFO, CONFIG, the epoch script, the others' ttl records).
const VERIFY_TIMEOUT: Duration = Duration::from_secs(10);
/// After a failed verification, the next one starts no sooner than this.
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// After a verification that found too few trusted readers, the next one starts no sooner
/// than this (each reads every master).
const SHORTFALL_PAUSE: Duration = Duration::from_secs(1);
/// Ttl records this client remembers having written, per master.
const RECORDS_KEPT: usize = 8;
/// A durable master's persistence is looked at again at most this often per master (and
/// at least once a quarter of this client's ttl while it keeps locking, if that is less).
const OBSERVE_EVERY: Duration = Duration::from_secs(1);

/// What an operator says of a master through [`RestartGuard::commission`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Commission {
    /// New: count at once. `force` overrides an existing marker.
    New { force: bool },
    /// Its data can no longer be trusted: a new epoch from now.
    Reset,
}

/// The guard of every master of one client.
pub(crate) struct RestartGuard {
    on: bool,
    marker: String,
    records: String,
    lock_pattern: String,
    drift_factor: f64,
    read_timeout: Duration,
    longest_ttl_ms: AtomicU64,
    /// The deployment's declared longest ttl, in ms, if any.
    declared_ms: Option<u64>,
    /// How often a durable master's persistence is looked at again.
    observe_every: Duration,
    /// Testing only: guard v2's reader rule (every answering reader is believed).
    trust_every_reader: bool,
    members: String,
    nodes: Arc<[Node]>,
    seats: Box<[Seat]>,
}

/// One member's place in the guard: what the client knows of it, and who waits for its
/// verifications.
#[derive(Default)]
struct Seat {
    state: Mutex<State>,
    /// Woken when a verification ends.
    done: Notify,
}

#[derive(Default)]
struct State {
    /// What this client knows of the master's epoch.
    view: View,
    /// For a member that is a Redis Cluster: what it knows of each hash slot's epoch, on
    /// the node serving the slot.
    by_slot: HashMap<u16, View>,
    /// Ttl records this client wrote on the master: `(ttl ms, when sent)`.
    records: Vec<(u64, Instant)>,
    /// Set by strict health checks: the master's grants never count while set.
    strict: Option<String>,
    /// When this client last looked at the master's persistence.
    observed: Option<Instant>,
    /// Whether a look at its persistence is under way.
    observing: bool,
    /// Behind a group: the most replicas ever known for it (the sentinels' count, or
    /// connected to its primary), which a believed reader must have acknowledge.
    replicas_seen: usize,
}

/// Where an epoch marker is, as the guard follows it.
#[derive(Debug, Clone)]
pub(crate) enum Place {
    /// Member `index`'s own marker: a master's, or a Sentinel group's primary's.
    Member(usize),
    /// One hash slot's marker in a member that is a Redis Cluster.
    Slot(SlotPlace),
}

/// Hash slot `slot` of cluster member `index`, on the node `node` (its cluster node id)
/// that serves it, reached through `conn`. Generations count per connection, so a view of
/// a slot is good only on the node it was verified on.
#[derive(Debug, Clone)]
pub(crate) struct SlotPlace {
    pub(crate) index: usize,
    pub(crate) slot: u16,
    pub(crate) node: Arc<str>,
    pub(crate) conn: Arc<Connection>,
}

impl Place {
    /// The member it belongs to.
    fn index(&self) -> usize {
        match self {
            Self::Member(index) => *index,
            Self::Slot(s) => s.index,
        }
    }

    /// Its view in the member's state.
    fn view<'s>(&self, state: &'s mut State) -> &'s mut View {
        match self {
            Self::Member(_) => &mut state.view,
            Self::Slot(s) => state.by_slot.entry(s.slot).or_default(),
        }
    }

    /// Whether `v` was verified here: for a slot, on the node that serves it now.
    fn verified_here(&self, v: &Verified) -> bool {
        match self {
            Self::Member(_) => true,
            Self::Slot(s) => v.node.as_deref() == Some(&*s.node),
        }
    }
}

/// What a client knows of one epoch marker — a master's, a Sentinel group's, or one hash
/// slot's of a Redis Cluster — and of its verification.
#[derive(Default)]
struct View {
    verified: Option<Verified>,
    running: bool,
    /// The last verification's task was dropped before it finished (its runtime shut down).
    interrupted: bool,
    last_attempt: Option<Instant>,
    last_failure: Option<NodeFailure>,
    /// The epoch last verified here, kept across reconnections.
    known_epoch: Option<String>,
}

#[derive(Debug, Clone)]
struct Verified {
    generation: u64,
    /// For a hash slot: the id of the cluster node it was verified on.
    node: Option<Arc<str>>,
    epoch: String,
    cause: EpochCause,
    /// Whether the epoch is durable (a restart keeps it): then a look at the master's
    /// persistence that says otherwise must withdraw it.
    durable: bool,
    /// The server verified (kept to note it in service on the others, afterwards).
    identity: String,
    /// Grants count from this instant on.
    until: Instant,
    /// Whether the metrics were told that its grants count (once per verification).
    counted_published: std::cell::Cell<bool>,
}

impl fmt::Debug for RestartGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RestartGuard")
            .field("on", &self.on)
            .field("marker", &self.marker)
            .field("longest_ttl_ms", &self.longest_ttl_ms)
            .finish_non_exhaustive()
    }
}

impl RestartGuard {
    pub(crate) fn new(config: &Config, nodes: Arc<[Node]>) -> Self {
        let prefix = config.keys.prefix();
        Self {
            on: config.restart_guard,
            marker: format!("{prefix}guard"),
            records: format!("{prefix}ttls"),
            members: format!("{prefix}members"),
            lock_pattern: format!("{}lock:*", glob_escape(prefix)),
            drift_factor: config.drift_factor,
            read_timeout: (config.node_timeout * 4).max(Duration::from_millis(250)),
            longest_ttl_ms: AtomicU64::new(millis(config.ttl)),
            declared_ms: config.deployment_max_ttl.map(millis),
            observe_every: (config.ttl / 4).min(OBSERVE_EVERY),
            trust_every_reader: config.guard_trusts_every_reader,
            seats: nodes.iter().map(|_| Seat::default()).collect(),
            nodes,
        }
    }

    pub(crate) fn is_on(&self) -> bool {
        self.on
    }

    /// The epoch marker's key.
    pub(crate) fn marker_key(&self) -> &str {
        &self.marker
    }

    /// The ttl records' key.
    pub(crate) fn records_key(&self) -> &str {
        &self.records
    }

    /// Raises this client's longest ttl (the floor of every quarantine it computes).
    pub(crate) fn raise_ttl(&self, ttl: Duration) {
        self.longest_ttl_ms
            .fetch_max(millis(ttl), Ordering::Relaxed);
    }

    fn seat(&self, index: usize) -> MutexGuard<'_, State> {
        self.seats[index]
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits until a connection at least as new as `generation` to master `index` has been
    /// verified. Its verdict may be a quarantine: [`admit`](Self::admit) tells. The
    /// verification runs in a task of its own, so a caller that gives up does not stop it.
    pub(crate) async fn ensure(
        self: &Arc<Self>,
        index: usize,
        generation: u64,
    ) -> Result<(), NodeFailure> {
        self.ensure_at(&Place::Member(index), generation).await
    }

    /// As [`ensure`](Self::ensure), for any place: for a hash slot, a verification on the
    /// node serving it, on a connection at least as new as `generation`.
    pub(crate) async fn ensure_at(
        self: &Arc<Self>,
        place: &Place,
        generation: u64,
    ) -> Result<(), NodeFailure> {
        if !self.on {
            return Ok(());
        }
        let index = place.index();
        // Whether this call started a verification: if that one is dropped unfinished, its
        // runtime — ours — is shutting down, and starting another would only lose it again.
        let mut started = false;
        loop {
            // Registered before looking, so a verification ending in between still wakes us.
            let done = self.seats[index].done.notified();
            {
                let mut state = self.seat(index);
                let view = place.view(&mut state);
                if view
                    .verified
                    .as_ref()
                    .is_some_and(|v| v.generation >= generation && place.verified_here(v))
                {
                    return Ok(());
                }
                if started && !view.running && view.interrupted {
                    return Err(NodeFailure::connection(
                        "the verification was dropped by its runtime, which is shutting down",
                    ));
                }
                if !view.running
                    && let Some(failure) = view.last_failure.clone()
                {
                    drop(state);
                    self.spawn_verify(place);
                    return Err(failure);
                }
            }
            started |= self.spawn_verify(place);
            done.await;
        }
    }

    /// Whether a grant that master `index` made on the connection of `generation`, reading
    /// back `epoch`, counts toward the quorum. One that shows a new epoch or a lost marker
    /// does not, and starts a new verification.
    pub(crate) fn admit(
        self: &Arc<Self>,
        index: usize,
        generation: u64,
        epoch: Option<&str>,
    ) -> Result<(), NodeFailure> {
        self.judge(&Place::Member(index), generation, epoch, None)
    }

    /// As [`admit`](Self::admit), for a grant through a Sentinel group: `seen` is
    /// `INFO replication` read back after the grant on the same connection. The grant counts
    /// only if the server is still a primary with the replication id the guard verified. A
    /// primary demoted, resynchronised in full from another (dropping every key only it
    /// had) and promoted back keeps its `run_id`, its marker (replicated from it) and,
    /// possibly, this client's connection — but every promotion draws a new replication id,
    /// and a primary's id never comes back, so one unchanged since the verification means no
    /// resynchronisation came in between. A replica that takes writes
    /// (`replica-read-only no`) keeps its old id until it syncs: its role says it. Either
    /// change withdraws the verification (the server is verified again, as a failover: a new
    /// epoch, quarantined); a replica's connection is replaced, so the sentinels are asked
    /// for the primary again. One judgement, under one lock, with the epoch and the
    /// quarantine: it cannot pass on one verification and count on the next.
    pub(crate) fn admit_seen(
        self: &Arc<Self>,
        index: usize,
        generation: u64,
        epoch: Option<&str>,
        seen: &Info,
    ) -> Result<(), NodeFailure> {
        let replid = seen.field("master_replid").ok_or_else(|| {
            NodeFailure::UnexpectedReply("INFO replication has no master_replid".into())
        })?;
        let primary = seen.field("role") == Some("master");
        self.judge(
            &Place::Member(index),
            generation,
            epoch,
            Some((primary, replid.to_owned())),
        )
    }

    /// As [`admit_seen`](Self::admit_seen), for a grant in hash slot `place` of a Redis
    /// Cluster member: `replication` and `cluster` are `INFO replication` and `CLUSTER
    /// INFO` read back after the grant on the same connection. The grant counts only on the
    /// node the slot was verified on, still a primary with the replication id and the
    /// config epoch verified: a failover draws a new replication id, and a node that takes
    /// a slot back bumps its config epoch, so a slot that left the node and came back (its
    /// marker with it, possibly from a shard that lost keys meanwhile) is verified again.
    // Used by the cluster member's voter (issue 22, not built yet).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn admit_slot(
        self: &Arc<Self>,
        place: &SlotPlace,
        generation: u64,
        epoch: Option<&str>,
        replication: &Info,
        cluster: &Info,
    ) -> Result<(), NodeFailure> {
        let primary = replication.field("role") == Some("master");
        let tail = cluster_identity_tail(replication, cluster)?;
        self.judge(
            &Place::Slot(place.clone()),
            generation,
            epoch,
            Some((primary, tail)),
        )
    }

    /// [`admit`](Self::admit)'s, [`admit_seen`](Self::admit_seen)'s and
    /// [`admit_slot`](Self::admit_slot)'s judgement; `seen`: whether the server is a
    /// primary, and its identity after the `run_id` (the replication id; on a cluster node,
    /// with its config epoch), which must be the verified one's.
    fn judge(
        self: &Arc<Self>,
        place: &Place,
        generation: u64,
        epoch: Option<&str>,
        seen: Option<(bool, String)>,
    ) -> Result<(), NodeFailure> {
        let index = place.index();
        if !self.on {
            return self.check_strict(index);
        }
        let mut state = self.seat(index);
        if let Some(reason) = &state.strict {
            return Err(NodeFailure::Quarantined {
                reason: reason.clone(),
                remaining: None,
            });
        }
        // A member's own view publishes its status; a slot's is one of many.
        let publish = matches!(place, Place::Member(_));
        let view = place.view(&mut state);
        let mut demoted = false;
        let refusal = match &view.verified {
            None => "it has not been verified yet",
            Some(v) if !place.verified_here(v) => {
                view.verified = None;
                "the slot is served by another node than the one it was verified on (a failover or a slot move); it is being verified again"
            }
            Some(v) if v.generation != generation => {
                "it was reached on a connection the guard has not verified yet (a reconnection)"
            }
            Some(_) if seen.as_ref().is_some_and(|(primary, _)| !primary) => {
                view.verified = None;
                demoted = true;
                "the server is a replica now (one that takes writes: replica-read-only no); the primary is looked for again"
            }
            Some(v)
                if seen.as_ref().is_some_and(|(_, tail)| {
                    v.identity.split_once('/').map(|(_, t)| t) != Some(tail.as_str())
                }) =>
            {
                view.verified = None;
                "its replication id (or, on a cluster node, its config epoch) changed since it was verified: it was replicated from another primary and promoted again (a failover and a failback), its replication backlog was created anew, or it took a slot back, and may have lost keys; it is being verified again"
            }
            Some(v) if epoch != Some(v.epoch.as_str()) => {
                view.verified = None;
                "its epoch changed or its marker is gone (it restarted or lost its data); it is being verified again"
            }
            Some(v) => {
                let remaining = v.until.saturating_duration_since(Instant::now());
                if remaining.is_zero() {
                    if publish && !v.counted_published.replace(true) {
                        metrics::guard_status(index, &GuardStatus::Counted { cause: v.cause });
                    }
                    return Ok(());
                }
                if publish {
                    metrics::guard_status(
                        index,
                        &GuardStatus::Quarantined {
                            cause: v.cause,
                            remaining,
                        },
                    );
                }
                return Err(NodeFailure::Quarantined {
                    reason: v.cause.quarantine_reason().to_owned(),
                    remaining: Some(remaining),
                });
            }
        };
        drop(state);
        // A group's connection is replaced, so that the sentinels are asked again; a
        // cluster node's role is the cluster member's to act on (a slot map refresh).
        if demoted && let Place::Member(_) = place {
            self.nodes[index].connection().replace(generation);
        }
        if publish {
            metrics::guard_status(index, &GuardStatus::Unverified { reason: None });
        }
        self.spawn_verify(place);
        Err(NodeFailure::Quarantined {
            reason: refusal.to_owned(),
            remaining: None,
        })
    }

    /// Whether an acquisition with `ttl` on master `index` should refresh the ttl record in
    /// its own pipeline: none of at least `ttl` sent there within a quarter of a ttl.
    pub(crate) fn refresh_due(&self, index: usize, ttl: Duration) -> bool {
        self.on
            && self
                .age(index, ttl)
                .is_none_or(|age| rules::record_refresh(Some(age), ttl))
    }

    /// Whether master `index` holds an acknowledged record of at least `ttl` that still
    /// covers a lock taken now (sent less than half a ttl ago).
    fn covered(&self, index: usize, ttl: Duration) -> bool {
        self.age(index, ttl)
            .is_some_and(|age| !rules::record_due(Some(age), ttl))
    }

    /// How long ago the freshest acknowledged record of at least `ttl` was sent to master
    /// `index`.
    fn age(&self, index: usize, ttl: Duration) -> Option<Duration> {
        let ttl_ms = millis(ttl);
        self.seat(index)
            .records
            .iter()
            .filter(|(t, _)| *t >= ttl_ms)
            .map(|(_, sent)| sent.elapsed())
            .min()
    }

    /// Before a lock with `ttl` is taken, or extended to a longer ttl: makes sure that a
    /// quorum of masters holds an acknowledged, fresh record of at least `ttl`, writing
    /// records where they are missing — one round trip, needed only after half a ttl
    /// without locking (acquisitions refresh the records in passing). A record that rode
    /// with the lock's own `SET` would not do: a master that lost the lock's key could be
    /// verified, and the others read, before the record arrived there (the model checker's
    /// finding). Returns the masters' answers when fewer than `quorum` are covered.
    pub(crate) async fn ensure_records(
        &self,
        ttl: Duration,
        quorum: usize,
        timeout: Duration,
        attempt: u32,
    ) -> Result<(), AttemptStats> {
        if !self.on {
            return Ok(());
        }
        let n = self.nodes.len();
        let missing: Vec<usize> = (0..n).filter(|&i| !self.covered(i, ttl)).collect();
        if n - missing.len() >= quorum {
            return Ok(());
        }
        let started = Instant::now();
        let records = &self.records;
        let writes = missing.iter().map(|&i| async move {
            let node = &self.nodes[i];
            let write = async {
                let live = node.live().await?;
                let sent = Instant::now();
                node.connection()
                    .run_on(&live, |mut c| async move {
                        redis::cmd("EVAL")
                            .arg(scripts::record_source())
                            .arg(1)
                            .arg(records)
                            .arg(millis(ttl))
                            .query_async::<Value>(&mut c)
                            .await
                    })
                    .await?;
                self.recorded(i, ttl, sent);
                Ok(())
            };
            let result = tokio::time::timeout(timeout, write)
                .await
                .unwrap_or(Err(NodeFailure::Timeout(timeout)));
            (i, result, started.elapsed())
        });
        let results = futures::future::join_all(writes).await;
        let mut stats = AttemptStats::pending(n, quorum, attempt);
        for (i, vote) in stats.votes.iter_mut().enumerate() {
            vote.vote = Vote::Granted;
            if let Some((_, result, latency)) = results.iter().find(|(j, _, _)| *j == i) {
                vote.latency = Some(*latency);
                if let Err(failure) = result {
                    vote.vote = Vote::Failed(failure.clone());
                }
            }
        }
        stats.elapsed = started.elapsed();
        if stats.granted() >= quorum {
            Ok(())
        } else {
            Err(stats)
        }
    }

    /// Notes that a record of `ttl`, sent at `sent`, was written on master `index`.
    pub(crate) fn recorded(&self, index: usize, ttl: Duration, sent: Instant) {
        let ttl_ms = millis(ttl);
        let mut state = self.seat(index);
        let records = &mut state.records;
        match records.iter_mut().find(|(t, _)| *t == ttl_ms) {
            Some(entry) => entry.1 = entry.1.max(sent),
            None => {
                if records.len() >= RECORDS_KEPT
                    && let Some(oldest) = records
                        .iter()
                        .enumerate()
                        .min_by_key(|(_, (_, s))| *s)
                        .map(|(i, _)| i)
                {
                    records.swap_remove(oldest);
                }
                records.push((ttl_ms, sent));
            }
        }
    }

    /// `Err` while a strict health check holds master `index` out (whether or not the guard
    /// is on).
    pub(crate) fn check_strict(&self, index: usize) -> Result<(), NodeFailure> {
        match &self.seat(index).strict {
            Some(reason) => Err(NodeFailure::Quarantined {
                reason: reason.clone(),
                remaining: None,
            }),
            None => Ok(()),
        }
    }

    /// Holds master `index` out (or lets it back in) for a reason a health check found.
    pub(crate) fn set_strict(&self, index: usize, reason: Option<String>) {
        self.seat(index).strict = reason;
    }

    /// The guard's view of master `index`.
    pub(crate) fn status(&self, index: usize) -> GuardStatus {
        let state = self.seat(index);
        if let Some(reason) = &state.strict {
            return GuardStatus::Unhealthy {
                reason: reason.clone(),
            };
        }
        if !self.on {
            return GuardStatus::Off;
        }
        let current = self.nodes[index]
            .connection()
            .current()
            .map(|l| l.generation);
        let status = match &state.view.verified {
            Some(v) if Some(v.generation) == current => {
                let remaining = v.until.saturating_duration_since(Instant::now());
                if remaining.is_zero() {
                    GuardStatus::Counted { cause: v.cause }
                } else {
                    GuardStatus::Quarantined {
                        cause: v.cause,
                        remaining,
                    }
                }
            }
            _ => GuardStatus::Unverified {
                reason: state.view.last_failure.as_ref().map(ToString::to_string),
            },
        };
        metrics::guard_status(index, &status);
        status
    }

    /// Starts a verification of `place` unless one is running (or one failed less than
    /// [`RETRY_PAUSE`] ago); says whether it did.
    fn spawn_verify(self: &Arc<Self>, place: &Place) -> bool {
        let index = place.index();
        {
            let mut state = self.seat(index);
            let view = place.view(&mut state);
            let pause = match &view.last_failure {
                None => Duration::ZERO,
                // Too few trusted readers: each try reads every master.
                Some(NodeFailure::Quarantined { .. }) => SHORTFALL_PAUSE,
                Some(_) => RETRY_PAUSE,
            };
            if view.running || view.last_attempt.is_some_and(|at| at.elapsed() < pause) {
                return false;
            }
            view.running = true;
            view.interrupted = false;
            view.last_attempt = Some(Instant::now());
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            place.view(&mut self.seat(index)).running = false;
            return false;
        };
        // Moved into the task when it is made, so that a task dropped by its runtime's
        // shutdown — before or during its first poll — still says it stopped.
        let mut running = Running {
            guard: self.clone(),
            place: place.clone(),
            armed: true,
        };
        handle.spawn(async move {
            let guard = running.guard.clone();
            let place = running.place.clone();
            let verify = async {
                match &place {
                    Place::Member(index) => guard.verify(*index).await,
                    Place::Slot(s) => guard.verify_slot(s).await,
                }
            };
            let result = tokio::time::timeout(VERIFY_TIMEOUT, verify)
                .await
                .unwrap_or(Err(NodeFailure::Timeout(VERIFY_TIMEOUT)));
            let identity = result.as_ref().ok().map(|v| v.identity.clone());
            let slot = match &place {
                Place::Member(_) => None,
                Place::Slot(s) => Some(s.slot),
            };
            {
                let mut state = guard.seat(index);
                let view = place.view(&mut state);
                view.running = false;
                match result {
                    Ok(mut verified) => {
                        // A new look at the same epoch never shortens its quarantine.
                        if let Some(prev) = &view.verified
                            && prev.epoch == verified.epoch
                        {
                            verified.until = verified.until.max(prev.until);
                        }
                        let remaining = verified.until.saturating_duration_since(Instant::now());
                        if !remaining.is_zero() {
                            tracing::warn!(
                                node = index,
                                ?slot,
                                cause = %verified.cause,
                                ?remaining,
                                "master quarantined by the restart guard"
                            );
                        }
                        view.known_epoch = Some(verified.epoch.clone());
                        view.verified = Some(verified);
                        view.last_failure = None;
                    }
                    Err(failure) => {
                        tracing::debug!(node = index, ?slot, %failure, "restart guard verification failed");
                        view.last_failure = Some(failure);
                    }
                }
            }
            running.disarm();
            guard.seats[index].done.notify_waiters();
            // A member's own verification: its status, and a note on the others that it is
            // in service (after the waiters are woken: a member that does not answer must
            // not delay them).
            if slot.is_none() {
                metrics::guard_status(index, &guard.status(index));
                if let Some(identity) = identity {
                    guard.remember(index, &identity).await;
                }
            }
        });
        true
    }

    /// Verifies master `index` on its current connection: confirms its epoch or begins a new
    /// one, then works out until when it stays out.
    async fn verify(&self, index: usize) -> Result<Verified, NodeFailure> {
        let node = &self.nodes[index];
        let live = node.live().await?;
        let (seen, _) = observe(node, &live, None).await?;
        // Behind a Sentinel group a new run_id may be a replica promoted in a failover, which
        // may lack keys whatever it persists, and which lost them at the promotion, not at a
        // boot: never durable, and a new epoch begins now.
        let replicated = node.connection().failover_is_restart();
        let durable = !replicated && seen.durable;
        let anchor = if replicated {
            0
        } else {
            rules::restart_anchor_offset_ms(seen.uptime)
        };
        let known = self
            .seat(index)
            .view
            .known_epoch
            .clone()
            .unwrap_or_default();
        let fresh = LockValue::random();
        let marker = &self.marker;
        let identity = &seen.identity;
        let reply: Value = node
            .connection()
            .run_on(&live, |mut c| async move {
                scripts::guard()
                    .key(marker)
                    .arg(identity)
                    .arg(u8::from(durable))
                    .arg(anchor)
                    .arg(fresh.as_str())
                    .arg(known)
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        let replied = Instant::now();
        if replicated {
            // The identity must still be the server's after the script: a failover, a
            // failback or a new backlog in between would leave the epoch recorded for an
            // identity already gone (safe — every grant reads the id back — but a needless
            // new epoch at the next verification).
            let after = node.info_on(&live, "replication").await?;
            if seen.identity.rsplit_once('/').map(|(_, id)| id) != after.field("master_replid") {
                return Err(NodeFailure::Quarantined {
                    reason: "its replication id changed during the verification (a failover or a failback); it is verified again".into(),
                    remaining: None,
                });
            }
        }
        let epoch = Epoch::parse(&reply)?;
        let left = self.quarantine(index, &epoch).await?;
        Ok(Verified {
            generation: live.generation,
            node: None,
            epoch: epoch.id,
            cause: epoch.cause,
            durable: epoch.durable,
            identity: seen.identity,
            until: replied + rules::local_wait(left, self.drift_factor),
            counted_published: std::cell::Cell::new(false),
        })
    }

    /// The epoch marker of hash slot `slot` in a member that is a Redis Cluster:
    /// `{prefix}guard:{T}`, with `T` a tag that hashes to `slot`, so that a script on a lock
    /// in that slot can read it.
    pub(crate) fn slot_marker(&self, slot: u16) -> String {
        format!("{}:{{{}}}", self.marker, crate::slot::tag_for(slot))
    }

    /// Verifies hash slot `place.slot` on the node serving it, as [`verify`](Self::verify)
    /// does a master behind a Sentinel group: the slot's marker confirmed by another node
    /// identity (a failover, a slot move, a failback, a slot come back) begins a new epoch
    /// now, never durable, and the slot is kept out until the deployment's longest ttl has
    /// passed since — worked out from the ttl records of every member, as for a master.
    /// One slot per verification.
    async fn verify_slot(&self, place: &SlotPlace) -> Result<Verified, NodeFailure> {
        let conn = &place.conn;
        let live = conn.get().await?;
        let (seen, _) = observe_on(conn, &live, Behind::Cluster, None).await?;
        let known = {
            let mut state = self.seat(place.index);
            Place::Slot(place.clone())
                .view(&mut state)
                .known_epoch
                .clone()
                .unwrap_or_default()
        };
        let fresh = LockValue::random();
        let marker = self.slot_marker(place.slot);
        let identity = &seen.identity;
        let reply: Value = conn
            .run_on(&live, |mut c| async move {
                scripts::guard()
                    .key(&marker)
                    .arg(identity)
                    .arg(0)
                    .arg(0)
                    .arg(fresh.as_str())
                    .arg(known)
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        let replied = Instant::now();
        // The identity must still be the node's after the script (see `verify`).
        let (after, _) = observe_on(conn, &live, Behind::Cluster, None).await?;
        if after.identity != seen.identity {
            return Err(NodeFailure::Quarantined {
                reason: "the node's replication id or config epoch changed during the verification (a failover, or a slot taken); it is verified again".into(),
                remaining: None,
            });
        }
        let epoch = Epoch::parse(&reply)?;
        let left = self.quarantine(place.index, &epoch).await?;
        Ok(Verified {
            generation: live.generation,
            node: Some(place.node.clone()),
            epoch: epoch.id,
            cause: epoch.cause,
            durable: false,
            identity: seen.identity,
            until: replied + rules::local_wait(left, self.drift_factor),
            counted_published: std::cell::Cell::new(false),
        })
    }

    /// How much longer, on master `index`'s clock, a master in `epoch` stays out: until the
    /// epoch's start plus the deployment's longest ttl, read from enough trusted readers; with
    /// too few, plus the declared `deployment_max_ttl`, or else `Err` (it stays out, and is
    /// verified again) until the hard maximum ttl has passed since the epoch began.
    async fn quarantine(&self, index: usize, epoch: &Epoch) -> Result<u64, NodeFailure> {
        // Every lock whose key the master could have lost at the epoch's start has run out
        // by the hard maximum ttl (with its drift) after it.
        let hard = millis(MAX_TTL)
            .saturating_add(millis(rules::drift_allowance(MAX_TTL, self.drift_factor)));
        if rules::quarantine_left_ms(epoch.since, hard, epoch.now) == 0 {
            return Ok(0);
        }
        let readings = self.read_records(index).await;
        let n = self.nodes.len();
        let needed = rules::trusted_readers_needed(n, rules::majority(n));
        let recorded = if readings.trusted >= needed {
            readings.longest
        } else if let Some(declared) = self.declared_ms {
            // Not enough masters to believe: the declared bound stands in.
            readings.longest.max(declared)
        } else {
            return Err(NodeFailure::Quarantined {
                reason: readings.shortfall(needed),
                remaining: None,
            });
        };
        let longest = recorded.max(self.longest_ttl_ms.load(Ordering::Relaxed));
        Ok(rules::quarantine_left_ms(epoch.since, longest, epoch.now))
    }

    /// Behind a Sentinel group (member `j`), after a read of its ttl records on `live` that
    /// left a trace: whether every replica the group is known to have acknowledged it
    /// (`WAIT`, on the same connection), so that the server read is still the group's
    /// primary. A primary cut off from its sentinels and replicas after a failover — a
    /// verifier that connected before may still reach it — keeps its identity and its old
    /// epoch, and misses every record written on the new primary; believed, it could
    /// shorten a quarantine. `WAIT` counts replicas up to the connection's last write,
    /// hence the trace. The count never shrinks: the most this client ever knew for the
    /// group (the sentinels' count at each connection, or `connected` — the primary's
    /// `connected_slaves` now), so neither a count read before replicas were added nor a
    /// connection made after a failover lowers it. Fewer connected than that: not believed,
    /// without waiting. Not believed, the group only counts as a reader fewer.
    async fn still_primary(&self, j: usize, node: &Node, live: &Live, connected: usize) -> bool {
        let needed = {
            let mut state = self.seat(j);
            state.replicas_seen = state
                .replicas_seen
                .max(node.connection().replicas_known())
                .max(connected);
            state.replicas_seen
        };
        if connected < needed {
            return false;
        }
        if needed == 0 {
            // No replica was ever known: the group cannot have failed over.
            return true;
        }
        let timeout_ms = millis(self.read_timeout / 4).max(1);
        matches!(
            node.query_on(live, redis::cmd("WAIT").arg(needed).arg(timeout_ms)).await,
            Ok(Value::Int(n)) if usize::try_from(n).is_ok_and(|n| n >= needed)
        )
    }

    /// Reads the ttl records of every master, with each reader's marker, and judges which
    /// readers other than `index` can be believed (`rules::reader_trusted`).
    async fn read_records(&self, index: usize) -> Readings {
        let (records, marker) = (&self.records, &self.marker);
        let max_ttl_ms = self.declared_ms.unwrap_or(millis(MAX_TTL));
        let reads = self.nodes.iter().enumerate().map(|(j, node)| async move {
            let read = async {
                let live = node.live().await?;
                let replicated = node.connection().failover_is_restart();
                // Behind a group, only the group's primary has every record (one cut off
                // after a failover misses those written on the new one): the read leaves
                // a trace that replicates, for `WAIT` to count replicas up to it.
                let confirm = replicated && node.connection().confirms_readers();
                let mut script = redis::cmd("EVAL");
                script
                    .arg(scripts::ttl_read_source())
                    .arg(2)
                    .arg(records)
                    .arg(marker)
                    .arg(u8::from(confirm));
                let (seen, reply) = observe(node, &live, Some(script)).await?;
                let reply = reply.ok_or_else(|| unexpected(&Value::Nil))?;
                let reader = Reader::parse(&reply)?;
                let same = rules::same_incarnation(
                    reader.run_id == seen.identity,
                    reader.durable,
                    seen.durable && !replicated,
                    replicated,
                );
                let trusted = rules::reader_trusted(
                    reader.present,
                    same,
                    reader.now.saturating_sub(reader.since),
                    max_ttl_ms,
                ) && (!confirm
                    || self.still_primary(j, node, &live, seen.replicas).await);
                // No epoch that records a known loss (a flush, a restart, a reset).
                let setting_up = !reader.present
                    || matches!(
                        reader.cause,
                        EpochCause::Commissioned | EpochCause::FirstSeen
                    );
                Ok::<_, NodeFailure>((reader.longest, trusted, setting_up))
            };
            tokio::time::timeout(self.read_timeout, read)
                .await
                .unwrap_or(Err(NodeFailure::Timeout(self.read_timeout)))
        });
        let answers = futures::future::join_all(reads).await;
        let mut readings = Readings {
            setting_up: true,
            ..Readings::default()
        };
        for (j, answer) in answers.into_iter().enumerate() {
            match answer {
                Ok((ttl, trusted, setting_up)) => {
                    // Any record is evidence of a ttl in use, believed or not.
                    readings.longest = readings.longest.max(ttl);
                    readings.setting_up &= setting_up;
                    if j != index {
                        readings.answered += 1;
                        readings.trusted += usize::from(trusted || self.trust_every_reader);
                    }
                }
                Err(failure) => {
                    readings.setting_up = false;
                    if readings.failure.is_none() {
                        readings.failure = Some(failure);
                    }
                }
            }
        }
        readings
    }

    /// Notes on every other master that master `index` is in service as the server
    /// `identity` (best effort), for [`commission`](Self::commission)'s check.
    async fn remember(&self, index: usize, identity: &str) {
        let addresses = self.addresses(index).await;
        let keep = rules::trust_age_ms(millis(MAX_TTL));
        let writes = self
            .others(index)
            .map(|node| self.members_call(node, "remember", identity, keep, &addresses));
        for outcome in futures::future::join_all(writes).await {
            if let Err(failure) = outcome {
                tracing::debug!(node = index, %failure, "could not note a member in service");
            }
        }
    }

    /// The names master `index` goes by: its URL as configured (without password) and, for
    /// a single server, every `ip:port` its host resolves to — so that two spellings of one
    /// address (a host name and its IP) are one. A server reached through another address
    /// altogether (a proxy, a virtual IP) is not recognised.
    async fn addresses(&self, index: usize) -> Vec<String> {
        let node = &self.nodes[index];
        let mut names = vec![node.name().to_owned()];
        if let Some(addr) = node.connection().fixed_addr() {
            let lookup = tokio::time::timeout(self.read_timeout, tokio::net::lookup_host(addr));
            if let Ok(Ok(found)) = lookup.await {
                names.extend(found.map(|a| a.to_string()));
            }
        }
        names.sort();
        names.dedup();
        names
    }

    /// Runs `members.lua` on `node`.
    async fn members_call(
        &self,
        node: &Node,
        verb: &str,
        identity: &str,
        keep: u64,
        addresses: &[String],
    ) -> Result<Value, NodeFailure> {
        let members = &self.members;
        let call = async {
            let live = node.live().await?;
            node.connection()
                .run_on(&live, |mut c| async move {
                    redis::cmd("EVAL")
                        .arg(scripts::members_source())
                        .arg(1)
                        .arg(members)
                        .arg(verb)
                        .arg(identity)
                        .arg(keep)
                        .arg(addresses)
                        .query_async::<Value>(&mut c)
                        .await
                })
                .await
        };
        tokio::time::timeout(self.read_timeout, call)
            .await
            .unwrap_or(Err(NodeFailure::Timeout(self.read_timeout)))
    }

    fn others(&self, index: usize) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(move |n| n.index() != index)
    }

    /// Whether any other master remembers master `index` (as `identity`, or by an address)
    /// in service: `Err(reason)` when one does, when one does not answer, or when there is
    /// no other master to ask.
    async fn recall(&self, index: usize, identity: &str) -> Result<(), String> {
        if self.nodes.len() < 2 {
            return Err(
                "no other member can be asked whether it has seen this server in service (give the client every master of the deployment)".to_owned(),
            );
        }
        let addresses = self.addresses(index).await;
        let addresses = &addresses;
        let reads = self.others(index).map(|node| async move {
            (
                node.index(),
                self.members_call(node, "recall", identity, 0, addresses)
                    .await,
            )
        });
        for (j, answer) in futures::future::join_all(reads).await {
            let known = match &answer {
                Ok(Value::Array(items)) => match items.as_slice() {
                    [Value::Int(run), Value::Int(addr)] => (*run == 1, *addr == 1),
                    _ => return Err(format!("master {j} answered unexpectedly ({answer:?})")),
                },
                Ok(other) => return Err(format!("master {j} answered unexpectedly ({other:?})")),
                Err(failure) => {
                    return Err(format!(
                        "master {j} could not be asked whether it has seen this server in service ({failure}); every other member must confirm it has not"
                    ));
                }
            };
            match known {
                (true, _) => {
                    return Err(format!(
                        "master {j} remembers this server ({identity}) in service: its data may have been deleted while locks were held"
                    ));
                }
                (_, true) => {
                    return Err(format!(
                        "master {j} remembers a server at this address in service: it may be that server after its data was deleted, or its replacement"
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Whether no lock can be held in the deployment, as commissioning a master (which then
    /// counts at once) requires: no master holds a live ttl record (a held lock keeps one on
    /// every master of its record set that did not lose data), read from enough trusted
    /// masters — or from every master of a deployment being set up (first sights and
    /// commissions only: no loss is known). `Ok(Err(reason))` when one may be held.
    async fn no_lock_can_be_held(&self, index: usize) -> Result<Result<(), String>, NodeFailure> {
        let readings = self.read_records(index).await;
        if let Some(failure @ NodeFailure::ForeignKey { .. }) = readings.failure {
            return Err(failure);
        }
        let n = self.nodes.len();
        let needed = rules::trusted_readers_needed(n, rules::majority(n));
        if readings.longest > 0 {
            return Ok(Err(format!(
                "locks may be held: a master records a ttl of {} ms in use",
                readings.longest
            )));
        }
        if readings.trusted >= needed || readings.setting_up {
            return Ok(Ok(()));
        }
        Ok(Err(format!(
            "no held lock could be ruled out: {} of the other masters answered, {} of them trusted ({needed} needed), and the deployment is not being set up (a master answered with an epoch begun by a loss, or did not answer)",
            readings.answered, readings.trusted
        )))
    }

    /// Looks at master `index`'s persistence again, soon, if its epoch is durable and it was
    /// not looked at within a quarter ttl (at most a second): a run-time switch away from
    /// `appendfsync always` must withdraw the epoch's durability before a crash can make
    /// the next restart look lossless. Called when a record is refreshed and on renewals;
    /// the look runs in a task of its own.
    pub(crate) fn watch_durability(self: &Arc<Self>, index: usize) {
        if !self.on {
            return;
        }
        {
            let mut state = self.seat(index);
            let due = state.view.verified.as_ref().is_some_and(|v| v.durable)
                && !state.observing
                && state
                    .observed
                    .is_none_or(|at| at.elapsed() >= self.observe_every);
            if !due {
                return;
            }
            state.observing = true;
            state.observed = Some(Instant::now());
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            self.seat(index).observing = false;
            return;
        };
        let guard = self.clone();
        handle.spawn(async move {
            let outcome =
                tokio::time::timeout(VERIFY_TIMEOUT, guard.observe_durability(index)).await;
            if let Ok(Err(failure)) = outcome {
                tracing::debug!(node = index, %failure, "could not look at a master's persistence");
            }
            guard.seat(index).observing = false;
        });
    }

    /// One look at master `index`'s persistence (see [`watch_durability`](Self::watch_durability)).
    pub(crate) async fn observe_durability(&self, index: usize) -> Result<(), NodeFailure> {
        let node = &self.nodes[index];
        let Some(live) = node.connection().current() else {
            return Ok(());
        };
        let (seen, _) = observe(node, &live, None).await?;
        if seen.durable && !node.connection().failover_is_restart() {
            return Ok(());
        }
        let marker = &self.marker;
        let cleared: i64 = node
            .connection()
            .run_on(&live, |mut c| async move {
                redis::cmd("EVAL")
                    .arg(scripts::withdraw_source())
                    .arg(1)
                    .arg(marker)
                    .query_async(&mut c)
                    .await
            })
            .await?;
        if let Some(v) = self.seat(index).view.verified.as_mut() {
            v.durable = false;
        }
        if cleared == 1 {
            tracing::warn!(
                node = index,
                "master no longer persists every write (appendonly/appendfsync changed at run time): its next restart counts as a data loss"
            );
        }
        Ok(())
    }

    /// Commissions master `index` (or resets its epoch): see
    /// [`Redlock::commission`](crate::Redlock::commission). `Err(reason)` when refused.
    pub(crate) async fn commission(
        &self,
        index: usize,
        action: Commission,
    ) -> Result<Result<(), String>, NodeFailure> {
        let node = &self.nodes[index];
        let live = node.live().await?;
        if let Commission::New { force: false } = action
            && let Some(key) = self.any_lock_key(node, &live).await?
        {
            return Ok(Err(format!(
                "it holds the lock key `{key}`: a master in use cannot be commissioned as new; wait until no lock is held on it, or reset its epoch instead"
            )));
        }
        let (seen, _) = observe(node, &live, None).await?;
        if let Commission::New { force: false } = action {
            if let Err(reason) = self.recall(index, &seen.identity).await {
                return Ok(Err(format!(
                    "{reason}; reset its epoch instead (it then stays out for the deployment's longest ttl), or pass force if you know it is new"
                )));
            }
            if let Err(reason) = self.no_lock_can_be_held(index).await? {
                return Ok(Err(format!(
                    "{reason}: a new master that counts at once could hand out a lock that the master it joins or replaces held; reset its epoch instead (it then stays out for the deployment's longest ttl)"
                )));
            }
        }
        let durable = !node.connection().failover_is_restart() && seen.durable;
        let (verb, force) = match action {
            Commission::New { force } => ("commission", force),
            Commission::Reset => ("reset", false),
        };
        let fresh = LockValue::random();
        let marker = &self.marker;
        let identity = &seen.identity;
        let reply: Value = node
            .connection()
            .run_on(&live, |mut c| async move {
                scripts::commission()
                    .key(marker)
                    .arg(verb)
                    .arg(identity)
                    .arg(u8::from(durable))
                    .arg(fresh.as_str())
                    .arg(u8::from(force))
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        let outcome = match &reply {
            Value::Array(items) => match items.as_slice() {
                [Value::Int(1), ..] => Ok(()),
                [Value::Int(0), cause, ..] => Err(format!(
                    "it is already in service (epoch begun by: {}); pass force to commission it anyway, or reset its epoch",
                    crate::error::node_failure::text_of(cause)
                )),
                _ => return Err(unexpected(&reply)),
            },
            _ => return Err(unexpected(&reply)),
        };
        if outcome.is_ok() {
            self.remember(index, &seen.identity).await;
        }
        // Whatever this client knew of the master is stale now.
        self.seat(index).view.verified = None;
        Ok(outcome)
    }

    /// An operator's word on hash slots `slots` of cluster member `place.index`, all served
    /// by `place.node` through `place.conn` (`place.slot` is not used): each slot's marker
    /// is commissioned (an epoch since 0: the slot counts at once, on this node) or reset,
    /// in one pipeline, with the node's identity. For each slot, `Ok` or why it was refused
    /// (already in service). The checks that no lock can be held, made for the whole member
    /// before, are the caller's. Whatever this client knew of those slots is dropped.
    // Used by the cluster member's commissioning (issue 22, not built yet).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) async fn commission_slots(
        &self,
        place: &SlotPlace,
        slots: &[u16],
        action: Commission,
    ) -> Result<Vec<Result<(), String>>, NodeFailure> {
        let conn = &place.conn;
        let live = conn.get().await?;
        let (seen, _) = observe_on(conn, &live, Behind::Cluster, None).await?;
        let (verb, force) = match action {
            Commission::New { force } => ("commission", force),
            Commission::Reset => ("reset", false),
        };
        let script = scripts::commission();
        let mut pipe = redis::Pipeline::with_capacity(slots.len() + 1);
        pipe.cmd("SCRIPT")
            .arg("LOAD")
            .arg(scripts::commission_source());
        for &slot in slots {
            pipe.cmd("EVALSHA")
                .arg(script.get_hash())
                .arg(1)
                .arg(self.slot_marker(slot))
                .arg(verb)
                .arg(&seen.identity)
                .arg(0)
                .arg(LockValue::random().as_str())
                .arg(u8::from(force));
        }
        let replies = conn.send_each(live.clone(), &pipe).await?;
        // The identity must still be the node's after the scripts (as in `verify_slot`).
        let (after, _) = observe_on(conn, &live, Behind::Cluster, None).await?;
        if after.identity != seen.identity {
            return Err(NodeFailure::Quarantined {
                reason: "the node's replication id or config epoch changed while its slots were commissioned (a failover, or a slot taken); commission them again".into(),
                remaining: None,
            });
        }
        let outcomes = replies
            .into_iter()
            .skip(1)
            .map(|reply| {
                let reply = reply.extract_error().map_err(classify)?;
                match &reply {
                    Value::Array(items) => match items.as_slice() {
                        [Value::Int(1), ..] => Ok(Ok(())),
                        [Value::Int(0), cause, ..] => Ok(Err(format!(
                            "the slot is already in service (epoch begun by: {}); pass force to commission it anyway, or reset its epoch",
                            crate::error::node_failure::text_of(cause)
                        ))),
                        _ => Err(unexpected(&reply)),
                    },
                    _ => Err(unexpected(&reply)),
                }
            })
            .collect::<Result<Vec<_>, NodeFailure>>()?;
        if outcomes.len() != slots.len() {
            return Err(NodeFailure::UnexpectedReply(format!(
                "{} answers to {} slots",
                outcomes.len(),
                slots.len()
            )));
        }
        let mut state = self.seat(place.index);
        for slot in slots {
            if let Some(view) = state.by_slot.get_mut(slot) {
                view.verified = None;
            }
        }
        Ok(outcomes)
    }

    /// One lock key on the master, if it holds any.
    async fn any_lock_key(&self, node: &Node, live: &Live) -> Result<Option<String>, NodeFailure> {
        let mut cursor = 0u64;
        loop {
            let reply = node
                .query_on(
                    live,
                    redis::cmd("SCAN")
                        .arg(cursor)
                        .arg("MATCH")
                        .arg(&self.lock_pattern)
                        .arg("COUNT")
                        .arg(1000),
                )
                .await?;
            let (next, keys): (u64, Vec<String>) =
                redis::from_redis_value(reply.clone()).map_err(|_| unexpected(&reply))?;
            if let Some(key) = keys.into_iter().next() {
                return Ok(Some(key));
            }
            if next == 0 {
                return Ok(None);
            }
            cursor = next;
        }
    }
}

/// One look at a server: who it is, and whether it persists every write before answering.
#[derive(Debug, Clone)]
struct Observation {
    /// Its `run_id`; behind a Sentinel group, `run_id/master_replid`: a server that was
    /// demoted, resynchronised from another primary (losing keys) and promoted back keeps
    /// its `run_id`, but every promotion changes the replication id.
    identity: String,
    /// Whole seconds.
    uptime: u64,
    /// `appendonly yes` and `appendfsync always`; unknown (`CONFIG` refused) counts as no.
    durable: bool,
    /// Behind a group: the primary's `connected_slaves`; else 0.
    replicas: usize,
}

/// A cluster node's identity after its `run_id`: `master_replid/config epoch`, from
/// `INFO replication` and `CLUSTER INFO`. Neither comes back: every promotion draws a new
/// replication id, and a node that takes a slot bumps its config epoch.
fn cluster_identity_tail(replication: &Info, cluster: &Info) -> Result<String, NodeFailure> {
    let replid = replication.field("master_replid").ok_or_else(|| {
        NodeFailure::UnexpectedReply("INFO replication has no master_replid".into())
    })?;
    let epoch = cluster.field("cluster_my_epoch").ok_or_else(|| {
        NodeFailure::UnexpectedReply("CLUSTER INFO has no cluster_my_epoch".into())
    })?;
    Ok(format!("{replid}/{epoch}"))
}

/// What stands behind a connection, for what the guard reads of its server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Behind {
    /// One master: its identity is its `run_id`.
    Single,
    /// A Sentinel group's primary: `run_id/master_replid`.
    Group,
    /// A Redis Cluster node: `run_id/master_replid/config epoch`.
    Cluster,
}

/// `INFO server` (and, behind a Sentinel group, `INFO replication`) and the persistence
/// settings in one pipeline on `live`, followed by `then` (whose reply is returned): a
/// restart in between would have broken the connection, so all of them are about one
/// incarnation of the server.
async fn observe(
    node: &Node,
    live: &Live,
    then: Option<redis::Cmd>,
) -> Result<(Observation, Option<Value>), NodeFailure> {
    let behind = if node.connection().failover_is_restart() {
        Behind::Group
    } else {
        Behind::Single
    };
    observe_on(node.connection(), live, behind, then).await
}

/// [`observe`] on any connection; on a cluster node, `CLUSTER INFO` too.
async fn observe_on(
    conn: &Arc<Connection>,
    live: &Live,
    behind: Behind,
    then: Option<redis::Cmd>,
) -> Result<(Observation, Option<Value>), NodeFailure> {
    let replicated = behind != Behind::Single;
    let mut pipe = redis::Pipeline::with_capacity(6);
    pipe.add_command(redis::cmd("INFO").arg("server").clone())
        .add_command(redis::cmd("CONFIG").arg("GET").arg("appendonly").clone())
        .add_command(redis::cmd("CONFIG").arg("GET").arg("appendfsync").clone());
    if replicated {
        pipe.add_command(redis::cmd("INFO").arg("replication").clone());
    }
    if behind == Behind::Cluster {
        pipe.add_command(redis::cmd("CLUSTER").arg("INFO").clone());
    }
    let fixed = pipe.len();
    if let Some(cmd) = then {
        pipe.add_command(cmd);
    }
    let mut replies = conn.send_each(live.clone(), &pipe).await?;
    if replies.len() != pipe.len() {
        return Err(NodeFailure::UnexpectedReply(format!(
            "{} replies to a pipeline of {}",
            replies.len(),
            pipe.len()
        )));
    }
    let last = (replies.len() > fixed)
        .then(|| replies.pop())
        .flatten()
        .map(|reply| {
            reply
                .extract_error()
                .map_err(crate::error::node_failure::classify)
        })
        .transpose()?;
    let info = Info::from_reply(&replies[0])?;
    let mut identity = info
        .field("run_id")
        .ok_or_else(|| NodeFailure::UnexpectedReply("INFO server has no run_id".into()))?
        .to_owned();
    let mut replicas = 0;
    if replicated {
        let replication = Info::from_reply(&replies[3])?;
        if replication.field("role") != Some("master") {
            if behind == Behind::Cluster {
                return Err(NodeFailure::Quarantined {
                    reason: "the cluster node is a replica now; the slot map is read again".into(),
                    remaining: None,
                });
            }
            // A replica that takes writes (`replica-read-only no`): not the group's primary,
            // whatever it answers; the sentinels are asked again.
            conn.replace(live.generation);
            return Err(NodeFailure::Quarantined {
                reason: "the server behind the group is a replica (one that takes writes: replica-read-only no); the sentinels are asked for the primary again".into(),
                remaining: None,
            });
        }
        let tail = if behind == Behind::Cluster {
            cluster_identity_tail(&replication, &Info::from_reply(&replies[4])?)?
        } else {
            replication
                .field("master_replid")
                .ok_or_else(|| {
                    NodeFailure::UnexpectedReply("INFO replication has no master_replid".into())
                })?
                .to_owned()
        };
        identity = format!("{identity}/{tail}");
        replicas = replication
            .number("connected_slaves")
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0);
    }
    let durable = config_value(&replies[1]).as_deref() == Some("yes")
        && config_value(&replies[2]).as_deref() == Some("always");
    Ok((
        Observation {
            identity,
            uptime: info.number("uptime_in_seconds").unwrap_or(0),
            durable,
            replicas,
        },
        last,
    ))
}

/// `guard.lua`'s answer.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Epoch {
    id: String,
    since: u64,
    now: u64,
    cause: EpochCause,
    durable: bool,
}

impl Epoch {
    /// `{epoch, since, now, cause, durable}`.
    fn parse(reply: &Value) -> Result<Self, NodeFailure> {
        let Value::Array(items) = reply else {
            return Err(unexpected(reply));
        };
        match items.as_slice() {
            [
                id @ Value::BulkString(_),
                Value::Int(since),
                Value::Int(now),
                cause,
                Value::Int(durable),
            ] => Ok(Self {
                id: crate::error::node_failure::text_of(id),
                since: since.unsigned_abs(),
                now: now.unsigned_abs(),
                cause: EpochCause::parse(&crate::error::node_failure::text_of(cause)),
                durable: *durable == 1,
            }),
            _ => Err(unexpected(reply)),
        }
    }
}

/// `ttl_read.lua`'s answer: one reader's longest ttl and its marker.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Reader {
    longest: u64,
    present: bool,
    run_id: String,
    durable: bool,
    since: u64,
    now: u64,
    cause: EpochCause,
}

impl Reader {
    /// `{longest, present, run_id, durable, since, now, cause}`.
    fn parse(reply: &Value) -> Result<Self, NodeFailure> {
        let Value::Array(items) = reply else {
            return Err(unexpected(reply));
        };
        match items.as_slice() {
            [
                Value::Int(longest),
                Value::Int(present),
                run_id,
                Value::Int(durable),
                Value::Int(since),
                Value::Int(now),
                cause,
            ] => Ok(Self {
                longest: longest.unsigned_abs(),
                present: *present == 1,
                run_id: crate::error::node_failure::text_of(run_id),
                durable: *durable == 1,
                since: since.unsigned_abs(),
                now: now.unsigned_abs(),
                cause: EpochCause::parse(&crate::error::node_failure::text_of(cause)),
            }),
            _ => Err(unexpected(reply)),
        }
    }
}

/// What the readers of a verification said.
#[derive(Debug, Default)]
struct Readings {
    /// The longest ttl recorded on any master that answered (believed or not).
    longest: u64,
    /// Other masters that answered.
    answered: usize,
    /// Of those, the ones whose answer may be believed.
    trusted: usize,
    /// Every master answered, and none carries an epoch that records a loss (only first
    /// sights and commissions): a deployment being set up.
    setting_up: bool,
    /// The first master's failure to answer, if any.
    failure: Option<NodeFailure>,
}

impl Readings {
    /// Why the master stays out when fewer than `needed` readers can be believed.
    fn shortfall(&self, needed: usize) -> String {
        if self.answered >= needed {
            format!(
                "{} of the other masters answered but only {} of them can be believed about the deployment's ttl records (a master whose epoch began less than twice the longest ttl ago may have lost records), and {needed} are needed: it stays out until enough of their epochs are old enough (commission new masters with `redquorum guard commission`; declare deployment_max_ttl to keep a master that lost data out only that long)",
                self.answered, self.trusted
            )
        } else {
            format!(
                "too few masters answered to read the deployment's ttl records: {} of the others answered, {} of them trusted, and {needed} are needed; it stays out until they answer (commission new masters with `redquorum guard commission`, or declare deployment_max_ttl)",
                self.answered, self.trusted
            )
        }
    }
}

/// `s` with the glob characters of `SCAN MATCH` escaped.
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A verification's task, as the master's state sees it: dropped armed (its runtime shut
/// down before it finished) it marks the verification stopped and interrupted, and wakes
/// whoever waits for it, so that a caller on another runtime starts one there instead of
/// waiting for good (the caller that started it, on the dying runtime, gives up: see
/// `ensure`).
struct Running {
    guard: Arc<RestartGuard>,
    place: Place,
    armed: bool,
}

impl Running {
    /// The verification finished and said so itself.
    fn disarm(&mut self) {
        self.armed = false;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.armed {
            let index = self.place.index();
            {
                let mut state = self.guard.seat(index);
                let view = self.place.view(&mut state);
                view.running = false;
                view.interrupted = true;
            }
            self.guard.seats[index].done.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::member::connection::Target;

    /// A guard over one master (nothing listens there) verified on generation 1 as epoch
    /// `E`, identity `run/R1`, counted from now.
    fn verified_guard() -> Arc<RestartGuard> {
        let guard = guard_with(Duration::from_secs(10), None);
        guard.seat(0).view.verified = Some(Verified {
            generation: 1,
            node: None,
            epoch: "E".into(),
            cause: EpochCause::Commissioned,
            durable: false,
            identity: "run/R1".into(),
            until: Instant::now(),
            counted_published: std::cell::Cell::new(false),
        });
        guard
    }

    /// A guard over one master (nothing listens there: it reads no ttl records) with
    /// `ttl` and `declared` as the deployment's longest.
    fn guard_with(ttl: Duration, declared: Option<Duration>) -> Arc<RestartGuard> {
        let config = Config {
            ttl,
            drift_factor: 0.01,
            node_timeout: Duration::from_millis(50),
            min_validity: None,
            connect_timeout: Duration::from_millis(50),
            retry: crate::RetryPolicy::once(),
            keys: crate::config::resources::Namespace::plain("redquorum:"),
            fencing: false,
            fence_counter_ttl: None,
            restart_guard: true,
            deployment_max_ttl: declared,
            strict: false,
            guard_trusts_every_reader: false,
            renewal_shares_connection: false,
        };
        let target = Target::Fixed(redis::Client::open("redis://127.0.0.1:1").expect("a URL"));
        let nodes: Arc<[Node]> =
            vec![Node::new(0, "m0".into(), target, config.connect_timeout)].into();
        Arc::new(RestartGuard::new(&config, nodes))
    }

    fn replication(role: &str, replid: &str) -> Info {
        Info::from_reply(&Value::BulkString(
            format!("# Replication\r\nrole:{role}\r\nmaster_replid:{replid}\r\n").into_bytes(),
        ))
        .expect("text")
    }

    #[tokio::test]
    async fn a_group_grant_counts_only_on_the_verified_primary() {
        let guard = verified_guard();
        let seen = replication("master", "R1");
        assert!(guard.admit_seen(0, 1, Some("E"), &seen).is_ok());
        // The epoch and the identity are judged together: either one changed refuses.
        assert!(guard.admit_seen(0, 1, Some("E2"), &seen).is_err());
        let guard = verified_guard();
        let refused = guard.admit_seen(0, 1, Some("E"), &replication("master", "R2"));
        assert!(
            matches!(&refused, Err(NodeFailure::Quarantined { reason, .. }) if reason.contains("replication id")),
            "{refused:?}"
        );
        assert!(
            guard.seat(0).view.verified.is_none(),
            "another replication id withdraws the verification"
        );
        // Withdrawn: the verified id no longer passes either, until verified again.
        assert!(guard.admit_seen(0, 1, Some("E"), &seen).is_err());
        let guard = verified_guard();
        let refused = guard.admit_seen(0, 1, Some("E"), &replication("slave", "R1"));
        assert!(
            matches!(&refused, Err(NodeFailure::Quarantined { reason, .. }) if reason.contains("replica")),
            "a replica that takes writes keeps its id until it syncs, and does not count: {refused:?}"
        );
        assert!(guard.seat(0).view.verified.is_none());
        // Another connection: refused whatever it reads back.
        let guard = verified_guard();
        assert!(guard.admit_seen(0, 2, Some("E"), &seen).is_err());
    }

    fn cluster_info(epoch: u64) -> Info {
        Info::from_reply(&Value::BulkString(
            format!("cluster_state:ok\r\ncluster_my_epoch:{epoch}\r\n").into_bytes(),
        ))
        .expect("text")
    }

    /// `verified_guard`'s member 0 seen as a cluster: slot 7 verified on node `A` (through
    /// a connection of its own, generation 1) as epoch `S7`, identity `run/R1/3`, counted
    /// from now.
    fn slot_verified() -> (Arc<RestartGuard>, SlotPlace) {
        let guard = verified_guard();
        let client = redis::Client::open("redis://127.0.0.1:1").expect("a URL");
        let place = SlotPlace {
            index: 0,
            slot: 7,
            node: "A".into(),
            conn: Arc::new(Connection::new(
                Target::Fixed(client),
                Duration::from_millis(50),
            )),
        };
        Place::Slot(place.clone()).view(&mut guard.seat(0)).verified = Some(Verified {
            generation: 1,
            node: Some("A".into()),
            epoch: "S7".into(),
            cause: EpochCause::Commissioned,
            durable: false,
            identity: "run/R1/3".into(),
            until: Instant::now(),
            counted_published: std::cell::Cell::new(false),
        });
        (guard, place)
    }

    #[tokio::test]
    async fn a_slot_grant_counts_only_on_the_node_identity_and_config_epoch_verified() {
        let (guard, place) = slot_verified();
        let seen = replication("master", "R1");
        assert!(
            guard
                .admit_slot(&place, 1, Some("S7"), &seen, &cluster_info(3))
                .is_ok()
        );
        // The member's own view is not the slot's, nor another slot's.
        assert!(guard.admit(0, 1, Some("S7")).is_err());
        let other = SlotPlace {
            slot: 8,
            ..place.clone()
        };
        assert!(
            guard
                .admit_slot(&other, 1, Some("S7"), &seen, &cluster_info(3))
                .is_err()
        );
        // The node took a slot since (its config epoch moved): the slot may have left and
        // come back with its marker, after a loss elsewhere.
        let refused = guard.admit_slot(&place, 1, Some("S7"), &seen, &cluster_info(4));
        assert!(
            matches!(&refused, Err(NodeFailure::Quarantined { reason, .. }) if reason.contains("config epoch")),
            "{refused:?}"
        );
        assert!(
            guard
                .admit_slot(&place, 1, Some("S7"), &seen, &cluster_info(3))
                .is_err(),
            "withdrawn until verified again"
        );
        // Another node serves the slot now: the same generation number there means nothing.
        let (guard, place) = slot_verified();
        let moved = SlotPlace {
            node: "B".into(),
            ..place.clone()
        };
        let refused = guard.admit_slot(&moved, 1, Some("S7"), &seen, &cluster_info(3));
        assert!(
            matches!(&refused, Err(NodeFailure::Quarantined { reason, .. }) if reason.contains("another node")),
            "{refused:?}"
        );
        // A failover (another replication id), a replica, another epoch: refused.
        for (replication, epoch) in [
            (replication("master", "R2"), "S7"),
            (replication("slave", "R1"), "S7"),
            (replication("master", "R1"), "S8"),
        ] {
            let (guard, place) = slot_verified();
            assert!(
                guard
                    .admit_slot(&place, 1, Some(epoch), &replication, &cluster_info(3))
                    .is_err()
            );
        }
    }

    /// Verifies `place` and returns the view's epoch, cause and identity.
    async fn verified_slot(
        guard: &Arc<RestartGuard>,
        place: &SlotPlace,
    ) -> (String, EpochCause, String) {
        let generation = place.conn.get().await.expect("connects").generation;
        tokio::time::timeout(
            Duration::from_secs(20),
            guard.ensure_at(&Place::Slot(place.clone()), generation),
        )
        .await
        .expect("verified in time")
        .expect("verified");
        let mut state = guard.seat(place.index);
        let v = Place::Slot(place.clone())
            .view(&mut state)
            .verified
            .clone()
            .expect("a view");
        assert_eq!(v.node.as_deref(), Some(&*place.node));
        (v.epoch, v.cause, v.identity)
    }

    /// On a real cluster, as two clients see it. One verifies a slot on node A and then
    /// sends nothing while the slot moves to B and back, its marker with it, unchanged
    /// (nobody verified it on B): A's `run_id`, replication id, the connection and the
    /// marker's epoch are all the same, and only A's config epoch tells. That client's next
    /// grant on A is refused for it, and the slot is verified again as a new epoch. The
    /// other client verifies the slot on B after a move: a new epoch there too.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slot_moved_away_and_back_is_a_new_epoch() {
        let cluster = redquorum_testkit::RedisCluster::builder()
            .replicas_per_primary(0)
            .start()
            .expect("a cluster");
        // A 1 s deployment: a first-seen slot counts about a second after it is verified.
        let second = Duration::from_secs(1);
        let idle = guard_with(second, Some(second));
        let other = guard_with(second, Some(second));
        let slot = 7;
        let a = cluster.primary_for_slot(slot).expect("served");
        let b = (a + 1) % 3;
        let place_on = |i: usize| SlotPlace {
            index: 0,
            slot,
            node: cluster.node_id(i).into(),
            conn: Arc::new(Connection::new(
                Target::Fixed(redis::Client::open(cluster.url(i)).expect("a URL")),
                Duration::from_secs(2),
            )),
        };
        let marker = idle.slot_marker(slot);
        let epoch_on = |i: usize| match cluster.cmd(i, &["HGET", &marker, "epoch"]) {
            Ok(Value::BulkString(b)) => Some(String::from_utf8_lossy(&b).into_owned()),
            _ => None,
        };
        let read_back = |i: usize| {
            let info = |args: &[&str]| {
                Info::from_reply(&cluster.cmd(i, args).expect("answers")).expect("text")
            };
            (info(&["INFO", "replication"]), info(&["CLUSTER", "INFO"]))
        };

        let on_a = place_on(a);
        let (first, cause, identity) = verified_slot(&idle, &on_a).await;
        assert_eq!(cause, EpochCause::FirstSeen);
        assert_eq!(
            identity.split('/').count(),
            3,
            "run_id/replid/config epoch: {identity}"
        );
        assert_eq!(epoch_on(a).as_deref(), Some(first.as_str()));
        let generation = on_a.conn.current().expect("live").generation;
        // Counted on A once its quarantine is over, while nothing moved.
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let (replication, info) = read_back(a);
            if idle
                .admit_slot(&on_a, generation, Some(&first), &replication, &info)
                .is_ok()
            {
                break;
            }
            assert!(Instant::now() < deadline, "slot {slot} never counted on A");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (_, before) = read_back(a);

        // Away to B and back to A, nobody verifying it on B: the marker comes back as it was.
        cluster.move_slot(slot, b).expect("moved to B");
        cluster.move_slot(slot, a).expect("moved back to A");
        assert_eq!(epoch_on(a).as_deref(), Some(first.as_str()));
        let (replication, after) = read_back(a);
        assert_ne!(
            before.field("cluster_my_epoch"),
            after.field("cluster_my_epoch"),
            "A took the slot back: its config epoch must have moved"
        );
        assert!(
            on_a.conn
                .current()
                .is_some_and(|l| l.generation == generation)
        );
        let refused = idle.admit_slot(&on_a, generation, Some(&first), &replication, &after);
        assert!(
            matches!(&refused, Err(NodeFailure::Quarantined { reason, .. }) if reason.contains("config epoch")),
            "{refused:?}"
        );
        let (again, cause, _) = verified_slot(&idle, &on_a).await;
        assert_ne!(
            again, first,
            "a marker confirmed by another identity is a new epoch"
        );
        assert_eq!(cause, EpochCause::Restarted);

        // The other client, after a move to B: a new epoch there.
        cluster.move_slot(slot, b).expect("moved to B");
        let (on_b, cause, _) = verified_slot(&other, &place_on(b)).await;
        assert_ne!(on_b, again);
        assert_eq!(cause, EpochCause::Restarted);
    }

    /// On a real cluster: every slot commissioned on the node serving it counts at once
    /// when verified; commissioning again is refused; a slot moved afterwards is a new
    /// epoch on its new node all the same.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn commissioned_slots_count_at_once_until_they_move() {
        let cluster = redquorum_testkit::RedisCluster::builder()
            .replicas_per_primary(0)
            .start()
            .expect("a cluster");
        // A ttl of a minute: without the commission, a first-seen slot would wait for it.
        let guard = guard_with(Duration::from_secs(60), Some(Duration::from_secs(60)));
        let place_on = |i: usize, slot: u16| SlotPlace {
            index: 0,
            slot,
            node: cluster.node_id(i).into(),
            conn: Arc::new(Connection::new(
                Target::Fixed(redis::Client::open(cluster.url(i)).expect("a URL")),
                Duration::from_secs(2),
            )),
        };
        let primaries = cluster.primaries().expect("primaries");
        let mut commissioned = 0;
        for &i in &primaries {
            let slots: Vec<u16> = cluster
                .slots_of(i)
                .expect("slots")
                .into_iter()
                .flatten()
                .collect();
            let outcomes = guard
                .commission_slots(&place_on(i, 0), &slots, Commission::New { force: false })
                .await
                .expect("commissioned");
            assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
            commissioned += slots.len();
            // Again: every slot is in service now.
            let again = guard
                .commission_slots(
                    &place_on(i, 0),
                    &slots[..2],
                    Commission::New { force: false },
                )
                .await
                .expect("answered");
            assert!(again.iter().all(Result::is_err), "{again:?}");
        }
        assert_eq!(commissioned, crate::slot::SLOTS);

        let slot = 7;
        let a = cluster.primary_for_slot(slot).expect("served");
        let on_a = place_on(a, slot);
        let (epoch, cause, _) = verified_slot(&guard, &on_a).await;
        assert_eq!(cause, EpochCause::Commissioned);
        let generation = on_a.conn.current().expect("live").generation;
        let info = |i: usize, args: &[&str]| {
            Info::from_reply(&cluster.cmd(i, args).expect("answers")).expect("text")
        };
        assert!(
            guard
                .admit_slot(
                    &on_a,
                    generation,
                    Some(&epoch),
                    &info(a, &["INFO", "replication"]),
                    &info(a, &["CLUSTER", "INFO"])
                )
                .is_ok(),
            "a commissioned slot counts at once"
        );
        let b = primaries
            .iter()
            .copied()
            .find(|&i| i != a)
            .expect("another primary");
        cluster.move_slot(slot, b).expect("moved");
        let (moved, cause, _) = verified_slot(&guard, &place_on(b, slot)).await;
        assert_ne!(moved, epoch);
        assert_eq!(cause, EpochCause::Restarted);
    }

    #[test]
    fn slot_markers_are_in_their_slot() {
        let guard = verified_guard();
        for slot in [0, 7, 12182, 16383] {
            let marker = guard.slot_marker(slot);
            assert_eq!(crate::slot::key_slot(&marker), slot, "{marker}");
            assert!(marker.starts_with("redquorum:guard:{"), "{marker}");
        }
    }

    #[test]
    fn glob_characters_are_escaped() {
        assert_eq!(glob_escape("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
        assert_eq!(glob_escape("redquorum:"), "redquorum:");
    }

    #[test]
    fn epochs_parse() {
        let reply = Value::Array(vec![
            Value::BulkString(b"e1".to_vec()),
            Value::Int(5),
            Value::Int(9),
            Value::BulkString(b"restarted".to_vec()),
            Value::Int(1),
        ]);
        assert_eq!(
            Epoch::parse(&reply).expect("parses"),
            Epoch {
                id: "e1".to_owned(),
                since: 5,
                now: 9,
                cause: EpochCause::Restarted,
                durable: true,
            }
        );
        assert!(Epoch::parse(&Value::Int(1)).is_err());
    }

    #[test]
    fn readers_parse() {
        let reply = Value::Array(vec![
            Value::Int(20_000),
            Value::Int(1),
            Value::BulkString(b"abc".to_vec()),
            Value::Int(0),
            Value::Int(7),
            Value::Int(9),
            Value::BulkString(b"commissioned".to_vec()),
        ]);
        let reader = Reader::parse(&reply).expect("parses");
        assert_eq!(reader.longest, 20_000);
        assert!(reader.present && !reader.durable);
        assert_eq!(
            (reader.run_id.as_str(), reader.since, reader.now),
            ("abc", 7, 9)
        );
        assert!(Reader::parse(&Value::Array(vec![Value::Int(0)])).is_err());
    }
}
