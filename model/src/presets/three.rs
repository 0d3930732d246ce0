//! The first model's instances, on three masters (where one data loss, the network and
//! the lock kinds can already fail), now under guard v3: the protocol instances, the two
//! findings against `guard-v2.md` as first written, and controls (a)–(f).

use super::{Named, Size, V3, base, client, quiet};
use crate::config::*;
use crate::model::{MUTEX, OVERWRITE, PERMITS};

pub(super) fn protocol(size: Size) -> Vec<Config> {
    let large = size == Size::Large;
    let mut restart = base(Named {
        name: "mutex-restart",
        about: "mutex, guard v3, 1 s and 2 s clients: a master restarts empty or keeping its marker",
    });
    restart.faults.flush = false;
    quiet(&mut restart);
    restart.horizon = 4;

    let mut flush = base(Named {
        name: "mutex-flush",
        about: "mutex, guard v3, 1 s and 2 s clients: FLUSHALL on a master that stays up",
    });
    flush.faults.keep_marker = false;
    quiet(&mut flush);
    flush.horizon = 4;

    let mut net = base(Named {
        name: "mutex-network",
        about: "mutex, 1 s client keeping alive with extend_with(2 s), a 2 s client: lost and duplicated messages, cancelled acquisitions",
    });
    net.faults.data_losses = 0;
    net.clients[1].extensions = 1;
    net.clients[1].extend_ttl_ms = Some(2000);
    net.cancel = true;
    net.horizon = 3;

    let mut fencing = base(Named {
        name: "fencing",
        about: "fenced mutex on durable masters (appendfsync always): one restart keeps everything",
    });
    fencing.masters.iter_mut().for_each(|m| m.durable = true);
    fencing.clients.iter_mut().for_each(|c| c.fenced = true);
    fencing.faults.data_losses = 0;
    fencing.faults.durable_restarts = 1;
    quiet(&mut fencing);
    fencing.horizon = 3;

    let mut rw = base(Named {
        name: "rwlock",
        about: "read-write lock: a 2 s reader and a 1 s writer; a master restarts",
    });
    rw.kind = Kind::ReadWrite;
    rw.clients = vec![
        ClientSpec {
            mode: Mode::Read,
            ..client(2000)
        },
        client(1000),
    ];
    if large {
        // Two readers beside the writer.
        rw.clients.push(ClientSpec {
            mode: Mode::Read,
            ..client(1000)
        });
    }
    rw.faults.flush = false;
    rw.faults.keep_marker = false;
    quiet(&mut rw);
    rw.horizon = 3;

    let mut sem = base(Named {
        name: "semaphore",
        about: "2-permit semaphore on 3 masters (quorum permit_quorum(3, 2) = 3), three clients",
    });
    sem.kind = Kind::Semaphore(2);
    sem.clients = vec![client(2000), client(1000), client(1000)];
    sem.faults.flush = false;
    sem.faults.keep_marker = false;
    if !large {
        sem.faults.data_losses = 0;
    }
    quiet(&mut sem);
    sem.horizon = 2;

    let mut clocks = base(Named {
        name: "clocks",
        about: "drift factor 0.3 (600 ms allowance on 2 s): a master clock jumps 600 ms ahead",
    });
    clocks.drift = DriftMode::Library { factor: 0.3 };
    clocks.clients = vec![client(2000), client(2000)];
    clocks.faults = Faults {
        data_losses: 0,
        gains: 1,
        gain_ms: 600,
        ..clocks.faults
    };
    quiet(&mut clocks);
    clocks.horizon = 4;

    let mut first = base(Named {
        name: "first-seen",
        about: "a master first seen at boot (no marker) beside two commissioned ones",
    });
    first.masters[2].start = MasterStart::FirstSeen;
    first.faults.data_losses = 0;
    quiet(&mut first);
    first.horizon = 4;

    let mut all = vec![restart, flush, net, fencing, rw, sem, clocks, first];
    if large {
        for cfg in &mut all {
            cfg.horizon += 1;
            cfg.faults.on = 0b111;
        }
        let mut both = base(Named {
            name: "mutex-everything",
            about: "mutex: restarts, FLUSHALL, lost and duplicated messages, on any master",
        });
        both.faults.on = 0b111;
        both.horizon = 4;
        all.push(both);
    }
    all
}

/// The design as `notes/guard-v2.md` writes it: each must find its counterexample.
pub(super) fn findings(_size: Size) -> Vec<Config> {
    let mut records = base(Named {
        name: "finding-1-records-in-flight",
        about: "guard-v2.md as written: the ttl record travels with the SET, so a verifier can read the other masters before a lock's record reaches them",
    });
    records.guard = GuardMode::Epochs(Guard {
        record_first: false,
        ..V3
    });
    records.faults.flush = false;
    quiet(&mut records);
    records.expect = Expect::Fails(MUTEX);

    let mut anchor = base(Named {
        name: "finding-2-boot-anchor",
        about: "guard-v2.md as written: since = now - (uptime + 1) s lies before the boot",
    });
    anchor.guard = GuardMode::Epochs(Guard {
        anchor: Anchor::Note,
        ..V3
    });
    anchor.faults.flush = false;
    quiet(&mut anchor);
    anchor.expect = Expect::Fails(MUTEX);
    vec![records, anchor]
}

pub(super) fn controls(_size: Size) -> Vec<Config> {
    let mut a = base(Named {
        name: "control-a-guard-off",
        about: "negative control (a): no restart guard, restarts without persistence",
    });
    a.guard = GuardMode::Off;
    a.faults.flush = false;
    quiet(&mut a);
    a.expect = Expect::Fails(MUTEX);

    let mut b = base(Named {
        name: "control-b-old-guard",
        about: "negative control (b): the old per-client guard (own run_id view, own ttl)",
    });
    b.guard = GuardMode::Old;
    b.clients[1].acquisitions = 2;
    b.faults.keep_marker = false;
    quiet(&mut b);
    b.expect = Expect::Fails(MUTEX);

    let mut c = base(Named {
        name: "control-c-set-xx",
        about: "negative control (c): renewal by SET XX (overwrites whatever value is there)",
    });
    c.extend = ExtendMode::SetXx;
    c.clients[0].extensions = 1;
    c.faults.data_losses = 0;
    quiet(&mut c);
    c.expect = Expect::Fails(OVERWRITE);

    let mut d = base(Named {
        name: "control-d-semaphore-majority",
        about: "negative control (d): a majority quorum for a 2-permit semaphore on 3 masters",
    });
    d.kind = Kind::Semaphore(2);
    d.quorum = QuorumRule::Majority;
    d.clients = vec![client(2000), client(2000), client(2000)];
    d.faults.data_losses = 0;
    quiet(&mut d);
    d.expect = Expect::Fails(PERMITS);

    let mut e = base(Named {
        name: "control-e-zero-drift",
        about: "negative control (e): the clocks instance with no drift allowance",
    });
    e.drift = DriftMode::Zero;
    e.clients = vec![client(2000), client(2000)];
    e.faults = Faults {
        data_losses: 0,
        gains: 1,
        gain_ms: 600,
        ..e.faults
    };
    quiet(&mut e);
    e.expect = Expect::Fails(MUTEX);

    let mut f = base(Named {
        name: "control-f-no-connection-check",
        about: "negative control: grants count on a reconnected connection while the epoch read back matches",
    });
    f.guard = GuardMode::Epochs(Guard {
        per_connection: false,
        ..V3
    });
    f.faults.flush = false;
    quiet(&mut f);
    f.expect = Expect::Fails(MUTEX);
    vec![a, b, c, d, e, f]
}
