//! The restart guard: a master that restarted (or lost its data) does not count toward a
//! quorum until the longest ttl in use has passed since it came up.
//!
//! Redlock is only safe if a master that crashed either kept its keys or stays out for at
//! least one ttl. The guard enforces the second half from the client:
//!
//! - When the client first talks to a master it reads `INFO server` (`run_id`,
//!   `uptime_in_seconds`) and writes the `run_id` to a marker key (`{prefix}guard`, no
//!   expiry). A master up for less than the longest ttl is quarantined until that ttl has
//!   passed since it came up.
//! - Every acquire script returns the marker alongside the grant, atomically. A grant whose
//!   marker is missing (the master lost its data: restarted without persistence, flushed)
//!   or differs from the `run_id` we verified (restarted, as another client noticed) does
//!   not count; the master is verified again and quarantined: for a ttl since it came up,
//!   or for a full ttl from now when its data vanished while it stayed up.
//!
//! The check rides on the acquire script (one extra `GET`), so the hot path gains no round
//! trip. A restart that kept the marker also kept the lock keys (the same persistence
//! wrote both), which is the safe case; partial persistence (`appendfsync everysec`, RDB
//! snapshots) can keep an old marker but lose recent lock keys, which is why
//! [`Redlock::health`](crate::Redlock::health) flags it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use redis::Value;
use redis::aio::ConnectionManager;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Bound on one verification (`INFO server`, then `SET` of the marker).
const VERIFY_TIMEOUT: Duration = Duration::from_secs(10);

use crate::node::classify;
use crate::stats::NodeFailure;

/// The guard of one master.
#[derive(Debug)]
pub(crate) struct Guard {
    marker_key: Option<String>,
    longest_ttl_ms: Arc<AtomicU64>,
    state: Mutex<State>,
    /// A verification task is running.
    running: AtomicBool,
    /// Woken when a verification ends.
    done: Notify,
}

#[derive(Debug, Default)]
struct State {
    verified: Option<Verified>,
    /// Why the last verification failed, if it did.
    last_failure: Option<NodeFailure>,
    /// The `run_id` of the last verification, kept while a new one is pending.
    last_run_id: Option<String>,
    /// Set by strict health checks: the master's grants never count while set.
    quarantined: Option<String>,
}

#[derive(Debug, Clone)]
struct Verified {
    run_id: String,
    counts_from: Instant,
}

/// Why a master is being verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reason {
    FirstSight,
    MarkerGone,
    MarkerChanged,
}

impl Guard {
    /// A guard writing its marker at `marker_key`, or a disabled one (`None`).
    pub(crate) fn new(marker_key: Option<String>, longest_ttl_ms: Arc<AtomicU64>) -> Self {
        Self {
            marker_key,
            longest_ttl_ms,
            state: Mutex::new(State::default()),
            running: AtomicBool::new(false),
            done: Notify::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The marker key the acquire script reads, when the guard is on.
    pub(crate) fn marker_key(&self) -> Option<&str> {
        self.marker_key.as_deref()
    }

    /// The `run_id` last verified, if any.
    pub(crate) fn run_id(&self) -> Option<String> {
        self.state().last_run_id.clone()
    }

    /// How long the master's grants will not count yet, if they do not: the rest of its
    /// quarantine, or the longest ttl (an upper bound) while it awaits verification.
    pub(crate) fn quarantined_for(&self) -> Option<Duration> {
        let state = self.state();
        if state.quarantined.is_some() {
            return Some(Duration::MAX);
        }
        match &state.verified {
            Some(v) => v
                .counts_from
                .checked_duration_since(Instant::now())
                .filter(|d| !d.is_zero()),
            None if self.marker_key.is_some() => Some(Duration::from_millis(
                self.longest_ttl_ms.load(Ordering::Relaxed),
            )),
            None => None,
        }
    }

    /// Quarantines (or releases) the master for a reason found by a health check.
    pub(crate) fn set_quarantine(&self, reason: Option<String>) {
        self.state().quarantined = reason;
    }

    /// Verifies the master once, before its first grant can count. The verification runs
    /// in its own task, so a caller that gives up (its node timeout) does not stop it.
    pub(crate) async fn ensure_verified(
        self: &Arc<Self>,
        conn: &ConnectionManager,
    ) -> Result<(), NodeFailure> {
        if self.marker_key.is_none() {
            return Ok(());
        }
        loop {
            // Registered before the check, so a verification ending in between still wakes us.
            let done = self.done.notified();
            {
                let state = self.state();
                if state.verified.is_some() {
                    return Ok(());
                }
                if !self.running.load(Ordering::SeqCst)
                    && let Some(failure) = &state.last_failure
                {
                    // The last verification failed: start another, and report this one.
                    let failure = failure.clone();
                    drop(state);
                    self.spawn_verify(conn, Reason::FirstSight);
                    return Err(failure);
                }
            }
            self.spawn_verify(conn, Reason::FirstSight);
            done.await;
        }
    }

    /// Whether a grant that came back with `marker` counts toward the quorum. A grant that
    /// shows a restart or data loss does not count, and starts a new verification.
    pub(crate) fn admit(
        self: &Arc<Self>,
        marker: Option<&str>,
        conn: &ConnectionManager,
    ) -> Result<(), NodeFailure> {
        if self.marker_key.is_none() {
            return self.check_quarantine();
        }
        let reason = match (&self.state().verified, marker) {
            (Some(v), Some(m)) if v.run_id == m => None,
            (Some(_), Some(_)) => Some(Reason::MarkerChanged),
            (Some(_), None) => Some(Reason::MarkerGone),
            (None, _) => Some(Reason::FirstSight),
        };
        if let Some(reason) = reason {
            // Not verified any more: nothing from this master counts until it is again.
            self.state().verified = None;
            self.spawn_verify(conn, reason);
            return Err(NodeFailure::Quarantined {
                reason: "the master restarted or lost its data; it is being verified again"
                    .to_owned(),
                remaining: None,
            });
        }
        self.check_quarantine()
    }

    /// Starts a verification task unless one is running.
    fn spawn_verify(self: &Arc<Self>, conn: &ConnectionManager, reason: Reason) {
        if self.running.swap(true, Ordering::SeqCst) {
            return;
        }
        let guard = self.clone();
        let mut conn = conn.clone();
        tokio::spawn(async move {
            let result = tokio::time::timeout(VERIFY_TIMEOUT, guard.verify(&mut conn, reason))
                .await
                .unwrap_or(Err(NodeFailure::Timeout(VERIFY_TIMEOUT)));
            if let Err(failure) = &result {
                tracing::debug!(%failure, "restart guard verification failed");
            }
            guard.state().last_failure = result.err();
            guard.running.store(false, Ordering::SeqCst);
            guard.done.notify_waiters();
        });
    }

    fn check_quarantine(&self) -> Result<(), NodeFailure> {
        match self.quarantine_failure() {
            Some(failure) => Err(failure),
            None => Ok(()),
        }
    }

    fn quarantine_failure(&self) -> Option<NodeFailure> {
        let state = self.state();
        if let Some(reason) = &state.quarantined {
            return Some(NodeFailure::Quarantined {
                reason: reason.clone(),
                remaining: None,
            });
        }
        let remaining = state
            .verified
            .as_ref()?
            .counts_from
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())?;
        Some(NodeFailure::Quarantined {
            reason: "the master restarted or lost its data less than a ttl ago".to_owned(),
            remaining: Some(remaining),
        })
    }

    async fn verify(
        &self,
        conn: &mut ConnectionManager,
        reason: Reason,
    ) -> Result<(), NodeFailure> {
        let Some(marker_key) = &self.marker_key else {
            return Ok(());
        };
        let info: Value = redis::cmd("INFO")
            .arg("server")
            .query_async(conn)
            .await
            .map_err(classify)?;
        let text = match &info {
            Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            Value::VerbatimString { text, .. } => text.clone(),
            other => {
                return Err(NodeFailure::UnexpectedReply(format!(
                    "INFO server: {other:?}"
                )));
            }
        };
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
                .map(str::to_owned)
        };
        let run_id = field("run_id")
            .ok_or_else(|| NodeFailure::UnexpectedReply("INFO server has no run_id".into()))?;
        let uptime = field("uptime_in_seconds")
            .and_then(|s| s.parse::<u64>().ok())
            .map(Duration::from_secs)
            .unwrap_or_default();
        let ttl = Duration::from_millis(self.longest_ttl_ms.load(Ordering::Relaxed));
        let previous = self.run_id();
        let restarted = previous.as_deref().is_some_and(|p| p != run_id);
        // `uptime_in_seconds` is rounded down: one more second keeps the bound safe.
        let since_boot = ttl.saturating_sub(uptime.saturating_sub(Duration::from_secs(1)));
        let quarantine = match reason {
            Reason::MarkerGone if !restarted => ttl,
            _ => since_boot,
        };
        let _: () = redis::cmd("SET")
            .arg(marker_key)
            .arg(&run_id)
            .query_async(conn)
            .await
            .map_err(classify)?;
        if !quarantine.is_zero() {
            tracing::warn!(?reason, %run_id, ?quarantine, "master quarantined by the restart guard");
        }
        let mut state = self.state();
        state.last_run_id = Some(run_id.clone());
        state.verified = Some(Verified {
            run_id,
            counts_from: Instant::now() + quarantine,
        });
        Ok(())
    }
}
