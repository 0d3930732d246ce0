//! What one model instance is: the deployment (members, clients, lock kind, who reaches
//! whom), the protocol variant (the design, or a negative control with one mechanism
//! changed), the bounds that keep the state space finite (horizon, faults, message losses),
//! and how it is searched.

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
    /// The quorum members, in order.
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
    /// One member is a Sentinel group (a primary and one replica).
    pub group: Option<GroupSpec>,
    /// One member is a Redis Cluster (two hash slots on two shards of a primary and a
    /// replica each). Not together with `group`, generations or commissioning.
    pub cluster: Option<ClusterSpec>,
    /// Connections may be torn down while the server still holds bytes written on them.
    pub generations: Option<Generations>,
    /// The operator's `commission`.
    pub commission: CommissionRule,
    /// When a client observes a master's persistence (`CONFIG GET appendfsync`).
    pub observe: Observe,
    /// Multi-resource acquisitions: the master grants all of the lock's keys or none.
    /// `false` is a negative control: a master that set some of them counts as a grant.
    pub all_or_nothing: bool,
    /// A batched renewal counts each lock's own extension result per member
    /// (`renewal::Inner::renew`'s tallies). `false` is a negative control: a member whose
    /// pipeline answered counts for every lock of the batch.
    pub batch_per_lock: bool,
    /// How the checker searches.
    pub search: Search,
    /// What the checker must conclude for this instance.
    pub expect: Expect,
}

/// A member's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MasterSpec {
    /// `appendonly yes` + `appendfsync always` in its configuration file: a restart loses
    /// nothing (unless `appendfsync` was switched at run time: [`Faults::config_sets`]).
    pub durable: bool,
    /// How the master starts.
    pub start: MasterStart,
}

/// The state a master is in when the run starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MasterStart {
    /// Commissioned by an operator (`since = 0`, vouched) and verified by every client: it
    /// counts at once, and every other member remembers it. The steady state.
    Commissioned,
    /// Booted just now, no marker: first seen by anyone, nobody has verified it yet, nobody
    /// remembers it.
    FirstSeen,
}

/// A client's configuration. Every client is a separate `Redlock` (its own guard views).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientSpec {
    /// The client's ttl, in milliseconds.
    pub ttl_ms: u64,
    /// How many acquisitions it attempts per lock, one after the other.
    pub acquisitions: u8,
    /// How many extensions (keep-alive renewals) it sends per held lock.
    pub extensions: u8,
    /// `extend_with(ttl)`: the ttl of its extensions, when not its own.
    pub extend_ttl_ms: Option<u64>,
    /// Read or write (read-write locks); `Write` for every other kind.
    pub mode: Mode,
    /// Fenced acquisitions (counter increment, token, write-back).
    pub fenced: bool,
    /// The locks it takes, as resource sets (bit `r`: resource `r`); `0` = no such lock.
    /// Two locks are held side by side and renewed in one batch.
    pub locks: [u8; 2],
    /// The members it can reach, as a bit set (its partition). Requests to the others
    /// fail at once (connection refused).
    pub reach: u8,
    /// Behind a Sentinel group: still connected to the old primary after a failover (the
    /// old primary is cut off from its sentinels and replica, not from this client).
    /// Everything it sends to the group goes there: its writes, its verifications, and
    /// the ttl reads of its verifications of other members (`group::server`).
    pub keeps_old_primary: bool,
}

/// Every member, as a reach set.
pub const ALL: u8 = u8::MAX;

/// The access a client asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// Shared access (read-write locks).
    Read,
    /// Exclusive access (mutex, writer, permit).
    Write,
}

/// What each master admits, per resource.
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
    /// Shared epochs and ttl records (`notes/guard-v3.md`, with knobs for the findings
    /// and controls).
    Epochs(Guard),
    /// Negative control (b): the old guard (`src/guard.rs`): each client's own `run_id`
    /// view and own ttl, a marker written unconditionally by whoever verifies.
    Old,
}

/// The epoch guard's knobs. [`crate::GUARD`] is the design.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Guard {
    /// How `since` is derived from `uptime_in_seconds` after a restart.
    pub anchor: Anchor,
    /// Every new connection is verified before its grants count. `false` is a negative
    /// control: grants count while the epoch read back matches.
    pub per_connection: bool,
    /// No key with ttl `t` is set (or extended to a longer ttl) until a ttl record `>= t`,
    /// sent less than `t/2` ago, is acknowledged by a quorum. `false`: the record travels
    /// with each `SET` (the first model's finding 1).
    pub record_first: bool,
    /// Which readers count toward the `trusted_readers_needed(N, Q)` a verification needs.
    pub readers: ReaderRule,
    /// `deployment_max_ttl`, if declared.
    pub declared_ms: Option<u64>,
    /// The other members' records are read (and, in the vouch control, the vouch written)
    /// at the instant `guard.lua` answers, instead of by requests of their own (see the
    /// README, "Abstractions").
    pub atomic_reads: bool,
}

/// Which readers of ttl records count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReaderRule {
    /// v3 (`guard-v3.md` on main): `rules::reader_trusted` — the marker is present, of the
    /// same incarnation (`rules::same_incarnation`), and its epoch began at least
    /// `rules::trust_age_ms(Tmax)` ago (a commissioned master's at 0).
    Trusted,
    /// The first v3 design, kept as a negative control: a reader is also trusted when its
    /// epoch was vouched for, and a verification with enough trusted readers vouches for
    /// the verified master's epoch (`vouch.lua`: records the ttl it found and sets
    /// `vouched`, compare-and-set on the epoch).
    Vouched,
    /// v2 (issue 19 finding 1): every reader that answers.
    Any,
    /// Negative control: a marker of the live server suffices (no age).
    NoAge,
}

/// The anchor of a restarted master's new epoch, from `now` and `uptime_in_seconds`
/// (which Redis computes as the difference of two whole-second clocks, so the real uptime
/// is within one second of it either way).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// `now − (uptime + 1)·1000`, as `guard-v2.md` wrote it ("boot, rounded down").
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

/// A Sentinel group as one member: a primary with one replica, asynchronous replication.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupSpec {
    /// Which member it is.
    pub member: usize,
    /// `WAIT 1` after every acquisition (the grant counts only once the replica has it).
    pub wait_acquire: bool,
    /// `WAIT 1` after every extension and batched renewal. `false` is issue 19's
    /// finding 2.
    pub wait_extend: bool,
    /// A grant through the group counts only if `INFO replication`, read back after it on
    /// the same connection, shows the identity the guard verified (`run_id/master_replid`:
    /// every promotion draws a new replication id), judged with the epoch read back
    /// (`RestartGuard::admit_seen`). `false`: the epoch read back and the connection
    /// generation alone (`RestartGuard::admit`), a negative control.
    pub grant_identity: bool,
    /// The old primary is demoted at the failover (the sentinels reach it again and make it
    /// a replica of the new primary): it refuses writes (`READONLY`) on the connections of
    /// the clients that keep it (`ClientSpec::keeps_old_primary`), which stay open and
    /// idle, and a second failover is a failback (`group::failover`). `false`: it is cut
    /// off and keeps serving those clients as a primary; one failover per run.
    pub failback: bool,
    /// The group is believed as a reader of ttl records only if `WAIT`, sent after
    /// `ttl_read.lua` on the same connection, is acknowledged by every replica the
    /// sentinels name (`group::reader_confirmed`): an old primary cut off after a
    /// failover, which misses every record written on the new primary since, is then not
    /// trusted (a reader fewer; its records still count as evidence). `false`: the marker
    /// alone decides (the old primary keeps its identity and its old epoch, so it is
    /// trusted), the negative control `control-sentinel-stale-reader`.
    pub wait_reads: bool,
}

/// A Redis Cluster as one member (`notes/cluster.md`): two hash slots, `s0` and `s1`, on
/// two shards, each a primary with one replica (asynchronous replication). Resource `r`
/// lives in slot `r mod 2`; a lock's resources share one slot. The guard runs slot by slot:
/// each slot has its own epoch marker, and each client its own view of each slot, tied to
/// the node it reaches the slot on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterSpec {
    /// Which member it is.
    pub member: usize,
    /// `WAIT 1` on the slot's shard after every acquisition.
    pub wait_acquire: bool,
    /// `WAIT 1` after every extension and batched renewal.
    pub wait_extend: bool,
    /// Where the epochs live.
    pub epochs: SlotEpochs,
    /// What a client does with a `MOVED` answer.
    pub moved: Moved,
    /// A slot whose marker was last confirmed by another node (its shard failed over, or
    /// it moved) begins a new epoch (`guard.lua` with `replicated`). `false` is negative
    /// control (c): the marker that came with the slot is confirmed, and the slot counts at
    /// once.
    pub node_change_new_epoch: bool,
    /// Where the member's ttl records live.
    pub records: Records,
    /// The identity of a node that `guard.lua` keeps in the marker (the server that last
    /// confirmed the epoch) and, with `grant_identity`, every grant answers with.
    pub identity: Identity,
    /// Every grant answers with the identity of the node that made it, and counts only if
    /// it is the one verified for the slot (with the epoch read back). `false`: the epoch
    /// read back and the connection generation alone (`RestartGuard::admit` as it is).
    pub grant_identity: bool,
    /// The shards that may fail over (`Faults::failovers` in all), as a bit set. A second
    /// failover of a shard is a failback: the old primary, fully resynchronised from the
    /// new one (losing what only it had), is promoted back.
    pub fail_shards: u8,
    /// The slots that may move (`Faults::moves` in all), as a bit set.
    pub move_slots: u8,
}

/// A cluster node's identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// `run_id` (`INFO server`): changes only when the server restarts.
    RunId,
    /// `run_id/master_replid`: also changes at every promotion (a new replication id), as
    /// behind a Sentinel group (`guard-v3.md`, review finding 4).
    Replid,
}

/// Where a cluster member's epoch markers live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotEpochs {
    /// One marker per slot (same hash tag as the slot's lock keys), read back atomically
    /// with every grant in that slot: the design.
    PerSlot,
    /// Negative control (a): one marker for the whole member, in slot `s0`; a grant in
    /// another slot counts against the member's epoch (read from `s0`, not atomically).
    PerMember,
}

/// What a client does with a `MOVED` answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moved {
    /// The vote fails, the slot map is refreshed, and the slot is verified again on its
    /// new node before any of its grants count: the design.
    Reverify,
    /// Negative control (b): the request is resent on the new node (a cluster client's
    /// redirect), and its grant counts while the epoch read back is the one verified.
    Follow,
}

/// Where a cluster member's ttl records live, and which marker a reader's answer is
/// trusted by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Records {
    /// Per member, in one designated slot, written by record rounds and refreshed in
    /// passing by writes in that slot; `ttl_read.lua` answers with the marker of slot
    /// `trust`. The design: `trust == slot` (the records and the marker they are trusted
    /// by are read atomically, in one script). `trust != slot` is control (d).
    Member {
        /// The slot holding the records.
        slot: u8,
        /// The slot whose marker the reader answers with.
        trust: u8,
    },
    /// The comparison: every lock records its ttl in its own slot (atomically with its
    /// keys); a reader answers with the longest record of every slot, trusted only if
    /// every slot's marker is.
    PerSlot,
}

/// Connection generations: a connection torn down on an I/O error while the server (or a
/// proxy) still holds bytes written on it, which it may still process later, after
/// requests written on the next generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Generations {
    /// The fix for issue 19's finding 5: a release goes out on the generation that
    /// carried the acquire; once that generation is gone with the acquire unanswered, the
    /// release is not sent to that master (its key runs out by ttl, and the release says
    /// so). `false`: the release goes out on the current generation.
    pub release_on_acquire_generation: bool,
}

/// The checks an operator's `commission` (without `force`) makes before it begins an
/// epoch since 0 (`RestartGuard::commission`, `guard-v3.md` "Commissioning: only when no
/// lock can be held"). Every version refuses a master holding lock keys or whose marker
/// names an epoch begun by anything other than a first sight (`commission.lua`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommissionRule {
    /// Refused when another member remembers the server in service (its `run_id`, or its
    /// address) — issue 19 finding 7.
    pub memory: bool,
    /// Refused when any member holds a live ttl record (a lock may be held).
    pub live_records: bool,
    /// Refused when no held lock can be ruled out: fewer than `trusted_readers_needed`
    /// other members are trusted readers, and some member's epoch records a known loss.
    pub ruled_out: bool,
}

impl CommissionRule {
    /// `guard-v3.md` on main: every check.
    pub const DESIGN: Self = Self {
        memory: true,
        live_records: true,
        ruled_out: true,
    };
}

/// When a client observes a master's persistence (`CONFIG GET appendonly/appendfsync`).
/// An observation that says "not always" clears `durable` in the marker (compare-and-set
/// on the epoch) before the client counts that master's grants again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observe {
    /// Negative control (v2): only at verification.
    Verify,
    /// `guard-v3.md`: at verification, with every ttl record (a record round or a refresh
    /// in passing) and with every extension (renewal tick).
    Note,
    /// With every write a grant counts on (acquisitions too).
    EveryWrite {
        /// The clear is on disk (`WAITAOF 1 0` after it) before a grant counts: the
        /// proposed fix. `false` is the design's clear, itself written under `everysec`.
        fsync_clear: bool,
    },
}

/// Bounds on the faults the environment injects over a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Faults {
    /// Data-loss events: restarts of a non-durable master (losing its lock keys, ttl
    /// records, counters and memory, with or without its epoch marker) and `FLUSHALL`.
    pub data_losses: u8,
    /// Restarts of durable masters (they lose nothing, but break every connection,
    /// unless `appendfsync` was switched at run time).
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
    /// `CONFIG SET appendfsync everysec` on a durable master, at run time.
    pub config_sets: u8,
    /// A member's server replaced by a new, empty one at a new address (the deployment's
    /// configuration names the new server in the lost one's place): nobody remembers it.
    pub replacements: u8,
    /// Attempts to commission a member (by an operator who reaches every member).
    pub commissions: u8,
    /// Sentinel failovers of the group member, or shard failovers of the cluster member.
    pub failovers: u8,
    /// Slots of the cluster member moved to the other shard (resharding).
    pub moves: u8,
    /// Connections torn down with bytes still on the server (with `generations`).
    pub teardowns: u8,
    /// The masters faults may hit, as a bit set. Masters with the same spec and the same
    /// clients are interchangeable, so faults on one of them stand for faults on any.
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

/// How the checker searches an instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Search {
    /// Every reachable state: depth-first when the instance must hold, breadth-first when
    /// it must fail (shortest counterexample).
    Exhaustive,
    /// Every reachable state, depth-first even when the instance must fail (breadth-first
    /// would keep too many states in memory); the counterexample is then shrunk.
    DepthFirst,
    /// Random walks from the initial state to the horizon (`spawn_simulation`, seeded):
    /// `states` states in all.
    Simulation {
        /// The seed of the first walk.
        seed: u64,
        /// States to generate.
        states: usize,
    },
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
    /// Number of members.
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

    /// The epoch guard's knobs, when it is on.
    pub fn epochs(&self) -> Option<Guard> {
        match self.guard {
            GuardMode::Epochs(g) => Some(g),
            _ => None,
        }
    }

    /// Whether the epoch guard is on.
    pub fn v2(&self) -> bool {
        self.epochs().is_some()
    }

    /// Whether a record round precedes keys whose ttl no quorum has recorded.
    pub fn record_first(&self) -> bool {
        self.epochs().is_some_and(|g| g.record_first)
    }

    /// Whether client `c` reaches member `m`.
    pub fn reaches(&self, c: usize, m: usize) -> bool {
        self.clients[c].reach & (1 << m) != 0
    }

    /// Whether member `m` is the Sentinel group.
    pub fn is_group(&self, m: usize) -> bool {
        self.group.is_some_and(|g| g.member == m)
    }

    /// Whether member `m` is the Redis Cluster.
    pub fn is_cluster(&self, m: usize) -> bool {
        self.cluster.is_some_and(|g| g.member == m)
    }

    /// Places a client keeps a connection queue and a guard view for: one per member, and
    /// one more for the cluster's second slot (place `n`). A plain member's place is its
    /// index; the cluster's slot `s0` is at the member's index.
    pub fn places(&self) -> usize {
        self.n() + usize::from(self.cluster.is_some())
    }

    /// The place of hash slot `hs` on member `m` (any slot of a plain member: `m`).
    pub fn place(&self, m: usize, hs: u8) -> usize {
        if hs == 1 && self.is_cluster(m) {
            self.n()
        } else {
            m
        }
    }

    /// The member a place belongs to.
    pub fn member_of(&self, p: usize) -> usize {
        match self.cluster {
            Some(g) if p >= self.n() => g.member,
            _ => p,
        }
    }

    /// The hash slot of a place (0 for a plain member).
    pub fn slot_at(&self, p: usize) -> u8 {
        u8::from(p >= self.n())
    }

    /// Whether place `p` is a slot of the cluster member.
    pub fn in_cluster(&self, p: usize) -> bool {
        self.is_cluster(self.member_of(p))
    }

    /// The hash slot of a lock's resources (resource `r` is in slot `r mod 2`).
    pub fn hash_slot(res: u8) -> u8 {
        (res.trailing_zeros() % 2) as u8
    }

    /// The place whose guard view a grant at place `p` counts against: the slot's own,
    /// or the member's (slot `s0`) in control (a).
    pub fn epoch_place(&self, p: usize) -> usize {
        match self.cluster {
            Some(g) if g.epochs == SlotEpochs::PerMember && self.in_cluster(p) => g.member,
            _ => p,
        }
    }

    /// The place member `m` keeps the ttl records of a lock in hash slot `hs` at.
    pub fn record_place(&self, m: usize, hs: u8) -> usize {
        match self.cluster {
            Some(g) if g.member == m => match g.records {
                Records::Member { slot, .. } => self.place(m, slot),
                Records::PerSlot => self.place(m, hs),
            },
            _ => m,
        }
    }

    /// Whether writes at place `p` write ttl records (for a cluster slot: it is where the
    /// member's records live).
    pub fn records_at(&self, p: usize) -> bool {
        match self.cluster {
            Some(g) if self.in_cluster(p) => match g.records {
                Records::Member { slot, .. } => self.slot_at(p) == slot,
                Records::PerSlot => true,
            },
            _ => true,
        }
    }

    /// Whether members remember each other (only tracked when commissioning is in play).
    pub fn tracks_memory(&self) -> bool {
        self.faults.commissions > 0 && self.commission.memory
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

impl ClientSpec {
    /// The lock slots it uses.
    pub fn slots(&self) -> usize {
        self.locks.iter().filter(|&&l| l != 0).count()
    }
}
