//! The instances `make model` checks: the protocol as designed (every property must
//! hold), and the negative controls (each must find its counterexample).

use crate::config::*;
use crate::model::{MUTEX, OVERWRITE, PERMITS};

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

/// The guard as designed, with the boot anchor the model needs to be safe.
pub const GUARD: GuardMode = GuardMode::V2 {
    anchor: Anchor::Safe,
    per_connection: true,
};

/// A client with `ttl_ms`, one acquisition, no extension.
pub fn client(ttl_ms: u64) -> ClientSpec {
    ClientSpec {
        ttl_ms,
        acquisitions: 1,
        extensions: 0,
        extend_ttl_ms: None,
        mode: Mode::Write,
        fenced: false,
    }
}

/// Three commissioned masters without persistence, a 1 s and a 2 s client, the v2 guard,
/// one data loss (restart or flush), one lost and one duplicated message.
pub fn base(name: &'static str, about: &'static str) -> Config {
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
            gains: 0,
            gain_ms: 0,
        },
        net: Net {
            losses: 1,
            duplicates: 1,
        },
        cancel: false,
        expect: Expect::Holds,
    }
}

/// Every instance of a size: protocol instances first, then the negative controls.
pub fn suite(size: Size) -> Vec<Config> {
    let mut all = vec![];
    all.extend(protocol(size));
    all.extend(controls(size));
    all
}

fn protocol(size: Size) -> Vec<Config> {
    let mut mutex = base(
        "mutex",
        "mutex, v2 guard: restarts with and without the marker, FLUSHALL, mixed ttls",
    );
    if size == Size::Tiny {
        mutex.horizon = 4;
        mutex.net = Net {
            losses: 0,
            duplicates: 0,
        };
    }
    vec![mutex]
}

fn controls(size: Size) -> Vec<Config> {
    let tiny = size == Size::Tiny;
    let mut a = base(
        "control-a-guard-off",
        "negative control (a): no restart guard, restarts without persistence",
    );
    a.guard = GuardMode::Off;
    a.faults.flush = false;
    a.expect = Expect::Fails(MUTEX);

    let mut b = base(
        "control-b-old-guard",
        "negative control (b): the old per-client guard (own run_id view, own ttl)",
    );
    b.guard = GuardMode::Old;
    b.clients[1].acquisitions = 2;
    b.expect = Expect::Fails(MUTEX);

    let mut c = base(
        "control-c-set-xx",
        "negative control (c): renewal by SET XX (overwrites whatever value is there)",
    );
    c.extend = ExtendMode::SetXx;
    c.clients[0].extensions = 1;
    c.faults.data_losses = 0;
    c.expect = Expect::Fails(OVERWRITE);

    let mut d = base(
        "control-d-semaphore-majority",
        "negative control (d): a majority quorum for a 2-permit semaphore on 3 masters",
    );
    d.kind = Kind::Semaphore(2);
    d.quorum = QuorumRule::Majority;
    d.clients = vec![client(2000), client(2000), client(2000)];
    d.faults.data_losses = 0;
    d.net = Net {
        losses: 0,
        duplicates: 0,
    };
    d.expect = Expect::Fails(PERMITS);

    let mut e = base(
        "control-e-zero-drift",
        "negative control (e): no drift allowance, a master clock running fast",
    );
    e.drift = DriftMode::Zero;
    e.faults = Faults {
        data_losses: 0,
        durable_restarts: 0,
        flush: false,
        gains: 1,
        gain_ms: 600,
    };
    e.expect = Expect::Fails(MUTEX);
    let _ = tiny;
    vec![a, b, c, d, e]
}
