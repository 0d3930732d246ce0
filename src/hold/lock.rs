//! The `Lock` handle: what was acquired, until when it is valid, and the operations on it.

use std::fmt;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use crate::config::resources::Keys;
use crate::config::validated::Timing;
use crate::error::node_failure::NodeFailure;
use crate::error::{Error, LossReason};
use crate::hold::client_core::Core;
use crate::hold::held::{Held, Status};
use crate::hold::keepalive::{KeepAlive, KeepAliveOptions};
use crate::metrics;
use crate::protocol::quorum::{self, Grant, Request};
use crate::stats::AttemptStats;

/// A lock held on a quorum of masters.
///
/// Use it only until [`deadline`](Lock::deadline): after that another client may hold the
/// same resource. [`extend`](Lock::extend) pushes the deadline back;
/// [`release`](Lock::release) gives the lock up. Dropping a lock without releasing it sends
/// the release from a background task (it never blocks); if no tokio runtime is left, the
/// keys expire by their ttl.
#[must_use = "dropping a Lock releases it at once; keep it for the critical section"]
pub struct Lock {
    core: Arc<Core>,
    shared: Arc<Held>,
    released: bool,
}

/// The outcome of a successful [`Lock::extend`].
#[derive(Debug, Clone)]
pub struct Extended {
    deadline: Instant,
    stats: AttemptStats,
}

impl Extended {
    /// The lock's new deadline.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Each master's vote on the extension.
    pub fn stats(&self) -> &AttemptStats {
        &self.stats
    }
}

/// What [`Lock::release`] did on each master, when it returned.
#[derive(Debug, Clone)]
pub struct ReleaseOutcome {
    results: Vec<Option<Result<u64, NodeFailure>>>,
}

impl ReleaseOutcome {
    /// Masters on which at least one of our keys was deleted.
    pub fn released(&self) -> usize {
        self.count(|r| matches!(r, Some(Ok(n)) if *n > 0))
    }

    /// Masters that answered but held none of our keys (never granted, or already expired).
    pub fn not_held(&self) -> usize {
        self.count(|r| matches!(r, Some(Ok(0))))
    }

    /// Masters whose answer had not arrived when a quorum had answered; their delete was
    /// sent and is seen through in the background.
    pub fn pending(&self) -> usize {
        self.count(Option::is_none)
    }

    /// Masters that could not be reached; their keys expire by the ttl.
    pub fn failures(&self) -> Vec<(usize, &NodeFailure)> {
        self.results
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match r {
                Some(Err(f)) => Some((i, f)),
                _ => None,
            })
            .collect()
    }

    /// Each master's result: the number of keys deleted, why it failed, or `None` while
    /// pending.
    pub fn results(&self) -> &[Option<Result<u64, NodeFailure>>] {
        &self.results
    }

    fn count(&self, pred: impl Fn(&Option<Result<u64, NodeFailure>>) -> bool) -> usize {
        self.results.iter().filter(|r| pred(r)).count()
    }
}

impl fmt::Debug for Lock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = self.shared.status();
        f.debug_struct("Lock")
            .field("resources", &self.shared.resources)
            .field("value", &self.shared.req.value)
            .field(
                "remaining",
                &status.deadline.saturating_duration_since(Instant::now()),
            )
            .field("lost", &status.lost)
            .finish()
    }
}

impl Lock {
    pub(crate) fn new(
        core: Arc<Core>,
        keys: Keys,
        req: Arc<Request>,
        timing: Timing,
        grant: Grant,
    ) -> Self {
        Self {
            core,
            shared: Arc::new(Held::new(keys.resources, req, timing, grant)),
            released: false,
        }
    }

    /// The lock's fencing token, when it was acquired with fencing on: a number that is
    /// larger than the token of every earlier holder of the same resources. Pass it with
    /// every write to the protected resource (see [`fenced_set`](crate::fenced_set)).
    pub fn fencing_token(&self) -> Option<u64> {
        self.shared.token
    }

    /// Renews the lock automatically (see [`keep_alive_with`](Lock::keep_alive_with)) with
    /// the default options.
    pub fn keep_alive(&self) -> Result<KeepAlive, Error> {
        self.keep_alive_with(KeepAliveOptions::new())
    }

    /// Renews the lock automatically until the returned handle is dropped, the lock is
    /// released, or it is lost. A failed renewal is retried while the lock is valid; the
    /// lock is marked lost (and [`Lease::lost`](crate::Lease::lost) fires) when a quorum
    /// answers that the keys are not ours, or when its deadline passes without a renewal. A
    /// renewal never recreates a key that is gone. Starting a new keep-alive supersedes an
    /// earlier one.
    pub fn keep_alive_with(&self, options: KeepAliveOptions) -> Result<KeepAlive, Error> {
        let shared = &self.shared;
        check_usable(&shared.status())?;
        let plan = options.plan(shared.timing)?;
        let generation = self.core.renewer.start(shared.clone(), plan);
        Ok(KeepAlive::new(shared.clone(), generation))
    }

    /// The resources this lock covers, sorted.
    pub fn resources(&self) -> &[String] {
        &self.shared.resources
    }

    /// What kind of lock this is: a mutex, a read or write hold, a permit.
    pub fn kind(&self) -> crate::LockKind {
        self.shared.req.kind.public()
    }

    /// The Redis keys that hold it (`{prefix}lock:{resource}` for a mutex; a read-write
    /// lock's readers, writer and pending-writer keys; a semaphore's holders).
    pub fn keys(&self) -> &[String] {
        &self.shared.req.keys
    }

    /// The random value stored in the keys. It is the lock's secret — whoever knows it can
    /// release or extend the lock — so do not log it (`Debug` shows only a fingerprint).
    pub fn value(&self) -> &str {
        self.shared.req.value.as_str()
    }

    /// The ttl the keys were set with.
    pub fn ttl(&self) -> Duration {
        self.shared.timing.ttl
    }

    /// The instant (on tokio's monotonic clock) after which the lock must no longer be
    /// used: `start + ttl - drift`, pushed back by each successful extension.
    pub fn deadline(&self) -> Instant {
        self.shared.status().deadline
    }

    /// Validity left: zero once the deadline has passed or the lock is known to be lost.
    pub fn remaining(&self) -> Duration {
        self.shared.remaining()
    }

    /// True once the deadline has passed or the lock is known to be lost.
    pub fn is_expired(&self) -> bool {
        self.remaining().is_zero()
    }

    /// The votes of the attempt that acquired the lock. Masters still pending at the
    /// decision are updated here as their answers arrive.
    pub fn stats(&self) -> AttemptStats {
        self.shared
            .stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Extends the lock by its ttl from now; see [`extend_with`](Lock::extend_with).
    pub async fn extend(&self) -> Result<Extended, Error> {
        self.extend_inner(None).await
    }

    /// Extends every key to live at least `ttl` from now on a quorum of masters, only where
    /// the key still holds our value, and moves the deadline to `start + ttl - drift` (never
    /// earlier than it was).
    ///
    /// Refused without any request once the deadline has passed ([`Error::Expired`]). If a
    /// quorum answers that the keys are gone or someone else's, the lock is lost
    /// ([`Error::Lost`]). Any other failure ([`Error::ExtendFailed`]) leaves the lock valid
    /// until its previous deadline: an extension never releases or shortens the lock.
    pub async fn extend_with(&self, ttl: Duration) -> Result<Extended, Error> {
        self.extend_inner(Some(ttl)).await
    }

    async fn extend_inner(&self, ttl: Option<Duration>) -> Result<Extended, Error> {
        let shared = &self.shared;
        check_usable(&shared.status())?;
        let (req, timing) = match ttl {
            None => (shared.req.clone(), shared.timing),
            Some(ttl) => {
                let timing = self.core.config.timing(ttl)?;
                (Arc::new(shared.req.with_ttl(timing.ttl)), timing)
            }
        };
        // Before anything is sent: a master that loses its data from now on is kept out for
        // at least this ttl by every client this one informs, and a quorum records it.
        self.core.guard.raise_ttl(timing.ttl);
        if ttl.is_some()
            && let Err(stats) = self
                .core
                .guard
                .ensure_records(
                    timing.ttl,
                    req.quorum(self.core.nodes.len()),
                    timing.node_timeout,
                    1,
                )
                .await
        {
            return Err(Error::ExtendFailed {
                stats: Box::new(stats),
            });
        }
        let span = tracing::info_span!(
            "redquorum.extend",
            "db.system.name" = "redis",
            "otel.kind" = "client",
            resources = ?shared.resources,
            kind = %req.kind.public(),
            value = %req.value,
            quorum = req.quorum(self.core.nodes.len()),
            votes = tracing::field::Empty,
            elapsed_us = tracing::field::Empty,
        );
        let ext = quorum::extend(&self.core.members, &req, timing)
            .instrument(span.clone())
            .await;
        let stats = ext.stats;
        span.record("votes", stats.granted() as u64);
        span.record("elapsed_us", stats.elapsed().as_micros() as u64);
        let kind = req.kind.public();
        if ext.extended {
            metrics::extended(kind, metrics::Kept::Ok);
            let deadline = shared.push_deadline(ext.deadline);
            return Ok(Extended { deadline, stats });
        }
        if stats.taken() >= stats.quorum() {
            metrics::extended(kind, metrics::Kept::Lost);
            let reason = LossReason::NotOurs {
                masters: stats.taken(),
            };
            shared.mark_lost(reason.clone());
            return Err(Error::Lost { reason });
        }
        metrics::extended(kind, metrics::Kept::Failed);
        Err(Error::ExtendFailed {
            stats: Box::new(stats),
        })
    }

    /// Releases the lock: the value-checked delete is sent to every master at once, and the
    /// call returns as soon as a quorum has answered (no quorum holds the lock any more);
    /// the other deletes are seen through in the background. Without a quorum of answers it
    /// waits at most one node timeout. Masters that cannot be reached keep the key until its
    /// ttl ends.
    ///
    /// Any keep-alive of the lock is stopped first, and an extension in flight is awaited,
    /// so no renewal can follow the release.
    ///
    /// Returns the outcome per master. If the lock had already expired or was lost, the
    /// delete is still sent (once, no retry) but the result is [`Error::Expired`] or
    /// [`Error::Lost`]: the critical section outlived the lock and the caller should know.
    pub async fn release(mut self) -> Result<ReleaseOutcome, Error> {
        // The release is handed to a task of its own before the first await: if this future
        // is dropped at any point (a caller's timeout, a `select!`), the deletes still reach
        // every master, after any extension in flight.
        self.released = true;
        let shared = self.shared.clone();
        shared.stop_tail();
        let status = shared.status();
        let members = self.core.members.clone();
        let n = members.len();
        let task = shared.spawn(|| {
            let (shared, members) = (shared.clone(), members.clone());
            async move {
                shared.control.stop().await;
                let span = tracing::info_span!(
                    "redquorum.release",
                    "db.system.name" = "redis",
                    "otel.kind" = "client",
                    resources = ?shared.resources,
                    kind = %shared.req.kind.public(),
                    value = %shared.req.value,
                    quorum = shared.req.quorum(members.len()),
                );
                quorum::release_quorum(&members, &shared.req, shared.timing.node_timeout)
                    .instrument(span)
                    .await
            }
        });
        let results = match task.await {
            Ok(results) => results,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // The runtime is shutting down: nothing more can be sent or heard.
            Err(_) => vec![None; n],
        };
        if results.iter().any(|r| matches!(r, Some(Err(_)))) {
            metrics::release_incomplete(shared.req.kind.public());
        }
        check_usable(&status)?;
        Ok(ReleaseOutcome { results })
    }
}

/// `Ok` while the lock may still be used.
pub(crate) fn check_usable(status: &Status) -> Result<(), Error> {
    if let Some(reason) = &status.lost {
        return Err(Error::Lost {
            reason: reason.clone(),
        });
    }
    let now = Instant::now();
    if now >= status.deadline {
        return Err(Error::Expired {
            overdue: now - status.deadline,
        });
    }
    Ok(())
}

impl Drop for Lock {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        self.shared.stop_tail();
        let members = self.core.members.clone();
        // Spawned, never awaited here: `Drop` must not block. If no runtime is left the task
        // never runs and the keys expire by their ttl.
        drop(self.shared.spawn(|| {
            let (shared, members) = (self.shared.clone(), members.clone());
            async move {
                shared.control.stop().await;
                quorum::release_all(&members, &shared.req, shared.timing.node_timeout).await;
            }
        }));
    }
}
