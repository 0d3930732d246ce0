//! The lease a critical section works under: validity left, loss signal, checks before side
//! effects, work cut off before the deadline.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::{Error, LossReason};
use crate::hold::held::Held;

/// A view of a held lock for the code that relies on it.
///
/// Cheap to clone. It answers three questions: how long may I still rely on the lock
/// ([`remaining`](Lease::remaining)), is it still safe to act *now*
/// ([`check`](Lease::check), to call right before an external side effect), and has it been
/// lost ([`lost`](Lease::lost)). [`run`](Lease::run) cuts long work off before the validity
/// ends instead of merely signalling.
///
/// The *safety margin* is the validity kept in reserve: `check` and `run` fail once less
/// than the margin is left, so that a side effect started just before the check still
/// lands before the deadline.
#[derive(Debug, Clone)]
pub struct Lease {
    shared: Arc<Held>,
    margin: Duration,
}

impl Lease {
    pub(crate) fn new(shared: Arc<Held>, margin: Duration) -> Self {
        Self { shared, margin }
    }

    /// The same lease with another safety margin.
    pub fn with_margin(mut self, margin: Duration) -> Self {
        self.margin = margin;
        self
    }

    /// The safety margin.
    pub fn margin(&self) -> Duration {
        self.margin
    }

    /// The resources the lock covers.
    pub fn resources(&self) -> &[String] {
        &self.shared.resources
    }

    /// The lock's fencing token, when it was acquired with fencing on (see
    /// [`Lock::fencing_token`](crate::Lock::fencing_token)): pass it with every write the
    /// lock protects.
    pub fn fencing_token(&self) -> Option<u64> {
        self.shared.token
    }

    /// The current deadline; renewals push it back.
    pub fn deadline(&self) -> Instant {
        self.shared.status().deadline
    }

    /// Validity left until the deadline; zero once lost.
    pub fn remaining(&self) -> Duration {
        self.shared.remaining()
    }

    /// True once the lock is known lost or its deadline has passed.
    pub fn is_lost(&self) -> bool {
        self.remaining().is_zero()
    }

    /// Resolves when the lock is lost: at once when a renewal finds the keys owned by
    /// someone else (or gone), and **no later than the deadline** when renewals fail or
    /// stop.
    pub async fn lost(&self) -> LossReason {
        let mut watch = self.shared.status.subscribe();
        loop {
            let status = watch.borrow_and_update().clone();
            if let Some(reason) = status.lost {
                return reason;
            }
            tokio::select! {
                _ = watch.changed() => {}
                () = tokio::time::sleep_until(status.deadline) => {
                    // A renewal may have moved the deadline in the same instant; marking
                    // only takes effect if the deadline really passed unrenewed.
                    if Instant::now() >= self.shared.status().deadline {
                        self.shared.mark_lost(LossReason::Expired);
                    }
                }
            }
        }
    }

    /// `Ok` while the lock is held with more than the safety margin left. Call it right
    /// before an external side effect (a write to another system) and skip the effect on
    /// error: [`Error::TooLate`] while the lock is still held but too briefly, then
    /// [`Error::Expired`] or [`Error::Lost`] once it is not.
    pub fn check(&self) -> Result<(), Error> {
        let status = self.shared.status();
        if let Some(reason) = status.lost {
            return Err(Error::Lost { reason });
        }
        self.too_late(status.deadline)
    }

    /// `Ok` while the lock is held at all (margin or not): `Lost` or `Expired` otherwise.
    pub(crate) fn check_held(&self) -> Result<(), Error> {
        let status = self.shared.status();
        if let Some(reason) = status.lost {
            return Err(Error::Lost { reason });
        }
        let now = Instant::now();
        if now >= status.deadline {
            return Err(Error::Expired {
                overdue: now - status.deadline,
            });
        }
        Ok(())
    }

    /// `Err` when less than the margin is left before `deadline`: `TooLate` before it,
    /// `Expired` after.
    fn too_late(&self, deadline: Instant) -> Result<(), Error> {
        let now = Instant::now();
        if now >= deadline {
            return Err(Error::Expired {
                overdue: now - deadline,
            });
        }
        let remaining = deadline - now;
        if remaining <= self.margin {
            return Err(Error::TooLate {
                remaining,
                margin: self.margin,
            });
        }
        Ok(())
    }

    /// Runs `work` while the lock is held: returns its output, or an error as soon as the
    /// lock is lost or less than the safety margin of validity is left (the deadline is
    /// followed as renewals move it). `work` is dropped at that point, not left running.
    pub async fn run<F: Future>(&self, work: F) -> Result<F::Output, Error> {
        let mut watch = self.shared.status.subscribe();
        let mut work = std::pin::pin!(work);
        loop {
            let status = watch.borrow_and_update().clone();
            if let Some(reason) = status.lost {
                return Err(Error::Lost { reason });
            }
            let cutoff = status
                .deadline
                .checked_sub(self.margin)
                .unwrap_or(status.deadline);
            // Past the cutoff the work is not polled again, not even once.
            if Instant::now() >= cutoff {
                self.too_late(status.deadline)?;
            }
            tokio::select! {
                biased;
                out = &mut work => return Ok(out),
                _ = watch.changed() => {}
                () = tokio::time::sleep_until(cutoff) => {
                    if watch.has_changed().unwrap_or(false) {
                        continue;
                    }
                    self.too_late(status.deadline)?;
                }
            }
        }
    }
}
