//! `RedisClusterBuilder`: how a local Redis Cluster is shaped and timed.

use std::time::Duration;

use super::RedisCluster;
use crate::TestkitError;
use crate::options::{ServerOptions, server_setters};

/// Primaries a builder starts unless told otherwise.
pub const DEFAULT_PRIMARIES: usize = 3;
/// Replicas of each primary unless told otherwise.
pub const DEFAULT_REPLICAS_PER_PRIMARY: usize = 1;
/// `cluster-node-timeout` unless told otherwise: 2 s. Short, so that a killed primary is
/// replaced within a few seconds, but not 1 s: on a loaded 2-core machine a node that is
/// merely slow for a second must not be failed over behind a test's back.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long forming the cluster, and each of [`RedisCluster`]'s waits that take no
/// explicit time-out, may take unless told otherwise.
pub const DEFAULT_CLUSTER_TIMEOUT: Duration = Duration::from_secs(60);

/// Most primaries a builder accepts.
const MAX_PRIMARIES: usize = 64;
/// Most nodes in all (each is a process on this machine).
const MAX_NODES: usize = 128;
/// Shortest accepted `cluster-node-timeout`.
const MIN_NODE_TIMEOUT: Duration = Duration::from_millis(100);

/// Configures and starts a [`RedisCluster`]. Obtain one with [`RedisCluster::builder`].
///
/// Setters only record values; [`start`](Self::start) validates them and does all the I/O.
#[derive(Clone, Debug)]
pub struct RedisClusterBuilder {
    pub(crate) primaries: usize,
    pub(crate) replicas_per_primary: usize,
    pub(crate) node_timeout: Duration,
    pub(crate) cluster_timeout: Duration,
    pub(crate) client_proxies: bool,
    pub(crate) server: ServerOptions,
}

impl Default for RedisClusterBuilder {
    fn default() -> Self {
        Self {
            primaries: DEFAULT_PRIMARIES,
            replicas_per_primary: DEFAULT_REPLICAS_PER_PRIMARY,
            node_timeout: DEFAULT_NODE_TIMEOUT,
            cluster_timeout: DEFAULT_CLUSTER_TIMEOUT,
            client_proxies: false,
            server: ServerOptions::default(),
        }
    }
}

impl RedisClusterBuilder {
    /// Number of primaries; the 16384 slots are split evenly between them. Default
    /// [`DEFAULT_PRIMARIES`] (3); 1 to 64. Automatic failover needs a majority of the
    /// primaries to vote, so a killed primary is only replaced with 3 or more.
    pub fn primaries(mut self, n: usize) -> Self {
        self.primaries = n;
        self
    }

    /// Replicas of each primary. Default [`DEFAULT_REPLICAS_PER_PRIMARY`] (1); 0 or more,
    /// with at most 128 nodes in all.
    pub fn replicas_per_primary(mut self, n: usize) -> Self {
        self.replicas_per_primary = n;
        self
    }

    /// `cluster-node-timeout`: how long a node may be unreachable before it is failed
    /// over. Default [`DEFAULT_NODE_TIMEOUT`] (2 s); at least 100 ms.
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = timeout;
        self
    }

    /// How long forming the cluster may take, and the time-out of
    /// [`RedisCluster::failover`]. Default [`DEFAULT_CLUSTER_TIMEOUT`] (60 s, generous
    /// for a loaded machine); must be positive.
    pub fn cluster_timeout(mut self, timeout: Duration) -> Self {
        self.cluster_timeout = timeout;
        self
    }

    /// Put a fault proxy in front of every node for clients, and make the nodes announce
    /// the proxies' ports (`cluster-announce-port`), so that a cluster client which
    /// follows `CLUSTER SLOTS` and `MOVED` stays on the proxies. See
    /// [`RedisCluster::client_link`]. The cluster bus and replication stay off these
    /// proxies. Default `false`.
    pub fn client_proxies(mut self, on: bool) -> Self {
        self.client_proxies = on;
        self
    }

    server_setters!(
        "every node",
        password: "Replicas authenticate with it too (`--masterauth`)."
    );

    /// Validates the options, starts every node, forms the cluster and waits until it is
    /// ready (see [`RedisCluster::wait_ready`]). On error nothing is left running and the
    /// temporary directory is removed.
    pub fn start(self) -> Result<RedisCluster, TestkitError> {
        let invalid = |message: String| Err(TestkitError::InvalidOption { message });
        if !(1..=MAX_PRIMARIES).contains(&self.primaries) {
            return invalid(format!(
                "{} primaries asked for; a local cluster has 1 to {MAX_PRIMARIES}",
                self.primaries
            ));
        }
        let nodes = self
            .primaries
            .saturating_mul(self.replicas_per_primary.saturating_add(1));
        if nodes > MAX_NODES {
            return invalid(format!(
                "{nodes} nodes asked for; a local cluster has at most {MAX_NODES}"
            ));
        }
        if self.node_timeout < MIN_NODE_TIMEOUT {
            return invalid(format!(
                "node_timeout {:?} is below {MIN_NODE_TIMEOUT:?}; nodes would fail each other over",
                self.node_timeout
            ));
        }
        if self.cluster_timeout.is_zero() {
            return invalid("cluster_timeout is zero; give the cluster positive time".into());
        }
        self.server.check(false)?;
        RedisCluster::from_builder(self)
    }
}
