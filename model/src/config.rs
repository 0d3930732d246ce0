//! What one model instance is: the deployment (masters, clients, lock kind), the protocol
//! variant (the real one, or a negative control with one mechanism changed), and the
//! bounds that keep the state space finite (horizon, faults, message losses).

use std::time::Duration;

/// One model instance.
#[derive(Debug, Clone)]
pub struct Config {
    /// Short name, used on the command line and in reports.
    pub name: &'static str,
    /// One line saying what this instance checks.
    pub about: &'static str,
    /// Real time between two ticks, in milliseconds. Every event happens on this grid.
    pub tick_ms: u64,
    /// Ticks after which time stops (the run still explores every interleaving up to it).
    pub horizon: u8,
    /// The masters, in order.
    pub masters: Vec<MasterSpec>,
    /// The clients, in order.
    pub clients: Vec<ClientSpec>,
    /// What each master admits.
    pub kind: Kind,
    /// How many grants a client needs.
    pub quorum: QuorumRule,
    /// The restart guard the clients run.
    pub guard: GuardMode,
    /// How a held lock is extended.
    pub extend: ExtendMode,
    /// The drift allowance the clients take off every validity.
    pub drift: DriftMode,
    /// Faults the environment may inject.
    pub faults: Faults,
    /// Message faults.
    pub net: Net,
    /// Clients may drop an acquisition mid-flight (a cancelled future); the round guard
    /// then releases every master.
    pub cancel: bool,
    /// What the checker must conclude for this instance.
    pub expect: Expect,
}

/// A master's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MasterSpec {
    /// `appendonly yes` + `appendfsync always`: a restart loses nothing.
    pub durable: bool,
    /// How the master starts.
    pub start: MasterStart,
}

/// The state a master is in when the run starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MasterStart {
    /// Commissioned by an operator (`since = 0`) and verified by every client: it counts
    /// at once. The steady state of a deployment.
    Commissioned,
    /// Booted just now, no marker: first seen by anyone, nobody has verified it yet.
    FirstSeen,
}

/// A client's configuration. Every client is a separate `Redlock` (its own guard views).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientSpec {
    /// The client's ttl, in milliseconds.
    pub ttl_ms: u64,
    /// How many acquisitions it attempts, one after the other.
    pub acquisitions: u8,
    /// How many extensions (keep-alive renewals) it sends per held lock.
    pub extensions: u8,
    /// `extend_with(ttl)`: the ttl of its extensions, when not its own.
    pub extend_ttl_ms: Option<u64>,
    /// Read or write (read-write locks); `Write` for every other kind.
    pub mode: Mode,
    /// Fenced acquisitions (counter increment, token, write-back).
    pub fenced: bool,
}

/// The access a client asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// Shared access (read-write locks).
    Read,
    /// Exclusive access (mutex, writer, permit).
    Write,
}

/// What each master admits, on one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// One holder: `SET NX`.
    Mutex,
    /// Many readers or one writer: read only with no writer, write only with no holder.
    ReadWrite,
    /// At most `k` holders per master.
    Semaphore(usize),
}

/// The quorum rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuorumRule {
    /// The library's: `majority(n)` for mutexes and read-write locks,
    /// `permit_quorum(n, k)` for semaphores.
    Library,
    /// Negative control (d): a majority, whatever the kind.
    Majority,
}

/// The restart guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardMode {
    /// Negative control (a): no guard.
    Off,
    /// The v2 design (`notes/guard-v2.md`): shared epochs, deployment-wide ttl records,
    /// persistence-aware restarts, per-connection verification.
    V2 {
        /// How `since` is derived from `uptime_in_seconds` after a restart.
        anchor: Anchor,
        /// Every new connection is verified before its grants count. `false` is a negative
        /// control: grants count while the epoch read back matches.
        per_connection: bool,
        /// The model's fix for finding 1: no key with ttl `t` is set or extended until a
        /// ttl record `>= t`, sent less than `t/2` ago, is acknowledged by a quorum (a
        /// record round first, when the cached records do not cover a quorum). `false` is
        /// the design as written: the record travels with each `SET` (hot path) or inside
        /// the script, so a verifier may read the other masters before it arrives.
        record_first: bool,
    },
    /// Negative control (b): the old guard (`src/guard.rs`): each client's own `run_id`
    /// view and own ttl, a marker written unconditionally by whoever verifies.
    Old,
}

/// The anchor of a restarted master's new epoch, from `now` and `uptime_in_seconds`
/// (which Redis computes as the difference of two whole-second clocks, so the real uptime
/// is within one second of it either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// `now − (uptime + 1)·1000`, as `guard-v2.md` writes it ("boot, rounded down").
    Note,
    /// `now − uptime·1000`.
    Uptime,
    /// `now − max(uptime − 1, 0)·1000`: never before the boot.
    Safe,
}

/// How a held lock is extended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtendMode {
    /// `extend.lua`: value-checked, never recreates, never shortens.
    Script,
    /// Negative control (c): `SET key value XX PX ttl`, whatever value is there.
    SetXx,
}

/// The drift allowance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DriftMode {
    /// `rules::drift_allowance(ttl, factor)`.
    Library {
        /// The drift factor.
        factor: f64,
    },
    /// Negative control (e): no allowance at all.
    Zero,
}

impl DriftMode {
    /// The factor the guard converts master time with.
    pub fn factor(self) -> f64 {
        match self {
            DriftMode::Library { factor } => factor,
            DriftMode::Zero => 0.0,
        }
    }

    /// The allowance for a lock with `ttl`.
    pub fn allowance(self, ttl: Duration) -> Duration {
        match self {
            DriftMode::Library { factor } => redquorum::rules::drift_allowance(ttl, factor),
            DriftMode::Zero => Duration::ZERO,
        }
    }
}

/// Bounds on the faults the environment injects over a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Faults {
    /// Data-loss events: restarts of a non-durable master (losing its lock keys, ttl
    /// records and counters, with or without its epoch marker) and `FLUSHALL`.
    pub data_losses: u8,
    /// Restarts of durable masters (they lose nothing, but break every connection).
    pub durable_restarts: u8,
    /// Whether `FLUSHALL` is among the data-loss events.
    pub flush: bool,
    /// Whether a restart without persistence may keep the epoch marker (an RDB or
    /// `everysec` file that has it, but not the last lock keys).
    pub keep_marker: bool,
    /// How many times a master's clock may jump ahead by `gain_ms`.
    pub gains: u8,
    /// The jump of a fast clock, in milliseconds.
    pub gain_ms: u64,
    /// The masters faults may hit, as a bit set. Masters with the same spec are
    /// interchangeable (every client sends to all of them), so faults on master 0 alone
    /// stand for faults on any of them.
    pub on: u8,
}

/// Bounds on message faults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Net {
    /// Requests or replies lost.
    pub losses: u8,
    /// Requests delivered twice.
    pub duplicates: u8,
}

/// What the checker must conclude.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Every `always` property holds and every `sometimes` property is witnessed.
    Holds,
    /// The named property has a counterexample.
    Fails(&'static str),
}

impl Config {
    /// Number of masters.
    pub fn n(&self) -> usize {
        self.masters.len()
    }

    /// Grants needed, from the library's rules (or a majority for control (d)).
    pub fn q(&self) -> usize {
        let n = self.n();
        match (self.quorum, self.kind) {
            (QuorumRule::Library, Kind::Semaphore(k)) => redquorum::rules::permit_quorum(n, k),
            _ => redquorum::rules::majority(n),
        }
    }

    /// Whether the v2 guard is on.
    pub fn v2(&self) -> bool {
        matches!(self.guard, GuardMode::V2 { .. })
    }

    /// Whether a record round precedes keys whose ttl no quorum has recorded.
    pub fn record_first(&self) -> bool {
        matches!(
            self.guard,
            GuardMode::V2 {
                record_first: true,
                ..
            }
        )
    }

    /// Every ttl a client uses, sorted.
    pub fn ttls(&self) -> Vec<u64> {
        let mut ttls: Vec<u64> = self
            .clients
            .iter()
            .flat_map(|c| [Some(c.ttl_ms), c.extend_ttl_ms])
            .flatten()
            .collect();
        ttls.sort_unstable();
        ttls.dedup();
        ttls
    }
}
