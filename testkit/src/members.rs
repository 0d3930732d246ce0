//! `Members`: the `redis-server` processes of one group (a Redis Cluster's nodes, a
//! Sentinel group's data nodes or sentinels, a TLS server), with the per-process actions
//! that every group offers. Unlike `LocalCluster`'s state there are no delayed restarts,
//! so dropping the members (which drops every `Server`) kills and reaps everything.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::cluster::lock;
use crate::node::Slot;
use redis::Value;

use crate::{RawConnection, ReplyExt, TestkitError, url};

/// The processes of a group, in index order; every node's operations are serialised by
/// its own mutex, as in `LocalCluster`.
#[derive(Debug)]
pub(crate) struct Members {
    slots: Vec<Mutex<Slot>>,
    ports: Vec<u16>,
    password: Option<String>,
}

impl Members {
    pub(crate) fn new(slots: Vec<Slot>, password: Option<String>) -> Self {
        let ports = slots.iter().map(|s| s.spec.port).collect();
        Self {
            slots: slots.into_iter().map(Mutex::new).collect(),
            ports,
            password,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.ports.len()
    }

    /// Node `i`'s port. Panics if `i` is out of range, like slice indexing.
    pub(crate) fn port(&self, i: usize) -> u16 {
        self.ports[i]
    }

    pub(crate) fn ports(&self) -> &[u16] {
        &self.ports
    }

    /// The index of the node listening on `port`.
    pub(crate) fn index_of_port(&self, port: u16) -> Option<usize> {
        self.ports.iter().position(|&p| p == port)
    }

    /// `redis://[:password@]127.0.0.1:PORT`. Panics if `i` is out of range.
    pub(crate) fn url(&self, i: usize) -> String {
        url::redis_url(self.ports[i], self.password.as_deref())
    }

    pub(crate) fn check(&self, i: usize) -> Result<(), TestkitError> {
        check_index(i, self.len())
    }

    fn slot(&self, i: usize) -> Result<MutexGuard<'_, Slot>, TestkitError> {
        self.check(i)?;
        Ok(lock(&self.slots[i]))
    }

    /// SIGKILL and reap; idempotent.
    pub(crate) fn kill(&self, i: usize) -> Result<(), TestkitError> {
        drop(self.slot(i)?.take());
        Ok(())
    }

    /// Kills the node if it runs, starts it again on the same port(s) with the same
    /// directory and options, and waits until it answers `PING`.
    pub(crate) fn restart(&self, i: usize) -> Result<(), TestkitError> {
        self.slot(i)?.restart()
    }

    /// SIGSTOP. Errors if the node is not running.
    pub(crate) fn pause(&self, i: usize) -> Result<(), TestkitError> {
        let mut slot = self.slot(i)?;
        slot.running()
            .ok_or(TestkitError::NotRunning { node: i })?
            .pause()
    }

    /// SIGCONT. Errors if the node is not running.
    pub(crate) fn resume(&self, i: usize) -> Result<(), TestkitError> {
        let mut slot = self.slot(i)?;
        slot.running()
            .ok_or(TestkitError::NotRunning { node: i })?
            .resume()
    }

    /// True if the process is alive (a paused one is); false out of range.
    pub(crate) fn is_running(&self, i: usize) -> bool {
        self.slot(i).is_ok_and(|mut slot| slot.running().is_some())
    }

    /// The indices of the nodes whose process is alive and not paused: the ones that can
    /// answer, which the groups' waits ask.
    pub(crate) fn responsive(&self) -> Vec<usize> {
        (0..self.len())
            .filter(|&i| {
                lock(&self.slots[i])
                    .running()
                    .is_some_and(|server| !server.is_paused())
            })
            .collect()
    }

    pub(crate) fn pid(&self, i: usize) -> Option<u32> {
        self.slot(i).ok()?.running().map(|s| s.pid())
    }

    /// A new connection to node `i` (with `AUTH` if the group has a password).
    pub(crate) fn connect(
        &self,
        i: usize,
        timeout: Duration,
    ) -> Result<RawConnection, TestkitError> {
        self.check(i)?;
        RawConnection::open(&self.url(i), timeout)
    }

    /// One command on a new connection (with `AUTH` if the group has a password).
    pub(crate) fn cmd(
        &self,
        i: usize,
        args: &[&str],
        timeout: Duration,
    ) -> Result<Value, TestkitError> {
        self.connect(i, timeout)?.call(args)
    }

    /// Kills and reaps every process now (dropping the members does the same).
    pub(crate) fn kill_all(&self) {
        for slot in &self.slots {
            drop(lock(slot).take());
        }
    }
}

/// `Ok` if `i` names one of `len` nodes, else [`TestkitError::NodeIndex`].
pub(crate) fn check_index(i: usize, len: usize) -> Result<(), TestkitError> {
    if i < len {
        Ok(())
    } else {
        Err(TestkitError::NodeIndex { index: i, len })
    }
}

/// Runs `start` on every item on its own thread (starting a node is mostly waiting for
/// it) and returns the results in order, or the first error. On error the values that
/// were started are dropped, which stops them.
pub(crate) fn start_parallel<T: Send, R: Send>(
    items: Vec<T>,
    start: impl Fn(T) -> Result<R, TestkitError> + Sync,
) -> Result<Vec<R>, TestkitError> {
    let start = &start;
    let results: Vec<Result<R, TestkitError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = items
            .into_iter()
            .map(|item| scope.spawn(move || start(item)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    });
    results.into_iter().collect()
}

/// `OK`, or [`TestkitError::ActionFailed`] naming what was being done and what Redis said.
pub(crate) fn expect_ok(reply: Value, action: impl FnOnce() -> String) -> Result<(), TestkitError> {
    match reply {
        Value::Okay => Ok(()),
        other => Err(TestkitError::ActionFailed {
            action: action(),
            reason: match other.as_error() {
                Some(e) => format!("Redis answered {e}"),
                None => format!("Redis answered {other:?}"),
            },
        }),
    }
}

/// How long a readiness probe waits for replicas to acknowledge its write.
const STREAM_PROBE_WAIT_MS: &str = "200";

/// Checks that `replicas` replicas of node `i` receive its replication stream *now*:
/// sends `write` (a command Redis propagates to replicas) and `WAIT replicas 200`.
///
/// `INFO replication` is not enough: after a diskless full sync a primary lists its
/// replica as `online` but holds the stream back until the replica's next
/// `REPLCONF ACK`, up to a second later. A write in that window reaches the replica late,
/// and a failover in it loses the write.
pub(crate) fn probe_stream(
    members: &Members,
    i: usize,
    replicas: usize,
    write: &[&[&str]],
    timeout: Duration,
) -> Result<(), String> {
    let fail = |e: TestkitError| format!("node {i} did not answer the replication probe: {e}");
    let mut conn = members.connect(i, timeout).map_err(fail)?;
    for command in write {
        if let Value::ServerError(e) = conn.call(command).map_err(fail)? {
            return Err(format!("node {i} refused the replication probe: {e}"));
        }
    }
    let wanted = replicas.to_string();
    let acked = conn
        .call(&["WAIT", &wanted, STREAM_PROBE_WAIT_MS])
        .map_err(fail)?
        .as_int()
        .unwrap_or(0);
    if usize::try_from(acked).unwrap_or(0) >= replicas {
        Ok(())
    } else {
        Err(format!(
            "{acked} of node {i}'s {replicas} replicas acknowledged its replication stream"
        ))
    }
}
