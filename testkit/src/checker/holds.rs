//! `Hold` and `Recorder`: every critical section of every client, on one monotonic clock.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// One critical section: a client held a lock on `resource` from `acquired` until it called
/// release (`released`) or its deadline passed, whichever came first.
///
/// All three instants are on the same monotonic clock ([`std::time::Instant`]; a tokio
/// `Instant` converts with `into_std()`). `acquired` is taken right after the acquire call
/// returned, `deadline` is the lock's last deadline (after any extension) and `released`
/// right before release was called (or when the holder stopped using the lock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// Which client held it (any stable number per client).
    pub client: usize,
    /// The resource locked.
    pub resource: String,
    /// When the acquire call returned the lock.
    pub acquired: Instant,
    /// The lock's deadline: it must not be used after this.
    pub deadline: Instant,
    /// When the holder called release (or otherwise stopped using the lock).
    pub released: Instant,
}

impl Hold {
    /// A hold of `resource` by `client`.
    pub fn new(
        client: usize,
        resource: impl Into<String>,
        acquired: Instant,
        deadline: Instant,
        released: Instant,
    ) -> Self {
        Self {
            client,
            resource: resource.into(),
            acquired,
            deadline,
            released,
        }
    }

    /// The end of the interval in which the holder could rely on the lock:
    /// `min(released, deadline)`.
    pub fn end(&self) -> Instant {
        self.released.min(self.deadline)
    }

    /// The interval's length (zero when the lock was already expired when it was returned).
    pub fn duration(&self) -> Duration {
        self.end().saturating_duration_since(self.acquired)
    }

    /// How far past the deadline the release came (zero when it came in time).
    pub fn overrun(&self) -> Duration {
        self.released.saturating_duration_since(self.deadline)
    }

    /// True when the acquire call returned a lock whose deadline had already passed: the
    /// interval is empty, and a lock client must never do this.
    pub fn expired_on_arrival(&self) -> bool {
        self.deadline <= self.acquired
    }
}

/// Collects the [`Hold`]s of every client of a scenario. Cheap to clone: clones share the
/// same list, so each client task can keep its own handle.
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    holds: Arc<Mutex<Vec<Hold>>>,
}

impl Recorder {
    /// An empty recorder.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one finished hold.
    pub fn record(&self, hold: Hold) {
        self.lock().push(hold);
    }

    /// Every hold recorded so far, in recording order.
    pub fn holds(&self) -> Vec<Hold> {
        self.lock().clone()
    }

    /// Number of holds recorded so far.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True if nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Hand-overs so far (see [`hand_overs`](crate::hand_overs)); cheap enough to poll.
    pub fn hand_overs(&self) -> usize {
        crate::checker::sweep::hand_overs(&self.lock())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Hold>> {
        self.holds.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
