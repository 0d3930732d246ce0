//! `SentinelGroupBuilder`: how a Sentinel group is shaped and timed.

use std::time::Duration;

use super::SentinelGroup;
use crate::TestkitError;
use crate::options::{ServerOptions, server_setters};

/// Replicas of the primary unless told otherwise.
pub const DEFAULT_SENTINEL_REPLICAS: usize = 2;
/// Sentinels unless told otherwise.
pub const DEFAULT_SENTINELS: usize = 3;
/// The name the sentinels monitor the primary under unless told otherwise.
pub const DEFAULT_MASTER_NAME: &str = "mymaster";
/// `sentinel down-after-milliseconds` unless told otherwise: 2 s. Short, so that a killed
/// primary is replaced within a few seconds, but not 1 s: on a loaded 2-core machine a
/// primary that is merely slow to answer for a second must not be failed over behind a
/// test's back.
pub const DEFAULT_DOWN_AFTER: Duration = Duration::from_secs(2);
/// `sentinel failover-timeout` unless told otherwise: 5 s. Sentinels abort a failover
/// whose promotion takes longer, and wait twice as long before failing the same primary
/// over again on their own.
pub const DEFAULT_FAILOVER_TIMEOUT: Duration = Duration::from_secs(5);
/// How long starting the group, and each of [`SentinelGroup`]'s waits that take no
/// explicit time-out, may take unless told otherwise.
pub const DEFAULT_GROUP_TIMEOUT: Duration = Duration::from_secs(60);

/// Shortest accepted `down-after-milliseconds` and `failover-timeout`.
const MIN_PERIOD: Duration = Duration::from_millis(100);

/// Configures and starts a [`SentinelGroup`]. Obtain one with [`SentinelGroup::builder`].
///
/// Setters only record values; [`start`](Self::start) validates them and does all the I/O.
#[derive(Clone, Debug)]
pub struct SentinelGroupBuilder {
    pub(crate) replicas: usize,
    pub(crate) sentinels: usize,
    pub(crate) master_name: String,
    pub(crate) quorum: Option<usize>,
    pub(crate) down_after: Duration,
    pub(crate) failover_timeout: Duration,
    pub(crate) group_timeout: Duration,
    /// The data nodes' options (sentinels run the same binary, with the same ready
    /// time-out, and none of the rest).
    pub(crate) server: ServerOptions,
    /// Data nodes the sentinels cannot demote (see [`SentinelGroupBuilder::undemotable`]).
    pub(crate) undemotable: Vec<usize>,
}

impl Default for SentinelGroupBuilder {
    fn default() -> Self {
        Self {
            replicas: DEFAULT_SENTINEL_REPLICAS,
            sentinels: DEFAULT_SENTINELS,
            master_name: DEFAULT_MASTER_NAME.to_owned(),
            quorum: None,
            down_after: DEFAULT_DOWN_AFTER,
            failover_timeout: DEFAULT_FAILOVER_TIMEOUT,
            group_timeout: DEFAULT_GROUP_TIMEOUT,
            server: ServerOptions::default(),
            undemotable: Vec::new(),
        }
    }
}

impl SentinelGroupBuilder {
    /// Replicas of the primary. Default [`DEFAULT_SENTINEL_REPLICAS`] (2); 0 or more
    /// (with none, there is nothing to fail over to).
    pub fn replicas(mut self, n: usize) -> Self {
        self.replicas = n;
        self
    }

    /// Sentinels. Default [`DEFAULT_SENTINELS`] (3); at least 1.
    pub fn sentinels(mut self, n: usize) -> Self {
        self.sentinels = n;
        self
    }

    /// The name the primary is monitored under. Default [`DEFAULT_MASTER_NAME`]
    /// (`mymaster`); a non-empty word without whitespace.
    pub fn master_name(mut self, name: impl Into<String>) -> Self {
        self.master_name = name.into();
        self
    }

    /// How many sentinels must agree that the primary is down. Default: a majority of
    /// the sentinels (2 of 3); 1 to the number of sentinels. A failover also needs a
    /// majority of sentinels to elect a leader, whatever the quorum.
    pub fn quorum(mut self, quorum: usize) -> Self {
        self.quorum = Some(quorum);
        self
    }

    /// `down-after-milliseconds`: how long the primary may not answer before sentinels
    /// consider it down. Default [`DEFAULT_DOWN_AFTER`] (2 s); at least 100 ms.
    pub fn down_after(mut self, period: Duration) -> Self {
        self.down_after = period;
        self
    }

    /// `failover-timeout`. Default [`DEFAULT_FAILOVER_TIMEOUT`] (5 s); at least 100 ms.
    pub fn failover_timeout(mut self, timeout: Duration) -> Self {
        self.failover_timeout = timeout;
        self
    }

    /// How long starting the group may take, and the time-out of
    /// [`SentinelGroup::failover`]. Default [`DEFAULT_GROUP_TIMEOUT`] (60 s, generous for
    /// a loaded machine); must be positive.
    pub fn group_timeout(mut self, timeout: Duration) -> Self {
        self.group_timeout = timeout;
        self
    }

    server_setters!(
        "the data nodes (not the sentinels)",
        password: "The sentinels are told it (`sentinel auth-pass`) and need none themselves; \
                   it must not contain whitespace."
    );

    /// Starts data node `i` with `SLAVEOF` and `REPLICAOF` renamed away (to names nobody
    /// knows), so that the sentinels cannot turn it into a replica: after a failover away
    /// from it, it stays a primary, and a client still connected to it keeps writing there
    /// — the split brain of a primary cut off from its sentinels, without a network
    /// partition the test kit could not aim at the sentinels alone (they reach the data
    /// nodes at the same address as clients do). Sentinels send `SLAVEOF` inside a
    /// `MULTI` that also kills the node's clients; with the command unknown the whole
    /// transaction is refused, so those clients stay connected too. Meant for the first
    /// primary (node 0): a replica so started could not be reconfigured either. Default:
    /// none; indices beyond the replicas are ignored.
    pub fn undemotable(mut self, i: usize) -> Self {
        self.undemotable.push(i);
        self
    }

    /// Validates the options, starts the primary, its replicas and the sentinels, and
    /// waits until the group is ready (see [`SentinelGroup::wait_ready`]). On error
    /// nothing is left running and the temporary directory is removed.
    pub fn start(self) -> Result<SentinelGroup, TestkitError> {
        let invalid = |message: String| Err(TestkitError::InvalidOption { message });
        if self.sentinels == 0 {
            return invalid("a Sentinel group needs at least one sentinel".into());
        }
        let quorum = self.effective_quorum();
        if quorum == 0 || quorum > self.sentinels {
            return invalid(format!(
                "quorum {quorum} is out of range for {} sentinels; use 1 to {}",
                self.sentinels, self.sentinels
            ));
        }
        if self.master_name.is_empty() || self.master_name.contains(char::is_whitespace) {
            return invalid(format!(
                "the master name {:?} is empty or has whitespace; pick a plain word",
                self.master_name
            ));
        }
        if self.down_after < MIN_PERIOD || self.failover_timeout < MIN_PERIOD {
            return invalid(format!(
                "down_after and failover_timeout must be at least {MIN_PERIOD:?}"
            ));
        }
        if self.group_timeout.is_zero() {
            return invalid("group_timeout is zero; give the group positive time".into());
        }
        self.server.check(true)?;
        SentinelGroup::from_builder(self)
    }

    /// The quorum in force: the one given, else a majority of the sentinels.
    pub(crate) fn effective_quorum(&self) -> usize {
        self.quorum.unwrap_or(self.sentinels / 2 + 1)
    }
}
