//! The model's state: global time, every server's data, every client's locks and guard
//! views, and the requests in flight on each client–member connection.
//!
//! Times are milliseconds. Real time is `tick · tick_ms`; a client's clock is real time (its
//! rate relative to the masters' is folded into the masters' gains); a master's clock is
//! real time plus its gain, relative to [`BASE_MS`].

use crate::config::Mode;

/// The masters' clocks, in absolute milliseconds, at real time zero (a Unix time in
/// whole seconds, so that `uptime_in_seconds` rounds as it does on a real server).
pub const BASE_MS: u64 = 1_700_000_000_000;

/// A lock value: random and unique per acquisition in the library; here
/// `client · 16 + lock · 8 + acquisition` (below 64).
pub type Value = u8;

/// The whole system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// Ticks since the start.
    pub tick: u8,
    /// The servers: one per member, then the Sentinel group's second server (its replica
    /// at the start), if any.
    pub masters: Vec<Master>,
    /// The clients.
    pub clients: Vec<Client>,
    /// Requests in flight on the current connection, FIFO: `chans[c · P + p]` from client
    /// `c` to place `p` (`P = Config::places()`: a member, or the cluster's second slot).
    /// A restart of the server breaks its connections and empties these.
    pub chans: Vec<Vec<Req>>,
    /// Requests written on a torn-down connection that the server still holds, as
    /// `(connection index, request)`, FIFO per connection; their replies are lost. Empty
    /// without generations.
    pub stale: Vec<(u8, Req)>,
    /// Faults still available.
    pub budget: Budget,
    /// The next fresh epoch id (epochs are never reused).
    pub next_epoch: u8,
    /// The Sentinel group has failed over: its replica is the primary, replication is cut.
    pub failed_over: bool,
    /// The cluster member's topology (unused without one).
    pub cluster: Cluster,
    /// What the properties look at.
    pub history: History,
    /// Each member's symmetry class (`0`: none); fixed for a run.
    pub classes: [u8; 8],
}

/// Faults left to inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Budget {
    /// Data-loss events (lossy restarts, flushes).
    pub data_losses: u8,
    /// Durable restarts.
    pub durable_restarts: u8,
    /// Clock jumps.
    pub gains: u8,
    /// Lost requests or replies.
    pub losses: u8,
    /// Duplicated requests.
    pub duplicates: u8,
    /// `CONFIG SET appendfsync everysec`.
    pub config_sets: u8,
    /// Servers replaced by new ones.
    pub replacements: u8,
    /// Commission attempts.
    pub commissions: u8,
    /// Failovers.
    pub failovers: u8,
    /// Slot moves.
    pub moves: u8,
    /// Connection teardowns.
    pub teardowns: u8,
}

/// A cluster member's topology, as the cluster sees it. Nodes: `0` = `A` and `1` = `A'`
/// (shard 0's first primary and its replica), `2` = `B` and `3` = `B'` (shard 1's). Each
/// node keeps one data set per hash slot (`cluster::server`), so that a slot's keys,
/// marker and records move as one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Cluster {
    /// The node serving each slot.
    pub owner: [u8; 2],
    /// Shards that have failed over (their replica is the primary), as a bit set.
    pub failed: u8,
    /// Shards that have failed back (their first primary is the primary again, after a full
    /// resynchronisation from the replica), as a bit set.
    pub back: u8,
    /// Old primaries cut off from their shard that still serve a slot to the clients that
    /// keep them (`ClientSpec::keeps_old_primary`): bit `node · 2 + slot`.
    pub cut: u8,
}

/// Facts about the past that properties need.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct History {
    /// 1 once any acquisition has succeeded.
    pub acquired: u8,
    /// Distinct clients that have held a lock.
    pub holders: u8,
    /// The largest fencing token handed out so far.
    pub max_token: u64,
    /// A holder was handed a token not above an earlier holder's.
    pub token_regressed: bool,
    /// `(master, victim, culprit)`: an operation carrying `culprit`'s value changed an
    /// entry that held `victim`'s.
    pub overwrite: Option<(u8, Value, Value)>,
}

/// One Redis server.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Master {
    /// The incarnation (`run_id`): changes at every restart. On a cluster node, its
    /// identity (`ClusterSpec::identity`): with the replication id, also at every
    /// promotion.
    pub run: u8,
    /// Master clock (relative to [`BASE_MS`]) at the last boot.
    pub boot: i64,
    /// How far its clock is ahead of real time.
    pub gain: i64,
    /// `appendfsync everysec` set at run time (its configuration file still says
    /// `always`): writes reach the disk only at the next fsync.
    pub everysec: bool,
    /// Its data set.
    pub data: Data,
    /// While `everysec`: what is on disk, which a crash comes back with.
    pub disk: Option<Box<Data>>,
    /// Values whose release this server answered (with generations: the property "no
    /// key outlives its completed release"), as a bit set.
    pub released: u64,
}

/// What a server stores (and replicates, and loses).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Data {
    /// The lock entries, sorted. A mutex key is one entry per resource; readers and
    /// permits are one entry each.
    pub holders: Vec<Entry>,
    /// The epoch marker (`{prefix}guard`).
    pub marker: Option<Marker>,
    /// The old guard's marker: the `run_id` the last verifier wrote.
    pub old_marker: Option<u8>,
    /// The ttl records (`{prefix}ttls`): `(ttl, score)`, sorted by ttl.
    pub records: Vec<(u64, i64)>,
    /// The fencing counter of resource 0.
    pub counter: u64,
    /// The members it remembers (`{prefix}members`), as a bit set of member indices.
    pub members: u8,
}

/// One lock entry on a master.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Entry {
    /// The resource.
    pub res: u8,
    /// The holder's value.
    pub value: Value,
    /// Read or write.
    pub mode: Mode,
    /// Expiry on this master's clock.
    pub expiry: i64,
}

/// Why an epoch began (`cause` in the marker).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Cause {
    /// A client saw no marker and had never verified one here.
    FirstSeen,
    /// The data was lost (no marker where a client had verified one), or a restart that
    /// may have lost keys.
    Lost,
    /// An operator commissioned it.
    Commissioned,
}

/// The epoch marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Marker {
    /// The epoch id.
    pub epoch: u8,
    /// The incarnation that last confirmed the epoch.
    pub run: u8,
    /// Master time at which the epoch began (the quarantine anchor), relative to
    /// [`BASE_MS`]; `-BASE_MS` (absolute 0) for a commissioned master.
    pub since: i64,
    /// Every incarnation that confirmed the epoch persisted every write, and every
    /// observation since said so.
    pub durable: bool,
    /// v3: the master's ttl records are known to cover every lock that can still be live.
    pub vouched: bool,
    /// Why it began.
    pub cause: Cause,
}

/// One client.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// Its locks (usually one).
    pub slots: Vec<Slot>,
    /// Its restart-guard view of each place (`Config::places`: each member, and the
    /// cluster's second slot): its connection and what it verified.
    pub views: Vec<View>,
    /// The longest ttl this client has used (it enters every quarantine).
    pub longest_ms: u64,
    /// Per place, the last successful ttl record it sent there: `(send time, ttl)`.
    pub recorded: Vec<Option<(i64, u64)>>,
    /// Connected to the Sentinel group's new primary (after a failover).
    pub on_new_primary: bool,
    /// Its slot map of the cluster member: the node it sends each slot's requests to.
    pub route: [u8; 2],
}

/// One lock of a client.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Slot {
    /// What it is doing.
    pub phase: Phase,
    /// Acquisitions started so far.
    pub started: u8,
    /// Members whose connection carrying this lock's acquire was torn down before the
    /// acquire was answered: it may still run there.
    pub orphans: u8,
}

/// A lock's phase.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Not holding, nothing in progress.
    Idle,
    /// A record round is open: then `next`.
    Recording(Round, Next),
    /// An acquire round is open.
    Acquiring(Round),
    /// A fenced acquisition's write-back round is open.
    Fencing {
        /// The acquire round's start (the deadline is measured from it).
        start: i64,
        /// The token being written back.
        token: u64,
        /// The write-back round.
        round: Round,
    },
    /// Holding the lock.
    Holding(Hold),
    /// Holding, with an extension round open.
    Extending(Hold, Round),
}

/// What a record round is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Next {
    /// An acquisition.
    Acquire,
    /// An extension of this lock to a longer ttl.
    Extend(Hold),
}

/// A held lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hold {
    /// The lock's value.
    pub value: Value,
    /// Real time after which it must not be used.
    pub deadline: i64,
    /// The fencing token (0 unfenced).
    pub token: u64,
    /// Extensions still to send.
    pub extensions_left: u8,
}

/// An open round: a request sent to every member, votes coming in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Round {
    /// The lock's value.
    pub value: Value,
    /// When the round started (real time).
    pub start: i64,
    /// The round's ttl.
    pub ttl: u64,
    /// Members that said yes (and count).
    pub yes: u8,
    /// Members that said no, failed, or whose yes does not count.
    pub no: u8,
    /// The largest token among the counted grants.
    pub token: u64,
}

impl Round {
    /// A round just started.
    pub fn new(value: Value, start: i64, ttl: u64) -> Self {
        Self {
            value,
            start,
            ttl,
            yes: 0,
            no: 0,
            token: 0,
        }
    }

    /// Whether member `m` has not answered yet.
    pub fn pending(&self, m: usize) -> bool {
        (self.yes | self.no) & (1 << m) == 0
    }

    /// Votes for.
    pub fn yes_count(&self) -> usize {
        self.yes.count_ones() as usize
    }

    /// Votes against (refusals, failures, grants that do not count).
    pub fn no_count(&self) -> usize {
        self.no.count_ones() as usize
    }
}

/// A client's restart-guard view of one member (its connection and what it verified).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct View {
    /// Epoch guard: the epoch verified on the current connection. Old guard: the `run_id`.
    pub verified: Option<u8>,
    /// Local time from which grants count (the end of a quarantine).
    pub counts_from: i64,
    /// A verification in progress.
    pub verify: Verify,
    /// Old guard: the `run_id` of the last verification, kept while a new one runs.
    pub last_run: Option<u8>,
    /// Old guard: the marker was missing (not changed) when the verification began.
    pub marker_gone: bool,
    /// This client has verified an epoch here before (`known_epoch`, kept across
    /// connections: a missing marker is then a loss, not a first sight).
    pub known: bool,
    /// On a cluster slot: the identity of the node the epoch was verified on.
    pub id: u8,
}

/// A verification in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verify {
    /// None.
    Idle,
    /// `guard.lua` (or the old guard's `INFO` + `SET marker`) sent.
    Script,
    /// `guard.lua` answered; the other members' ttl records are being read.
    Reading(Reading),
}

/// A verification reading the other members' ttl records (`ttl_read.lua`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reading {
    /// The epoch `guard.lua` confirmed or began.
    pub epoch: u8,
    /// Its anchor (master clock).
    pub since: i64,
    /// The master's clock when `guard.lua` ran.
    pub now_m: i64,
    /// The client's clock then.
    pub at: i64,
    /// The epoch was vouched for already.
    pub vouched: bool,
    /// The identity of the server `guard.lua` ran on.
    pub id: u8,
    /// Readers asked, as a bit set.
    pub asked: u8,
    /// Readers that answered.
    pub answered: u8,
    /// Readers that answered and are trusted.
    pub trusted: u8,
    /// The longest ttl any answering reader holds a live record of.
    pub longest: u64,
}

/// A request on a connection. Its reply is delivered with it (or lost); a request may
/// also arrive long after its round is over, and then acts on the master all the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Req {
    /// Acquire: `SET NX PX` (hot path, with a ttl record before it when due) or the
    /// acquire script (record, admission of every key, counter increment); the epoch is
    /// read back.
    Acquire {
        /// Our value.
        value: Value,
        /// The ttl.
        ttl: u64,
        /// Read or write.
        mode: Mode,
        /// The resources (bit set).
        res: u8,
        /// Write a ttl record first.
        record: bool,
        /// Increment the fencing counter.
        fenced: bool,
    },
    /// `record.lua`: a ttl record, on its own.
    Record {
        /// The ttl.
        ttl: u64,
    },
    /// `fence.lua`: raise the counter to `token` where our entry is.
    Fence {
        /// Our value.
        value: Value,
        /// The token.
        token: u64,
    },
    /// `extend.lua` (or `SET XX` in control (c)); a batched renewal carries a second lock
    /// in the same pipeline.
    Extend {
        /// Our value.
        value: Value,
        /// The other lock of the batch.
        also: Option<Value>,
        /// The new ttl.
        ttl: u64,
    },
    /// `release.lua`: delete our entries.
    Release {
        /// Our value.
        value: Value,
    },
    /// `guard.lua`, or `INFO server` + `SET marker run_id` (old guard).
    Verify,
    /// `INFO server` + `CONFIG GET` + `ttl_read.lua`, for the verification of place `of`.
    Read {
        /// The place (member, or cluster slot) being verified.
        of: u8,
    },
    /// `vouch.lua`: record `ttl` and set `vouched`, if the epoch is still `epoch`.
    Vouch {
        /// The epoch verified.
        epoch: u8,
        /// The deployment's longest ttl the verification found.
        ttl: u64,
    },
}

impl Req {
    /// The value the request carries, if any.
    pub fn value(&self) -> Option<Value> {
        match *self {
            Req::Acquire { value, .. }
            | Req::Fence { value, .. }
            | Req::Extend { value, .. }
            | Req::Release { value } => Some(value),
            Req::Verify | Req::Record { .. } | Req::Read { .. } | Req::Vouch { .. } => None,
        }
    }

    /// Whether it is a lock operation whose loss or duplication the protocol must survive.
    pub fn lock_op(&self) -> bool {
        matches!(
            self,
            Req::Acquire { .. } | Req::Extend { .. } | Req::Fence { .. }
        )
    }
}

impl State {
    /// Real time now.
    pub fn now(&self, tick_ms: u64) -> i64 {
        i64::from(self.tick) * tick_ms as i64
    }

    /// The oldest request still on the server from torn-down connection `chan`.
    pub fn stale_head(&self, chan: usize) -> Option<(usize, Req)> {
        self.stale
            .iter()
            .position(|&(i, _)| usize::from(i) == chan)
            .map(|p| (p, self.stale[p].1))
    }
}

impl Hold {
    /// Whether the lock may be used at real time `now`.
    pub fn live(&self, now: i64) -> bool {
        now < self.deadline
    }
}

impl Slot {
    /// A lock not taken yet.
    pub fn new() -> Self {
        Self {
            phase: Phase::Idle,
            started: 0,
            orphans: 0,
        }
    }

    /// The lock held at `now`, if any.
    pub fn held(&self, now: i64) -> Option<&Hold> {
        match &self.phase {
            Phase::Holding(h) | Phase::Extending(h, _) | Phase::Recording(_, Next::Extend(h))
                if h.live(now) =>
            {
                Some(h)
            }
            _ => None,
        }
    }

    /// The open round, if any.
    pub fn round(&self) -> Option<&Round> {
        match &self.phase {
            Phase::Acquiring(r)
            | Phase::Fencing { round: r, .. }
            | Phase::Extending(_, r)
            | Phase::Recording(r, _) => Some(r),
            _ => None,
        }
    }

    /// The open round, mutably.
    pub fn round_mut(&mut self) -> Option<&mut Round> {
        match &mut self.phase {
            Phase::Acquiring(r)
            | Phase::Fencing { round: r, .. }
            | Phase::Extending(_, r)
            | Phase::Recording(r, _) => Some(r),
            _ => None,
        }
    }
}

impl Default for Slot {
    fn default() -> Self {
        Self::new()
    }
}

impl Client {
    /// Whether every lock is idle.
    pub fn idle(&self) -> bool {
        self.slots.iter().all(|s| s.phase == Phase::Idle)
    }
}
