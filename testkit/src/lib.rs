//! Test kit for redquorum: real Redis masters on free ports, a fault-injecting TCP proxy,
//! and per-node clock skew, behind a synchronous API that any test (sync or async) can use.
//!
//! ```no_run
//! use std::time::Duration;
//! use redquorum_testkit::{Direction, Fault, LocalCluster, ReplyExt, TestkitError};
//!
//! fn main() -> Result<(), TestkitError> {
//!     // Five independent masters (the default), each a `redis-server` child process.
//!     let cluster = LocalCluster::start(5)?;
//!     assert_eq!(cluster.cmd(0, &["PING"])?.as_str(), Some("PONG")); // see `ReplyExt`
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
//! Beyond independent masters, the kit starts the other shapes a quorum member can take,
//! each with the fault actions its tests need: a local Redis Cluster ([`RedisCluster`]),
//! a Sentinel-managed primary ([`SentinelGroup`]), and a TLS server ([`TlsServer`]):
//!
//! ```no_run
//! use redquorum_testkit::{RedisCluster, SentinelGroup, TestkitError, TlsServer};
//!
//! fn main() -> Result<(), TestkitError> {
//!     let cluster = RedisCluster::builder().primaries(3).replicas_per_primary(1).start()?;
//!     let primary = cluster.primary_for_key("lock:{a}")?;
//!     cluster.partition_replicas(primary); // clients still reach it, replicas do not
//!     cluster.failover(cluster.replicas_of(primary)?[0])?; // CLUSTER FAILOVER FORCE
//!
//!     let group = SentinelGroup::builder().replicas(2).sentinels(3).start()?;
//!     let promoted = group.failover()?; // SENTINEL FAILOVER, and the sentinels agree
//!
//!     let tls = TlsServer::start()?;
//!     let (url, ca) = (tls.url(), tls.certs().ca_cert_pem()); // rediss://user:pw@…
//!     # let _ = (promoted, url, ca);
//!     Ok(())
//! }
//! ```
//!
//! `redis-server` is found through `$REDQUORUM_REDIS_SERVER`, else `PATH`
//! (`apt-get install -y redis-server`). Clock skew
//! ([`ClusterBuilder::clock_shim`]) also needs a C compiler at run time, and TLS (the
//! TLS server, and the Redis Cluster's internal links) the `openssl` program
//! (`$REDQUORUM_OPENSSL`, else `PATH`).
//!
//! # Layout
//! - `builder`: [`ClusterBuilder`] and [`Persistence`], the options of a cluster.
//! - `cluster`: [`LocalCluster`], the public face: lifecycle of nodes, commands, links.
//! - `state`: what the cluster shares with its delayed-restart threads, and its teardown.
//! - `node`: one node's slot, and starting it with port-race retries.
//! - `server`: one `redis-server` child process: spawn, readiness probe, signals, reaping.
//! - `ports`: picking free loopback ports.
//! - `locate`: finding `redis-server`, a C compiler and `openssl`.
//! - `members`: the processes of one group (cluster nodes, sentinels, data nodes, a TLS
//!   server) with the actions every group offers, parallel start, and the probe that a
//!   primary's replication stream really reaches its replicas.
//! - `options`: what every builder of `redis-server` processes shares (binary, password,
//!   persistence, extra arguments, ready time-out): defaults, checks, a node's spec and
//!   directory, and the setters each builder gets from one macro.
//! - `poll`: the one bounded "wait until the servers say so" loop of the groups.
//! - `replication`: [`Role`], and reading `INFO replication`.
//! - `rcluster`: the local Redis Cluster: [`RedisClusterBuilder`], [`RedisCluster`],
//!   [`FailoverMode`], [`key_slot`]; inside, `spawn` (a node's ports, TLS options and
//!   replication proxy), `form` (slots, `MEET`, `REPLICATE`), `reshard` (moving a slot),
//!   `ask` and `topology` (what the nodes say, and the pure readiness check).
//! - `sentinel`: the Sentinel group: [`SentinelGroupBuilder`], [`SentinelGroup`]; inside,
//!   `config` (the files sentinels rewrite, the `SENTINEL DEBUG` tuning) and `state` (what
//!   the sentinels say, and the pure readiness check).
//! - `tls`: [`TlsCerts`] (a throw-away CA and certificates, made with `openssl`),
//!   [`TlsServer`] and its builder.
//! - `connection`: [`RawConnection`], redis-rs's blocking connection with one time-out per
//!   step and error replies as values, for tests that drive the wire step by step.
//! - `reply`: [`ReplyExt`], one-line accessors on redis-rs's `Value` for assertions.
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
mod options;
mod poll;
mod ports;
mod proxy;
mod rcluster;
mod replication;
mod reply;
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
pub use reply::ReplyExt;
pub use sentinel::{
    DEFAULT_DOWN_AFTER, DEFAULT_FAILOVER_TIMEOUT, DEFAULT_GROUP_TIMEOUT, DEFAULT_MASTER_NAME,
    DEFAULT_SENTINEL_REPLICAS, DEFAULT_SENTINELS, SentinelGroup, SentinelGroupBuilder,
};
pub use tls::{
    CERT_VALIDITY_DAYS, DEFAULT_TLS_USER, TlsAuthClients, TlsCerts, TlsServer, TlsServerBuilder,
};
