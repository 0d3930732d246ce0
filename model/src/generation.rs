//! Connection generations (`src/connection.rs`): a connection torn down on an I/O error
//! is replaced by the next generation, while the server (or a proxy) may still hold bytes
//! written on the old one and process them later — after requests of the new generation.
//! Issue 19's finding 5: a release sent on the new generation can overtake the acquire it
//! releases, and the key then stays for a full ttl after the release said it was gone.

use crate::client;
use crate::config::Config;
use crate::group;
use crate::guard;
use crate::log::Log;
use crate::master::Ctx;
use crate::state::{Phase, Req, State, Value};

/// `Lock::release` / the round guard's cleanup: the value-checked delete to every member.
/// With the fix, a member whose connection carrying the acquire was torn down before the
/// acquire was answered gets no release on the new generation (the acquire may still run
/// after it): the release reports that member as not released, and its key runs out by
/// ttl.
pub(crate) fn send_release(cfg: &Config, s: &mut State, c: usize, slot: usize, value: Value) {
    let n = cfg.n();
    let places = cfg.places();
    let hs = Config::hash_slot(cfg.clients[c].locks[slot]);
    let orphans = s.clients[c].slots[slot].orphans;
    let fixed = cfg
        .generations
        .is_some_and(|g| g.release_on_acquire_generation);
    for m in (0..n).filter(|&m| cfg.reaches(c, m)) {
        if fixed && orphans & (1 << m) != 0 {
            continue;
        }
        s.chans[c * places + cfg.place(m, hs)].push(Req::Release { value });
    }
    s.clients[c].slots[slot].orphans = 0;
}

/// Client `c`'s connection to member `m` is torn down on an I/O error: what was written
/// on it stays with the server, and may still run; every request in flight on it fails
/// for the client; the next generation is a new connection, verified before its grants
/// count.
pub(crate) fn teardown(cfg: &Config, s: &mut State, c: usize, m: usize, log: &mut Log) {
    let n = cfg.places();
    s.budget.teardowns -= 1;
    let moved = std::mem::take(&mut s.chans[c * n + m]);
    for slot in &mut s.clients[c].slots {
        let Some(round) = slot.round_mut() else {
            continue;
        };
        if !round.pending(m) {
            continue;
        }
        round.no |= 1 << m;
        let value = round.value;
        let acquiring = matches!(slot.phase, Phase::Acquiring(_));
        if acquiring
            && moved
                .iter()
                .any(|r| matches!(r, Req::Acquire { value: v, .. } if *v == value))
        {
            slot.orphans |= 1 << m;
        }
    }
    log.note(|| format!("{} request(s) left with m{m}", moved.len()));
    s.stale
        .extend(moved.into_iter().map(|r| ((c * n + m) as u8, r)));
    guard::reconnected(cfg, s, c, m);
    client::decide(cfg, s, c, false, log);
}

/// The server processes the oldest request of a torn-down connection; nobody gets the
/// reply.
pub(crate) fn deliver_stale(cfg: &Config, s: &mut State, c: usize, m: usize, log: &mut Log) {
    let n = cfg.places();
    let Some((at, req)) = s.stale_head(c * n + m) else {
        return;
    };
    s.stale.remove(at);
    let srv = group::server(cfg, s, c, m);
    let now = s.now(cfg.tick_ms);
    let now_m = s.masters[srv].clock(now);
    let ctx = Ctx {
        cfg,
        member: m,
        known: s.clients[c].views[m].known,
        records: true,
    };
    let reply = s.masters[srv].apply(ctx, req, now_m, &mut s.next_epoch, &mut s.history);
    log.note(|| format!("=> {} (nobody reads it)", crate::trace::reply(&reply)));
}

/// The server notices the closed connection and discards what is left of it.
pub(crate) fn drop_stale(cfg: &Config, s: &mut State, c: usize, m: usize) {
    let chan = c * cfg.places() + m;
    s.stale.retain(|&(i, _)| usize::from(i) != chan);
}
