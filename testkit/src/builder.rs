//! `ClusterBuilder` and `Persistence`: how a `LocalCluster` is configured.

use std::time::Duration;

use crate::options::{ServerOptions, server_setters};
use crate::{LocalCluster, TestkitError};

/// Number of nodes a builder starts unless told otherwise.
pub const DEFAULT_NODES: usize = 5;
/// How long a node may take to answer `PING` after it is spawned, unless told otherwise.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(10);

/// What a node keeps on disk across a kill and restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Persistence {
    /// Nothing: `--save "" --appendonly no`. A killed node comes back empty.
    #[default]
    None,
    /// An append-only file fsynced before every reply: `--appendonly yes --appendfsync
    /// always --save ""`. A killed node comes back with every acknowledged write.
    AofAlways,
}

/// Configures and starts a [`LocalCluster`]. Obtain one with [`LocalCluster::builder`].
///
/// Setters only record values; [`start`](Self::start) validates them and does all the I/O.
#[derive(Clone, Debug)]
pub struct ClusterBuilder {
    pub(crate) nodes: usize,
    /// Per-node overrides of `server.persistence`.
    pub(crate) persistence_of: Vec<(usize, Persistence)>,
    pub(crate) clock_shim: bool,
    pub(crate) server: ServerOptions,
}

impl Default for ClusterBuilder {
    fn default() -> Self {
        Self {
            nodes: DEFAULT_NODES,
            persistence_of: Vec::new(),
            clock_shim: false,
            server: ServerOptions::default(),
        }
    }
}

impl ClusterBuilder {
    /// Number of independent masters. Default [`DEFAULT_NODES`] (5); 0 starts nothing.
    pub fn nodes(mut self, n: usize) -> Self {
        self.nodes = n;
        self
    }

    /// What node `i` persists, overriding [`persistence`](Self::persistence) for it (e.g.
    /// a cluster where only some masters keep an append-only file). Indices beyond the
    /// node count are ignored.
    pub fn persistence_of(mut self, i: usize, persistence: Persistence) -> Self {
        self.persistence_of.push((i, persistence));
        self
    }

    /// Load the clock shim into every node so that [`LocalCluster::clock`] can skew its
    /// `gettimeofday`. Default `false`. Needs a C compiler at run time.
    pub fn clock_shim(mut self, on: bool) -> Self {
        self.clock_shim = on;
        self
    }

    server_setters!("every node", password: "");

    /// Validates the options, starts every node and waits until each answers `PING`.
    ///
    /// On error nothing is left running and the temporary directory is removed.
    pub fn start(self) -> Result<LocalCluster, TestkitError> {
        self.server.check(false)?;
        LocalCluster::from_builder(self)
    }
}
