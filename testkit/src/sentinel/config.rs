//! The configuration files of a Sentinel group, and the run-time tuning of its sentinels.

use std::path::Path;
use std::time::Duration;

use crate::TestkitError;

/// The ACL user replicas authenticate as (`masteruser`); disabling it on a primary is how
/// the group partitions a primary from its replicas (see `SentinelGroup`).
pub(crate) const REPLICATION_USER: &str = "replicator";

/// `SENTINEL DEBUG` settings applied to every sentinel after each start (they live in
/// memory only):
/// - `info-period 1000`: sentinels poll `INFO` on every node each second instead of every
///   10 s, so they see promotions, reconfigured replicas and restarted nodes quickly (and
///   a replica's information is always fresh enough for `SENTINEL FAILOVER`).
/// - `publish-period 500`: hello messages every 0.5 s instead of 2 s, so sentinels find
///   each other sooner, and a restarted old primary is turned into a replica after 2 s
///   instead of 8 s (that wait is four publish periods).
/// - `tilt-trigger 10000`: a sentinel enters TILT mode (and refuses to act for 30 s) when
///   its timer fires more than this late; the default 2 s can happen on a loaded 2-core
///   machine, and the group must not freeze for a scheduling hiccup.
pub(crate) const SENTINEL_DEBUG: [&str; 8] = [
    "SENTINEL",
    "DEBUG",
    "info-period",
    "1000",
    "publish-period",
    "500",
    "tilt-trigger",
    "10000",
];

/// `redis-server` arguments that rename `SLAVEOF` and `REPLICAOF` to random names, so that
/// no sentinel (nor anybody) can make the node a replica while it runs (see
/// `SentinelGroupBuilder::undemotable`). On the command line, not in the configuration
/// file: sentinels rewrite that file, and `rename-command` cannot be set at run time.
pub(crate) fn undemotable_args() -> Vec<String> {
    ["SLAVEOF", "REPLICAOF"]
        .into_iter()
        .flat_map(|command| {
            [
                "--rename-command".to_owned(),
                command.to_owned(),
                format!("{}-{:032x}", command.to_lowercase(), rand::random::<u128>()),
            ]
        })
        .collect()
}

/// A data node's configuration file. Sentinels rewrite it (`CONFIG REWRITE`) whenever
/// they reconfigure the node, so a node restarted from it keeps the role they gave it;
/// that is why the initial `replicaof` is written here and not on the command line, which
/// would win over the rewritten file.
pub(crate) fn write_data_node(
    path: &Path,
    replica_of: Option<u16>,
    replication_password: &str,
) -> Result<(), TestkitError> {
    let mut text = format!(
        "# Written by redquorum-testkit; sentinels rewrite it with CONFIG REWRITE.\n\
         user {REPLICATION_USER} on >{replication_password} +psync +replconf +ping\n\
         masteruser {REPLICATION_USER}\n\
         masterauth {replication_password}\n\
         repl-diskless-sync-delay 0\n"
    );
    if let Some(port) = replica_of {
        text.push_str(&format!("replicaof 127.0.0.1 {port}\n"));
    }
    write(path, &text)
}

/// What a sentinel monitors.
#[derive(Debug)]
pub(crate) struct Monitor<'a> {
    pub(crate) name: &'a str,
    pub(crate) primary_port: u16,
    pub(crate) quorum: usize,
    pub(crate) down_after: Duration,
    pub(crate) failover_timeout: Duration,
    pub(crate) replicas: usize,
    pub(crate) password: Option<&'a str>,
}

/// A sentinel's configuration file; the sentinel keeps its state in it (its id, the
/// replicas and sentinels it knows, the current primary), so a restarted sentinel
/// carries on where it stopped.
pub(crate) fn write_sentinel(path: &Path, m: &Monitor<'_>) -> Result<(), TestkitError> {
    let name = m.name;
    let mut text = format!(
        "# Written by redquorum-testkit; the sentinel rewrites it with its state.\n\
         sentinel monitor {name} 127.0.0.1 {} {}\n\
         sentinel down-after-milliseconds {name} {}\n\
         sentinel failover-timeout {name} {}\n\
         sentinel parallel-syncs {name} {}\n",
        m.primary_port,
        m.quorum,
        m.down_after.as_millis(),
        m.failover_timeout.as_millis(),
        // Every replica re-syncs at once after a failover: faster, and the data is tiny.
        m.replicas.max(1),
    );
    if let Some(pw) = m.password {
        text.push_str(&format!("sentinel auth-pass {name} {pw}\n"));
    }
    write(path, &text)
}

fn write(path: &Path, text: &str) -> Result<(), TestkitError> {
    std::fs::write(path, text)
        .map_err(|e| TestkitError::os(format!("writing {}", path.display()), e))
}
