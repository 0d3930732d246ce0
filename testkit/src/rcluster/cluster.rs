//! `RedisCluster`: the public face of a local Redis Cluster.

use std::fmt;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis::Value;
use tempfile::TempDir;

use super::ask;
use super::form;
use super::reshard::{self, Target};
use super::slot::{SLOT_COUNT, key_in, key_slot};
use super::spawn::{self, NodeNet, NodeOptions};
use super::{FailoverMode, RedisClusterBuilder};
use crate::cluster::lock;
use crate::members::{Members, expect_ok, start_parallel};
use crate::options;
use crate::replication::Replication;
use crate::server::NodeSpec;
use crate::{DEFAULT_CMD_TIMEOUT, Direction, Fault, LinkProxy, Role, TestkitError, TlsCerts, poll};

/// After how long without a promotion [`RedisCluster::failover_with`] sends its
/// `CLUSTER FAILOVER` again: twice Redis' own manual-failover time-out (5 s).
const FAILOVER_RETRY: Duration = Duration::from_secs(10);

/// A local Redis Cluster: `primaries × (1 + replicas_per_primary)` `redis-server`
/// processes with `cluster-enabled yes` on free ports of `127.0.0.1`, each with its own
/// directory and `nodes.conf`, formed and waited for until it is ready.
///
/// Nodes are numbered: `0..primaries` are the primaries the slots are first split
/// between, and replica `j` of primary `p` is node `primaries + p * replicas_per_primary +
/// j`. Roles change with failovers; [`role`](Self::role), [`primaries`](Self::primaries),
/// [`primary_for_key`](Self::primary_for_key) and [`replicas_of`](Self::replicas_of) ask
/// the cluster for the current ones.
///
/// # Networks
/// Clients and the test kit use each node's plain-text [`port`](Self::port)
/// ([`seed_urls`](Self::seed_urls)). The cluster bus and replication run over TLS with
/// certificates made for the cluster ([`certs`](Self::certs)); each node announces, as
/// its TLS port, a fault proxy in front of it ([`replication_link`](Self::replication_link)),
/// so everything a primary sends its replicas, and nothing else, crosses that proxy.
/// [`partition_replicas`](Self::partition_replicas) blackholes it: the primary keeps
/// answering clients and accepting writes that never reach its replicas, while the bus
/// stays up, so the cluster does not fail over on its own. Pausing the primary
/// (`CLIENT PAUSE`, `DEBUG SLEEP`) would stop its clients too, and a replica-side
/// `CLIENT KILL` only drops the link until it reconnects; a proxy is a real partition.
/// A TLS client is sent to the replication proxies too: this cluster is for plain-text
/// clients.
///
/// # Failures
/// [`kill`](Self::kill) (SIGKILL) a primary and [`wait_failover`](Self::wait_failover)
/// until a replica has taken its slots; [`failover`](Self::failover) promotes a replica
/// with `CLUSTER FAILOVER FORCE` and waits; [`restart`](Self::restart) brings a node
/// back with its identity (an old primary comes back as a replica of its successor).
///
/// # Slot moves
/// [`move_slot`](Self::move_slot) reshards one slot to another primary, keys and all, as
/// `redis-cli --cluster reshard` would; [`begin_slot_move`](Self::begin_slot_move),
/// [`migrate_keys`](Self::migrate_keys) and [`finish_slot_move`](Self::finish_slot_move)
/// are its steps, for a test that needs a slot half-migrated (`ASK`, `TRYAGAIN`).
///
/// Every method takes `&self` and every wait is bounded. Dropping the cluster kills and
/// reaps every process, stops its proxies and removes its directory.
///
/// ```no_run
/// use std::time::Duration;
/// use redquorum_testkit::{RedisCluster, TestkitError};
///
/// fn main() -> Result<(), TestkitError> {
///     let cluster = RedisCluster::builder()
///         .primaries(3)
///         .replicas_per_primary(1)
///         .start()?;
///     let seeds: Vec<String> = cluster.seed_urls(); // hand these to a cluster client
///
///     // Write where the key lives.
///     let primary = cluster.primary_for_key("lock:{orders}")?;
///     cluster.cmd(primary, &["SET", "lock:{orders}", "me"])?;
///
///     // The primary keeps its clients but loses its replicas...
///     cluster.partition_replicas(primary);
///     cluster.cmd(primary, &["SET", "lock:{orders}", "unreplicated"])?;
///     // ...and a replica that missed the write is promoted.
///     let replica = cluster.replicas_of(primary)?[0];
///     cluster.heal_replicas(primary);
///     cluster.failover(replica)?;
///
///     // A killed primary is replaced by the cluster itself.
///     cluster.kill(replica)?;
///     let successor = cluster.wait_failover(replica, Duration::from_secs(30))?;
///     cluster.restart(replica)?; // comes back as a replica of `successor`
///     cluster.wait_ready(Duration::from_secs(30))?;
///     # let _ = (seeds, successor);
///     Ok(())
/// }
/// ```
pub struct RedisCluster {
    members: Members,
    nets: Vec<NodeNet>,
    ids: Vec<String>,
    /// The port each node announces to its primary when it replicates (its TLS port).
    replica_ports: Vec<u16>,
    password: Option<String>,
    cluster_timeout: Duration,
    /// The slots each node served when it was last killed, for `wait_failover`.
    killed_slots: Mutex<Vec<Vec<(u16, u16)>>>,
    certs: TlsCerts,
    dir: Option<TempDir>,
    dir_path: PathBuf,
}

impl fmt::Debug for RedisCluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisCluster")
            .field("ports", &self.members.ports())
            .field("ids", &self.ids)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("dir", &self.dir_path)
            .finish_non_exhaustive()
    }
}

impl RedisCluster {
    /// A builder with the defaults: 3 primaries with 1 replica each, a 2 s node time-out.
    pub fn builder() -> RedisClusterBuilder {
        RedisClusterBuilder::default()
    }

    /// Starts a cluster with the defaults; the same as `builder().start()`.
    pub fn start() -> Result<RedisCluster, TestkitError> {
        Self::builder().start()
    }

    pub(crate) fn from_builder(b: RedisClusterBuilder) -> Result<Self, TestkitError> {
        let binary = b.server.binary()?;
        let certs = TlsCerts::generate()?;
        let n = b.primaries * (1 + b.replicas_per_primary);
        let (dir, node_dirs) = options::directories(
            "redquorum-testkit-rcluster-",
            (0..n).map(|i| format!("node-{i}")),
        )?;
        let specs: Vec<NodeSpec> = node_dirs
            .into_iter()
            .enumerate()
            .map(|(index, node_dir)| b.server.spec(index, node_dir, &binary))
            .collect();
        let opts = NodeOptions {
            certs: &certs,
            node_timeout: b.node_timeout,
            client_proxy: b.client_proxies,
            password: b.server.password.as_deref(),
            extra_args: &b.server.extra_args,
        };
        // On error, dropping what did start kills those nodes and stops their proxies.
        let (slots, nets): (Vec<_>, Vec<_>) =
            start_parallel(specs, |spec| spawn::start(spec, &opts))?
                .into_iter()
                .unzip();
        let members = Members::new(slots, b.server.password.clone());
        let ids = form::form(
            &members,
            &nets,
            b.primaries,
            b.replicas_per_primary,
            b.cluster_timeout,
        )?;
        let cluster = Self {
            replica_ports: nets.iter().map(|net| net.tls_port).collect(),
            members,
            nets,
            ids,
            password: b.server.password,
            cluster_timeout: b.cluster_timeout,
            killed_slots: Mutex::new(vec![Vec::new(); n]),
            certs,
            dir_path: dir.path().to_path_buf(),
            dir: Some(dir),
        };
        cluster.wait_ready(b.cluster_timeout)?;
        Ok(cluster)
    }

    /// Number of nodes, primaries and replicas.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// True if the cluster has no nodes (never, once started).
    pub fn is_empty(&self) -> bool {
        self.members.len() == 0
    }

    /// Node `i`'s cluster id (40 hex characters); it survives restarts.
    ///
    /// # Panics
    /// If `i >= self.len()`, like slice indexing.
    pub fn node_id(&self, i: usize) -> &str {
        &self.ids[i]
    }

    /// Node `i`'s plain-text URL, `redis://[:password@]127.0.0.1:PORT`, direct to the node.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn url(&self, i: usize) -> String {
        self.members.url(i)
    }

    /// Every node's direct URL, in node order.
    pub fn urls(&self) -> Vec<String> {
        (0..self.len()).map(|i| self.url(i)).collect()
    }

    /// The URLs a cluster client should be given as seeds: the client proxies' when the
    /// cluster was built with [`client_proxies(true)`](RedisClusterBuilder::client_proxies),
    /// else the nodes' own ([`urls`](Self::urls)). Either way the nodes tell the client
    /// the same addresses in `CLUSTER SLOTS` and `MOVED`.
    pub fn seed_urls(&self) -> Vec<String> {
        (0..self.len())
            .map(|i| match &self.nets[i].client {
                Some(proxy) => proxy.url(),
                None => self.url(i),
            })
            .collect()
    }

    /// Node `i`'s plain-text port; it stays the same across restarts.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn port(&self, i: usize) -> u16 {
        self.members.port(i)
    }

    /// Node `i`'s own TLS port (replicas reach it through
    /// [`replication_link`](Self::replication_link) instead).
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn tls_port(&self, i: usize) -> u16 {
        self.nets[i].tls_port
    }

    /// Node `i`'s cluster bus port (`cluster-port`).
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn bus_port(&self, i: usize) -> u16 {
        self.nets[i].bus_port
    }

    /// Sends one command straight to node `i` on a new connection and returns the reply,
    /// waiting at most 2 s for each step. The node answers `MOVED` for keys it does not
    /// serve; see [`cmd_for_key`](Self::cmd_for_key).
    pub fn cmd(&self, i: usize, args: &[&str]) -> Result<Value, TestkitError> {
        self.members.cmd(i, args, DEFAULT_CMD_TIMEOUT)
    }

    /// [`cmd`](Self::cmd) with another time-out for connect, write and read.
    pub fn cmd_with_timeout(
        &self,
        i: usize,
        args: &[&str],
        timeout: Duration,
    ) -> Result<Value, TestkitError> {
        self.members.cmd(i, args, timeout)
    }

    /// Sends one command to the primary currently serving `key`'s slot (as
    /// [`primary_for_key`](Self::primary_for_key) finds it).
    pub fn cmd_for_key(&self, key: &str, args: &[&str]) -> Result<Value, TestkitError> {
        self.cmd(self.primary_for_key(key)?, args)
    }

    /// What node `i` says it is (`INFO replication`).
    pub fn role(&self, i: usize) -> Result<Role, TestkitError> {
        let info = self.cmd(i, &["INFO", "replication"])?;
        Replication::parse(&info)
            .map(|r| r.role)
            .map_err(|detail| TestkitError::Protocol {
                what: format!("reading INFO replication of node {i}"),
                detail,
            })
    }

    /// The nodes currently serving slots, ascending, as the first running node that
    /// answers sees them.
    pub fn primaries(&self) -> Result<Vec<usize>, TestkitError> {
        let view = ask::any_view(&self.members)?;
        Ok((0..self.len())
            .filter(|&i| view.get(&self.ids[i]).is_some_and(|n| !n.slots.is_empty()))
            .collect())
    }

    /// The node serving `slot` (below [`SLOT_COUNT`]), as the first running node that
    /// answers sees it.
    pub fn primary_for_slot(&self, slot: u16) -> Result<usize, TestkitError> {
        if slot >= SLOT_COUNT {
            return Err(TestkitError::InvalidOption {
                message: format!("slot {slot} is out of range; slots are 0 to 16383"),
            });
        }
        let view = ask::any_view(&self.members)?;
        let owner = view.owner(slot).ok_or_else(|| TestkitError::ActionFailed {
            action: format!("find the primary of slot {slot}"),
            reason: "no node serves it".to_owned(),
        })?;
        self.index_of(&owner.id)
    }

    /// The node serving `key` (see [`key_slot`]).
    pub fn primary_for_key(&self, key: &str) -> Result<usize, TestkitError> {
        self.primary_for_slot(key_slot(key))
    }

    /// The replicas of node `primary`, ascending, as the first running node that answers
    /// sees them (dead replicas included).
    pub fn replicas_of(&self, primary: usize) -> Result<Vec<usize>, TestkitError> {
        self.members.check(primary)?;
        let view = ask::any_view(&self.members)?;
        let id = &self.ids[primary];
        Ok((0..self.len())
            .filter(|&i| {
                view.get(&self.ids[i])
                    .is_some_and(|n| n.primary.as_deref() == Some(id))
            })
            .collect())
    }

    /// The slot ranges node `i` serves, as the first running node that answers sees them
    /// (empty for a replica).
    pub fn slots_of(&self, i: usize) -> Result<Vec<RangeInclusive<u16>>, TestkitError> {
        self.members.check(i)?;
        let view = ask::any_view(&self.members)?;
        Ok(view
            .get(&self.ids[i])
            .map(|n| n.slots.iter().map(|&(s, e)| s..=e).collect())
            .unwrap_or_default())
    }

    /// A key `"{prefix}{n}"` (the smallest such `n`) whose slot node `i` serves now, to
    /// put a lock on a primary a test is about to fail.
    pub fn key_on(&self, i: usize, prefix: &str) -> Result<String, TestkitError> {
        let slots: Vec<(u16, u16)> = self
            .slots_of(i)?
            .into_iter()
            .map(|range| (*range.start(), *range.end()))
            .collect();
        key_in(&slots, |n| format!("{prefix}{n}")).ok_or_else(|| TestkitError::ActionFailed {
            action: format!("find a key served by node {i}"),
            reason: if slots.is_empty() {
                "it serves no slots; pass a primary".to_owned()
            } else {
                format!("no key {prefix}N tried lands on its slots")
            },
        })
    }

    /// Kills node `i` with SIGKILL and reaps it. Idempotent. The slots it served are
    /// remembered for [`wait_failover`](Self::wait_failover).
    pub fn kill(&self, i: usize) -> Result<(), TestkitError> {
        self.members.check(i)?;
        if self.members.is_running(i)
            && let Ok(view) = ask::any_view(&self.members)
            && let Some(node) = view.get(&self.ids[i])
            && !node.slots.is_empty()
        {
            lock(&self.killed_slots)[i] = node.slots.clone();
        }
        self.members.kill(i)
    }

    /// Kills node `i` if it runs and starts it again with the same ports, directory and
    /// `nodes.conf`, waiting until it answers `PING`. It rejoins with its identity; a
    /// primary that was failed over meanwhile comes back as a replica of its successor.
    /// Without [`Persistence::AofAlways`](crate::Persistence::AofAlways) it comes back
    /// without data: a replica syncs again, and a primary restarted before it was failed
    /// over keeps its slots, empty, and its replicas resync to empty too (the hazard a
    /// Redlock restart guard exists for). Call [`wait_ready`](Self::wait_ready) to wait
    /// until it is part of the cluster again.
    pub fn restart(&self, i: usize) -> Result<(), TestkitError> {
        self.members.restart(i)
    }

    /// Freezes node `i` with SIGSTOP (connections stay open, nothing is answered); after
    /// the node time-out the cluster fails a paused primary over. Errors if not running.
    pub fn pause(&self, i: usize) -> Result<(), TestkitError> {
        self.members.pause(i)
    }

    /// Continues node `i` with SIGCONT. Errors if the node is not running.
    pub fn resume(&self, i: usize) -> Result<(), TestkitError> {
        self.members.resume(i)
    }

    /// True if node `i`'s process is alive (a paused node is). False out of range.
    pub fn is_running(&self, i: usize) -> bool {
        self.members.is_running(i)
    }

    /// Node `i`'s process id while it is alive.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.members.pid(i)
    }

    /// Waits, at most `timeout`, until the cluster is ready: every running, unpaused node
    /// reports `cluster_state:ok` with all 16384 slots ok, all of them agree on who
    /// serves which slots and who replicates whom, none flags another as failing, and
    /// every such replica is in sync with its primary, which lists it as online. Dead or
    /// paused nodes are left out.
    pub fn wait_ready(&self, timeout: Duration) -> Result<(), TestkitError> {
        poll::until(
            timeout,
            || "waiting for the Redis Cluster to be ready".to_owned(),
            || self.check_ready(),
        )
    }

    /// Promotes replica `replica` with `CLUSTER FAILOVER FORCE` and waits (for the
    /// builder's [`cluster_timeout`](RedisClusterBuilder::cluster_timeout)) until it
    /// serves its former primary's slots and the cluster is ready again
    /// ([`wait_ready`](Self::wait_ready)). The old primary, if it runs, becomes its replica.
    pub fn failover(&self, replica: usize) -> Result<(), TestkitError> {
        self.failover_with(replica, FailoverMode::Force, self.cluster_timeout)
    }

    /// [`failover`](Self::failover) with another [`FailoverMode`] and time-out. A
    /// failover that has not promoted the replica after 10 s (twice Redis' own limit for
    /// a manual failover, which Redis does not retry) is asked for again.
    pub fn failover_with(
        &self,
        replica: usize,
        mode: FailoverMode,
        timeout: Duration,
    ) -> Result<(), TestkitError> {
        let action = || format!("fail over to node {replica}");
        let view = ask::view_of(&self.members, replica)?;
        let me = view.myself().ok_or_else(|| TestkitError::ActionFailed {
            action: action(),
            reason: "it does not list itself in CLUSTER NODES".to_owned(),
        })?;
        if me.is_primary() {
            return Err(TestkitError::ActionFailed {
                action: action(),
                reason: "it is a primary already; pass one of its replicas (replicas_of)"
                    .to_owned(),
            });
        }
        expect_ok(self.cmd(replica, mode.args())?, action)?;
        let mut asked = Instant::now();
        poll::until(
            timeout,
            || format!("waiting for node {replica} to take over after {mode:?} failover"),
            || {
                let view = ask::view_of(&self.members, replica).map_err(|e| e.to_string())?;
                match view.myself() {
                    Some(me) if me.is_primary() && !me.slots.is_empty() => self.check_ready(),
                    _ => {
                        // Redis gives a manual failover 5 s; one that lost its election
                        // (votes that came too late on a loaded machine) is over and is
                        // not retried by Redis, so ask again.
                        if asked.elapsed() >= FAILOVER_RETRY {
                            let _ = self.cmd(replica, mode.args());
                            asked = Instant::now();
                        }
                        Err(format!("node {replica} is not a primary yet"))
                    }
                }
            },
        )
    }

    /// Waits, at most `timeout`, until another node serves the slots that node
    /// `old_primary` served when it was [`kill`](Self::kill)ed (or, if it runs, serves
    /// now) and the cluster is ready again; returns the new primary. With a dead or
    /// paused primary the cluster needs the node time-out plus a second or two.
    pub fn wait_failover(
        &self,
        old_primary: usize,
        timeout: Duration,
    ) -> Result<usize, TestkitError> {
        self.members.check(old_primary)?;
        let action = || format!("wait for node {old_primary} to be failed over");
        let mut slots = lock(&self.killed_slots)[old_primary].clone();
        if slots.is_empty() {
            slots = ask::any_view(&self.members)?
                .get(&self.ids[old_primary])
                .map(|n| n.slots.clone())
                .unwrap_or_default();
        }
        let Some(&(slot, _)) = slots.first() else {
            return Err(TestkitError::ActionFailed {
                action: action(),
                reason: "it served no slots; pass a primary".to_owned(),
            });
        };
        let successor = poll::until(
            timeout,
            || format!("waiting for a replica to take over node {old_primary}'s slots"),
            || {
                let view = ask::any_view(&self.members).map_err(|e| e.to_string())?;
                let owner = view
                    .owner(slot)
                    .ok_or(format!("nobody serves slot {slot}"))?;
                let index = self.index_of(&owner.id).map_err(|e| e.to_string())?;
                if index == old_primary {
                    return Err(format!("node {old_primary} still serves slot {slot}"));
                }
                self.check_ready()?;
                Ok(index)
            },
        )?;
        lock(&self.killed_slots)[old_primary].clear();
        Ok(successor)
    }

    /// Moves `slot` to primary `to` the way `redis-cli --cluster reshard` does, and waits
    /// (for the builder's [`cluster_timeout`](RedisClusterBuilder::cluster_timeout)) until
    /// every running node says `to` serves it and nobody migrates it any more:
    /// [`begin_slot_move`](Self::begin_slot_move), then
    /// [`finish_slot_move`](Self::finish_slot_move). Keys keep their values and time to
    /// live. The new owner takes a new config epoch.
    pub fn move_slot(&self, slot: u16, to: usize) -> Result<(), TestkitError> {
        self.begin_slot_move(slot, to)?;
        self.finish_slot_move(slot, to)
    }

    /// Opens a move of `slot` from the primary serving it to primary `to` and moves no key:
    /// `CLUSTER SETSLOT slot IMPORTING` on `to`, then `MIGRATING` on the source. From here
    /// the source answers `ASK` for keys of the slot it does not have (and `TRYAGAIN` for a
    /// command on several keys of which only some are there); the target serves them only
    /// after `ASKING`. Returns the source node. Move keys with
    /// [`migrate_keys`](Self::migrate_keys), and close with
    /// [`finish_slot_move`](Self::finish_slot_move).
    pub fn begin_slot_move(&self, slot: u16, to: usize) -> Result<usize, TestkitError> {
        let from = self.primary_for_slot(slot)?;
        let target = self.slot_target(slot, from, to)?;
        reshard::open(&self.members, slot, (from, &self.ids[from]), &target)?;
        Ok(from)
    }

    /// During a move opened with [`begin_slot_move`](Self::begin_slot_move), moves `keys`
    /// (each in `slot`) from the source to `to` with `MIGRATE` (values and time to live
    /// kept); keys the source no longer has are skipped.
    pub fn migrate_keys(&self, slot: u16, to: usize, keys: &[&str]) -> Result<(), TestkitError> {
        let from = self.primary_for_slot(slot)?;
        let target = self.slot_target(slot, from, to)?;
        reshard::migrate(&self.members, slot, from, &target, keys)
    }

    /// Closes a move opened with [`begin_slot_move`](Self::begin_slot_move): moves every
    /// key the source still has in `slot` (`CLUSTER GETKEYSINSLOT`, `MIGRATE` in batches
    /// of 100), then `CLUSTER SETSLOT slot NODE` on `to`, the source and every other
    /// primary, and waits as [`move_slot`](Self::move_slot) does.
    pub fn finish_slot_move(&self, slot: u16, to: usize) -> Result<(), TestkitError> {
        let from = self.primary_for_slot(slot)?;
        let target = self.slot_target(slot, from, to)?;
        let others = self.primaries()?;
        reshard::migrate_all(&self.members, slot, from, &target)?;
        reshard::assign(&self.members, slot, from, &target, &others)?;
        poll::until(
            self.cluster_timeout,
            || format!("waiting for every node to agree that node {to} serves slot {slot}"),
            || reshard::agreed(&self.members, slot, &self.ids[to]),
        )
    }

    /// Where `slot`, served by `from`, may be moved: `to` must be another primary.
    fn slot_target(&self, slot: u16, from: usize, to: usize) -> Result<Target<'_>, TestkitError> {
        self.members.check(to)?;
        let action = || format!("move slot {slot} from node {from} to node {to}");
        if from == to {
            return Err(TestkitError::ActionFailed {
                action: action(),
                reason: format!("node {to} serves it already; pass another primary"),
            });
        }
        let view = ask::view_of(&self.members, to)?;
        if !view.myself().is_some_and(|me| me.is_primary()) {
            return Err(TestkitError::ActionFailed {
                action: action(),
                reason: format!("node {to} is not a primary; pass one of `primaries()`"),
            });
        }
        Ok(Target {
            index: to,
            id: &self.ids[to],
            tls_port: self.nets[to].tls_port,
            password: self.password.as_deref(),
        })
    }

    /// The fault proxy in front of node `i`'s TLS port, which the node announces: every
    /// replica of node `i` syncs from it through this link, and nothing else uses it.
    /// Faults on it ([`Fault::delay`] for lagging replicas, [`Fault::Blackhole`] for a
    /// partition) act on replication only.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn replication_link(&self, i: usize) -> &LinkProxy {
        &self.nets[i].replication
    }

    /// Partitions node `i` from its replicas: blackholes its
    /// [`replication_link`](Self::replication_link) both ways. Clients still reach the
    /// node and its writes succeed, but no byte reaches its replicas, and their
    /// acknowledgements (`WAIT`) do not come back. The bus stays up, so nothing fails
    /// over by itself. A replica keeps reporting `master_link_status:up` until
    /// `repl-timeout` (60 s unless given in `extra_args`) and then tries to reconnect,
    /// through the same blackhole. Applies to whichever replicas node `i` has, now and
    /// after a failover.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn partition_replicas(&self, i: usize) {
        self.replication_link(i)
            .set(Direction::Both, Fault::Blackhole);
    }

    /// Ends [`partition_replicas`](Self::partition_replicas): the stale replication
    /// connections are reset when data next crosses them, the replicas reconnect and
    /// resync (partially if the primary's backlog still has what they missed).
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn heal_replicas(&self, i: usize) {
        self.replication_link(i).set(Direction::Both, Fault::Pass);
    }

    /// The fault proxy clients use to reach node `i`, when the cluster was built with
    /// [`client_proxies(true)`](RedisClusterBuilder::client_proxies): node `i` announces
    /// its port, so `MOVED` and `CLUSTER SLOTS` lead cluster clients there. All clients
    /// share these proxies (a node announces one address).
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn client_link(&self, i: usize) -> Option<&LinkProxy> {
        self.nets[i].client.as_ref()
    }

    /// The certificates of the cluster's TLS bus and replication links.
    pub fn certs(&self) -> &TlsCerts {
        &self.certs
    }

    /// The cluster's temporary directory (`node-<i>/` holds each node's data, logs and
    /// `nodes.conf`).
    pub fn dir(&self) -> &Path {
        &self.dir_path
    }

    /// Node `i`'s Redis log file.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn log_path(&self, i: usize) -> PathBuf {
        self.dir_path.join(format!("node-{i}")).join("redis.log")
    }

    fn index_of(&self, id: &str) -> Result<usize, TestkitError> {
        self.ids
            .iter()
            .position(|known| known == id)
            .ok_or_else(|| TestkitError::ActionFailed {
                action: "map a cluster node id to a node".to_owned(),
                reason: format!("node id {id} is not one of this cluster's nodes"),
            })
    }

    fn check_ready(&self) -> Result<(), String> {
        ask::ready(&self.members, &self.ids, &self.replica_ports)
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        self.members.kill_all();
        self.nets.clear();
        if let Some(dir) = self.dir.take()
            && let Err(e) = dir.close()
        {
            tracing::warn!(dir = %self.dir_path.display(), error = %e, "could not remove the cluster directory");
        }
    }
}

// The cluster is shared across threads and tasks in an `Arc`.
const _: fn() = || {
    fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<RedisCluster>();
};
