//! The one error type of the test kit.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while starting, driving or talking to local Redis masters.
///
/// Messages are full sentences that say what to change. The enum is `#[non_exhaustive]`:
/// match the variants you care about and keep a catch-all arm.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TestkitError {
    /// No `redis-server` binary could be found.
    #[error(
        "redis-server was not found ({searched}); install it with `apt-get install -y redis-server` \
         or set REDQUORUM_REDIS_SERVER to the path of a redis-server binary."
    )]
    RedisServerNotFound {
        /// Where the test kit looked.
        searched: String,
    },

    /// No C compiler could be found to build the clock shim.
    #[error(
        "No C compiler was found to build the clock shim (tried $CC, `cc` and `gcc` on PATH); \
         install one with `apt-get install -y gcc` or set CC to its path."
    )]
    CompilerNotFound,

    /// The C compiler failed to build the clock shim.
    #[error("The C compiler {compiler} failed to build the clock shim: {stderr}")]
    ShimCompile {
        /// The compiler that was run.
        compiler: PathBuf,
        /// What the compiler printed on its standard error.
        stderr: String,
    },

    /// A builder option is out of range.
    #[error("Invalid test kit option: {message}")]
    InvalidOption {
        /// What is wrong and what to change.
        message: String,
    },

    /// A node index is out of range.
    #[error("Node index {index} is out of range: the cluster has {len} nodes.")]
    NodeIndex {
        /// The index that was asked for.
        index: usize,
        /// How many nodes the cluster has.
        len: usize,
    },

    /// The node is not running, so the operation cannot be applied to it.
    #[error("Node {node} is not running; start it again with `restart({node})` first.")]
    NotRunning {
        /// The node's index.
        node: usize,
    },

    /// The `redis-server` process could not be spawned.
    #[error("Could not spawn redis-server {binary} for node {node}: {source}.")]
    Spawn {
        /// The node's index.
        node: usize,
        /// The binary that was run.
        binary: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },

    /// A node did not become ready (answer PING) in time, or exited while starting.
    #[error(
        "Node {node} on port {port} did not become ready within {waited:?}: {reason}. \
         Last lines of its log:\n{log_tail}"
    )]
    NotReady {
        /// The node's index.
        node: usize,
        /// The port it was started on.
        port: u16,
        /// How long the test kit waited.
        waited: Duration,
        /// Why it was not considered ready.
        reason: String,
        /// The last lines of the node's log files.
        log_tail: String,
    },

    /// The node could not bind its port, even after retrying.
    #[error(
        "Node {node} could not bind port {port} after {attempts} attempt(s) because it is in use; \
         free the port or retry."
    )]
    PortUnavailable {
        /// The node's index.
        node: usize,
        /// The last port tried.
        port: u16,
        /// How many times the test kit tried.
        attempts: u32,
    },

    /// A graceful stop did not finish in time; the process was then killed.
    #[error("Node {node} did not exit within {waited:?} after SIGTERM, so it was killed.")]
    StopTimeout {
        /// The node's index.
        node: usize,
        /// How long the test kit waited.
        waited: Duration,
    },

    /// A delayed restart (see `LocalCluster::restart_after`) failed in its background thread.
    #[error("The delayed restart of node {node} failed: {message}")]
    DelayedRestart {
        /// The node's index.
        node: usize,
        /// The error of the restart.
        message: String,
    },

    /// A group of servers (a Redis Cluster, a Sentinel group) is not in the state an action
    /// needs, or a server refused the action.
    #[error("Could not {action}: {reason}")]
    ActionFailed {
        /// What the test kit was asked to do.
        action: String,
        /// Why it could not, and what to change.
        reason: String,
    },

    /// An operation did not finish before its deadline.
    #[error("Timed out after {after:?} while {what}.")]
    Timeout {
        /// What the test kit was doing.
        what: String,
        /// The deadline that passed.
        after: Duration,
    },

    /// The peer closed or reset the connection.
    #[error("The connection was closed by the peer while {what}.")]
    ConnectionClosed {
        /// What the test kit was doing.
        what: String,
    },

    /// The server sent a reply the test kit cannot use (of another kind, or unparsable
    /// text).
    #[error("Redis sent an unexpected reply while {what}: {detail}.")]
    Protocol {
        /// What the test kit was doing.
        what: String,
        /// What was wrong with the reply.
        detail: String,
    },

    /// Authentication with the configured password failed.
    #[error("Redis refused authentication: {message}. Check the password in the URL.")]
    Auth {
        /// The server's error reply.
        message: String,
    },

    /// A URL is not of the form the test kit produces (`redis://[:password@]host:port`).
    #[error("The URL {url} is not of the form redis://[:password@]host:port.")]
    InvalidUrl {
        /// The URL, with any password removed.
        url: String,
    },

    /// The clock rate is not a finite number in (0, 1000].
    #[error(
        "The clock rate {rate} is invalid; use a finite number greater than 0 and at most 1000."
    )]
    InvalidClockRate {
        /// The rejected rate.
        rate: f64,
    },

    /// Any other failure of a redis-rs connection (a refused connect, a reply redis-rs
    /// cannot parse), with what the test kit was doing.
    #[error("Redis connection error while {what}: {source}.")]
    Redis {
        /// What the test kit was doing.
        what: String,
        /// redis-rs's error.
        #[source]
        source: redis::RedisError,
    },

    /// Any other operating-system error, with what the test kit was doing.
    #[error("I/O error while {context}: {source}.")]
    Io {
        /// What the test kit was doing.
        context: String,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
}

impl TestkitError {
    /// True if the error is a timeout (a paused node or a blackholed link looks like this).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout { .. })
    }

    /// True if the peer closed or reset the connection.
    pub fn is_connection_closed(&self) -> bool {
        matches!(self, Self::ConnectionClosed { .. })
    }

    /// Wraps a redis-rs error, turning time-outs, resets and refused `AUTH` into their own
    /// variants.
    pub(crate) fn redis(
        context: impl Into<String>,
        source: redis::RedisError,
        timeout: Duration,
    ) -> Self {
        let what = context.into();
        if source.is_timeout() {
            Self::Timeout {
                what,
                after: timeout,
            }
        } else if source.kind() == redis::ErrorKind::AuthenticationFailed {
            Self::Auth {
                message: source.to_string(),
            }
        } else if source.is_connection_dropped() && !source.is_connection_refusal() {
            Self::ConnectionClosed { what }
        } else {
            Self::Redis { what, source }
        }
    }

    /// Wraps an I/O error that has no time-out meaning.
    pub(crate) fn os(context: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}
