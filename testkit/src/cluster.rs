//! `LocalCluster`: N independent `redis-server` masters on free loopback ports.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use redis::Value;

use crate::clock::{self, CLOCK_FILE_ENV};
use crate::connection::DEFAULT_CMD_TIMEOUT;
use crate::members::{check_index, start_parallel};
use crate::node::{self, Slot};
use crate::options;
use crate::proxy::LinkSet;
use crate::state::Inner;
use crate::{ClockControl, ClusterBuilder, RawConnection, TestkitError, url};

/// How long [`LocalCluster::stop`] waits for a node to exit after SIGTERM.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Poll interval of [`LocalCluster::wait_ready`].
const READY_POLL: Duration = Duration::from_millis(10);

/// N independent Redis masters, each a `redis-server` child process on a free port of
/// `127.0.0.1`, with its own temporary data directory.
///
/// Every method takes `&self`, so the cluster can be shared in an `Arc` between threads and
/// tasks; operations on one node are serialised, operations on different nodes are not.
/// All methods are synchronous and every wait in them is bounded.
///
/// Dropping the cluster kills every process it started (including any started by a
/// [`restart_after`](Self::restart_after) thread, and none after the drop), reaps them,
/// stops every [`LinkSet`] it created and removes the data directory.
pub struct LocalCluster {
    inner: Arc<Inner>,
}

impl fmt::Debug for LocalCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalCluster")
            .field("ports", &self.inner.ports)
            .field("password", &self.inner.password.as_ref().map(|_| "***"))
            .field("dir", &self.inner.dir_path)
            .finish_non_exhaustive()
    }
}

impl LocalCluster {
    /// A builder with the defaults: 5 nodes, no persistence, no password, no clock shim.
    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    /// Starts `n` nodes with the defaults; the same as `builder().nodes(n).start()`.
    pub fn start(n: usize) -> Result<LocalCluster, TestkitError> {
        Self::builder().nodes(n).start()
    }

    pub(crate) fn from_builder(b: ClusterBuilder) -> Result<Self, TestkitError> {
        let binary = b.server.binary()?;
        let shim = if b.clock_shim {
            Some(clock::shim_library()?)
        } else {
            None
        };
        let (dir, node_dirs) = options::directories(
            "redquorum-testkit-",
            (0..b.nodes).map(|i| format!("node-{i}")),
        )?;
        let mut specs = Vec::with_capacity(b.nodes);
        let mut clocks = Vec::with_capacity(b.nodes);
        for (index, node_dir) in node_dirs.into_iter().enumerate() {
            let mut spec = b.server.spec(index, node_dir, &binary);
            if let Some((_, p)) = b.persistence_of.iter().rev().find(|(i, _)| *i == index) {
                spec.persistence = *p;
            }
            let clock = match &shim {
                Some(library) => {
                    let clock = ClockControl::create(index, spec.dir.join("clock"))?;
                    spec.env
                        .push(("LD_PRELOAD".into(), library.clone().into_os_string()));
                    spec.env
                        .push((CLOCK_FILE_ENV.into(), clock.path().as_os_str().to_owned()));
                    Some(clock)
                }
                None => None,
            };
            clocks.push(clock);
            specs.push(spec);
        }
        // On error, the nodes that did start are stopped, and `dir` goes too.
        let slots = start_parallel(specs, |mut spec| {
            node::start_fresh(&mut spec).map(|s| Slot::new(spec, s))
        })?;
        let ports = slots.iter().map(|s| s.spec.port).collect();
        Ok(Self {
            inner: Arc::new(Inner::new(slots, ports, clocks, b.server.password, dir)),
        })
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.inner.ports.len()
    }

    /// True if the cluster has no nodes.
    pub fn is_empty(&self) -> bool {
        self.inner.ports.is_empty()
    }

    /// The nodes' URLs, `redis://127.0.0.1:PORT` or `redis://:password@127.0.0.1:PORT`,
    /// direct to the servers (no proxy).
    pub fn urls(&self) -> Vec<String> {
        (0..self.len()).map(|i| self.url(i)).collect()
    }

    /// Node `i`'s URL (see [`urls`](Self::urls)).
    ///
    /// # Panics
    /// If `i >= self.len()`, like slice indexing.
    pub fn url(&self, i: usize) -> String {
        url::redis_url(self.port(i), self.inner.password.as_deref())
    }

    /// Node `i`'s port; it stays the same across restarts.
    ///
    /// # Panics
    /// If `i >= self.len()`, like slice indexing.
    pub fn port(&self, i: usize) -> u16 {
        self.inner.ports[i]
    }

    /// The cluster's temporary directory (`node-<i>/` holds each node's data and logs).
    pub fn dir(&self) -> &Path {
        &self.inner.dir_path
    }

    /// Node `i`'s Redis log file.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn log_path(&self, i: usize) -> PathBuf {
        self.inner
            .dir_path
            .join(format!("node-{i}"))
            .join("redis.log")
    }

    /// Kills node `i` with SIGKILL and reaps it. Idempotent: a dead node stays dead.
    /// Cancels a pending [`restart_after`](Self::restart_after) of the node.
    pub fn kill(&self, i: usize) -> Result<(), TestkitError> {
        drop(self.slot(i)?.take());
        Ok(())
    }

    /// Stops node `i` gracefully (SIGTERM: Redis flushes its AOF and exits) and waits up to
    /// [`STOP_TIMEOUT`] for it, then kills it. Idempotent. Cancels a pending delayed restart.
    pub fn stop(&self, i: usize) -> Result<(), TestkitError> {
        let server = self.slot(i)?.take();
        match server {
            Some(server) => server.terminate(STOP_TIMEOUT),
            None => Ok(()),
        }
    }

    /// Freezes node `i` with SIGSTOP: connections stay open, nothing is answered, keys do
    /// not expire on their own. Errors if the node is not running.
    pub fn pause(&self, i: usize) -> Result<(), TestkitError> {
        let mut slot = self.slot(i)?;
        slot.running()
            .ok_or(TestkitError::NotRunning { node: i })?
            .pause()
    }

    /// Continues node `i` with SIGCONT. Errors if the node is not running.
    pub fn resume(&self, i: usize) -> Result<(), TestkitError> {
        let mut slot = self.slot(i)?;
        slot.running()
            .ok_or(TestkitError::NotRunning { node: i })?
            .resume()
    }

    /// Kills node `i` if it is running, starts it again on the same port with the same data
    /// directory and options, and waits until it answers `PING`. With
    /// [`Persistence::AofAlways`](crate::Persistence::AofAlways) it comes back with its keys.
    pub fn restart(&self, i: usize) -> Result<(), TestkitError> {
        self.slot(i)?.restart()
    }

    /// Kills node `i` now and starts it again after `delay` from a background thread;
    /// returns at once.
    ///
    /// The node is down for at least `delay`. Use [`wait_ready`](Self::wait_ready) to wait
    /// for it to be back; if the delayed start fails, the error is logged with `tracing`
    /// and returned by `wait_ready`. A later `kill`, `stop`, `restart` or `restart_after` of
    /// the same node cancels the pending start, and so does dropping the cluster: no
    /// process is ever started after the cluster is gone.
    pub fn restart_after(&self, i: usize, delay: Duration) -> Result<(), TestkitError> {
        let epoch = {
            let mut slot = self.slot(i)?;
            drop(slot.take());
            slot.epoch()
        };
        Inner::spawn_delayed_restart(&self.inner, i, epoch, delay)
    }

    /// Waits until node `i` is running and answers `PING`, for at most `timeout`.
    /// Returns the error of a failed delayed restart at once.
    pub fn wait_ready(&self, i: usize, timeout: Duration) -> Result<(), TestkitError> {
        self.check(i)?;
        let started = Instant::now();
        loop {
            // `try_lock`: a restart in progress holds the node's lock for up to its ready
            // time-out, and this wait must not outlast `timeout` because of it.
            let running = match self.inner.slots[i].try_lock() {
                Ok(mut slot) => Some(slot_state(&mut slot)),
                Err(TryLockError::Poisoned(poisoned)) => {
                    Some(slot_state(&mut poisoned.into_inner()))
                }
                Err(TryLockError::WouldBlock) => None,
            };
            if let Some((_, Some(message))) = running {
                return Err(TestkitError::DelayedRestart { node: i, message });
            }
            if let Some((true, None)) = running {
                let remaining = timeout.saturating_sub(started.elapsed());
                let probe = remaining.clamp(Duration::from_millis(1), DEFAULT_CMD_TIMEOUT);
                let reply = self.cmd_with_timeout(i, &["PING"], probe);
                if matches!(&reply, Ok(Value::SimpleString(pong)) if pong == "PONG") {
                    return Ok(());
                }
            }
            if started.elapsed() >= timeout {
                return Err(TestkitError::Timeout {
                    what: format!("waiting for node {i} to answer PING"),
                    after: timeout,
                });
            }
            std::thread::sleep(READY_POLL);
        }
    }

    /// True if node `i`'s process is alive (a paused node is alive). False for an index
    /// out of range.
    pub fn is_running(&self, i: usize) -> bool {
        self.slot(i).is_ok_and(|mut slot| slot.running().is_some())
    }

    /// Node `i`'s process id while it is alive.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.slot(i).ok()?.running().map(|s| s.pid())
    }

    /// The clock control of node `i`: `Some` when the cluster was built with
    /// [`clock_shim(true)`](ClusterBuilder::clock_shim) (and `i` is in range).
    pub fn clock(&self, i: usize) -> Option<ClockControl> {
        self.inner.clocks.get(i)?.clone()
    }

    /// A new set of fault proxies, one per node, for one client; jitter uses a random seed
    /// (see [`LinkSet::seed`]).
    pub fn links(&self) -> Result<LinkSet, TestkitError> {
        self.links_seeded(rand::random())
    }

    /// Like [`links`](Self::links) with a fixed seed, so that the sequence of jitter delays
    /// on each connection is reproducible (which chunks they apply to still depends on how
    /// TCP splits the stream).
    pub fn links_seeded(&self, seed: u64) -> Result<LinkSet, TestkitError> {
        let set = LinkSet::start(&self.inner.ports, self.inner.password.as_deref(), seed)?;
        self.inner.register_links(&set);
        Ok(set)
    }

    /// Sends one command straight to node `i` on a new connection (with `AUTH` if the
    /// cluster has a password) and returns the reply, waiting at most 2 s for each step.
    /// An error *reply* is `Ok(Value::ServerError(..))`; a paused node is `Err` (time-out).
    pub fn cmd(&self, i: usize, args: &[&str]) -> Result<Value, TestkitError> {
        self.cmd_with_timeout(i, args, DEFAULT_CMD_TIMEOUT)
    }

    /// [`cmd`](Self::cmd) with another time-out for connect, write and read.
    pub fn cmd_with_timeout(
        &self,
        i: usize,
        args: &[&str],
        timeout: Duration,
    ) -> Result<Value, TestkitError> {
        self.check(i)?;
        RawConnection::open(&self.url(i), timeout)?.call(args)
    }

    fn check(&self, i: usize) -> Result<(), TestkitError> {
        check_index(i, self.len())
    }

    fn slot(&self, i: usize) -> Result<MutexGuard<'_, Slot>, TestkitError> {
        self.check(i)?;
        Ok(lock(&self.inner.slots[i]))
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        self.inner.close();
    }
}

/// Whether the node runs, and the error of its last delayed restart.
fn slot_state(slot: &mut Slot) -> (bool, Option<String>) {
    (
        slot.running().is_some(),
        slot.delayed_error().map(str::to_owned),
    )
}

/// Locks a mutex, ignoring poisoning: a test that panicked while holding it must not stop
/// the cleanup of its processes.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

// The cluster is shared across threads and tasks in an `Arc`.
const _: fn() = || {
    fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<LocalCluster>();
};
