//! A Redis Cluster as one quorum member (`notes/cluster.md`): two hash slots on two
//! shards, each a primary with one replica (asynchronous replication); a shard that fails
//! over (its replica promoted with the last replicated state; the old primary still serving
//! the clients that keep it, as `group.rs` does for Sentinel, and answering `MOVED` to the
//! others once demoted); a slot moved to the other shard with its keys, marker and records
//! intact (`MIGRATE` of every key, then `CLUSTER SETSLOT … NODE`); `MOVED` answers from a
//! node that does not serve the slot; `WAIT 1` on the slot's shard after the writes that
//! keep a grant alive.
//!
//! Replication: a replica holds what its primary had at the last acknowledged `WAIT` (at
//! the start, without `WAIT`). Asynchronous replication ships a prefix of the primary's
//! writes, and a replica further ahead only has more of them; under the guard a promoted
//! replica's contents never count before a new epoch and its quarantine (and its records
//! are never trusted before `2·Tmax`), so the replica furthest behind is the one to check.
//! (`group.rs` lets the replica catch up at any moment; here that multiplied the states
//! for nothing the guard can see.)
//!
//! Nodes: `0` = `A`, `1` = `A'` (shard 0), `2` = `B`, `3` = `B'` (shard 1); slot `s0` starts
//! on `A`, `s1` on `B`. Every node keeps one data set per slot, at [`server`]: the cluster
//! member's own index for `A`'s `s0`, then `n + 2·node + slot − 1`. A node's data sets share
//! its `run_id` ([`run`]). Cluster nodes do not restart here: a shard's failover is how a
//! cluster slot loses data (a primary restarted without persistence is a lost slot that
//! its marker, lost with it, already reports).

use crate::config::{Config, Identity, Records};
use crate::group;
use crate::master::{ReaderInfo, Reply};
use crate::state::{Req, State};

/// Nodes of the cluster member.
pub(crate) const NODES: u8 = 4;

/// A node's `run_id` (`A` has the member's, 0; a Sentinel replica has 128).
pub(crate) fn run(node: u8) -> u8 {
    if node == 0 { 0 } else { 128 + node }
}

/// The shard a node belongs to.
pub(crate) fn shard(node: u8) -> u8 {
    node / 2
}

/// The shard's primary now.
pub(crate) fn primary(s: &State, h: u8) -> u8 {
    2 * h + u8::from(failed(s, h))
}

/// Whether shard `h` has failed over.
pub(crate) fn failed(s: &State, h: u8) -> bool {
    s.cluster.failed & (1 << h) != 0
}

/// The server (a node's data set of slot `hs`) in `State::masters`.
pub(crate) fn server(cfg: &Config, node: u8, hs: u8) -> usize {
    let member = cfg.cluster.map_or(0, |g| g.member);
    if node == 0 && hs == 0 {
        member
    } else {
        cfg.n() + 2 * usize::from(node) + usize::from(hs) - 1
    }
}

/// A node's name in traces.
pub(crate) fn name(node: u8) -> &'static str {
    ["A", "A'", "B", "B'"][usize::from(node)]
}

/// The node that runs client `c`'s request for slot `hs`: the node its slot map names, if
/// that node serves the slot for this client (the slot's node; or an old primary cut off
/// from its shard, for a client that keeps it). `None`: that node answers `MOVED`.
pub(crate) fn serving(cfg: &Config, s: &State, c: usize, hs: u8) -> Option<u8> {
    let node = s.clients[c].route[usize::from(hs)];
    let cut = s.cluster.cut & (1 << (node * 2 + hs)) != 0;
    (s.cluster.owner[usize::from(hs)] == node || (cut && cfg.clients[c].keeps_old_primary))
        .then_some(node)
}

/// The server client `c`'s request to place `p` runs on; `None`: `MOVED`.
pub(crate) fn route(cfg: &Config, s: &State, c: usize, p: usize) -> Option<usize> {
    if !cfg.in_cluster(p) {
        return Some(group::server(cfg, s, c, p));
    }
    let hs = cfg.slot_at(p);
    serving(cfg, s, c, hs).map(|node| server(cfg, node, hs))
}

/// The server a request that may follow a redirect runs on (a release, a read of ttl
/// records, neither of which can let anyone in): the serving node, or the slot's node.
pub(crate) fn follow(cfg: &Config, s: &State, c: usize, p: usize) -> usize {
    route(cfg, s, c, p).unwrap_or_else(|| {
        let hs = cfg.slot_at(p);
        server(cfg, s.cluster.owner[usize::from(hs)], hs)
    })
}

/// The `MOVED` answer to a request for place `p`.
pub(crate) fn moved(cfg: &Config, s: &State, p: usize) -> Reply {
    let hs = cfg.slot_at(p);
    Reply::Moved {
        slot: hs,
        node: s.cluster.owner[usize::from(hs)],
    }
}

/// Whether `req` to place `p` waits for the shard's replica (`WAIT 1`) before it counts.
pub(crate) fn waits(cfg: &Config, p: usize, req: &Req) -> bool {
    match cfg.cluster {
        Some(g) if cfg.in_cluster(p) => match req {
            Req::Acquire { .. } => g.wait_acquire,
            Req::Extend { .. } => g.wait_extend,
            _ => false,
        },
        _ => false,
    }
}

/// Whether the replica may still acknowledge a write client `c` sends to place `p`: the
/// node serving it is a first primary whose shard has not failed over.
pub(crate) fn linked(cfg: &Config, s: &State, c: usize, p: usize) -> bool {
    cfg.in_cluster(p)
        && serving(cfg, s, c, cfg.slot_at(p)).is_some_and(|node| {
            let h = shard(node);
            node % 2 == 0 && !failed(s, h) && s.cluster.back & (1 << h) == 0
        })
}

/// `WAIT 1` after a successful write of client `c` at place `p`: `acked` when the replica
/// caught up in time (then it has everything its primary has). A write the replica did not
/// acknowledge does not count; an old primary cut off from its shard has no replica left.
/// A promoted replica has one of its own (the demoted primary, resynchronised), whose
/// data never matters (one failover per shard), and its `WAIT` always succeeds.
pub(crate) fn wait(
    cfg: &Config,
    s: &mut State,
    c: usize,
    p: usize,
    acked: bool,
    reply: Reply,
) -> Reply {
    let success = matches!(
        reply,
        Reply::Granted { .. } | Reply::Extended(true, _) | Reply::Extended(_, Some(true))
    );
    let Some(node) = serving(cfg, s, c, cfg.slot_at(p)) else {
        return reply;
    };
    if !success {
        return reply;
    }
    let h = shard(node);
    if failed(s, h) {
        if node == 2 * h + 1 {
            return reply;
        }
        return Reply::NotReplicated;
    }
    if s.cluster.back & (1 << h) != 0 {
        // Failed back: its replica's data never matters again (two failovers per shard).
        return reply;
    }
    if acked {
        sync(cfg, s, h);
        reply
    } else {
        Reply::NotReplicated
    }
}

/// Shard `h`'s replica catches up with its primary (every slot's data set).
pub(crate) fn sync(cfg: &Config, s: &mut State, h: u8) {
    for hs in 0..2 {
        let data = s.masters[server(cfg, 2 * h, hs)].data.clone();
        s.masters[server(cfg, 2 * h + 1, hs)].data = data;
    }
}

/// Whether shard `h` may fail over (or back): it serves a slot, and has not failed back.
pub(crate) fn may_fail_over(s: &State, h: u8) -> bool {
    s.cluster.back & (1 << h) == 0 && s.cluster.owner.iter().any(|&node| shard(node) == h)
}

/// Shard `h` fails over, or back if it has failed over already.
///
/// Over: its replica, with what it last replicated, serves the shard's slots. The old
/// primary is cut off from the cluster: a client that keeps it (`keeps_old_primary`) is
/// still served by it (nobody demoted it yet); every other client meets it demoted,
/// answering `MOVED` to the new primary.
///
/// Back: the old primary rejoins as the new one's replica, which has writes it lacks and
/// lacks writes only it took, so it resynchronises in full (its own writes since the
/// failover are gone), and a manual `CLUSTER FAILOVER` (lossless) promotes it back; the
/// demoted replica answers `MOVED`. Its `run_id` is unchanged, and the connections clients
/// had to it may still be open.
///
/// A promotion changes the node's replication id: with `Identity::Replid`, its identity.
pub(crate) fn failover(cfg: &Config, s: &mut State, h: u8) {
    s.budget.failovers -= 1;
    let (old, new) = (2 * h, 2 * h + 1);
    let promoted = if failed(s, h) {
        for hs in 0..2 {
            let data = s.masters[server(cfg, new, hs)].data.clone();
            s.masters[server(cfg, old, hs)].data = data;
        }
        for owner in &mut s.cluster.owner {
            if *owner == new {
                *owner = old;
            }
        }
        s.cluster.cut &= !(0b11 << (2 * old));
        s.cluster.failed &= !(1 << h);
        s.cluster.back |= 1 << h;
        old
    } else {
        s.cluster.failed |= 1 << h;
        for hs in 0..2u8 {
            let owner = &mut s.cluster.owner[usize::from(hs)];
            if *owner == old {
                *owner = new;
                s.cluster.cut |= 1 << (2 * old + hs);
            }
        }
        new
    };
    if cfg.cluster.is_some_and(|g| g.identity == Identity::Replid) {
        for hs in 0..2 {
            let m = &mut s.masters[server(cfg, promoted, hs)];
            m.run = m.run.wrapping_add(16);
        }
    }
}

/// Slot `hs` moves to the other shard's primary with everything in it (every key migrated
/// with its ttl, then `CLUSTER SETSLOT … NODE` on both nodes): the old node answers
/// `MOVED` from now on.
pub(crate) fn migrate(cfg: &Config, s: &mut State, hs: u8) {
    s.budget.moves -= 1;
    let from = s.cluster.owner[usize::from(hs)];
    let to = primary(s, 1 - shard(from));
    let data = std::mem::take(&mut s.masters[server(cfg, from, hs)].data);
    s.masters[server(cfg, to, hs)].data = data;
    s.cluster.owner[usize::from(hs)] = to;
}

/// `ttl_read.lua` (with `INFO server` and `CONFIG GET`) on cluster member `j`, for client
/// `c`, at real time `now`: in the records' slot, answering with that slot's marker (the
/// design) or another's (control (d)); or, with per-slot records, every slot's longest
/// record, trusted only if every slot's marker is.
pub(crate) fn read(cfg: &Config, s: &mut State, c: usize, j: usize, now: i64) -> ReaderInfo {
    let Some(g) = cfg.cluster else {
        unreachable!("not a cluster");
    };
    let mut at = |hs: u8| {
        let srv = follow(cfg, s, c, cfg.place(j, hs));
        let master = &mut s.masters[srv];
        let now_m = master.clock(now);
        master.expire(now_m);
        master.read(cfg, j, now_m)
    };
    match g.records {
        Records::Member { slot, trust } => {
            let mut info = at(slot);
            if trust != slot {
                info.marker = at(trust).marker;
            }
            info
        }
        Records::PerSlot => {
            let (a, b) = (at(0), at(1));
            let marker = match (a.marker, b.marker) {
                (Some(x), Some(y)) => Some((x.0 && y.0, x.1.max(y.1), x.2 && y.2, x.3 && y.3)),
                _ => None,
            };
            ReaderInfo {
                longest: a.longest.max(b.longest),
                marker,
                live_durable: a.live_durable && b.live_durable,
                now_m: a.now_m,
            }
        }
    }
}
