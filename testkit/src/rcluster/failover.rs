//! `FailoverMode`: which `CLUSTER FAILOVER` a test asks a replica for.

/// How [`RedisCluster::failover_with`](crate::RedisCluster::failover_with) promotes a
/// replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum FailoverMode {
    /// `CLUSTER FAILOVER FORCE`: the replica does not wait for its primary to hand over
    /// (the primary may be unreachable, or partitioned from it), but still needs the
    /// votes of a majority of primaries. Writes the replica has not received are lost:
    /// the failover a Redlock member must survive.
    #[default]
    Force,
    /// `CLUSTER FAILOVER`: the primary stops accepting writes, the replica catches up
    /// with it, then takes over. No acknowledged write is lost; needs a working
    /// replication link (it gives up after 5 s inside Redis otherwise).
    Coordinated,
    /// `CLUSTER FAILOVER TAKEOVER`: the replica takes over on its own, without votes
    /// (it bumps the config epoch by itself).
    Takeover,
}

impl FailoverMode {
    pub(crate) fn args(self) -> &'static [&'static str] {
        match self {
            Self::Force => &["CLUSTER", "FAILOVER", "FORCE"],
            Self::Coordinated => &["CLUSTER", "FAILOVER"],
            Self::Takeover => &["CLUSTER", "FAILOVER", "TAKEOVER"],
        }
    }
}
