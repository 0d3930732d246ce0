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
//! group's other replica at it); one failover per run, so that replica's data never matters
//! and its `WAIT` always succeeds.

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

/// Whether `req` to member `m` waits for the replica (`WAIT 1`) before it counts.
pub(crate) fn waits(cfg: &Config, m: usize, req: &Req) -> bool {
    match cfg.group {
        Some(g) if g.member == m => match req {
            Req::Acquire { .. } => g.wait_acquire,
            Req::Extend { .. } => g.wait_extend,
            _ => false,
        },
        _ => false,
    }
}

/// Whether the replica may still acknowledge a write on server `srv`: the first primary
/// before the failover (after it, the old primary has no replica left).
pub(crate) fn linked(cfg: &Config, s: &State, srv: usize) -> bool {
    cfg.group.is_some_and(|g| srv == g.member) && !s.failed_over
}

/// `WAIT 1` after a successful write on server `srv`: `acked` when the replica caught up
/// in time (then it has everything the primary has). A write that was not acknowledged
/// does not count.
pub(crate) fn wait(cfg: &Config, s: &mut State, srv: usize, acked: bool, reply: Reply) -> Reply {
    let success = matches!(
        reply,
        Reply::Granted { .. } | Reply::Extended(true, _) | Reply::Extended(_, Some(true))
    );
    if !success {
        return reply;
    }
    if srv == cfg.n() {
        // The new primary's own replica.
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
    cfg.group
        .is_some_and(|g| !s.failed_over && s.masters[g.member].data != s.masters[cfg.n()].data)
}

/// The sentinels promote the replica. Clients that cannot reach the old primary any
/// more lose their connection and reconnect to the new one (a new connection: verified
/// again, and the new `run_id` is a loss); the others keep the old primary.
pub(crate) fn failover(cfg: &Config, s: &mut State) {
    let Some(g) = cfg.group else {
        return;
    };
    s.failed_over = true;
    s.budget.failovers -= 1;
    let places = cfg.places();
    for c in 0..s.clients.len() {
        if cfg.clients[c].keeps_old_primary {
            continue;
        }
        s.clients[c].on_new_primary = true;
        s.chans[c * places + g.member].clear();
        guard::reconnected(cfg, s, c, g.member);
    }
}
