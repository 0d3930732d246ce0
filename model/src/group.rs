//! A Sentinel group as one quorum member (`src/group.rs`): a primary with one replica,
//! asynchronous replication, a failover that promotes the replica, an old primary that
//! clients connected before the failover keep talking to (it is cut off from its sentinels
//! and replica, not from them, and nobody demotes it), and `WAIT 1` after the writes that
//! keep a grant alive.
//!
//! Servers: the member's own index is the first primary; index `n` is its replica, the
//! primary after a failover. The replica's data is the primary's at some earlier moment
//! (replication is one ordered stream): [`sync`] copies the primary's data set over, at
//! any time while the link is up, and an acknowledged `WAIT` does so at once.
//! After the failover the new primary has a replica of its own (the sentinels point the
//! group's other replica at it); its data never matters (the one further failover a run may
//! have is a failback to the old primary, resynchronised in full), and its `WAIT` always
//! succeeds.
//!
//! A failback (`GroupSpec::failback`, a second failover): the old primary, demoted at the
//! failover and refusing writes since (`READONLY`) on the connections that clients kept
//! to it, is resynchronised in full from the new primary (losing what only it had) and
//! promoted again: the same `run_id`, a new replication id, and those connections still
//! open. Every promotion draws a new replication id, part of the identity `guard.lua`
//! keeps behind a group (`run_id/master_replid`): here `Master::run` moves by 16. After a
//! failback its replica's data never matters either (no third failover).

use crate::config::Config;
use crate::guard;
use crate::master::Reply;
use crate::state::{Req, State};

/// The server client `c`'s connection to member `m` reaches.
pub(crate) fn server(cfg: &Config, s: &State, c: usize, m: usize) -> usize {
    if cfg.is_group(m) && s.clients[c].on_new_primary {
        cfg.n()
    } else {
        m
    }
}

/// The server an operator (or a client connecting now) reaches for member `m`.
pub(crate) fn current(cfg: &Config, s: &State, m: usize) -> usize {
    if cfg.is_group(m) && s.failed_over {
        cfg.n()
    } else {
        m
    }
}

/// Whether client `c` may believe member `j` as a reader of ttl records
/// (`GroupSpec::wait_reads`): behind the group, only once `WAIT`, sent after the ttl read
/// on the same connection, is acknowledged by every replica the sentinels name — which
/// happens only on the server they name as primary (before the failover its replica is
/// linked; the new primary's, or after a failback the old primary's, always acknowledges).
/// An old primary that a client kept after the failover, cut off from its replica (or
/// demoted, with `failback`), gets no acknowledgement: a reader fewer. Any other member,
/// or without `wait_reads`: yes.
pub(crate) fn reader_confirmed(cfg: &Config, s: &State, c: usize, j: usize) -> bool {
    match cfg.group {
        Some(g) if g.member == j && g.wait_reads => server(cfg, s, c, j) == current(cfg, s, j),
        _ => true,
    }
}

/// Whether `req` to member `m` waits for the replica (`WAIT 1`) before it counts; with
/// `failback`, every write that may count goes through [`wait`] (where a demoted old
/// primary refuses it).
pub(crate) fn waits(cfg: &Config, m: usize, req: &Req) -> bool {
    match cfg.group {
        Some(g) if g.member == m => match req {
            Req::Acquire { .. } => g.wait_acquire || g.failback,
            Req::Extend { .. } => g.wait_extend || g.failback,
            Req::Record { .. } => g.failback,
            _ => false,
        },
        _ => false,
    }
}

/// Whether the group has failed back (its first primary is the primary again).
pub(crate) fn back(cfg: &Config, s: &State) -> bool {
    cfg.group.is_some() && !s.failed_over && s.budget.failovers < cfg.faults.failovers
}

/// Whether server `srv` is the old primary, demoted at the failover (`failback`).
fn demoted(cfg: &Config, s: &State, srv: usize) -> bool {
    cfg.group
        .is_some_and(|g| g.failback && srv == g.member && s.failed_over)
}

/// Whether the replica may still acknowledge a write on server `srv`: the first primary
/// before the failover (after it, the old primary has no replica left; after a failback
/// its replica's acknowledgement never matters), in a group that `WAIT`s at all.
pub(crate) fn linked(cfg: &Config, s: &State, srv: usize) -> bool {
    cfg.group
        .is_some_and(|g| srv == g.member && (g.wait_acquire || g.wait_extend))
        && !s.failed_over
        && !back(cfg, s)
}

/// `WAIT 1` after a successful write on server `srv`: `acked` when the replica caught up
/// in time (then it has everything the primary has). A write that was not acknowledged
/// does not count. A demoted old primary refuses every write (`READONLY`; shown as not
/// replicated: the vote fails alike) — what it did to its data set is lost at the
/// failback's resynchronisation, and only the clients that kept it read that set before.
pub(crate) fn wait(cfg: &Config, s: &mut State, srv: usize, acked: bool, reply: Reply) -> Reply {
    let Some(g) = cfg.group else {
        return reply;
    };
    if demoted(cfg, s, srv) {
        return match reply {
            Reply::Granted { .. } | Reply::Extended(..) | Reply::Flag(_) => Reply::NotReplicated,
            other => other,
        };
    }
    let waited = match reply {
        Reply::Granted { .. } => g.wait_acquire,
        Reply::Extended(a, b) => g.wait_extend && (a || b == Some(true)),
        _ => false,
    };
    if !waited || srv == cfg.n() || back(cfg, s) {
        // No `WAIT`, nothing to acknowledge, or the new primary's own replica (or, after a
        // failback, the old primary's), which always acknowledges.
        return reply;
    }
    if acked && linked(cfg, s, srv) {
        sync(cfg, s);
        reply
    } else {
        Reply::NotReplicated
    }
}

/// The replica catches up with the primary.
pub(crate) fn sync(cfg: &Config, s: &mut State) {
    if let Some(g) = cfg.group {
        let data = s.masters[g.member].data.clone();
        s.masters[cfg.n()].data = data;
    }
}

/// Whether the replica is behind (a [`sync`] would change something).
pub(crate) fn behind(cfg: &Config, s: &State) -> bool {
    cfg.group.is_some_and(|g| {
        !s.failed_over && !back(cfg, s) && s.masters[g.member].data != s.masters[cfg.n()].data
    })
}

/// The sentinels promote the replica (a new replication id). Clients that cannot reach
/// the old primary any more lose their connection and reconnect to the new one (a new
/// connection: verified again, and the new `run_id` is a loss); the others keep the old
/// primary (served by it, or, with `failback`, refused: it is demoted).
///
/// The second failover (with `failback`) is a failback: the old primary, resynchronised in
/// full from the new one (whatever only it had is gone), is promoted again (the same
/// `run_id`, a new replication id); the clients on the new primary, demoted now, reconnect
/// to it (the sentinels close their connections, or a `READONLY` or `role:slave` has them
/// replaced), and the connections the others kept to it are still open.
pub(crate) fn failover(cfg: &Config, s: &mut State) {
    let Some(g) = cfg.group else {
        return;
    };
    assert!(!back(cfg, s), "one failover and one failback per run");
    let (old, new) = (g.member, cfg.n());
    s.budget.failovers -= 1;
    let places = cfg.places();
    if s.failed_over {
        s.failed_over = false;
        s.masters[old].data = s.masters[new].data.clone();
        s.masters[old].run = s.masters[old].run.wrapping_add(16);
        for c in 0..s.clients.len() {
            if !s.clients[c].on_new_primary {
                continue;
            }
            s.clients[c].on_new_primary = false;
            s.chans[c * places + g.member].clear();
            guard::reconnected(cfg, s, c, g.member);
        }
        return;
    }
    s.failed_over = true;
    s.masters[new].run = s.masters[new].run.wrapping_add(16);
    for c in 0..s.clients.len() {
        if cfg.clients[c].keeps_old_primary {
            continue;
        }
        s.clients[c].on_new_primary = true;
        s.chans[c * places + g.member].clear();
        guard::reconnected(cfg, s, c, g.member);
    }
}
