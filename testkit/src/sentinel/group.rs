//! `SentinelGroup`: the public face of a primary, its replicas and their sentinels.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use redis::Value;
use tempfile::TempDir;

use super::SentinelGroupBuilder;
use super::ask::{self, ASK_TIMEOUT};
use super::config::{self, Monitor, REPLICATION_USER, SENTINEL_DEBUG};
use crate::members::{Members, expect_ok, start_parallel};
use crate::node::{self, Slot};
use crate::options::{self, ServerOptions};
use crate::replication::Replication;
use crate::{DEFAULT_CMD_TIMEOUT, Role, TestkitError, poll};

/// A Sentinel-managed primary: one primary, its replicas (`replicaof`) and sentinels
/// (`redis-server <conf> --sentinel`), each a child process on a free port of
/// `127.0.0.1` with its own directory and configuration file.
///
/// Data nodes are numbered `0..=replicas` (node 0 is the first primary), sentinels
/// `0..sentinels`, separately. Roles change with failovers; [`primary`](Self::primary)
/// asks the sentinels, [`role`](Self::role) the node.
///
/// Sentinels are configured with `down-after-milliseconds` 2 s and `failover-timeout` 5 s
/// by default, and tuned at run time with `SENTINEL DEBUG` (`INFO` every second, hello
/// messages every 0.5 s, TILT only after a 10 s stall) so that they notice changes within
/// a second or two and do not freeze on a loaded machine.
///
/// # Partitioning a primary from its replicas
/// Sentinels hand out one address per node, to clients and, in `REPLICAOF`, to replicas,
/// and they reconfigure a replica that replicates from any other address
/// (`+fix-slave-config`). A proxy between the replicas and the primary would therefore be
/// either also the clients' way in, or undone by the sentinels. Instead, replicas
/// authenticate to their primary as a dedicated ACL user (`replicator`, via `masteruser`
/// and `masterauth`), and [`partition_replicas`](Self::partition_replicas) disables that
/// user on the primary and kills its connections: no replication byte flows (every
/// reconnection is refused at `AUTH`), while clients and sentinels, who log in as other
/// users, still reach the primary and its writes succeed. Unlike a silent network
/// partition, the primary and the replicas see the link go down at once; and sentinels
/// will not promote a replica whose link has been down for more than ten times
/// `down-after` (20 s by default, plus the time the primary has been down).
///
/// # An old primary that stays a primary
/// A primary cut off from its sentinels is failed over but keeps taking writes from the
/// clients that still reach it, until the sentinels reach it again and demote it. The
/// sentinels reach the data nodes at the addresses clients use, so the kit cannot cut them
/// off alone; instead a node started
/// [`undemotable`](crate::SentinelGroupBuilder::undemotable) refuses to be demoted: after
/// [`partition_replicas`](Self::partition_replicas) and [`failover`](Self::failover) it is a
/// primary the sentinels no longer name, with its old clients still connected and nothing
/// it takes replicated.
///
/// Every method takes `&self` and every wait is bounded. Dropping the group kills and
/// reaps every process and removes its directory.
///
/// ```no_run
/// use std::time::Duration;
/// use redquorum_testkit::{SentinelGroup, TestkitError};
///
/// fn main() -> Result<(), TestkitError> {
///     let group = SentinelGroup::builder()
///         .replicas(2)
///         .sentinels(3)
///         .master_name("mymaster")
///         .start()?;
///     let sentinels: Vec<String> = group.sentinel_urls(); // for the client under test
///     let primary = group.primary()?; // as the sentinels report it
///     group.cmd(primary, &["SET", "lock", "me"])?;
///
///     // A manual failover: a replica is promoted and reported.
///     let promoted = group.failover()?;
///
///     // A killed primary is replaced; restarted, it rejoins as a replica.
///     group.kill(promoted)?;
///     let successor = group.wait_failover(promoted, Duration::from_secs(30))?;
///     group.restart(promoted)?;
///     group.wait_ready(Duration::from_secs(30))?;
///     # let _ = (sentinels, successor);
///     Ok(())
/// }
/// ```
pub struct SentinelGroup {
    data: Members,
    sentinels: Members,
    master_name: String,
    group_timeout: Duration,
    /// After how long without a new primary `failover` asks again.
    failover_retry: Duration,
    dir: Option<TempDir>,
    dir_path: PathBuf,
}

impl fmt::Debug for SentinelGroup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SentinelGroup")
            .field("master_name", &self.master_name)
            .field("data_ports", &self.data.ports())
            .field("sentinel_ports", &self.sentinels.ports())
            .field("dir", &self.dir_path)
            .finish_non_exhaustive()
    }
}

impl SentinelGroup {
    /// A builder with the defaults: a primary with 2 replicas, 3 sentinels, quorum 2,
    /// master name `mymaster`.
    pub fn builder() -> SentinelGroupBuilder {
        SentinelGroupBuilder::default()
    }

    /// Starts a group with the defaults; the same as `builder().start()`.
    pub fn start() -> Result<SentinelGroup, TestkitError> {
        Self::builder().start()
    }

    pub(crate) fn from_builder(b: SentinelGroupBuilder) -> Result<Self, TestkitError> {
        let binary = b.server.binary()?;
        let names = (0..=b.replicas)
            .map(|i| format!("node-{i}"))
            .chain((0..b.sentinels).map(|j| format!("sentinel-{j}")));
        let (dir, mut data_dirs) = options::directories("redquorum-testkit-sentinel-", names)?;
        let sentinel_dirs = data_dirs.split_off(b.replicas + 1);
        let replication_password = format!("{:032x}", rand::random::<u128>());
        let data_spec = |index: usize, replica_of: Option<u16>| {
            let mut spec = b.server.spec(index, data_dirs[index].clone(), &binary);
            if b.undemotable.contains(&index) {
                spec.extra_args.extend(config::undemotable_args());
            }
            let file = spec.dir.join("redis.conf");
            config::write_data_node(&file, replica_of, &replication_password)?;
            spec.config_file = Some(file);
            Ok::<_, TestkitError>(spec)
        };

        // The primary first: the replicas' and sentinels' files name its port.
        let mut primary = data_spec(0, None)?;
        let primary_server = node::start_fresh(&mut primary)?;
        let primary_port = primary.port;
        let replica_specs = (1..=b.replicas)
            .map(|i| data_spec(i, Some(primary_port)))
            .collect::<Result<Vec<_>, _>>()?;
        let mut data_slots = vec![Slot::new(primary, primary_server)];
        data_slots.extend(start_parallel(replica_specs, |mut spec| {
            node::start_fresh(&mut spec).map(|server| Slot::new(spec, server))
        })?);
        let data = Members::new(data_slots, b.server.password.clone());

        let monitor = Monitor {
            name: &b.master_name,
            primary_port,
            quorum: b.effective_quorum(),
            down_after: b.down_after,
            failover_timeout: b.failover_timeout,
            replicas: b.replicas,
            password: b.server.password.as_deref(),
        };
        // Sentinels run the same binary with the same ready time-out, and nothing else of
        // the data nodes' options.
        let sentinel_server = ServerOptions {
            extra_args: vec!["--sentinel".to_owned()],
            redis_server: b.server.redis_server.clone(),
            ready_timeout: b.server.ready_timeout,
            ..ServerOptions::default()
        };
        let sentinel_specs = sentinel_dirs
            .into_iter()
            .enumerate()
            .map(|(j, sentinel_dir)| {
                let mut spec = sentinel_server.spec(j, sentinel_dir, &binary);
                let file = spec.dir.join("sentinel.conf");
                config::write_sentinel(&file, &monitor)?;
                spec.config_file = Some(file);
                Ok(spec)
            })
            .collect::<Result<Vec<_>, TestkitError>>()?;
        let sentinel_slots = start_parallel(sentinel_specs, |mut spec| {
            node::start_fresh(&mut spec).map(|server| Slot::new(spec, server))
        })?;
        let sentinels = Members::new(sentinel_slots, None);

        let group = Self {
            data,
            sentinels,
            master_name: b.master_name,
            group_timeout: b.group_timeout,
            // Twice what a promotion may take before the sentinels abort the failover.
            failover_retry: b.failover_timeout * 2,
            dir_path: dir.path().to_path_buf(),
            dir: Some(dir),
        };
        for j in 0..b.sentinels {
            group.tune_sentinel(j)?;
        }
        group.wait_ready(b.group_timeout)?;
        Ok(group)
    }

    /// The name the sentinels monitor the primary under.
    pub fn master_name(&self) -> &str {
        &self.master_name
    }

    /// Number of data nodes (the primary and its replicas).
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True if the group has no data nodes (never, once started).
    pub fn is_empty(&self) -> bool {
        self.data.len() == 0
    }

    /// Number of sentinels.
    pub fn sentinel_count(&self) -> usize {
        self.sentinels.len()
    }

    /// The sentinels' URLs, `redis://127.0.0.1:PORT` (sentinels have no password), for the
    /// client under test together with [`master_name`](Self::master_name).
    pub fn sentinel_urls(&self) -> Vec<String> {
        (0..self.sentinels.len())
            .map(|j| self.sentinels.url(j))
            .collect()
    }

    /// Sentinel `j`'s port.
    ///
    /// # Panics
    /// If `j >= self.sentinel_count()`, like slice indexing.
    pub fn sentinel_port(&self, j: usize) -> u16 {
        self.sentinels.port(j)
    }

    /// Data node `i`'s URL, `redis://[:password@]127.0.0.1:PORT`, direct to the node.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn url(&self, i: usize) -> String {
        self.data.url(i)
    }

    /// Data node `i`'s port; it stays the same across restarts.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn port(&self, i: usize) -> u16 {
        self.data.port(i)
    }

    /// Sends one command straight to data node `i` on a new connection (with `AUTH` if
    /// the group has a password), waiting at most 2 s for each step.
    pub fn cmd(&self, i: usize, args: &[&str]) -> Result<Value, TestkitError> {
        self.data.cmd(i, args, DEFAULT_CMD_TIMEOUT)
    }

    /// [`cmd`](Self::cmd) with another time-out for connect, write and read.
    pub fn cmd_with_timeout(
        &self,
        i: usize,
        args: &[&str],
        timeout: Duration,
    ) -> Result<Value, TestkitError> {
        self.data.cmd(i, args, timeout)
    }

    /// Sends one command to sentinel `j`, e.g. `["SENTINEL", "REPLICAS", "mymaster"]`.
    pub fn sentinel_cmd(&self, j: usize, args: &[&str]) -> Result<Value, TestkitError> {
        self.sentinels.cmd(j, args, DEFAULT_CMD_TIMEOUT)
    }

    /// The primary's address as the first running sentinel that answers reports it
    /// (`SENTINEL get-master-addr-by-name`).
    pub fn primary_addr(&self) -> Result<SocketAddr, TestkitError> {
        let mut last = None;
        for j in self.sentinels.responsive() {
            match ask::reported_by(&self.sentinels, j, &self.master_name) {
                Ok(addr) => return Ok(addr),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| TestkitError::ActionFailed {
            action: "ask the sentinels for the primary".to_owned(),
            reason: "no sentinel is running; restart one first".to_owned(),
        }))
    }

    /// The data node at [`primary_addr`](Self::primary_addr).
    pub fn primary(&self) -> Result<usize, TestkitError> {
        let addr = self.primary_addr()?;
        self.data
            .index_of_port(addr.port())
            .ok_or_else(|| TestkitError::ActionFailed {
                action: "map the reported primary to a node".to_owned(),
                reason: format!("the sentinels report {addr}, which is none of the group's nodes"),
            })
    }

    /// What data node `i` says it is (`INFO replication`).
    pub fn role(&self, i: usize) -> Result<Role, TestkitError> {
        Ok(self.replication(i)?.role)
    }

    /// The data nodes that say they replicate from node `primary`, ascending.
    pub fn replicas_of(&self, primary: usize) -> Result<Vec<usize>, TestkitError> {
        self.data.check(primary)?;
        let port = self.data.port(primary);
        Ok(self
            .data
            .responsive()
            .into_iter()
            .filter(|&i| {
                self.replication(i)
                    .is_ok_and(|r| r.role == Role::Replica && r.primary_port == Some(port))
            })
            .collect())
    }

    /// Kills data node `i` with SIGKILL and reaps it. Idempotent.
    pub fn kill(&self, i: usize) -> Result<(), TestkitError> {
        self.data.kill(i)
    }

    /// Kills data node `i` if it runs and starts it again on the same port from its
    /// configuration file, which the sentinels rewrite whenever they reconfigure it: a
    /// replica comes back replicating from the primary it last had; a primary that was
    /// failed over meanwhile comes back as a primary and is turned into a replica by the
    /// sentinels about two seconds later. Use [`wait_ready`](Self::wait_ready). Without
    /// [`Persistence::AofAlways`](crate::Persistence::AofAlways) a primary restarted before the sentinels failed it over
    /// comes back empty, and its replicas resync to empty too.
    pub fn restart(&self, i: usize) -> Result<(), TestkitError> {
        self.data.restart(i)
    }

    /// Freezes data node `i` with SIGSTOP; after `down-after` the sentinels consider a
    /// paused primary down and fail it over. Errors if the node is not running.
    pub fn pause(&self, i: usize) -> Result<(), TestkitError> {
        self.data.pause(i)
    }

    /// Continues data node `i` with SIGCONT. Errors if the node is not running.
    pub fn resume(&self, i: usize) -> Result<(), TestkitError> {
        self.data.resume(i)
    }

    /// True if data node `i`'s process is alive (a paused node is). False out of range.
    pub fn is_running(&self, i: usize) -> bool {
        self.data.is_running(i)
    }

    /// Data node `i`'s process id while it is alive.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.data.pid(i)
    }

    /// Kills sentinel `j` with SIGKILL and reaps it. Idempotent.
    pub fn kill_sentinel(&self, j: usize) -> Result<(), TestkitError> {
        self.sentinels.kill(j)
    }

    /// Starts sentinel `j` again from its configuration file (it keeps its id and what it
    /// knew) and applies the test kit's run-time tuning again.
    pub fn restart_sentinel(&self, j: usize) -> Result<(), TestkitError> {
        self.sentinels.restart(j)?;
        self.tune_sentinel(j)
    }

    /// True if sentinel `j`'s process is alive. False out of range.
    pub fn is_sentinel_running(&self, j: usize) -> bool {
        self.sentinels.is_running(j)
    }

    /// Waits, at most `timeout`, until the group is ready: every running, unpaused
    /// sentinel reports the same primary, not down and with no failover in progress, and
    /// knows every other running data node as a replica of it with a working link and
    /// every other running sentinel as healthy; that primary says `role:master`; and
    /// every other running data node replicates from it, in sync. Returns the primary.
    pub fn wait_ready(&self, timeout: Duration) -> Result<usize, TestkitError> {
        poll::until(
            timeout,
            || "waiting for the Sentinel group to be ready".to_owned(),
            || self.check_ready(),
        )
    }

    /// Asks a sentinel for a failover (`SENTINEL FAILOVER <name>`, retried while a
    /// previous one is still in progress or no replica qualifies yet) and waits (for the
    /// builder's [`group_timeout`](SentinelGroupBuilder::group_timeout)) until every
    /// running sentinel reports a new primary and that node says `role:master`. Returns
    /// the new primary. The other nodes follow shortly; use
    /// [`wait_ready`](Self::wait_ready) to wait for them. A failover the sentinels abort
    /// (a promotion slower than `failover-timeout`) is asked for again after twice that
    /// time.
    pub fn failover(&self) -> Result<usize, TestkitError> {
        let started = Instant::now();
        let old = self.primary()?;
        self.ask_failover(self.group_timeout)?;
        let mut asked = Instant::now();
        poll::until(
            self.group_timeout.saturating_sub(started.elapsed()),
            || format!("waiting for the sentinels to replace node {old} as the primary"),
            || {
                let reported = self.new_primary(old);
                // A manual failover that failed (its promotion outlasted
                // `failover-timeout` on a loaded machine) is aborted and not retried by
                // the sentinels, so ask again; one still in progress answers INPROG.
                if reported.is_err() && asked.elapsed() >= self.failover_retry {
                    let _ = self.ask_failover(ASK_TIMEOUT);
                    asked = Instant::now();
                }
                reported
            },
        )
    }

    /// Sends `SENTINEL FAILOVER` to the first running sentinel until one accepts it.
    fn ask_failover(&self, timeout: Duration) -> Result<(), TestkitError> {
        let name = self.master_name.as_str();
        poll::until(
            timeout,
            || format!("asking the sentinels to fail {name} over"),
            || {
                let j = *self
                    .sentinels
                    .responsive()
                    .first()
                    .ok_or("no sentinel is running")?;
                match self
                    .sentinels
                    .cmd(j, &["SENTINEL", "FAILOVER", name], ASK_TIMEOUT)
                {
                    Ok(Value::Okay) => Ok(()),
                    Ok(other) => Err(format!("sentinel {j} answered {other:?}")),
                    Err(e) => Err(format!("sentinel {j}: {e}")),
                }
            },
        )
    }

    /// Waits, at most `timeout`, until every running sentinel reports a primary other
    /// than node `old_primary` and that node says `role:master`; returns it. After
    /// [`kill`](Self::kill)ing (or [`pause`](Self::pause)-ing) the primary, sentinels need
    /// `down-after` plus an election, a few seconds in all.
    pub fn wait_failover(
        &self,
        old_primary: usize,
        timeout: Duration,
    ) -> Result<usize, TestkitError> {
        self.data.check(old_primary)?;
        self.wait_new_primary(old_primary, timeout)
    }

    /// Cuts data node `i` off from its replicas (see the type's docs): disables the
    /// replication user on it and kills the replicas' connections. Clients and sentinels
    /// still reach the node; its writes succeed but reach no replica. Lasts until
    /// [`heal_replicas`](Self::heal_replicas), also across failovers (the node refuses
    /// replicas whatever its role) and, once the sentinels have rewritten the node's
    /// configuration file, across a restart of the node.
    pub fn partition_replicas(&self, i: usize) -> Result<(), TestkitError> {
        let action = || format!("partition node {i} from its replicas");
        expect_ok(
            self.cmd(i, &["ACL", "SETUSER", REPLICATION_USER, "off"])?,
            action,
        )?;
        match self.cmd(i, &["CLIENT", "KILL", "USER", REPLICATION_USER])? {
            Value::Int(_) => Ok(()),
            other => Err(TestkitError::ActionFailed {
                action: action(),
                reason: format!("CLIENT KILL answered {other:?}"),
            }),
        }
    }

    /// Ends [`partition_replicas`](Self::partition_replicas): enables the replication user
    /// again; the replicas reconnect within a second and resync.
    pub fn heal_replicas(&self, i: usize) -> Result<(), TestkitError> {
        expect_ok(
            self.cmd(i, &["ACL", "SETUSER", REPLICATION_USER, "on"])?,
            || format!("heal the partition of node {i}"),
        )
    }

    /// The group's temporary directory: `node-<i>/` and `sentinel-<j>/` hold each
    /// process's configuration file, data and log.
    pub fn dir(&self) -> &Path {
        &self.dir_path
    }

    /// Data node `i`'s Redis log file.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn log_path(&self, i: usize) -> PathBuf {
        self.dir_path.join(format!("node-{i}")).join("redis.log")
    }

    /// Sentinel `j`'s log file.
    ///
    /// # Panics
    /// If `j >= self.sentinel_count()`.
    pub fn sentinel_log_path(&self, j: usize) -> PathBuf {
        self.dir_path
            .join(format!("sentinel-{j}"))
            .join("redis.log")
    }

    fn tune_sentinel(&self, j: usize) -> Result<(), TestkitError> {
        expect_ok(self.sentinel_cmd(j, &SENTINEL_DEBUG)?, || {
            format!("tune sentinel {j} with SENTINEL DEBUG")
        })
    }

    fn replication(&self, i: usize) -> Result<Replication, TestkitError> {
        ask::replication(&self.data, i)
    }

    fn wait_new_primary(&self, old: usize, timeout: Duration) -> Result<usize, TestkitError> {
        poll::until(
            timeout,
            || format!("waiting for the sentinels to replace node {old} as the primary"),
            || self.new_primary(old),
        )
    }

    fn new_primary(&self, old: usize) -> Result<usize, String> {
        ask::new_primary(&self.data, &self.sentinels, &self.master_name, old)
    }

    fn check_ready(&self) -> Result<usize, String> {
        ask::ready(&self.data, &self.sentinels, &self.master_name)
    }
}

impl Drop for SentinelGroup {
    fn drop(&mut self) {
        // Sentinels first, so that none reacts to the data nodes going away.
        self.sentinels.kill_all();
        self.data.kill_all();
        if let Some(dir) = self.dir.take()
            && let Err(e) = dir.close()
        {
            tracing::warn!(dir = %self.dir_path.display(), error = %e, "could not remove the group directory");
        }
    }
}

// The group is shared across threads and tasks in an `Arc`.
const _: fn() = || {
    fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<SentinelGroup>();
};
