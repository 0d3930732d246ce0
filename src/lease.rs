//! The lease a critical section works under, and `Redlock::with_lock`, which acquires,
//! keeps alive, and releases around a body on every path.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::{LockOptions, Redlock};
use crate::error::{ConfigError, Error, LossReason};
use crate::keepalive::KeepAliveOptions;
use crate::lock::Shared;

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
    shared: Arc<Shared>,
    margin: Duration,
}

impl Lease {
    pub(crate) fn new(shared: Arc<Shared>, margin: Duration) -> Self {
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
    /// error.
    pub fn check(&self) -> Result<(), Error> {
        let status = self.shared.status();
        if let Some(reason) = status.lost {
            return Err(Error::Lost { reason });
        }
        let remaining = status.deadline.saturating_duration_since(Instant::now());
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
                let remaining = status.deadline.saturating_duration_since(Instant::now());
                return Err(Error::TooLate {
                    remaining,
                    margin: self.margin,
                });
            }
            tokio::select! {
                biased;
                out = &mut work => return Ok(out),
                _ = watch.changed() => {}
                () = tokio::time::sleep_until(cutoff) => {
                    if watch.has_changed().unwrap_or(false) {
                        continue;
                    }
                    let remaining = status.deadline.saturating_duration_since(Instant::now());
                    return Err(Error::TooLate { remaining, margin: self.margin });
                }
            }
        }
    }
}

/// What [`Redlock::with_lock`] does to the body when the lock is lost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LossPolicy {
    /// Drop (cancel) the body at once and return [`Error::Lost`]. The default: work that
    /// goes on without the lock is what corrupts data.
    #[default]
    Abort,
    /// Only signal, through [`Lease::lost`] and [`Lease::check`]; the body runs to its end
    /// and its value is returned.
    Signal,
}

/// Options for [`Redlock::with_lock_with`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScopeOptions {
    lock: LockOptions,
    keep_alive: KeepAliveOptions,
    margin: Option<Duration>,
    on_loss: LossPolicy,
}

impl ScopeOptions {
    /// The defaults: the client's ttl and retry policy, renewal at a third of the ttl, a
    /// safety margin of a tenth of the ttl, [`LossPolicy::Abort`].
    pub const fn new() -> Self {
        Self {
            lock: LockOptions::new(),
            keep_alive: KeepAliveOptions::new(),
            margin: None,
            on_loss: LossPolicy::Abort,
        }
    }

    /// How to acquire: ttl and retry policy.
    pub const fn lock(mut self, lock: LockOptions) -> Self {
        self.lock = lock;
        self
    }

    /// How to renew.
    pub const fn keep_alive(mut self, keep_alive: KeepAliveOptions) -> Self {
        self.keep_alive = keep_alive;
        self
    }

    /// The lease's safety margin (below the ttl minus the drift allowance).
    pub const fn margin(mut self, margin: Duration) -> Self {
        self.margin = Some(margin);
        self
    }

    /// What to do when the lock is lost.
    pub const fn on_loss(mut self, policy: LossPolicy) -> Self {
        self.on_loss = policy;
        self
    }
}

impl Redlock {
    /// Runs `body` under a lock on `resources`; see [`with_lock_with`](Redlock::with_lock_with).
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> Result<(), redquorum::Error> {
    /// let total = redlock
    ///     .with_lock(["stock:4711"], |lease| async move {
    ///         // … read, compute …
    ///         lease.check()?; // still ours, with margin to spare: write
    ///         Ok::<_, redquorum::Error>(42)
    ///     })
    ///     .await??;
    /// # let _ = total; Ok(()) }
    /// ```
    pub async fn with_lock<I, S, F, Fut, T>(&self, resources: I, body: F) -> Result<T, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
        F: FnOnce(Lease) -> Fut,
        Fut: Future<Output = T>,
    {
        self.with_lock_with(resources, ScopeOptions::new(), body)
            .await
    }

    /// Acquires a lock on `resources` (retrying per the options), keeps it alive while
    /// `body` runs, and releases it on every path: when the body returns, when the lock is
    /// lost, and when this future is dropped (the release is then sent from a background
    /// task, after any extension in flight).
    ///
    /// Returns the body's value, or [`Error::Lost`] if the lock was lost while it ran and
    /// the policy is [`LossPolicy::Abort`] (the body is then cancelled).
    pub async fn with_lock_with<I, S, F, Fut, T>(
        &self,
        resources: I,
        options: ScopeOptions,
        body: F,
    ) -> Result<T, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
        F: FnOnce(Lease) -> Fut,
        Fut: Future<Output = T>,
    {
        // Validate everything before taking the lock.
        let timing = self.config().timing(options.lock.ttl_or(self.ttl()))?;
        options.keep_alive.plan(timing)?;
        let margin = options.margin.unwrap_or(timing.ttl / 10);
        if margin >= timing.ttl - timing.drift {
            return Err(ConfigError::OutOfRange {
                option: "margin",
                reason: format!(
                    "the safety margin {margin:?} must be below the ttl minus the drift allowance"
                ),
            }
            .into());
        }
        let lock = self.lock_with(resources, options.lock).await?;
        let keep = lock.keep_alive_with(options.keep_alive)?;
        let lease = keep.lease().with_margin(margin);
        let outcome = match options.on_loss {
            LossPolicy::Abort => {
                let watcher = lease.clone();
                tokio::select! {
                    biased;
                    value = body(lease) => Ok(value),
                    reason = watcher.lost() => Err(Error::Lost { reason }),
                }
            }
            LossPolicy::Signal => Ok(body(lease).await),
        };
        drop(keep);
        // `release` waits for an extension in flight before deleting; its own error (the
        // lock ran out while the body finished) is already reflected in `outcome` or was
        // signalled to the body.
        let _ = lock.release().await;
        outcome
    }
}
