//! A Redis Cluster as one quorum member (issue 22, `notes/cluster.md`): two hash slots on
//! two shards (a primary and a replica each), a shard that fails over and a slot that moves
//! to the other shard, while clients hold locks in both slots. The design: per-slot epochs,
//! a `MOVED` that fails its vote and has the slot verified again, a node change that is a
//! new epoch for the slot, the member's ttl records in one slot, read with that slot's
//! marker. The controls take one of these away.

use super::{Named, Size, base, client, five, quiet, walks};
use crate::config::*;
use crate::model::MUTEX;

/// The design's cluster member at index 0: `WAIT` on acquisitions and renewals iff
/// `wait`, records in `s0`.
fn spec(wait: bool) -> ClusterSpec {
    ClusterSpec {
        member: 0,
        wait_acquire: wait,
        wait_extend: wait,
        epochs: SlotEpochs::PerSlot,
        moved: Moved::Reverify,
        node_change_new_epoch: true,
        records: Records::Member { slot: 0, trust: 0 },
        identity: Identity::Replid,
        grant_identity: true,
        fail_shards: 0b11,
        move_slots: 0b11,
    }
}

/// Member 0 a two-shard cluster beside two masters; one shard failover, one slot move, no
/// other fault on the cluster; quiet network, three ticks.
fn cluster(id: Named, wait: bool) -> Config {
    let mut cfg = base(id);
    cfg.cluster = Some(spec(wait));
    cfg.faults.data_losses = 0;
    cfg.faults.failovers = 1;
    cfg.faults.moves = 1;
    cfg.faults.on = 0;
    quiet(&mut cfg);
    cfg.horizon = 3;
    cfg
}

/// Without `WAIT`, where the restart guard alone must keep a failover safe: c0 (2 s)
/// takes resource 1 (slot `s1`) and reaches the cluster and master 1; c1 (1 s, two
/// acquisitions: a `MOVED` fails the first after a failover) takes resource 1 and reaches
/// everything. Both record in `s0`. Either shard may fail over, `s1` may move (with it, to
/// shard 0, whose failover then loses what was migrated). Nobody keeps an old primary
/// (without `WAIT` that is unsafe whatever the guard does:
/// `cluster-renewal-without-wait`).
fn lossy(id: Named) -> Config {
    let mut cfg = cluster(id, false);
    cfg.clients = vec![
        ClientSpec {
            reach: 0b011,
            locks: [0b10, 0],
            ..client(2000)
        },
        ClientSpec {
            locks: [0b10, 0],
            acquisitions: 2,
            ..client(1000)
        },
    ];
    if let Some(g) = &mut cfg.cluster {
        g.move_slots = 0b10;
    }
    cfg
}

/// `cluster-lossy`'s clients; shard 1 fails over and back (two failovers, no move): a
/// node identified by `identity`, grants checked against it iff `grant_identity`.
fn failback(id: Named, identity: Identity, grant_identity: bool) -> Config {
    let mut cfg = lossy(id);
    if let Some(g) = &mut cfg.cluster {
        g.identity = identity;
        g.grant_identity = grant_identity;
        g.fail_shards = 0b10;
    }
    cfg.faults.failovers = 2;
    cfg.faults.moves = 0;
    cfg
}

/// `cluster-failover`'s shape (mirroring `sentinel-failover`): `WAIT` on acquisitions and
/// renewals; c0 (1 s) holds a lock in each slot kept alive by one batched renewal (two
/// ticks), reaches the cluster and master 1, and keeps talking to an old primary after a
/// failover; c1 (1 s, two acquisitions: it learns of a failover from a `MOVED`, which fails
/// its first) takes resource 0 and reaches everything.
fn failover(id: Named, wait_extend: bool) -> Config {
    let mut cfg = cluster(id, true);
    if let Some(g) = &mut cfg.cluster {
        g.wait_extend = wait_extend;
    }
    cfg.clients = vec![
        ClientSpec {
            reach: 0b011,
            extensions: 2,
            keeps_old_primary: true,
            locks: [0b01, 0b10],
            ..client(1000)
        },
        ClientSpec {
            acquisitions: 2,
            ..client(1000)
        },
    ];
    cfg
}

/// The member's ttl records in slot `s1` (shard 1), locks in `s0`, and a data loss on
/// master 1 beside the cluster's failover: c0 (2 s) takes resource 0 and reaches the
/// cluster and master 1, c1 (1 s, two acquisitions) takes resource 0 and reaches
/// everything. When master 1 loses c0's key, the cluster is one of the readers c1's
/// verification of master 1 counts on, and shard 1's failover may have lost its records.
fn records(id: Named, records: Records) -> Config {
    let mut cfg = cluster(id, false);
    if let Some(g) = &mut cfg.cluster {
        g.records = records;
    }
    cfg.clients = vec![
        ClientSpec {
            reach: 0b011,
            ..client(2000)
        },
        client(1000),
    ];
    if let Some(g) = &mut cfg.cluster {
        g.move_slots = 0b10;
    }
    cfg.faults.data_losses = 1;
    cfg.faults.flush = false;
    cfg.faults.keep_marker = false;
    cfg.faults.on = 0b010;
    cfg.horizon = 2;
    cfg
}

pub(super) fn protocol(size: Size) -> Vec<Config> {
    let large = size == Size::Large;
    let mut plain = lossy(Named {
        name: "cluster-lossy",
        about: "member 0 a 2-shard cluster without WAIT: a shard fails over (its replica missing keys) and slot s1 moves while c0 (2 s) holds its lock in s1 and c1 (1 s) contends; per-slot epochs, MOVED re-verified",
    });
    // Two ticks: 9 million states; three (the large suite): 16 million.
    plain.horizon = if large { 3 } else { 2 };
    let mut group = failover(
        Named {
            name: "cluster-failover",
            about: "member 0 a 2-shard cluster with WAIT on acquisitions and renewals: a shard fails over while c0 keeps locks in both slots alive through an old primary, and a slot moves",
        },
        true,
    );
    // Every interleaving does not fit even the large suite: more walks there.
    let states = if large { 100_000_000 } else { 10_000_000 };
    group.search = Search::Simulation { seed: 19, states };
    let in_s1 = records(
        Named {
            name: "cluster-records",
            about: "the cluster's ttl records in slot s1, read with s1's marker; locks in s0; shard 1 fails over and master 1 loses its data",
        },
        Records::Member { slot: 1, trust: 1 },
    );
    let per_slot = records(
        Named {
            name: "cluster-records-per-slot",
            about: "the comparison: cluster-records with ttl records in every lock's slot, a reader trusted only if every slot's marker is",
        },
        Records::PerSlot,
    );
    let mut spread = five(Named {
        name: "cluster-five",
        about: "5 members, member 0 a 2-shard cluster without WAIT (a failover, a slot move), finding 1's partitions: c0 (2 s) holds locks in both slots, c1 (1 s) takes resource 1; member 1 loses its data",
    });
    spread.cluster = Some(spec(false));
    spread.clients[0].locks = [0b01, 0b10];
    spread.clients[1].locks = [0b10, 0];
    spread.clients[1].acquisitions = 2;
    spread.faults.data_losses = 1;
    spread.faults.failovers = 1;
    spread.faults.moves = 1;
    spread.faults.on = 0b00010;
    let states = if large { 50_000_000 } else { 10_000_000 };
    spread.search = Search::Simulation { seed: 19, states };
    let back = failback(
        Named {
            name: "cluster-failback",
            about: "cluster-lossy where shard 1 fails over and back (the old primary, resynchronised in full, promoted again): identity run_id/master_replid, checked with every grant",
        },
        Identity::Replid,
        true,
    );
    let mut followed = lossy(Named {
        name: "cluster-moved-followed-identity",
        about: "cluster-lossy with MOVED followed (the acquire resent on the new node), every grant checked against the node identity verified for its slot",
    });
    if let Some(g) = &mut followed.cluster {
        g.moved = Moved::Follow;
    }
    followed.horizon = 1;
    let mut all = vec![plain, group, in_s1, per_slot, back, followed, spread];
    if large {
        // A MOVED that only ever means a clean move can be followed even on the epoch
        // alone: control (b) needs a failover behind its MOVED.
        let mut moves_only = lossy(Named {
            name: "cluster-moved-followed-moves-only",
            about: "control-cluster-moved-followed (MOVED followed, grants checked on the epoch alone) with no failover: every MOVED is a clean move",
        });
        if let Some(g) = &mut moves_only.cluster {
            g.moved = Moved::Follow;
            g.grant_identity = false;
            g.fail_shards = 0;
            g.move_slots = 0b11;
        }
        // c0 holds a lock in each slot, c1 contends for both.
        let mut both = lossy(Named {
            name: "cluster-lossy-both-slots",
            about: "cluster-lossy with c0 (2 s) holding a lock in each slot and c1 (1 s) contending for both, either slot moving",
        });
        both.clients[0].locks = [0b01, 0b10];
        both.clients[1].locks = [0b01, 0b10];
        if let Some(g) = &mut both.cluster {
            g.move_slots = 0b11;
        }
        walks(&mut both);
        all.extend([moves_only, both]);
    }
    all
}

pub(super) fn findings(_size: Size) -> Vec<Config> {
    let mut no_wait = failover(
        Named {
            name: "cluster-renewal-without-wait",
            about: "cluster-failover without WAIT after renewals: c0's renewals on the old primary keep its lock alive while the new primary's copy runs out (issue 19 finding 2, per shard)",
        },
        false,
    );
    // One lock (resource 0), shard 0 failing over, no move: the walks find it sooner.
    no_wait.clients[0].locks = [0b01, 0];
    if let Some(g) = &mut no_wait.cluster {
        g.fail_shards = 0b01;
    }
    no_wait.faults.moves = 0;
    no_wait.expect = Expect::Fails(MUTEX);
    walks(&mut no_wait);
    let mut run_id = failback(
        Named {
            name: "cluster-failback-run-id",
            about: "issue 22 as written: a node identified by its run_id, which a failback keeps",
        },
        Identity::RunId,
        true,
    );
    run_id.expect = Expect::Fails(MUTEX);
    run_id.horizon = 1;
    let mut epoch_only = failback(
        Named {
            name: "cluster-failback-epoch-only",
            about: "grants checked against the epoch read back and the connection generation only (RestartGuard::admit): a connection that outlives a failback",
        },
        Identity::Replid,
        false,
    );
    epoch_only.expect = Expect::Fails(MUTEX);
    epoch_only.horizon = 1;
    vec![no_wait, run_id, epoch_only]
}

pub(super) fn controls(_size: Size) -> Vec<Config> {
    let with = |name, about, f: fn(&mut ClusterSpec)| {
        let mut cfg = lossy(Named { name, about });
        if let Some(g) = &mut cfg.cluster {
            f(g);
        }
        cfg.expect = Expect::Fails(MUTEX);
        // The counterexamples need one tick at most.
        cfg.horizon = 1;
        cfg
    };
    // (a) and (b) check grants against the epoch alone: a member-wide epoch has no one
    // node to compare a grant's with, and a client that follows redirects does not know
    // which node answered (with the node's identity read back, following is safe:
    // `cluster-moved-followed-identity`).
    let member = with(
        "control-cluster-member-epoch",
        "negative control (a): cluster-lossy with one epoch for the whole member (a marker in s0): shard 1's failover is not seen through s0",
        |g| {
            g.epochs = SlotEpochs::PerMember;
            g.grant_identity = false;
        },
    );
    let follow = with(
        "control-cluster-moved-followed",
        "negative control (b): cluster-lossy with MOVED followed blindly: the acquire is resent on the new node and counts against the slot's epoch",
        |g| {
            g.moved = Moved::Follow;
            g.grant_identity = false;
        },
    );
    let mut kept = with(
        "control-cluster-failover-kept",
        "negative control (c): cluster-lossy with a failover not a new epoch: the promoted replica's marker is confirmed and its slot counts at once",
        |g| g.node_change_new_epoch = false,
    );
    kept.faults.moves = 0;
    let mut trust = records(
        Named {
            name: "control-cluster-records-trust",
            about: "negative control (d): cluster-records with the reader trusted by s0's marker while its records live in s1",
        },
        Records::Member { slot: 1, trust: 0 },
    );
    trust.expect = Expect::Fails(MUTEX);
    trust.faults.moves = 0;
    vec![member, follow, kept, trust]
}
