//! What [`Redlock::health`](crate::Redlock::health) reports: each master's state, the
//! problems found, and the restart guard's view. Plain data, below every module that fills
//! it in.

mod guard;
mod problem;
mod renewal;

use std::fmt;
use std::time::Duration;

pub use guard::{EpochCause, GuardStatus};
pub use problem::Problem;
pub use renewal::{MIN_RENEWAL_HEADROOM, RenewalLoad};

/// What one master looks like.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct NodeHealth {
    /// Position in the configured list.
    pub node: usize,
    /// URL, password redacted.
    pub url: String,
    /// Round trip of a `PING`, when reachable.
    pub rtt: Option<Duration>,
    /// `redis_version`, or `valkey <valkey_version>` on Valkey (which pins `redis_version`
    /// at 7.2.4). Informational only: nothing is decided on it.
    pub version: Option<String>,
    /// `role` (`master` or `slave`).
    pub role: Option<String>,
    /// The server this member's connection reaches (`host:port`): for a Sentinel group, the
    /// primary the sentinels named.
    pub primary: Option<String>,
    /// Replicas connected to it (`connected_slaves`).
    pub replicas: Option<u64>,
    /// `run_id`: one per server process.
    pub run_id: Option<String>,
    /// `uptime_in_seconds`.
    pub uptime: Option<Duration>,
    /// `appendonly`, `appendfsync`, `save` (`None` when `CONFIG GET` is not allowed).
    pub persistence: Option<(String, String, String)>,
    /// `maxmemory-policy` (`None` when `CONFIG GET` is not allowed).
    pub maxmemory_policy: Option<String>,
    /// The master's wall clock minus ours, in milliseconds (informational: Redlock needs
    /// equal clock *rates*, not equal clocks).
    pub clock_offset_ms: Option<f64>,
    /// Master seconds per local second over the sampling window.
    pub clock_rate: Option<f64>,
    /// How long the restart guard (or a strict check) keeps this master's grants from
    /// counting; `Some(Duration::MAX)` while that is not known yet.
    pub quarantined: Option<Duration>,
    /// The restart guard's view of the master: counted, quarantined (until when, why), or
    /// not verified.
    pub guard: GuardStatus,
    /// What is wrong with it.
    pub problems: Vec<Problem>,
}

/// The state of every master. [`is_healthy`](HealthReport::is_healthy) is true when no
/// problem was found.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthReport {
    /// One entry per master, in configured order.
    pub nodes: Vec<NodeHealth>,
    /// Problems of the set as a whole (an even count, renewal overloaded).
    pub problems: Vec<Problem>,
    /// Whether this client's renewals keep up with the locks it keeps alive.
    pub renewal: RenewalLoad,
    /// Masters where this client's waiters poll instead of being woken by releases: they
    /// refused `SUBSCRIBE` recently (a proxy, an ACL without pub/sub). Not a problem: locking
    /// works, hand-over takes a polling delay there.
    pub polling: Vec<PollingNote>,
}

/// A master where waiting callers poll: it refused the subscription to release
/// announcements (see [`Redlock::waiting_notes`](crate::Redlock::waiting_notes)).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PollingNote {
    /// Position of the master in the configured list.
    pub node: usize,
    /// Why `SUBSCRIBE` failed there (typically `NOPERM`).
    pub reason: crate::error::node_failure::NodeFailure,
}

impl fmt::Display for PollingNote {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "master {}: waiters poll (SUBSCRIBE refused: {}); allow pub/sub on the lock channels for hand-over on release",
            self.node, self.reason
        )
    }
}

impl HealthReport {
    /// True when no problem was found.
    pub fn is_healthy(&self) -> bool {
        self.problems.is_empty() && self.nodes.iter().all(|n| n.problems.is_empty())
    }

    /// Every problem, with the node it concerns (`None` for the whole set).
    pub fn all_problems(&self) -> Vec<(Option<usize>, &Problem)> {
        let set = self.problems.iter().map(|p| (None, p));
        let nodes = self
            .nodes
            .iter()
            .flat_map(|n| n.problems.iter().map(move |p| (Some(n.node), p)));
        set.chain(nodes).collect()
    }
}

impl fmt::Display for HealthReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let problems = self.all_problems();
        if problems.is_empty() {
            return write!(f, "{} masters, no problem found", self.nodes.len());
        }
        write!(f, "{} problem(s):", problems.len())?;
        for (node, p) in problems {
            match node {
                Some(i) => write!(f, " node {i}: {p};")?,
                None => write!(f, " {p};")?,
            }
        }
        Ok(())
    }
}
