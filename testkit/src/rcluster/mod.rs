//! A local Redis Cluster: primaries and replicas on free loopback ports, formed by the
//! test kit, with failovers, slot moves and a replication partition on demand.

mod ask;
mod builder;
mod cluster;
mod failover;
mod form;
mod reshard;
mod slot;
mod spawn;
mod topology;

pub use builder::{
    DEFAULT_CLUSTER_TIMEOUT, DEFAULT_NODE_TIMEOUT, DEFAULT_PRIMARIES, DEFAULT_REPLICAS_PER_PRIMARY,
    RedisClusterBuilder,
};
pub use cluster::RedisCluster;
pub use failover::FailoverMode;
pub use slot::{SLOT_COUNT, key_slot};
