//! One node's slot in a cluster: its spec, its current process, and start-with-retry.

use std::time::{Duration, Instant};

use crate::TestkitError;
use crate::ports::free_port;
use crate::server::{NodeSpec, Server, StartError};

/// How many ports a first start tries before giving up on port races.
const FRESH_PORT_ATTEMPTS: u32 = 5;
/// Pause between two attempts to bind the same port again on restart.
const SAME_PORT_BACKOFF: Duration = Duration::from_millis(50);

/// The mutable state of one node, always accessed under its own mutex.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) spec: NodeSpec,
    server: Option<Server>,
    /// Bumped by every explicit kill/stop/restart so that a pending delayed restart can
    /// tell that it has been superseded.
    epoch: u64,
    /// The error of the last delayed restart, until the node is next started.
    delayed_error: Option<String>,
}

impl Slot {
    pub(crate) fn new(spec: NodeSpec, server: Server) -> Self {
        Self {
            spec,
            server: Some(server),
            epoch: 0,
            delayed_error: None,
        }
    }

    /// The live process, reaping it (and forgetting it) if it exited on its own.
    pub(crate) fn running(&mut self) -> Option<&mut Server> {
        if self.server.as_mut().is_some_and(|s| s.exited().is_some()) {
            self.server = None;
        }
        self.server.as_mut()
    }

    /// Takes the process out of the slot and supersedes any pending delayed restart.
    pub(crate) fn take(&mut self) -> Option<Server> {
        self.epoch += 1;
        self.server.take()
    }

    /// The current epoch (see [`Slot::take`]).
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Starts the node again on its port, replacing (killing) any current process.
    pub(crate) fn restart(&mut self) -> Result<(), TestkitError> {
        drop(self.take());
        self.delayed_error = None;
        self.server = Some(start_same_port(&self.spec)?);
        Ok(())
    }

    /// Records the outcome of a delayed restart.
    pub(crate) fn finish_delayed(&mut self, outcome: Result<Server, TestkitError>) {
        match outcome {
            Ok(server) => {
                self.server = Some(server);
                self.delayed_error = None;
            }
            Err(e) => {
                tracing::error!(node = self.spec.index, error = %e, "delayed restart failed");
                self.delayed_error = Some(e.to_string());
            }
        }
    }

    /// The error of the last delayed restart, if it failed.
    pub(crate) fn delayed_error(&self) -> Option<&str> {
        self.delayed_error.as_deref()
    }
}

/// First start: picks a free port, and another one if a different process wins the race
/// for it between our probe and `redis-server`'s bind.
pub(crate) fn start_fresh(spec: &mut NodeSpec) -> Result<Server, TestkitError> {
    start_fresh_with(spec, |spec| {
        spec.port = free_port()?;
        Ok(())
    })
}

/// [`start_fresh`] for nodes that listen on more than one port (a TLS port, a cluster bus
/// port) or whose options name their ports: `pick` sets `spec.port` and everything that
/// depends on the ports before each attempt, so a lost race on any of them is retried
/// with all new ports.
pub(crate) fn start_fresh_with(
    spec: &mut NodeSpec,
    mut pick: impl FnMut(&mut NodeSpec) -> Result<(), TestkitError>,
) -> Result<Server, TestkitError> {
    for _ in 0..FRESH_PORT_ATTEMPTS {
        pick(spec)?;
        match Server::start(spec) {
            Ok(server) => return Ok(server),
            Err(StartError::PortInUse) => {
                tracing::debug!(
                    node = spec.index,
                    port = spec.port,
                    "port race lost, retrying"
                );
            }
            Err(StartError::Failed(e)) => return Err(e),
        }
    }
    Err(TestkitError::PortUnavailable {
        node: spec.index,
        port: spec.port,
        attempts: FRESH_PORT_ATTEMPTS,
    })
}

/// Restart: the port must stay the same (clients and proxies know it), so a port that is
/// briefly taken is retried until the node's ready time-out has passed.
pub(crate) fn start_same_port(spec: &NodeSpec) -> Result<Server, TestkitError> {
    let started = Instant::now();
    let mut attempts = 0;
    loop {
        attempts += 1;
        match Server::start(spec) {
            Ok(server) => return Ok(server),
            Err(StartError::Failed(e)) => return Err(e),
            Err(StartError::PortInUse) if started.elapsed() < spec.ready_timeout => {
                std::thread::sleep(SAME_PORT_BACKOFF);
            }
            Err(StartError::PortInUse) => {
                return Err(TestkitError::PortUnavailable {
                    node: spec.index,
                    port: spec.port,
                    attempts,
                });
            }
        }
    }
}
