//! The model's state: global time, every master's data, every client's phase and guard
//! views, and the requests in flight on each client–master connection.
//!
//! Times are milliseconds. Real time is `tick · tick_ms`; a client's clock is real time (its
//! rate relative to the masters' is folded into the masters' gains); a master's clock is
//! real time plus its gain, relative to [`BASE_MS`].

use crate::config::Mode;

/// The masters' clocks, in absolute milliseconds, at real time zero (a Unix time in
/// whole seconds, so that `uptime_in_seconds` rounds as it does on a real server).
pub const BASE_MS: u64 = 1_700_000_000_000;

/// A lock value: random and unique per acquisition in the library; here
/// `client · 16 + acquisition`.
pub type Value = u8;

/// The whole system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// Ticks since the start.
    pub tick: u8,
    /// The masters.
    pub masters: Vec<Master>,
    /// The clients.
    pub clients: Vec<Client>,
    /// Requests in flight, FIFO per connection: `chans[c · n + m]` from client `c` to
    /// master `m`. A restart of `m` breaks its connections and empties these.
    pub chans: Vec<Vec<Req>>,
    /// Faults still available.
    pub budget: Budget,
    /// The next fresh epoch id (epochs are never reused).
    pub next_epoch: u8,
    /// What the properties look at.
    pub history: History,
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
}

/// Facts about the past that properties need.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct History {
    /// 1 once any acquisition has succeeded.
    pub acquired: u8,
    /// Distinct clients that have held the lock.
    pub holders: u8,
    /// The largest fencing token handed out so far.
    pub max_token: u64,
    /// A holder was handed a token not above an earlier holder's.
    pub token_regressed: bool,
    /// `(master, victim, culprit)`: an operation carrying `culprit`'s value changed an
    /// entry that held `victim`'s.
    pub overwrite: Option<(u8, Value, Value)>,
}

/// One Redis master.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Master {
    /// The incarnation (`run_id`): changes at every restart.
    pub run: u8,
    /// Master clock (relative to [`BASE_MS`]) at the last boot.
    pub boot: i64,
    /// How far its clock is ahead of real time.
    pub gain: i64,
    /// The lock entries on the one resource: `(value, mode, expiry on this clock)`,
    /// sorted. A mutex key is one entry; readers and permits are one entry each.
    pub holders: Vec<(Value, Mode, i64)>,
    /// The v2 epoch marker (`{prefix}guard`).
    pub marker: Option<Marker>,
    /// The old guard's marker: the `run_id` the last verifier wrote.
    pub old_marker: Option<u8>,
    /// The ttl records (`{prefix}ttls`): `(ttl, score)`, sorted by ttl.
    pub records: Vec<(u64, i64)>,
    /// The fencing counter of the resource.
    pub counter: u64,
}

/// The v2 epoch marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Marker {
    /// The epoch id.
    pub epoch: u8,
    /// The incarnation that last confirmed the epoch.
    pub run: u8,
    /// Master time at which the epoch began (the quarantine anchor), relative to
    /// [`BASE_MS`]; `-BASE_MS` (absolute 0) for a commissioned master.
    pub since: i64,
    /// Every incarnation that confirmed the epoch persisted every write.
    pub durable: bool,
}

/// One client.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// What it is doing.
    pub phase: Phase,
    /// Acquisitions started so far.
    pub started: u8,
    /// Its restart-guard view of each master.
    pub views: Vec<View>,
    /// The longest ttl this client has used (it enters every quarantine).
    pub longest_ms: u64,
    /// Per master, the last successful ttl record it sent: `(send time, ttl)`. The hot
    /// path skips the record while `rules::record_due` says so.
    pub recorded: Vec<Option<(i64, u64)>>,
}

/// A client's phase.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Not holding, nothing in progress.
    Idle,
    /// A record round is open (the fix for finding 1): then `next`.
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
    /// An extension of this lock.
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

/// An open round: a request sent to every master, votes coming in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Round {
    /// The lock's value.
    pub value: Value,
    /// When the round started (real time).
    pub start: i64,
    /// The round's ttl.
    pub ttl: u64,
    /// Masters that said yes (and count).
    pub yes: u8,
    /// Masters that said no, failed, or whose yes does not count.
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

    /// Whether master `m` has not answered yet.
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

/// A client's restart-guard view of one master (its connection and what it verified).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct View {
    /// v2: the epoch verified on the current connection. Old guard: the `run_id`.
    pub verified: Option<u8>,
    /// Local time from which grants count (the end of a quarantine).
    pub counts_from: i64,
    /// A verification in progress.
    pub verify: Verify,
    /// Old guard: the `run_id` of the last verification, kept while a new one runs.
    pub last_run: Option<u8>,
    /// Old guard: the marker was missing (not changed) when the verification began.
    pub marker_gone: bool,
}

/// A verification in progress.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verify {
    /// None.
    Idle,
    /// `guard.lua` (v2) or `INFO` + `SET marker` (old) sent.
    Script,
}

/// A request on a connection. Its reply is delivered with it (or lost); a request may
/// also arrive long after its round is over, and then acts on the master all the same.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Req {
    /// Acquire: `SET NX PX` (hot path, with a ttl record before it when due) or the
    /// acquire script (record, admission, counter increment); the epoch is read back.
    Acquire {
        /// Our value.
        value: Value,
        /// The ttl.
        ttl: u64,
        /// Read or write.
        mode: Mode,
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
    /// `extend.lua` (or `SET XX` in control (c)).
    Extend {
        /// Our value.
        value: Value,
        /// The new ttl.
        ttl: u64,
    },
    /// `release.lua`: delete our entry.
    Release {
        /// Our value.
        value: Value,
    },
    /// `guard.lua` (v2), or `INFO server` + `SET marker run_id` (old guard).
    Verify,
}

impl Req {
    /// The value the request carries, if any.
    pub fn value(&self) -> Option<Value> {
        match *self {
            Req::Acquire { value, .. }
            | Req::Fence { value, .. }
            | Req::Extend { value, .. }
            | Req::Release { value } => Some(value),
            Req::Verify | Req::Record { .. } => None,
        }
    }
}

impl State {
    /// Real time now.
    pub fn now(&self, tick_ms: u64) -> i64 {
        i64::from(self.tick) * tick_ms as i64
    }
}

impl Hold {
    /// Whether the lock may be used at real time `now`.
    pub fn live(&self, now: i64) -> bool {
        now < self.deadline
    }
}

impl Client {
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
}
