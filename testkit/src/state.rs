//! The state a `LocalCluster` shares with its background threads: delayed restarts and
//! the teardown that makes sure none of them outlives the cluster.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::cluster::lock;
use crate::node::{self, Slot};
use crate::proxy::{LinkSet, Shared as LinkShared};
use crate::{ClockControl, TestkitError};

/// Shared by a `LocalCluster` and its delayed-restart threads.
pub(crate) struct Inner {
    pub(crate) slots: Vec<Mutex<Slot>>,
    pub(crate) ports: Vec<u16>,
    pub(crate) clocks: Vec<Option<ClockControl>>,
    pub(crate) password: Option<String>,
    pub(crate) dir_path: PathBuf,
    dir: Mutex<Option<TempDir>>,
    /// Set once by `close`; checked under a node's lock before any delayed start.
    closed: AtomicBool,
    /// Wakes sleeping delayed-restart threads when the cluster closes.
    wake: Condvar,
    wake_lock: Mutex<()>,
    restarts: Mutex<Vec<JoinHandle<()>>>,
    links: Mutex<Vec<Weak<LinkShared>>>,
}

impl Inner {
    pub(crate) fn new(
        slots: Vec<Slot>,
        ports: Vec<u16>,
        clocks: Vec<Option<ClockControl>>,
        password: Option<String>,
        dir: TempDir,
    ) -> Self {
        Self {
            slots: slots.into_iter().map(Mutex::new).collect(),
            ports,
            clocks,
            password,
            dir_path: dir.path().to_path_buf(),
            dir: Mutex::new(Some(dir)),
            closed: AtomicBool::new(false),
            wake: Condvar::new(),
            wake_lock: Mutex::new(()),
            restarts: Mutex::new(Vec::new()),
            links: Mutex::new(Vec::new()),
        }
    }

    /// Remembers a link set so that closing the cluster stops it too.
    pub(crate) fn register_links(&self, set: &LinkSet) {
        let mut links = lock(&self.links);
        links.retain(|weak| weak.strong_count() > 0);
        links.extend(set.links().iter().map(|l| Arc::downgrade(l.shared())));
    }

    /// Starts node `i` after `delay` on a background thread, unless the node's epoch has
    /// moved past `epoch` (a later kill/stop/restart) or the cluster closed meanwhile.
    pub(crate) fn spawn_delayed_restart(
        this: &Arc<Self>,
        i: usize,
        epoch: u64,
        delay: Duration,
    ) -> Result<(), TestkitError> {
        let inner = Arc::clone(this);
        let handle = std::thread::Builder::new()
            .name(format!("redquorum-testkit-restart-{i}"))
            .spawn(move || inner.delayed_restart(i, epoch, delay))
            .map_err(|e| TestkitError::os("spawning a delayed-restart thread", e))?;
        let mut restarts = lock(&this.restarts);
        restarts.retain(|h| !h.is_finished());
        restarts.push(handle);
        Ok(())
    }

    fn delayed_restart(&self, i: usize, epoch: u64, delay: Duration) {
        let deadline = Instant::now() + delay;
        {
            let mut guard = lock(&self.wake_lock);
            loop {
                let now = Instant::now();
                if self.closed.load(Ordering::SeqCst) || now >= deadline {
                    break;
                }
                guard = self
                    .wake
                    .wait_timeout(guard, deadline - now)
                    .map(|(g, _)| g)
                    .unwrap_or_else(|poisoned| poisoned.into_inner().0);
            }
        }
        let mut slot = lock(&self.slots[i]);
        // `close` sets `closed` before it takes any node lock, so checking it under the
        // node's lock means either we start first (and `close` kills it) or we see it.
        if self.closed.load(Ordering::SeqCst) || slot.epoch() != epoch {
            return;
        }
        let outcome = node::start_same_port(&slot.spec);
        slot.finish_delayed(outcome);
    }

    /// Tears everything down; idempotent. Never waits long: delayed-restart threads are
    /// woken at once, and a thread in the middle of a start finishes it within the ready
    /// time-out before its process is killed here.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        {
            let _guard = lock(&self.wake_lock);
            self.wake.notify_all();
        }
        let restarts = std::mem::take(&mut *lock(&self.restarts));
        for handle in restarts {
            if handle.join().is_err() {
                tracing::error!("a delayed-restart thread panicked");
            }
        }
        for slot in &self.slots {
            drop(lock(slot).take());
        }
        for link in lock(&self.links).drain(..) {
            if let Some(shared) = link.upgrade() {
                shared.stop();
            }
        }
        if let Some(dir) = lock(&self.dir).take() {
            let path = dir.path().to_path_buf();
            if let Err(e) = dir.close() {
                tracing::warn!(dir = %path.display(), error = %e, "could not remove the cluster directory");
            }
        }
    }
}
