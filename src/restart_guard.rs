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
//!   a new epoch is kept out until `since` plus the longest ttl recorded on the masters
//!   (read from at least `N − Q + 1` of the others: some of them hold every live lock's record)
//!   and never less than this client's own longest ttl.
//! - **Persistence-aware.** A restart of a master that persists every write before answering
//!   (`appendonly yes`, `appendfsync always`, read with `CONFIG GET`), whose marker survived,
//!   lost nothing: it keeps its epoch and counts at once for everybody.
//! - **Commissioning.** A master with no marker is new, or was flushed: it is kept out for
//!   the longest ttl from first sight, unless an operator commissions it
//!   ([`Redlock::commission`](crate::Redlock::commission)).
//!
//! Grants from a quarantined master do not count; it still receives releases and
//! extensions.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use redis::Value;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::connection::Live;
use crate::failure::{NodeFailure, unexpected};
use crate::node::Node;
use crate::report::{EpochCause, GuardStatus};
use crate::rules;
use crate::scripts;
use crate::settings::{Config, MAX_TTL};
use crate::stats::{AttemptStats, Vote};
use crate::value::LockValue;

/// Bound on one verification (INFO, CONFIG, the epoch script, the others' ttl records).
const VERIFY_TIMEOUT: Duration = Duration::from_secs(10);
/// After a failed verification, the next one starts no sooner than this.
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// Ttl records this client remembers having written, per master.
const RECORDS_KEPT: usize = 8;

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
    nodes: Arc<[Node]>,
    slots: Box<[Slot]>,
}

#[derive(Default)]
struct Slot {
    state: Mutex<State>,
    /// Woken when a verification ends.
    done: Notify,
}

#[derive(Default)]
struct State {
    verified: Option<Verified>,
    running: bool,
    /// The last verification's task was dropped before it finished (its runtime shut down).
    interrupted: bool,
    last_attempt: Option<Instant>,
    last_failure: Option<NodeFailure>,
    /// The epoch last verified here, kept across reconnections.
    known_epoch: Option<String>,
    /// Ttl records this client wrote on the master: `(ttl ms, when sent)`.
    records: Vec<(u64, Instant)>,
    /// Set by strict health checks: the master's grants never count while set.
    strict: Option<String>,
}

#[derive(Debug, Clone)]
struct Verified {
    generation: u64,
    epoch: String,
    cause: EpochCause,
    /// Grants count from this instant on.
    until: Instant,
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
        let prefix = &config.key_prefix;
        Self {
            on: config.restart_guard,
            marker: format!("{prefix}guard"),
            records: format!("{prefix}ttls"),
            lock_pattern: format!("{}lock:*", glob_escape(prefix)),
            drift_factor: config.drift_factor,
            read_timeout: (config.node_timeout * 4).max(Duration::from_millis(250)),
            longest_ttl_ms: AtomicU64::new(millis(config.ttl)),
            declared_ms: config.deployment_max_ttl.map(millis),
            slots: nodes.iter().map(|_| Slot::default()).collect(),
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

    fn slot(&self, index: usize) -> MutexGuard<'_, State> {
        self.slots[index]
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
        if !self.on {
            return Ok(());
        }
        // Whether this call started a verification: if that one is dropped unfinished, its
        // runtime — ours — is shutting down, and starting another would only lose it again.
        let mut started = false;
        loop {
            // Registered before looking, so a verification ending in between still wakes us.
            let done = self.slots[index].done.notified();
            {
                let state = self.slot(index);
                if state
                    .verified
                    .as_ref()
                    .is_some_and(|v| v.generation >= generation)
                {
                    return Ok(());
                }
                if started && !state.running && state.interrupted {
                    return Err(NodeFailure::connection(
                        "the verification was dropped by its runtime, which is shutting down",
                    ));
                }
                if !state.running
                    && let Some(failure) = state.last_failure.clone()
                {
                    drop(state);
                    self.spawn_verify(index);
                    return Err(failure);
                }
            }
            started |= self.spawn_verify(index);
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
        if !self.on {
            return self.check_strict(index);
        }
        let mut state = self.slot(index);
        if let Some(reason) = &state.strict {
            return Err(NodeFailure::Quarantined {
                reason: reason.clone(),
                remaining: None,
            });
        }
        let refusal = match &state.verified {
            None => "it has not been verified yet",
            Some(v) if v.generation != generation => {
                "it was reached on a connection the guard has not verified yet (a reconnection)"
            }
            Some(v) if epoch != Some(v.epoch.as_str()) => {
                state.verified = None;
                "its epoch changed or its marker is gone (it restarted or lost its data); it is being verified again"
            }
            Some(v) => {
                let remaining = v.until.saturating_duration_since(Instant::now());
                if remaining.is_zero() {
                    return Ok(());
                }
                return Err(NodeFailure::Quarantined {
                    reason: v.cause.quarantine_reason().to_owned(),
                    remaining: Some(remaining),
                });
            }
        };
        drop(state);
        self.spawn_verify(index);
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
        self.slot(index)
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
        let mut state = self.slot(index);
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
        match &self.slot(index).strict {
            Some(reason) => Err(NodeFailure::Quarantined {
                reason: reason.clone(),
                remaining: None,
            }),
            None => Ok(()),
        }
    }

    /// Holds master `index` out (or lets it back in) for a reason a health check found.
    pub(crate) fn set_strict(&self, index: usize, reason: Option<String>) {
        self.slot(index).strict = reason;
    }

    /// The guard's view of master `index`.
    pub(crate) fn status(&self, index: usize) -> GuardStatus {
        let state = self.slot(index);
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
        match &state.verified {
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
                reason: state.last_failure.as_ref().map(ToString::to_string),
            },
        }
    }

    /// Starts a verification of master `index` unless one is running (or one failed less
    /// than [`RETRY_PAUSE`] ago); says whether it did.
    fn spawn_verify(self: &Arc<Self>, index: usize) -> bool {
        {
            let mut state = self.slot(index);
            if state.running
                || (state.last_failure.is_some()
                    && state
                        .last_attempt
                        .is_some_and(|at| at.elapsed() < RETRY_PAUSE))
            {
                return false;
            }
            state.running = true;
            state.interrupted = false;
            state.last_attempt = Some(Instant::now());
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            self.slot(index).running = false;
            return false;
        };
        // Moved into the task when it is made, so that a task dropped by its runtime's
        // shutdown — before or during its first poll — still says it stopped.
        let mut running = Running {
            guard: self.clone(),
            index,
            armed: true,
        };
        handle.spawn(async move {
            let guard = running.guard.clone();
            let result = tokio::time::timeout(VERIFY_TIMEOUT, guard.verify(index))
                .await
                .unwrap_or(Err(NodeFailure::Timeout(VERIFY_TIMEOUT)));
            {
                let mut state = guard.slot(index);
                state.running = false;
                match result {
                    Ok(mut verified) => {
                        // A new look at the same epoch never shortens its quarantine.
                        if let Some(prev) = &state.verified
                            && prev.epoch == verified.epoch
                        {
                            verified.until = verified.until.max(prev.until);
                        }
                        let remaining = verified.until.saturating_duration_since(Instant::now());
                        if !remaining.is_zero() {
                            tracing::warn!(
                                node = index,
                                cause = %verified.cause,
                                ?remaining,
                                "master quarantined by the restart guard"
                            );
                        }
                        state.known_epoch = Some(verified.epoch.clone());
                        state.verified = Some(verified);
                        state.last_failure = None;
                    }
                    Err(failure) => {
                        tracing::debug!(node = index, %failure, "restart guard verification failed");
                        state.last_failure = Some(failure);
                    }
                }
            }
            running.disarm();
            guard.slots[index].done.notify_waiters();
        });
        true
    }

    /// Verifies master `index` on its current connection: confirms its epoch or begins a new
    /// one, then works out until when it stays out.
    async fn verify(&self, index: usize) -> Result<Verified, NodeFailure> {
        let node = &self.nodes[index];
        let live = node.live().await?;
        let (run_id, uptime) = identity(node, &live).await?;
        // Behind a Sentinel group a new run_id may be a replica promoted in a failover, which
        // may lack keys whatever it persists, and which lost them at the promotion, not at a
        // boot: never durable, and a new epoch begins now.
        let replicated = node.connection().failover_is_restart();
        let durable = !replicated && node.durable_on(&live).await;
        let anchor = if replicated {
            0
        } else {
            rules::restart_anchor_offset_ms(uptime)
        };
        let known = self.slot(index).known_epoch.clone().unwrap_or_default();
        let fresh = LockValue::random();
        let marker = &self.marker;
        let reply: Value = node
            .connection()
            .run_on(&live, |mut c| async move {
                scripts::guard()
                    .key(marker)
                    .arg(&run_id)
                    .arg(u8::from(durable))
                    .arg(anchor)
                    .arg(fresh.as_str())
                    .arg(known)
                    .invoke_async(&mut c)
                    .await
            })
            .await?;
        let replied = Instant::now();
        let (epoch, since, now, cause) = parse_epoch(&reply)?;
        // An epoch older than any ttl (with any drift) cannot have lost a lock still alive.
        let horizon = millis(MAX_TTL).saturating_mul(2);
        let left = if rules::quarantine_left_ms(since, horizon, now) == 0 {
            0
        } else {
            let recorded = match (self.deployment_ttl(index).await, self.declared_ms) {
                (Ok(recorded), _) => recorded,
                // Not enough masters to read from: the declared bound stands in.
                (Err(_), Some(declared)) => declared,
                (Err(failure), None) => return Err(failure),
            };
            let longest = recorded.max(self.longest_ttl_ms.load(Ordering::Relaxed));
            rules::quarantine_left_ms(since, longest, now)
        };
        Ok(Verified {
            generation: live.generation,
            epoch,
            cause,
            until: replied + rules::local_wait(left, self.drift_factor),
        })
    }

    /// The longest ttl recorded on the masters: every master is asked, and at least
    /// `N − Q + 1` other than `index` must answer (any lock held on a quorum keeps its
    /// record on `Q − 1` masters besides one that lost it, and these meet any `N − Q + 1` of
    /// the others).
    async fn deployment_ttl(&self, index: usize) -> Result<u64, NodeFailure> {
        let n = self.nodes.len();
        let needed = rules::ttl_readers(n, rules::majority(n));
        let records = &self.records;
        let reads = self.nodes.iter().map(|node| async move {
            let read = async {
                let live = node.live().await?;
                node.connection()
                    .run_on(&live, |mut c| async move {
                        scripts::ttl_read()
                            .key(records)
                            .invoke_async::<u64>(&mut c)
                            .await
                    })
                    .await
            };
            tokio::time::timeout(self.read_timeout, read)
                .await
                .unwrap_or(Err(NodeFailure::Timeout(self.read_timeout)))
        });
        let answers = futures::future::join_all(reads).await;
        let mut longest = 0;
        let mut others = 0;
        for (j, answer) in answers.into_iter().enumerate() {
            if let Ok(ttl) = answer {
                longest = longest.max(ttl);
                others += usize::from(j != index);
            }
        }
        if others < needed {
            return Err(NodeFailure::Quarantined {
                reason: format!(
                    "the deployment's longest ttl could not be read: {others} of the other masters answered and {needed} are needed; it stays out until they answer (or set deployment_max_ttl)"
                ),
                remaining: None,
            });
        }
        Ok(longest)
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
        let (run_id, _) = identity(node, &live).await?;
        let durable = !node.connection().failover_is_restart() && node.durable_on(&live).await;
        let (verb, force) = match action {
            Commission::New { force } => ("commission", force),
            Commission::Reset => ("reset", false),
        };
        let fresh = LockValue::random();
        let marker = &self.marker;
        let reply: Value = node
            .connection()
            .run_on(&live, |mut c| async move {
                scripts::commission()
                    .key(marker)
                    .arg(verb)
                    .arg(&run_id)
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
                    crate::failure::text_of(cause)
                )),
                _ => return Err(unexpected(&reply)),
            },
            _ => return Err(unexpected(&reply)),
        };
        // Whatever this client knew of the master is stale now.
        self.slot(index).verified = None;
        Ok(outcome)
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

/// The server's `run_id` and uptime in whole seconds.
async fn identity(node: &Node, live: &Live) -> Result<(String, u64), NodeFailure> {
    let info = node.info_on(live, "server").await?;
    let run_id = info
        .field("run_id")
        .ok_or_else(|| NodeFailure::UnexpectedReply("INFO server has no run_id".into()))?
        .to_owned();
    Ok((run_id, info.number("uptime_in_seconds").unwrap_or(0)))
}

/// `{epoch, since, now, cause}` from `guard.lua`.
fn parse_epoch(reply: &Value) -> Result<(String, u64, u64, EpochCause), NodeFailure> {
    let Value::Array(items) = reply else {
        return Err(unexpected(reply));
    };
    match items.as_slice() {
        [
            epoch @ Value::BulkString(_),
            Value::Int(since),
            Value::Int(now),
            cause,
        ] => Ok((
            crate::failure::text_of(epoch),
            since.unsigned_abs(),
            now.unsigned_abs(),
            EpochCause::parse(&crate::failure::text_of(cause)),
        )),
        _ => Err(unexpected(reply)),
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
    index: usize,
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
            {
                let mut state = self.guard.slot(self.index);
                state.running = false;
                state.interrupted = true;
            }
            self.guard.slots[self.index].done.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        ]);
        assert_eq!(
            parse_epoch(&reply).expect("parses"),
            ("e1".to_owned(), 5, 9, EpochCause::Restarted)
        );
        assert!(parse_epoch(&Value::Int(1)).is_err());
    }
}
