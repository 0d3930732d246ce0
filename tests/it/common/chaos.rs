//! What a scenario's chaos thread works with: the cluster and links, a stop signal it
//! sleeps on, and a mark it sets when the faults are over.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use redquorum_testkit::{LinkSet, LocalCluster};

/// What the chaos thread gets: the cluster, every client's links, its own random stream,
/// and the stop signal.
pub struct Chaos {
    pub cluster: Arc<LocalCluster>,
    pub links: Vec<Arc<LinkSet>>,
    pub rng: StdRng,
    pub stop: Stop,
    pub started: Instant,
}

/// A stop signal a thread can sleep on.
#[derive(Clone, Default)]
pub struct Stop {
    inner: Arc<(Mutex<bool>, Condvar)>,
}

impl Stop {
    pub fn set(&self) {
        *self.inner.0.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.inner.1.notify_all();
    }

    pub fn is_set(&self) -> bool {
        *self.inner.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sleeps for `d` unless stopped first; returns `true` if the run goes on. This paces a
    /// fault schedule; it never stands in for waiting on a condition.
    pub fn sleep(&self, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut stopped = self.inner.0.lock().unwrap_or_else(PoisonError::into_inner);
        while !*stopped {
            let now = Instant::now();
            if now >= deadline {
                return true;
            }
            stopped = self
                .inner
                .1
                .wait_timeout(stopped, deadline - now)
                .map(|(g, _)| g)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        false
    }
}

/// An instant that a chaos thread can set (e.g. "the majority was resumed"). Clients count
/// their acquisitions after it, and once it is set a run does not end before every client
/// has acquired after it (within the run's bound): recovery is waited for, not hoped for.
/// A scenario whose chaos sets one says so ([`Scenario::wait_for_mark`]), so that a run
/// does not end before the mark is set, however slowly the faults unfold.
///
/// [`Scenario::wait_for_mark`]: super::scenario::Scenario::wait_for_mark
#[derive(Clone)]
pub struct Mark {
    origin: Instant,
    nanos: Arc<AtomicU64>,
    after: Arc<Vec<AtomicU64>>,
}

impl Mark {
    pub(super) fn new(clients: usize) -> Self {
        Self {
            origin: Instant::now(),
            nanos: Arc::new(AtomicU64::new(u64::MAX)),
            after: Arc::new((0..clients).map(|_| AtomicU64::new(0)).collect()),
        }
    }

    pub fn set_now(&self) {
        let n = u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX - 1);
        self.nanos.store(n, Ordering::SeqCst);
    }

    pub(super) fn is_set(&self) -> bool {
        self.nanos.load(Ordering::SeqCst) != u64::MAX
    }

    /// Counts an acquisition of `client` at `at`; true if it came after the mark.
    pub(super) fn count(&self, client: usize, at: Instant) -> bool {
        let n = self.nanos.load(Ordering::SeqCst);
        let after = n != u64::MAX && at >= self.origin + Duration::from_nanos(n);
        if after {
            self.after[client].fetch_add(1, Ordering::SeqCst);
        }
        after
    }

    pub(super) fn every_client_after(&self) -> bool {
        self.after.iter().all(|c| c.load(Ordering::SeqCst) > 0)
    }
}

/// Ends a scenario: raises `stop`, then waits for the chaos thread (returning what it
/// returned) and for every worker, each within 30 s (a stopped worker may still be inside
/// a retry).
pub async fn wind_down<T: Send + 'static>(
    stop: &std::sync::atomic::AtomicBool,
    chaos: std::thread::JoinHandle<T>,
    workers: Vec<tokio::task::JoinHandle<()>>,
) -> T {
    stop.store(true, Ordering::SeqCst);
    let outcome = tokio::task::spawn_blocking(move || chaos.join())
        .await
        .expect("join")
        .expect("the chaos thread");
    for worker in workers {
        tokio::time::timeout(Duration::from_secs(30), worker)
            .await
            .expect("a worker stops within 30 s")
            .expect("no panic");
    }
    outcome
}
