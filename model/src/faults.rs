//! What the environment does to the members: restarts (with or without persistence),
//! `FLUSHALL`, fast clocks, `CONFIG SET appendfsync everysec` at run time, a server
//! replaced by a new one, and an operator's `commission`.

use redquorum::rules;

use crate::config::Config;
use crate::group;
use crate::guard;
use crate::state::{Cause, State};

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

/// Member `m`'s server is replaced by a new, empty one at a new address, which the
/// deployment's configuration now names in its place: a new `run_id`, no marker, no keys,
/// no memory; nobody remembers it (neither its `run_id` nor its address), and no client
/// has verified an epoch on it (a client configured with the new address is a new
/// `Redlock`). Every connection breaks.
pub(crate) fn replace(cfg: &Config, s: &mut State, m: usize) {
    s.budget.replacements -= 1;
    let now = s.now(cfg.tick_ms);
    let master = &mut s.masters[m];
    let now_m = master.clock(now);
    master.restart(false, false, now_m);
    master.data.members = 0;
    for other in &mut s.masters {
        other.data.members &= !(1 << m);
    }
    for c in &mut s.clients {
        c.views[m].known = false;
    }
    broken(cfg, s, m);
}

/// Every connection to member `m`'s server is broken: what was in flight is lost, and
/// each client verifies its new connection before its grants count.
fn broken(cfg: &Config, s: &mut State, m: usize) {
    let n = cfg.places();
    for c in 0..s.clients.len() {
        s.chans[c * n + m].clear();
        s.stale.retain(|&(i, _)| usize::from(i) != c * n + m);
        guard::reconnected(cfg, s, c, m);
    }
}

/// Whether an operator's `commission` of member `m` (without `force`) would be accepted
/// now; it is only offered then (a refused commission changes nothing). As
/// `RestartGuard::commission` checks, in order, from an operator who reaches every member:
/// no lock key on the server; no other member remembers it in service
/// (`CommissionRule::memory`); no member holds a live ttl record
/// (`CommissionRule::live_records`); a held lock can be ruled out — at least
/// `trusted_readers_needed` other members are trusted readers, or no member's epoch
/// records a known loss (`CommissionRule::ruled_out`, `no_lock_can_be_held`); and
/// `commission.lua`: no marker, or one begun by a first sight.
pub(crate) fn commission_accepted(cfg: &Config, s: &State, m: usize) -> bool {
    let n = cfg.n();
    let rule = cfg.commission;
    let now = s.now(cfg.tick_ms);
    let master = &s.masters[group::current(cfg, s, m)];
    let mut probe = master.clone();
    if !probe.commission(cfg, m, 0) {
        return false;
    }
    if rule.memory
        && (0..n)
            .filter(|&j| j != m)
            .any(|j| s.masters[group::current(cfg, s, j)].data.members & (1 << m) != 0)
    {
        return false;
    }
    let (mut longest, mut trusted, mut setting_up) = (0, 0, true);
    for j in 0..n {
        let server = &s.masters[group::current(cfg, s, j)];
        let info = server.read(cfg, j, server.clock(now));
        longest = longest.max(info.longest);
        setting_up &= server
            .data
            .marker
            .is_none_or(|mk| matches!(mk.cause, Cause::Commissioned | Cause::FirstSeen));
        let believed = cfg
            .epochs()
            .is_some_and(|g| guard::reader_trusted(cfg, g.readers, g.declared_ms, j, &info));
        if j != m && believed {
            trusted += 1;
        }
    }
    if rule.live_records && longest > 0 {
        return false;
    }
    let needed = rules::trusted_readers_needed(n, rules::majority(n));
    !(rule.ruled_out && trusted < needed && !setting_up)
}

/// The operator commissions member `m`: a new epoch since 0, that every client counts at
/// once and believes as a reader; every other member remembers it.
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
