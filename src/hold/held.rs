//! The state of one held lock, shared by its [`Lock`](crate::Lock) handle, its leases, its
//! keep-alive and the renewal task: deadline and loss (a watch), the renewal gate, the
//! votes of the acquisition.

use std::fmt;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::watch;
use tokio::task::{AbortHandle, JoinHandle};
use tokio::time::Instant;

use crate::config::validated::Timing;
use crate::error::LossReason;
use crate::metrics;
use crate::protocol::quorum::{Grant, Request};
use crate::stats::AttemptStats;

/// State shared by the handle, its leases and the renewal task.
pub(crate) struct Held {
    pub(crate) resources: Arc<[String]>,
    pub(crate) req: Arc<Request>,
    pub(crate) timing: Timing,
    pub(crate) status: watch::Sender<Status>,
    /// The runtime the lock was taken on: its release (and its renewal task) runs there
    /// when the thread that releases or drops it has no runtime of its own (or one that is
    /// shutting down).
    pub(crate) handle: Handle,
    pub(crate) control: Control,
    /// The fencing token, when fenced.
    pub(crate) token: Option<u64>,
    pub(crate) stats: Arc<Mutex<AttemptStats>>,
    tail: Mutex<Option<AbortHandle>>,
}

/// Where a lock stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Status {
    pub(crate) deadline: Instant,
    pub(crate) lost: Option<LossReason>,
}

impl fmt::Debug for Held {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Held")
            .field("resources", &self.resources)
            .field("value", &self.req.value)
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

impl Held {
    pub(crate) fn new(
        resources: Arc<[String]>,
        req: Arc<Request>,
        timing: Timing,
        grant: Grant,
    ) -> Self {
        Self {
            resources,
            req,
            timing,
            status: watch::Sender::new(Status {
                deadline: grant.deadline,
                lost: None,
            }),
            handle: Handle::current(),
            control: Control::default(),
            token: grant.token,
            stats: grant.stats,
            tail: Mutex::new(grant.tail),
        }
    }

    /// Spawns work for this lock, made by `make`: on the caller's runtime if it has one — it
    /// is running, while the lock's own may have shut down since (a client used from one
    /// runtime after another) — unless that runtime drops the task at once (it is shutting
    /// down: a lock dropped by its shutdown), else on the runtime the lock was taken on.
    pub(crate) fn spawn<F>(&self, make: impl Fn() -> F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        if let Ok(current) = Handle::try_current() {
            let task = current.spawn(make());
            if !task.is_finished() {
                return task;
            }
        }
        self.handle.spawn(make())
    }

    pub(crate) fn status(&self) -> Status {
        self.status.borrow().clone()
    }

    /// Validity left: zero once the deadline has passed or the lock is known lost.
    pub(crate) fn remaining(&self) -> Duration {
        let status = self.status.borrow();
        if status.lost.is_some() {
            return Duration::ZERO;
        }
        status.deadline.saturating_duration_since(Instant::now())
    }

    /// Moves the deadline to `deadline` if that is later (an extension never shortens).
    pub(crate) fn push_deadline(&self, deadline: Instant) -> Instant {
        let mut now = deadline;
        self.status.send_if_modified(|s| {
            if s.lost.is_none() && deadline > s.deadline {
                s.deadline = deadline;
                true
            } else {
                now = s.deadline;
                false
            }
        });
        now
    }

    pub(crate) fn mark_lost(&self, reason: LossReason) {
        self.status.send_if_modified(|s| {
            if s.lost.is_none() {
                metrics::lost(matches!(reason, LossReason::Expired));
                s.lost = Some(reason);
                true
            } else {
                false
            }
        });
    }

    /// Stops the per-lock tail task, where there is one (members without a collector: the
    /// coordinator's simulated masters), before any release, so that a request still pending
    /// there can never be sent after the release. Members with a collector need no tail:
    /// their release seals the lock's acquires first ([`Wire::seal`](crate::protocol::wire::Wire::seal)).
    pub(crate) fn stop_tail(&self) {
        if let Some(tail) = self
            .tail
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            tail.abort();
        }
    }
}

/// The per-lock half of the renewal machinery, kept in the lock's shared state.
#[derive(Debug, Default)]
pub(crate) struct Control {
    /// Bumped by every start and stop: only the entry of the current generation renews.
    pub(crate) generation: AtomicU64,
    /// Held while an extension of this lock is in flight.
    pub(crate) gate: Arc<tokio::sync::Mutex<()>>,
}

impl Control {
    /// Stops any renewal of this lock and waits until no extension of it is in flight.
    pub(crate) async fn stop(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        drop(self.gate.lock().await);
    }
}
