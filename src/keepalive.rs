//! [`KeepAlive`]: automatic extension of a lock for as long as a handle lives, and its
//! options.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::error::ConfigError;
use crate::held::Held;
use crate::lease::Lease;
use crate::renewal::Plan;
use crate::settings::Timing;

/// When and how long a kept-alive lock is renewed.
///
/// ```
/// use std::time::Duration;
/// use redquorum::KeepAliveOptions;
///
/// // Renew every 2 s, and give up holding after ten minutes whatever happens.
/// let options = KeepAliveOptions::new()
///     .renew_after(Duration::from_secs(2))
///     .max_hold(Duration::from_secs(600));
/// # let _ = options;
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeepAliveOptions {
    renew_after: Option<Duration>,
    max_extensions: Option<u32>,
    max_hold: Option<Duration>,
}

impl KeepAliveOptions {
    /// The defaults: renew when a third of the ttl has passed, no limit.
    pub const fn new() -> Self {
        Self {
            renew_after: None,
            max_extensions: None,
            max_hold: None,
        }
    }

    /// Renew this long after each successful extension (and correspondingly before the
    /// first deadline). Default: a third of the ttl. It must leave room before the deadline
    /// for a renewal, a retry delay and a retry — three node timeouts — or keep-alive
    /// refuses with [`ConfigError::OutOfRange`].
    pub const fn renew_after(mut self, after: Duration) -> Self {
        self.renew_after = Some(after);
        self
    }

    /// Stop renewing after `n` extensions; the lock then runs out at its deadline.
    pub const fn max_extensions(mut self, n: u32) -> Self {
        self.max_extensions = Some(n);
        self
    }

    /// Stop renewing once `hold` has passed since the keep-alive began; the lock then runs
    /// out at its deadline. The Redlock paper advises such a bound so that a client that
    /// hangs in its critical section cannot keep a resource forever.
    pub const fn max_hold(mut self, hold: Duration) -> Self {
        self.max_hold = Some(hold);
        self
    }

    pub(crate) fn plan(&self, timing: Timing) -> Result<Plan, ConfigError> {
        let every = self.renew_after.unwrap_or(timing.ttl / 3);
        let window = timing.ttl - timing.drift;
        let needed = every.saturating_add(timing.node_timeout * 3);
        if every.is_zero() || needed >= window {
            return Err(ConfigError::OutOfRange {
                option: "renew_after",
                reason: format!(
                    "renewing {every:?} after an extension leaves less than three node timeouts ({:?}) before the deadline, {window:?} after it; renew earlier or raise the ttl",
                    timing.node_timeout * 3
                ),
            });
        }
        Ok(Plan {
            every,
            slack: every / 4,
            max_extensions: self.max_extensions,
            max_hold: self.max_hold,
        })
    }
}

/// Keeps a lock alive: its renewals run while this handle lives. Dropping it stops them;
/// [`stop`](KeepAlive::stop) also waits for an extension in flight.
///
/// Renewals of every kept-alive lock of one [`Redlock`](crate::Redlock) are batched: locks
/// due close together share one pipelined round trip per master (up to 1,024 of them, fewer
/// when the masters answer slowly), on a connection apart from acquisitions. Whether they
/// keep up shows in [`RenewalStats::load`](crate::RenewalStats::load) and in
/// [`Redlock::health`](crate::Redlock::health).
#[must_use = "dropping the KeepAlive stops the renewals at once"]
#[derive(Debug)]
pub struct KeepAlive {
    lock: Arc<Held>,
    generation: u64,
    margin: Duration,
}

impl KeepAlive {
    pub(crate) fn new(lock: Arc<Held>, generation: u64) -> Self {
        let margin = lock.timing.ttl / 10;
        Self {
            lock,
            generation,
            margin,
        }
    }

    /// A view of the lock for the code that uses it: deadline, loss signal, checks. Its
    /// safety margin defaults to a tenth of the ttl; see [`Lease::with_margin`].
    pub fn lease(&self) -> Lease {
        Lease::new(self.lock.clone(), self.margin)
    }

    /// Stops the renewals and waits until no extension is in flight.
    pub async fn stop(self) {
        // Dropping `self` bumps the generation, then we wait out the gate.
        let lock = self.lock.clone();
        drop(self);
        drop(lock.control.gate.lock().await);
    }
}

impl Drop for KeepAlive {
    fn drop(&mut self) {
        // Only stop our own renewal: a later keep-alive of the same lock supersedes us.
        let _ = self.lock.control.generation.compare_exchange(
            self.generation,
            self.generation + 1,
            Ordering::SeqCst,
            Ordering::SeqCst,
        );
    }
}
