//! The instances `make model` checks: the protocol as designed (every property must
//! hold), the findings (the design as first written: each must find its counterexample),
//! and the negative controls (one mechanism switched off: each must find its
//! counterexample).
//!
//! - `three` — the first model's instances on three masters.
//! - `losses` — guard v3 with two losses and per-client partitions, on three masters
//!   (every interleaving) and five (random walks).
//! - `members` — durability observed at run time, a Sentinel group that fails over.
//! - `locks` — multi-resource locks, two locks under one batched renewal, connection
//!   generations.
//! - `cluster` — a Redis Cluster member: per-slot epochs through a shard failover and a
//!   slot move, `MOVED`, where the member's ttl records live.

mod cluster;
mod commission;
mod locks;
mod losses;
mod members;
mod three;

use crate::config::*;

/// How big the instances are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// Seconds each: for unit tests in debug builds.
    Tiny,
    /// The default of `make model`: a few minutes in all, release build, 2 cores.
    Default,
    /// Longer horizons, more faults and operations (`MODEL_SIZE=large`).
    Large,
}

/// The epoch guard as `notes/guard-v3.md` on main designs it (with the first model's two
/// fixes: records before keys, a boot anchor never before the boot): readers trusted by
/// age, no vouching.
pub const V3: Guard = Guard {
    anchor: Anchor::Safe,
    per_connection: true,
    record_first: true,
    readers: ReaderRule::Trusted,
    declared_ms: None,
    atomic_reads: true,
};

/// An instance's name (its `name:` is what `make model --only` matches, and what the
/// claims ledger in `src/safety.rs` cites) and one line on what it checks.
#[derive(Debug, Clone, Copy)]
pub struct Named {
    /// The instance's name.
    pub name: &'static str,
    /// What it checks.
    pub about: &'static str,
}

/// The guard as designed.
pub const GUARD: GuardMode = GuardMode::Epochs(V3);

/// A client with `ttl_ms`, one lock on resource 0, one acquisition, no extension, every
/// member in reach.
pub fn client(ttl_ms: u64) -> ClientSpec {
    ClientSpec {
        ttl_ms,
        acquisitions: 1,
        extensions: 0,
        extend_ttl_ms: None,
        mode: Mode::Write,
        fenced: false,
        locks: [1, 0],
        reach: ALL,
        keeps_old_primary: false,
    }
}

/// Three commissioned masters without persistence, a 2 s and a 1 s client, guard v3,
/// one data loss on master 0 (restart or flush), one lost and one duplicated message.
pub fn base(id: Named) -> Config {
    let Named { name, about } = id;
    let lossy = MasterSpec {
        durable: false,
        start: MasterStart::Commissioned,
    };
    Config {
        name,
        about,
        tick_ms: 500,
        horizon: 6,
        masters: vec![lossy; 3],
        clients: vec![client(2000), client(1000)],
        kind: Kind::Mutex,
        quorum: QuorumRule::Library,
        guard: GUARD,
        extend: ExtendMode::Script,
        drift: DriftMode::Library { factor: 0.01 },
        faults: Faults {
            data_losses: 1,
            durable_restarts: 0,
            flush: true,
            keep_marker: true,
            gains: 0,
            gain_ms: 0,
            config_sets: 0,
            replacements: 0,
            commissions: 0,
            failovers: 0,
            moves: 0,
            teardowns: 0,
            on: 0b001,
        },
        net: Net {
            losses: 1,
            duplicates: 1,
        },
        cancel: false,
        group: None,
        cluster: None,
        generations: None,
        commission: CommissionRule::DESIGN,
        observe: Observe::Note,
        all_or_nothing: true,
        batch_per_lock: true,
        search: Search::Exhaustive,
        expect: Expect::Holds,
    }
}

/// Three commissioned masters without persistence and issue 19 finding 1's shape at the
/// smallest size: c0 (2 s) reaches masters 0 and 1 only, c1 (1 s, two acquisitions)
/// reaches all three. Two data losses (restarts with or without the marker, `FLUSHALL`)
/// on masters 0 and 1 — every master c0's lock is on. Quiet network, three ticks.
pub fn two_losses(id: Named) -> Config {
    let mut cfg = base(id);
    cfg.clients = vec![
        ClientSpec {
            reach: 0b011,
            ..client(2000)
        },
        client(1000),
    ];
    cfg.faults.data_losses = 2;
    cfg.faults.flush = false;
    cfg.faults.on = 0b011;
    quiet(&mut cfg);
    cfg.horizon = 3;
    cfg.search = Search::DepthFirst;
    cfg
}

/// Five commissioned masters without persistence and issue 19 finding 1's partitions:
/// c0 (2 s) reaches masters 0–2, c1 (1 s, two acquisitions) reaches 0, 1, 3 and 4. Two
/// data losses (restarts with or without the marker, `FLUSHALL`) on masters 0 and 1, the
/// two that both clients reach (3 and 4 stand for each other, and so do 0 and 1). Quiet
/// network, three ticks. Searched by seeded random walks: every interleaving of five
/// masters does not fit (see the README).
pub fn five(id: Named) -> Config {
    let mut cfg = base(id);
    cfg.masters = vec![cfg.masters[0]; 5];
    cfg.clients = vec![
        ClientSpec {
            reach: 0b00111,
            ..client(2000)
        },
        ClientSpec {
            reach: 0b11011,
            ..client(1000)
        },
    ];
    cfg.faults.data_losses = 2;
    cfg.faults.flush = false;
    cfg.faults.on = 0b00011;
    quiet(&mut cfg);
    cfg.horizon = 3;
    cfg.search = Search::Simulation {
        seed: 19,
        states: 20_000_000,
    };
    cfg
}

/// How a finding or a control on a large instance looks for its counterexample: seeded
/// random walks (the counterexample is then shrunk). Where a counterexample exists,
/// walks weighted towards deliveries find it in seconds; an exhaustive search would first
/// go through most of the instance.
pub(crate) fn walks(cfg: &mut Config) {
    cfg.search = Search::Simulation {
        seed: 19,
        states: 50_000_000,
    };
}

/// For the default suite, an instance whose every interleaving takes minutes (Sentinel
/// failover: 73.5 million states; the batched renewal) is searched by seeded random walks
/// over `states` states; `MODEL_SIZE=large` checks every interleaving.
pub(crate) fn walks_unless_large(cfg: &mut Config, size: Size, states: usize) {
    if size != Size::Large {
        cfg.search = Search::Simulation { seed: 19, states };
    }
}

/// Every instance of a size: protocol instances first, then what must fail (the
/// findings against the design as written, and the negative controls).
pub fn suite(size: Size) -> Vec<Config> {
    let mut all = three::protocol(size);
    all.extend(losses::protocol(size));
    all.extend(commission::protocol(size));
    all.extend(members::protocol(size));
    all.extend(locks::protocol(size));
    all.extend(cluster::protocol(size));
    all.extend(three::findings(size));
    all.extend(losses::findings(size));
    all.extend(commission::findings(size));
    all.extend(members::findings(size));
    all.extend(locks::findings(size));
    all.extend(cluster::findings(size));
    all.extend(three::controls(size));
    all.extend(losses::controls(size));
    all.extend(commission::controls(size));
    all.extend(members::controls(size));
    all.extend(locks::controls(size));
    all.extend(cluster::controls(size));
    if size == Size::Tiny {
        all.iter_mut().for_each(tiny);
    }
    all
}

/// The first model's instances, checked every way at one tick (protocol) or just long
/// enough for their counterexample, in the unit tests.
const FIRST: &[(&str, u8)] = &[
    ("mutex-restart", 1),
    ("mutex-flush", 1),
    ("mutex-network", 1),
    ("fencing", 1),
    ("rwlock", 1),
    ("semaphore", 1),
    ("clocks", 1),
    ("first-seen", 1),
    ("finding-1-records-in-flight", 3),
    ("finding-2-boot-anchor", 2),
    ("control-a-guard-off", 2),
    ("control-b-old-guard", 2),
    ("control-c-set-xx", 0),
    ("control-d-semaphore-majority", 0),
    ("control-e-zero-drift", 3),
    ("control-f-no-connection-check", 0),
];

/// The cluster member's instances whose every interleaving at `t = 0` is small: the
/// protocol checked there, the findings and controls (whose shortest counterexamples all
/// happen at `t = 0`) searched breadth-first.
const CLUSTER: &[&str] = &[
    "cluster-lossy",
    "cluster-failback",
    "cluster-failback-run-id",
    "cluster-failback-epoch-only",
    "control-cluster-member-epoch",
    "control-cluster-moved-followed",
    "control-cluster-failover-kept",
];

/// For the unit tests (debug builds, seconds each): the first model's instances over a
/// short horizon, the cluster's at `t = 0`; every newer one by random walks at its own
/// horizon, briefly for the protocol, until the counterexample for the rest.
fn tiny(cfg: &mut Config) {
    if let Some(&(_, h)) = FIRST.iter().find(|(n, _)| *n == cfg.name) {
        cfg.horizon = h;
        return;
    }
    if CLUSTER.contains(&cfg.name) {
        cfg.horizon = 0;
        cfg.search = Search::Exhaustive;
        return;
    }
    let states = match cfg.expect {
        Expect::Holds => 100_000,
        Expect::Fails(_) => 20_000_000,
    };
    cfg.search = Search::Simulation { seed: 19, states };
}

fn quiet(cfg: &mut Config) {
    cfg.net = Net {
        losses: 0,
        duplicates: 0,
    };
}
