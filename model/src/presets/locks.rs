//! Locks beyond one resource per client: multi-resource locks (all-or-nothing per
//! master), two locks of one client renewed in one batch, and connection generations
//! (issue 19 finding 5).

use super::{Named, Size, base, client, quiet, walks, walks_unless_large};
use crate::config::*;
use crate::model::{MUTEX, RELEASED};

/// c0 (2 s) takes one lock on resources 0 and 1 (the acquire script), c1 (1 s) one on
/// resource 1; master 0 restarts once.
fn multi(id: Named) -> Config {
    let mut cfg = base(id);
    cfg.clients = vec![
        ClientSpec {
            locks: [0b11, 0],
            ..client(2000)
        },
        ClientSpec {
            locks: [0b10, 0],
            ..client(1000)
        },
    ];
    cfg.faults.flush = false;
    quiet(&mut cfg);
    cfg.horizon = 3;
    cfg
}

/// c0 (1 s) holds a lock on resource 0 and one on resource 1, kept alive by one batched
/// renewal (two ticks), and reaches masters 0 and 1 only; c1 (1 s, two acquisitions)
/// takes resource 1. Master 0 loses its data once (a restart or `FLUSHALL`).
fn batch(id: Named) -> Config {
    let mut cfg = base(id);
    cfg.clients = vec![
        ClientSpec {
            locks: [0b01, 0b10],
            extensions: 2,
            reach: 0b011,
            ..client(1000)
        },
        ClientSpec {
            locks: [0b10, 0],
            acquisitions: 2,
            ..client(1000)
        },
    ];
    cfg.faults.keep_marker = false;
    quiet(&mut cfg);
    cfg.horizon = 3;
    cfg.search = Search::DepthFirst;
    cfg
}

/// Two 1 s clients (c0 with two acquisitions); the connections to master 0 may be torn
/// down once with bytes still on the server.
fn generations(id: Named, fixed: bool) -> Config {
    let mut cfg = base(id);
    cfg.clients = vec![
        ClientSpec {
            acquisitions: 2,
            ..client(1000)
        },
        client(1000),
    ];
    cfg.generations = Some(Generations {
        release_on_acquire_generation: fixed,
    });
    cfg.faults.data_losses = 0;
    cfg.faults.teardowns = 1;
    quiet(&mut cfg);
    cfg.horizon = 2;
    cfg
}

pub(super) fn protocol(size: Size) -> Vec<Config> {
    let mut batched = batch(Named {
        name: "batch-renewal",
        about: "c0 holds locks on resources 0 and 1 under one batched renewal, c1 takes resource 1; master 0 loses its data",
    });
    walks_unless_large(&mut batched, size, 20_000_000);
    vec![
        multi(Named {
            name: "multi-resource",
            about: "a lock on resources {0, 1} (all-or-nothing per master) and one on {1}; a master restarts",
        }),
        batched,
        generations(
            Named {
                name: "generations",
                about: "connections torn down with bytes on the server; releases go on the acquire's generation",
            },
            true,
        ),
    ]
}

pub(super) fn findings(_size: Size) -> Vec<Config> {
    let mut overtakes = generations(
        Named {
            name: "i19-finding-5-release-overtakes-acquire",
            about: "issue 19 finding 5: releases on the current generation",
        },
        false,
    );
    overtakes.expect = Expect::Fails(RELEASED);
    vec![overtakes]
}

pub(super) fn controls(_size: Size) -> Vec<Config> {
    let mut partial = multi(Named {
        name: "control-i-partial-grant",
        about: "negative control: a master that set some of a multi-resource lock's keys counts as a grant",
    });
    partial.all_or_nothing = false;
    partial.expect = Expect::Fails(MUTEX);

    let mut per_member = batch(Named {
        name: "control-j-batch-per-member",
        about: "negative control: a batched renewal counts a member for every lock once its pipeline answered",
    });
    per_member.batch_per_lock = false;
    per_member.expect = Expect::Fails(MUTEX);
    walks(&mut per_member);
    vec![partial, per_member]
}
