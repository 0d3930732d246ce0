//! Members that can fail in ways three plain masters cannot show: a durable master
//! switched to `appendfsync everysec` at run time (issue 19 finding 3), a Sentinel
//! group that fails over while an old primary is still reachable (finding 2), one that
//! fails over and back under a connection kept idle (`notes/cluster.md` finding 1), and an
//! old primary a verifier kept, read as a reader of ttl records.

use super::{Named, Size, base, client, quiet, walks, walks_unless_large};
use crate::config::*;
use crate::model::MUTEX;

/// Three durable masters (`appendfsync always` in their configuration files), a 2 s and
/// a 1 s client; master 0 may be switched to `everysec` at run time and crash once.
fn durability(id: Named, observe: Observe) -> Config {
    let mut cfg = base(id);
    cfg.masters.iter_mut().for_each(|m| m.durable = true);
    cfg.faults.data_losses = 0;
    cfg.faults.durable_restarts = 1;
    cfg.faults.config_sets = 1;
    cfg.observe = observe;
    quiet(&mut cfg);
    cfg.horizon = 3;
    cfg
}

/// A Sentinel group as member 0 (`WAIT 1` after acquisitions and renewals) beside two
/// masters. c0 (1 s) holds two locks (resources 0 and 1) kept alive by one batched
/// renewal (two ticks), reaches the group and master 1 only, and stays connected to the
/// old primary after a failover; c1 (1 s) takes resource 0, reaches everything and
/// follows the failover.
fn sentinel(id: Named, wait_extend: bool) -> Config {
    let mut cfg = base(id);
    cfg.clients = vec![
        ClientSpec {
            reach: 0b011,
            extensions: 2,
            keeps_old_primary: true,
            locks: [0b01, 0b10],
            ..client(1000)
        },
        client(1000),
    ];
    cfg.group = Some(GroupSpec {
        member: 0,
        wait_acquire: true,
        wait_extend,
        grant_identity: true,
        failback: false,
        wait_reads: true,
    });
    cfg.faults.data_losses = 0;
    cfg.faults.failovers = 1;
    cfg.faults.on = 0;
    quiet(&mut cfg);
    cfg.horizon = 3;
    cfg
}

/// A Sentinel group as member 0, without `WAIT`, beside two masters, that fails over and
/// back (`GroupSpec::failback`; `cluster-failback`'s shape, `notes/cluster.md` finding 1):
/// c0 (2 s) takes resource 0, reaches the group and master 1, and keeps its connection to
/// the old primary open through both failovers (idle while it is demoted: it refuses c0's
/// writes); c1 (1 s, two acquisitions) takes resource 0, reaches everything and follows
/// each failover. Grants through the group checked against the verified identity
/// (`run_id/master_replid`) iff `grant_identity`.
fn failback(id: Named, grant_identity: bool) -> Config {
    let mut cfg = base(id);
    cfg.clients = vec![
        ClientSpec {
            reach: 0b011,
            keeps_old_primary: true,
            ..client(2000)
        },
        ClientSpec {
            acquisitions: 2,
            ..client(1000)
        },
    ];
    cfg.group = Some(GroupSpec {
        member: 0,
        wait_acquire: false,
        wait_extend: false,
        grant_identity,
        failback: true,
        wait_reads: true,
    });
    cfg.faults.data_losses = 0;
    cfg.faults.failovers = 2;
    cfg.faults.on = 0;
    quiet(&mut cfg);
    cfg.horizon = 3;
    cfg
}

/// A verifier that kept the group's old primary reads it as a trusted reader (a review
/// finding): five members, the Sentinel group as member 0 (`WAIT 1` after acquisitions
/// and renewals) and masters 1–4; masters 1 and 2 may lose their data (two losses:
/// restarts with or without the marker, `FLUSHALL`). c0 (500 ms) reaches the group and
/// masters 1 and 2, follows the failover, and extends its lock once to 2 s
/// (`extend_with`: a record round of 2 s first), so that the long lock's records and keys
/// may be on the new primary and masters 1 and 2 only. c1 (500 ms, the verifier) reaches
/// every member and keeps its connection to the old primary, which it reads (and writes)
/// when it verifies masters 1 and 2 (`group::server`). The group is believed as a reader
/// only once `WAIT` after the ttl read is acknowledged iff `wait_reads`. Two ticks: the
/// long lock exists from t = 0 (an extension needs no verified member, an acquisition on
/// the new primary would first wait out the holder's own ttl there), and the verifier's
/// quarantine ends before t = 1000.
fn stale_reader(id: Named, wait_reads: bool) -> Config {
    let mut cfg = base(id);
    cfg.masters = vec![cfg.masters[0]; 5];
    cfg.clients = vec![
        ClientSpec {
            reach: 0b00111,
            extensions: 1,
            extend_ttl_ms: Some(2000),
            ..client(500)
        },
        ClientSpec {
            keeps_old_primary: true,
            ..client(500)
        },
    ];
    cfg.group = Some(GroupSpec {
        member: 0,
        wait_acquire: true,
        wait_extend: true,
        grant_identity: true,
        failback: false,
        wait_reads,
    });
    cfg.faults.data_losses = 2;
    cfg.faults.failovers = 1;
    cfg.faults.on = 0b00110;
    quiet(&mut cfg);
    cfg.horizon = 2;
    cfg
}

pub(super) fn protocol(size: Size) -> Vec<Config> {
    let durable = durability(
        Named {
            name: "durability-observed",
            about: "3 durable masters, master 0 switched to everysec at run time and crashing: every write that counts observes appendfsync, and a clear of durable is on disk (WAITAOF) before anything counts (the proposed fix)",
        },
        Observe::EveryWrite { fsync_clear: true },
    );
    // The library's mechanism (guard-v3.md: observed at verification, ttl records and
    // renewals) under the claim's assumption: persistence is not switched at run time, and
    // a durable restart keeps the member's epoch.
    let mut kept = durability(
        Named {
            name: "durability-kept",
            about: "3 durable masters, the library's observations (verification, ttl records, renewals), master 0 restarting durably: its epoch is kept and counts at once",
        },
        Observe::Note,
    );
    kept.faults.config_sets = 0;
    let group = sentinel(
        Named {
            name: "sentinel-failover",
            about: "a Sentinel group (WAIT on acquisitions and renewals) fails over while c0 keeps its lock alive on the old primary",
        },
        true,
    );
    let mut group = group;
    walks_unless_large(&mut group, size, 20_000_000);
    let back = failback(
        Named {
            name: "sentinel-failback",
            about: "a Sentinel group without WAIT fails over and back (the old primary, resynchronised in full from the promoted replica, promoted again) while c0 keeps an idle connection to it: identity run_id/master_replid checked with every grant",
        },
        true,
    );
    // Every interleaving over three ticks (the large suite): 20.6 million states, 80 s.
    let mut back = back;
    walks_unless_large(&mut back, size, 30_000_000);
    let mut stale = stale_reader(
        Named {
            name: "sentinel-stale-reader",
            about: "5 members, a Sentinel group (WAIT on writes) and masters 1-4, masters 1 and 2 losing their data: a 500 ms verifier that kept the group's old primary verifies them while a lock extended to 2 s has its records on the new primary and masters 1 and 2 only; the group is a trusted reader only once WAIT after the ttl read is acknowledged",
        },
        true,
    );
    // Random walks (five members).
    stale.search = Search::Simulation {
        seed: 19,
        states: 20_000_000,
    };
    vec![kept, durable, group, back, stale]
}

pub(super) fn findings(_size: Size) -> Vec<Config> {
    let mut residual = durability(
        Named {
            name: "v3-durability-residual",
            about: "guard-v3.md's observations (verification, ttl records, renewals): CONFIG SET, a grant that observes nothing, a crash — the window the note admits",
        },
        Observe::Note,
    );
    residual.expect = Expect::Fails(MUTEX);

    let mut lost = durability(
        Named {
            name: "v3-durability-lost-clear",
            about: "every write observes, but the clear of durable is itself written under everysec: the crash loses it with the grant",
        },
        Observe::EveryWrite { fsync_clear: false },
    );
    lost.expect = Expect::Fails(MUTEX);

    let mut no_wait = sentinel(
        Named {
            name: "i19-finding-2-renewal-without-wait",
            about: "issue 19 finding 2: sentinel-failover without WAIT after renewals",
        },
        false,
    );
    no_wait.expect = Expect::Fails(MUTEX);
    walks(&mut no_wait);
    vec![residual, lost, no_wait]
}

pub(super) fn controls(_size: Size) -> Vec<Config> {
    let mut unobserved = durability(
        Named {
            name: "control-g-durability-unobserved",
            about: "negative control (v2): durability observed only at verification",
        },
        Observe::Verify,
    );
    unobserved.expect = Expect::Fails(MUTEX);
    let mut epoch_only = failback(
        Named {
            name: "control-sentinel-failback-epoch-only",
            about: "negative control: sentinel-failback with grants checked against the epoch read back and the connection generation only (RestartGuard::admit): a connection that outlives a failback",
        },
        false,
    );
    epoch_only.expect = Expect::Fails(MUTEX);
    // Its counterexample needs no tick.
    epoch_only.horizon = 1;
    let mut stale = stale_reader(
        Named {
            name: "control-sentinel-stale-reader",
            about: "negative control: sentinel-stale-reader with the group believed as a reader on its marker alone (no WAIT after the ttl read): the old primary, trusted, misses the 2 s lock's records",
        },
        false,
    );
    stale.expect = Expect::Fails(MUTEX);
    // Breadth-first does not fit in memory (over 17 GB within a minute); seeded walks find the
    // counterexample once restarts that lose everything are the only losses (with
    // `FLUSHALL` and marker-keeping restarts too, 50 million states of walks did not).
    stale.faults.flush = false;
    stale.faults.keep_marker = false;
    walks(&mut stale);
    vec![unobserved, epoch_only, stale]
}
