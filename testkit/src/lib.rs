//! Test kit for redquorum: real Redis masters on free ports, a fault-injecting TCP proxy,
//! and per-node clock skew, behind a synchronous API that any test (sync or async) can use.
//!
//! ```no_run
//! use std::time::Duration;
//! use redquorum_testkit::{Direction, Fault, LocalCluster, TestkitError};
//!
//! fn main() -> Result<(), TestkitError> {
//!     // Five independent masters (the default), each a `redis-server` child process.
//!     let cluster = LocalCluster::start(5)?;
//!     assert_eq!(cluster.cmd(0, &["PING"])?.as_str(), Some("PONG"));
//!
//!     // One client's view of the network: a proxy per node, with run-time faults.
//!     let links = cluster.links()?;
//!     let urls: Vec<String> = links.urls(); // hand these to the client under test
//!     links.link(1).set(Direction::Both, Fault::delay(Duration::from_millis(50)));
//!     links.link(2).set(Direction::ToClient, Fault::Drop); // applied, never acknowledged
//!
//!     // Process faults.
//!     cluster.pause(3)?; // SIGSTOP
//!     cluster.resume(3)?;
//!     cluster.restart_after(4, Duration::from_millis(500))?;
//!     cluster.wait_ready(4, Duration::from_secs(10))?;
//!     # let _ = urls;
//!     Ok(())
//! } // dropping the cluster kills and reaps every process and removes its files
//! ```
//!
//! `redis-server` is found through `$REDQUORUM_REDIS_SERVER`, else `PATH`
//! (`apt-get install -y redis-server`). Clock skew
//! ([`ClusterBuilder::clock_shim`]) also needs a C compiler at run time.
//!
//! # Layout
//! - `builder`: [`ClusterBuilder`] and [`Persistence`], the options of a cluster.
//! - `cluster`: [`LocalCluster`], the public face: lifecycle of nodes, commands, links.
//! - `state`: what the cluster shares with its delayed-restart threads, and its teardown.
//! - `node`: one node's slot, and starting it with port-race retries.
//! - `server`: one `redis-server` child process: spawn, readiness probe, signals, reaping.
//! - `ports`: picking free loopback ports.
//! - `locate`: finding `redis-server` and a C compiler.
//! - `connection`: [`RawConnection`], a tiny blocking RESP client for tests.
//! - `resp`, `reply`: the wire format and [`Reply`].
//! - `url`: building and reading `redis://[:password@]host:port` URLs.
//! - `proxy`: the fault proxy: [`LinkSet`], [`LinkProxy`], [`Fault`], [`Direction`],
//!   statistics and the request tap, on the test kit's own tokio runtime.
//! - `clock`: the `LD_PRELOAD` `gettimeofday` shim (`clock/shim.c`) and [`ClockControl`].
//! - `checker`: the mutual-exclusion checker: [`Hold`]s in a [`Recorder`], the sweep for
//!   overlaps ([`analyse`]), the lost-update [`Referee`], seeds, and a [`Checker`] that
//!   prints each scenario's one-line [`Report`].
//! - `error`: [`TestkitError`].

mod builder;
mod checker;
mod clock;
mod cluster;
mod connection;
mod error;
mod locate;
mod members;
mod node;
mod poll;
mod ports;
mod proxy;
mod rcluster;
mod replication;
mod reply;
mod resp;
mod sentinel;
mod server;
mod state;
mod tls;
mod url;

pub use builder::{ClusterBuilder, DEFAULT_NODES, DEFAULT_READY_TIMEOUT, Persistence};
pub use checker::{
    Analysis, Checker, DEFAULT_MIN_HAND_OVERS, DEFAULT_SOAK_FACTOR, Hold, Overlap, Recorder,
    Referee, RefereeSession, RefereeTally, Report, SEED_ENV, SOAK_ENV, SUMMARY_FILE_ENV, Verdict,
    analyse, derive_seed, find_overlaps, hand_overs, rng_for, seed_from_env, soak_factor,
};
pub use clock::{APPLY_LATENCY, CLOCK_FILE_ENV, ClockControl};
pub use cluster::{LocalCluster, STOP_TIMEOUT};
pub use connection::{DEFAULT_CMD_TIMEOUT, RawConnection};
pub use error::TestkitError;
pub use locate::{OPENSSL_ENV, REDIS_SERVER_ENV};
pub use proxy::{
    Direction, DirectionStats, Fault, LinkProxy, LinkSet, LinkStats, TAP_CAPTURE_BYTES,
    TAP_MAX_EVENTS, TapEvent,
};
pub use rcluster::{
    DEFAULT_CLUSTER_TIMEOUT, DEFAULT_NODE_TIMEOUT, DEFAULT_PRIMARIES, DEFAULT_REPLICAS_PER_PRIMARY,
    FailoverMode, RedisCluster, RedisClusterBuilder, SLOT_COUNT, key_slot,
};
pub use replication::Role;
pub use reply::Reply;
pub use sentinel::{
    DEFAULT_DOWN_AFTER, DEFAULT_FAILOVER_TIMEOUT, DEFAULT_GROUP_TIMEOUT, DEFAULT_MASTER_NAME,
    DEFAULT_SENTINEL_REPLICAS, DEFAULT_SENTINELS, SentinelGroup, SentinelGroupBuilder,
};
pub use tls::{
    CERT_VALIDITY_DAYS, DEFAULT_TLS_USER, TlsAuthClients, TlsCerts, TlsServer, TlsServerBuilder,
};
