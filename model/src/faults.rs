//! What the environment does to the members: restarts (with or without persistence),
//! `FLUSHALL`, fast clocks, `CONFIG SET appendfsync everysec` at run time, a server
//! replaced by a new one, and an operator's `commission`.

use crate::config::{CommissionRule, Config};
use crate::group;
use crate::guard;
use crate::state::State;

/// Member `m`'s server restarts at once (crash and boot in one step, the hardest case for
/// the guard). A durable one comes back with what was on disk; another loses its lock
/// keys, records, counters and memory, and keeps its epoch marker iff `keep_marker`.
/// Every connection to it breaks.
pub(crate) fn restart(cfg: &Config, s: &mut State, m: usize, keep_marker: bool) {
    let durable = cfg.masters[m].durable;
    if durable {
        s.budget.durable_restarts -= 1;
    } else {
        s.budget.data_losses -= 1;
    }
    let now = s.now(cfg.tick_ms);
    let master = &mut s.masters[m];
    let now_m = master.clock(now);
    master.restart(durable, keep_marker, now_m);
    broken(cfg, s, m);
}

/// `FLUSHALL` on member `m`'s server, which stays up (its connections too).
pub(crate) fn flush(s: &mut State, m: usize) {
    s.budget.data_losses -= 1;
    s.masters[m].data.wipe();
}

/// Member `m`'s server is replaced by a new, empty one at the same address: a new
/// `run_id`, no marker, no keys, no memory. Every connection breaks.
pub(crate) fn replace(cfg: &Config, s: &mut State, m: usize) {
    s.budget.replacements -= 1;
    let now = s.now(cfg.tick_ms);
    let master = &mut s.masters[m];
    let now_m = master.clock(now);
    master.restart(false, false, now_m);
    broken(cfg, s, m);
}

/// Every connection to member `m`'s server is broken: what was in flight is lost, and
/// each client verifies its new connection before its grants count.
fn broken(cfg: &Config, s: &mut State, m: usize) {
    let n = cfg.n();
    for c in 0..s.clients.len() {
        s.chans[c * n + m].clear();
        s.stale.retain(|&(i, _)| usize::from(i) != c * n + m);
        guard::reconnected(cfg, s, c, m);
    }
}

/// Whether an operator's `commission` of member `m` would be accepted now (it is only
/// offered then: a refused commission changes nothing). `guard-v3.md`: refused when the
/// master holds lock keys, when its marker names an epoch begun by anything other than a
/// first sight, or when any other member remembers it (with [`CommissionRule::Forgets`],
/// the last check is skipped).
pub(crate) fn commission_accepted(cfg: &Config, s: &State, m: usize) -> bool {
    let master = &s.masters[group::current(cfg, s, m)];
    let mut probe = master.clone();
    if !probe.commission(cfg, m, 0) {
        return false;
    }
    match cfg.commission {
        CommissionRule::Forgets => true,
        CommissionRule::Remembers => (0..cfg.n())
            .filter(|&j| j != m)
            .all(|j| s.masters[group::current(cfg, s, j)].data.members & (1 << m) == 0),
    }
}

/// The operator commissions member `m`: a new epoch since 0, vouched, that every client
/// counts at once; every other member remembers it.
pub(crate) fn commission(cfg: &Config, s: &mut State, m: usize) {
    s.budget.commissions -= 1;
    let epoch = s.next_epoch;
    s.next_epoch += 1;
    let srv = group::current(cfg, s, m);
    s.masters[srv].commission(cfg, m, epoch);
    for j in (0..cfg.n()).filter(|&j| j != m) {
        let srv = group::current(cfg, s, j);
        s.masters[srv].data.members |= 1 << m;
    }
}

/// `CONFIG SET appendfsync everysec` on member `m` at run time.
pub(crate) fn config_set(s: &mut State, m: usize) {
    s.budget.config_sets -= 1;
    s.masters[m].config_set_everysec();
}
