//! A Sentinel group: a primary, its replicas and the sentinels that fail it over, on free
//! loopback ports, with failovers and a replication partition on demand.

mod ask;
mod builder;
mod config;
mod group;
mod state;

pub use builder::{
    DEFAULT_DOWN_AFTER, DEFAULT_FAILOVER_TIMEOUT, DEFAULT_GROUP_TIMEOUT, DEFAULT_MASTER_NAME,
    DEFAULT_SENTINEL_REPLICAS, DEFAULT_SENTINELS, SentinelGroupBuilder,
};
pub use group::SentinelGroup;
