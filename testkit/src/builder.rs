//! `ClusterBuilder` and `Persistence`: how a `LocalCluster` is configured.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

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
#[derive(Clone)]
pub struct ClusterBuilder {
    pub(crate) nodes: usize,
    pub(crate) persistence: Persistence,
    /// Per-node overrides of `persistence`.
    pub(crate) persistence_of: Vec<(usize, Persistence)>,
    pub(crate) password: Option<String>,
    pub(crate) clock_shim: bool,
    pub(crate) extra_args: Vec<String>,
    pub(crate) redis_server: Option<PathBuf>,
    pub(crate) ready_timeout: Duration,
}

impl Default for ClusterBuilder {
    fn default() -> Self {
        Self {
            nodes: DEFAULT_NODES,
            persistence: Persistence::None,
            persistence_of: Vec::new(),
            password: None,
            clock_shim: false,
            extra_args: Vec::new(),
            redis_server: None,
            ready_timeout: DEFAULT_READY_TIMEOUT,
        }
    }
}

impl fmt::Debug for ClusterBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusterBuilder")
            .field("nodes", &self.nodes)
            .field("persistence", &self.persistence)
            .field("persistence_of", &self.persistence_of)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("clock_shim", &self.clock_shim)
            .field("extra_args", &self.extra_args)
            .field("redis_server", &self.redis_server)
            .field("ready_timeout", &self.ready_timeout)
            .finish()
    }
}

impl ClusterBuilder {
    /// Number of independent masters. Default [`DEFAULT_NODES`] (5); 0 starts nothing.
    pub fn nodes(mut self, n: usize) -> Self {
        self.nodes = n;
        self
    }

    /// What each node persists. Default [`Persistence::None`].
    pub fn persistence(mut self, persistence: Persistence) -> Self {
        self.persistence = persistence;
        self
    }

    /// What node `i` persists, overriding [`persistence`](Self::persistence) for it (e.g.
    /// a cluster where only some masters keep an append-only file). Indices beyond the
    /// node count are ignored.
    pub fn persistence_of(mut self, i: usize, persistence: Persistence) -> Self {
        self.persistence_of.push((i, persistence));
        self
    }

    /// Require this password (`--requirepass`). URLs then carry it as `redis://:pw@...`.
    /// Default: no password. Must not be empty.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// Load the clock shim into every node so that [`LocalCluster::clock`] can skew its
    /// `gettimeofday`. Default `false`. Needs a C compiler at run time.
    pub fn clock_shim(mut self, on: bool) -> Self {
        self.clock_shim = on;
        self
    }

    /// More `redis-server` arguments, appended after the test kit's own (so they win),
    /// e.g. `["--maxmemory", "10mb"]`. Default: none.
    pub fn extra_args(mut self, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.extra_args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Run this binary instead of looking up `$REDQUORUM_REDIS_SERVER` or `PATH`.
    pub fn redis_server(mut self, path: PathBuf) -> Self {
        self.redis_server = Some(path);
        self
    }

    /// How long a node may take to answer `PING` after it is spawned.
    /// Default [`DEFAULT_READY_TIMEOUT`] (10 s); must be positive.
    pub fn ready_timeout(mut self, timeout: Duration) -> Self {
        self.ready_timeout = timeout;
        self
    }

    /// Validates the options, starts every node and waits until each answers `PING`.
    ///
    /// On error nothing is left running and the temporary directory is removed.
    pub fn start(self) -> Result<LocalCluster, TestkitError> {
        if self.password.as_deref() == Some("") {
            return Err(TestkitError::InvalidOption {
                message: "the password is empty; leave it unset for no password".to_owned(),
            });
        }
        if self.ready_timeout.is_zero() {
            return Err(TestkitError::InvalidOption {
                message: "ready_timeout is zero; give nodes a positive time to start".to_owned(),
            });
        }
        LocalCluster::from_builder(self)
    }
}
