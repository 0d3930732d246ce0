//! What a client does, as the library does it: each function names the library code it
//! models (`src/quorum.rs`, `src/lock.rs`, `src/renewal.rs`, `src/restart_guard.rs`).
//! A client holds up to two locks (slots); their renewals travel in one batch.

use std::time::Duration;

use redquorum::rules;

use crate::cluster;
use crate::config::{Config, Kind, Moved};
use crate::generation;
use crate::guard;
use crate::log::Log;
use crate::master::Reply;
use crate::state::{Hold, Next, Phase, Req, Round, State, Value};

/// The value of client `c`'s `i`-th acquisition of lock `slot`.
pub(crate) fn value_of(c: usize, slot: usize, i: u8) -> Value {
    (c as u8) * 16 + (slot as u8) * 8 + i
}

/// `start + ttl − drift` (`quorum::acquire`, `quorum::extend`): the library's validity
/// window, in whole milliseconds (rounded down: a deadline never later than the library's).
pub(crate) fn deadline(cfg: &Config, start: i64, ttl_ms: u64) -> i64 {
    let ttl = Duration::from_millis(ttl_ms);
    let window = rules::validity_window(ttl, cfg.drift.allowance(ttl));
    start + window.as_millis() as i64
}

/// Members client `c` cannot reach, as a bit set: a round counts them as failed at once
/// (connection refused).
fn unreachable(cfg: &Config, c: usize) -> u8 {
    (0..cfg.n())
        .filter(|&m| !cfg.reaches(c, m))
        .fold(0, |set, m| set | 1 << m)
}

/// Sends `req` to every member client `c` reaches (a fan-out: one request per
/// connection, all at once); `req(m)` names the place (on a cluster member, the slot) and
/// the request.
fn fan_out(cfg: &Config, s: &mut State, c: usize, req: impl Fn(usize) -> Option<(usize, Req)>) {
    let places = cfg.places();
    for m in (0..cfg.n()).filter(|&m| cfg.reaches(c, m)) {
        if let Some((p, r)) = req(m) {
            s.chans[c * places + p].push(r);
        }
    }
}

/// The hash slot of client `c`'s lock `slot` (on a cluster member).
fn hash_slot(cfg: &Config, c: usize, slot: usize) -> u8 {
    Config::hash_slot(cfg.clients[c].locks[slot])
}

/// Members on which client `c` holds a ttl record `>= ttl` sent less than `ttl/2` ago
/// (`RestartGuard::covered`), as a bit set; on a cluster member, where a lock in hash
/// slot `hs` records.
fn covered(cfg: &Config, s: &State, c: usize, hs: u8, now: i64, ttl: u64) -> u8 {
    recent(cfg, s, c, hs, now, ttl, rules::record_due)
}

/// Members where the record of `ttl` needs no refresh in passing
/// (`RestartGuard::refresh_due` says no).
fn refreshed(cfg: &Config, s: &State, c: usize, hs: u8, now: i64, ttl: u64) -> u8 {
    recent(cfg, s, c, hs, now, ttl, rules::record_refresh)
}

fn recent(
    cfg: &Config,
    s: &State,
    c: usize,
    hs: u8,
    now: i64,
    ttl: u64,
    due: fn(Option<Duration>, Duration) -> bool,
) -> u8 {
    let mut set = 0;
    for m in 0..cfg.n() {
        let r = &s.clients[c].recorded[cfg.record_place(m, hs)];
        let since = r
            .filter(|&(_, t)| t >= ttl)
            .map(|(sent, _)| Duration::from_millis((now - sent).max(0) as u64));
        if !due(since, Duration::from_millis(ttl)) {
            set |= 1 << m;
        }
    }
    set
}

/// `RestartGuard::ensure_records`: when the cached records of `ttl` do not cover a
/// quorum, a record round (`record.lua` on every member not covered) comes first. Returns
/// whether it started.
fn record_first(
    cfg: &Config,
    s: &mut State,
    c: usize,
    slot: usize,
    value: Value,
    ttl: u64,
    next: Next,
) -> bool {
    let now = s.now(cfg.tick_ms);
    let hs = hash_slot(cfg, c, slot);
    let covered = covered(cfg, s, c, hs, now, ttl);
    if !cfg.record_first() || covered.count_ones() as usize >= cfg.q() {
        return false;
    }
    let mut round = Round::new(value, now, ttl);
    round.yes = covered;
    round.no = unreachable(cfg, c) & !covered;
    s.clients[c].slots[slot].phase = Phase::Recording(round, next);
    fan_out(cfg, s, c, |m| {
        (covered & (1 << m) == 0).then_some((cfg.record_place(m, hs), Req::Record { ttl }))
    });
    true
}

/// `quorum::acquire`: one attempt, `start` taken before the first request.
pub(crate) fn acquire(cfg: &Config, s: &mut State, c: usize, slot: usize) {
    let spec = cfg.clients[c];
    let client = &mut s.clients[c];
    let value = value_of(c, slot, client.slots[slot].started);
    client.slots[slot].started += 1;
    client.slots[slot].orphans = 0;
    client.longest_ms = client.longest_ms.max(spec.ttl_ms);
    if !record_first(cfg, s, c, slot, value, spec.ttl_ms, Next::Acquire) {
        send_acquire(cfg, s, c, slot, value);
    }
}

/// The acquire round itself.
fn send_acquire(cfg: &Config, s: &mut State, c: usize, slot: usize, value: Value) {
    let now = s.now(cfg.tick_ms);
    let spec = cfg.clients[c];
    let ttl = spec.ttl_ms;
    // The hot path refreshes the record in passing when `rules::record_refresh` says so;
    // the scripts always record. Without the epoch guard nobody records.
    // On a cluster member, only a lock in the slot of the member's records can record in
    // passing (a script or pipeline touches one slot's node).
    let hot = cfg.kind == Kind::Mutex && !spec.fenced && spec.locks[slot].count_ones() == 1;
    let hs = hash_slot(cfg, c, slot);
    let fresh = refreshed(cfg, s, c, hs, now, ttl);
    let mut round = Round::new(value, now, ttl);
    round.no = unreachable(cfg, c);
    s.clients[c].slots[slot].phase = Phase::Acquiring(round);
    let res = spec.locks[slot];
    fan_out(cfg, s, c, |m| {
        let p = cfg.place(m, hs);
        let req = Req::Acquire {
            value,
            ttl,
            mode: spec.mode,
            res,
            record: cfg.v2() && cfg.records_at(p) && (!hot || fresh & (1 << m) == 0),
            fenced: spec.fenced,
        };
        Some((p, req))
    });
}

/// The round guard's cleanup (`Round::drop` → `spawn_release`): the value-checked release
/// to every member, from a task that outlives the caller.
fn cleanup(cfg: &Config, s: &mut State, c: usize, slot: usize, value: Value, log: &mut Log) {
    forget(cfg, s, c, value);
    generation::send_release(cfg, s, c, slot, value);
    s.clients[c].slots[slot].phase = Phase::Idle;
    log.note(|| format!("c{c} gives up: releases v{value} on every master"));
}

/// `Lock::release`: stops the keep-alive (the gate waits for an extension in flight, so
/// this is only enabled while no extension round is open), then the value-checked delete
/// on every member from a spawned task: a cancelled caller cannot stop it.
pub(crate) fn release(cfg: &Config, s: &mut State, c: usize, slot: usize) {
    if let Phase::Holding(h) = s.clients[c].slots[slot].phase {
        let value = h.value;
        forget(cfg, s, c, value);
        generation::send_release(cfg, s, c, slot, value);
        s.clients[c].slots[slot].phase = Phase::Idle;
    }
}

/// Drops the acquire and write-back requests of `value` still queued on `c`'s current
/// connections, once their round is decided. Their late arrival would only set an entry of
/// ours that nobody counts and that the release queued behind them deletes, write a ttl
/// record, or raise a counter, none of which can let anyone in; dropping them is the
/// behaviour where they were lost. Extensions stay: a late extension is exactly what
/// control (c) is about. Requests on a torn-down generation stay too: whether they run
/// before or after the release is finding 5.
fn forget(cfg: &Config, s: &mut State, c: usize, value: Value) {
    let places = cfg.places();
    for p in 0..places {
        s.chans[c * places + p].retain(|r| {
            !matches!(r, Req::Acquire { value: v, .. } | Req::Fence { value: v, .. } if *v == value)
        });
    }
}

/// A caller dropping its acquisition mid-round: the round guard releases every member.
pub(crate) fn cancel(cfg: &Config, s: &mut State, c: usize, slot: usize, log: &mut Log) {
    let value = match &s.clients[c].slots[slot].phase {
        Phase::Acquiring(r) | Phase::Fencing { round: r, .. } => r.value,
        Phase::Recording(_, Next::Acquire) => {
            s.clients[c].slots[slot].phase = Phase::Idle;
            return;
        }
        _ => return,
    };
    cleanup(cfg, s, c, slot, value, log);
}

/// A renewal tick (`renewal::Inner::renew`): every held lock of the client with
/// extensions left, in one batch — one pipeline per member carrying every lock's
/// value-checked extension (`Member::extend_many`), each lock counted on its own. An
/// `extend_with` to a longer ttl (one lock) needs its records first.
pub(crate) fn extend(cfg: &Config, s: &mut State, c: usize) {
    let spec = cfg.clients[c];
    let now = s.now(cfg.tick_ms);
    let ttl = spec.extend_ttl_ms.unwrap_or(spec.ttl_ms);
    if cfg.v2() {
        // The epoch guard counts `extend_with` ttls in the client's longest ttl.
        s.clients[c].longest_ms = s.clients[c].longest_ms.max(ttl);
    }
    let batch: Vec<(usize, Hold)> = s.clients[c]
        .slots
        .iter()
        .enumerate()
        .filter_map(|(i, slot)| match slot.phase {
            Phase::Holding(h) if h.live(now) && h.extensions_left > 0 => Some((i, h)),
            _ => None,
        })
        .collect();
    if let [(slot, h)] = batch[..]
        && ttl > spec.ttl_ms
        && record_first(cfg, s, c, slot, h.value, ttl, Next::Extend(h))
    {
        return;
    }
    send_extend(cfg, s, c, &batch, ttl);
}

fn send_extend(cfg: &Config, s: &mut State, c: usize, batch: &[(usize, Hold)], ttl: u64) {
    let now = s.now(cfg.tick_ms);
    for &(slot, h) in batch {
        let mut round = Round::new(h.value, now, ttl);
        round.no = unreachable(cfg, c);
        s.clients[c].slots[slot].phase = Phase::Extending(h, round);
    }
    let (Some(&(first_slot, first)), second) = (batch.first(), batch.get(1)) else {
        return;
    };
    let places = cfg.places();
    for m in (0..cfg.n()).filter(|&m| cfg.reaches(c, m)) {
        // One pipeline per member; on a cluster member, one per slot's node.
        let p = cfg.place(m, hash_slot(cfg, c, first_slot));
        let q = second.map(|&(slot, h)| (cfg.place(m, hash_slot(cfg, c, slot)), h));
        let also = q.filter(|&(q, _)| q == p).map(|(_, h)| h.value);
        s.chans[c * places + p].push(Req::Extend {
            value: first.value,
            also,
            ttl,
        });
        if let Some((q, h)) = q.filter(|&(q, _)| q != p) {
            s.chans[c * places + q].push(Req::Extend {
                value: h.value,
                also: None,
                ttl,
            });
        }
    }
}

/// The slot whose open round `req` belongs to.
fn slot_of(s: &State, c: usize, value: Value) -> Option<usize> {
    s.clients[c]
        .slots
        .iter()
        .position(|slot| slot.round().is_some_and(|r| r.value == value))
}

/// Client `c` handles the answer to `req` from place `p` (a member, or a cluster slot),
/// then decides its rounds if it can.
pub(crate) fn on_reply(
    cfg: &Config,
    s: &mut State,
    c: usize,
    p: usize,
    req: Req,
    reply: Reply,
    log: &mut Log,
) {
    let now = s.now(cfg.tick_ms);
    let m = cfg.member_of(p);
    if let Reply::Moved { slot: hs, node } = reply {
        on_moved(cfg, s, c, p, req, hs, node, log);
        return decide(cfg, s, c, false, log);
    }
    match req {
        Req::Verify | Req::Read { .. } => return guard::on_reply(cfg, s, c, p, req, reply, log),
        Req::Release { .. } | Req::Vouch { .. } => return,
        Req::Record { ttl } => {
            // Every lock waiting for this ttl's records.
            for slot in 0..s.clients[c].slots.len() {
                if let Phase::Recording(r, _) = s.clients[c].slots[slot].phase
                    && r.ttl == ttl
                {
                    s.clients[c].recorded[p] = Some((r.start, ttl));
                    vote(s, c, slot, m, reply == Reply::Flag(true));
                }
            }
        }
        Req::Acquire { value, record, .. } => {
            let Some(slot) = slot_of(s, c, value) else {
                return;
            };
            // The view the grant counts against: the slot's (the member's, in control (a)).
            let e = cfg.epoch_place(p);
            let client = &mut s.clients[c];
            let Phase::Acquiring(r) = &mut client.slots[slot].phase else {
                return;
            };
            let counted = match reply {
                Reply::Granted { token, .. } => {
                    if record {
                        client.recorded[p] = Some((r.start, r.ttl));
                    }
                    let check_id = cfg
                        .cluster
                        .is_some_and(|g| g.grant_identity && cfg.in_cluster(p));
                    let admitted = guard::admit(cfg, &mut client.views[e], &reply, now, check_id);
                    if admitted.is_ok() {
                        r.token = r.token.max(token);
                    }
                    admitted
                }
                Reply::NotReplicated => Err("not replicated (WAIT)"),
                _ => Err("taken"),
            };
            if let Err(why) = counted {
                log.note(|| format!("not counted: {why}"));
            }
            let reverify = s.clients[c].views[e].verified.is_none();
            vote(s, c, slot, m, counted.is_ok());
            if reverify {
                guard::need(cfg, s, c, e);
            }
        }
        Req::Fence { value, .. } => {
            if let Some(slot) = slot_of(s, c, value) {
                vote(s, c, slot, m, reply == Reply::Flag(true));
            }
        }
        Req::Extend { value, also, ttl } => {
            let (first, second) = match reply {
                // Control: the pipeline answered, so every lock of the batch counts.
                Reply::Extended(..) if !cfg.batch_per_lock => (true, true),
                Reply::Extended(a, b) => (a, b.unwrap_or(false)),
                _ => {
                    log.note(|| "not counted: not replicated (WAIT)".to_owned());
                    (false, false)
                }
            };
            for (v, ok) in [(Some(value), first), (also, second)] {
                let Some(slot) = v.and_then(|v| slot_of(s, c, v)) else {
                    continue;
                };
                if !matches!(s.clients[c].slots[slot].phase, Phase::Extending(..)) {
                    continue;
                }
                if ok && cfg.v2() && cfg.records_at(p) {
                    let start = s.clients[c].slots[slot].round().map_or(now, |r| r.start);
                    s.clients[c].recorded[p] = Some((start, ttl));
                }
                vote(s, c, slot, m, ok);
            }
        }
    }
    decide(cfg, s, c, false, log);
}

/// A cluster node answered `MOVED slot node`: the client's slot map now names `node`.
/// The design (`Moved::Reverify`): that vote fails, and so does every request still queued
/// for the slot (they went to the old node, which answers each with `MOVED`); releases
/// follow the redirect (a value-checked delete cannot let anyone in); the slot is
/// verified on its new node before any of its grants count. Control (b)
/// (`Moved::Follow`): the request is resent on the new node, its vote still open, and the
/// slot's view is kept.
#[allow(clippy::too_many_arguments)]
fn on_moved(
    cfg: &Config,
    s: &mut State,
    c: usize,
    p: usize,
    req: Req,
    hs: u8,
    node: u8,
    log: &mut Log,
) {
    let places = cfg.places();
    s.clients[c].route[usize::from(hs)] = node;
    if cfg.cluster.is_some_and(|g| g.moved == Moved::Follow) {
        log.note(|| format!("resent on {}", cluster::name(node)));
        s.chans[c * places + p].push(req);
        return;
    }
    let m = cfg.member_of(p);
    let queued = std::mem::take(&mut s.chans[c * places + p]);
    let (releases, failed): (Vec<Req>, Vec<Req>) = queued
        .into_iter()
        .partition(|r| matches!(r, Req::Release { .. }));
    s.chans[c * places + p] = releases;
    for r in std::iter::once(req).chain(failed) {
        fail(s, c, m, r);
    }
    log.note(|| {
        format!(
            "not counted: slot s{hs} is on {} now; verified again there",
            cluster::name(node)
        )
    });
    guard::moved(cfg, s, c, p);
}

/// Member `m`'s answer to `req` failed: a vote against, for whichever round it belongs to.
fn fail(s: &mut State, c: usize, m: usize, req: Req) {
    match req {
        Req::Acquire { value, .. } | Req::Fence { value, .. } => {
            if let Some(slot) = slot_of(s, c, value) {
                vote(s, c, slot, m, false);
            }
        }
        Req::Extend { value, also, .. } => {
            for v in std::iter::once(value).chain(also) {
                if let Some(slot) = slot_of(s, c, v)
                    && matches!(s.clients[c].slots[slot].phase, Phase::Extending(..))
                {
                    vote(s, c, slot, m, false);
                }
            }
        }
        Req::Record { ttl } => {
            for slot in 0..s.clients[c].slots.len() {
                if let Phase::Recording(r, _) = s.clients[c].slots[slot].phase
                    && r.ttl == ttl
                {
                    vote(s, c, slot, m, false);
                }
            }
        }
        Req::Verify | Req::Read { .. } | Req::Release { .. } | Req::Vouch { .. } => {}
    }
}

/// Member `m`'s vote in `slot`'s open round.
fn vote(s: &mut State, c: usize, slot: usize, m: usize, yes: bool) {
    if let Some(round) = s.clients[c].slots[slot].round_mut()
        && round.pending(m)
    {
        if yes {
            round.yes |= 1 << m;
        } else {
            round.no |= 1 << m;
        }
    }
}

/// `quorum::decide` with `rules::decision`, and what follows a decided round, for every
/// lock of client `c`. At a tick (`timeout`) the members still pending have failed (their
/// node timeout is below a tick).
pub(crate) fn decide(cfg: &Config, s: &mut State, c: usize, timeout: bool, log: &mut Log) {
    for slot in 0..s.clients[c].slots.len() {
        decide_slot(cfg, s, c, slot, timeout, log);
    }
}

fn decide_slot(cfg: &Config, s: &mut State, c: usize, slot: usize, timeout: bool, log: &mut Log) {
    let (n, q) = (cfg.n(), cfg.q());
    let now = s.now(cfg.tick_ms);
    let Some(&round) = s.clients[c].slots[slot].round() else {
        return;
    };
    let pending = if timeout {
        n - round.yes_count() - round.no_count()
    } else {
        0
    };
    let Some(granted) = rules::decision(round.yes_count(), round.no_count() + pending, n, q) else {
        return;
    };
    let spec = cfg.clients[c];
    let min_validity = (spec.ttl_ms / 10) as i64;
    let phase = s.clients[c].slots[slot].phase.clone();
    match phase {
        Phase::Recording(r, next) => match (granted, next) {
            (true, Next::Acquire) => send_acquire(cfg, s, c, slot, r.value),
            (true, Next::Extend(h)) => send_extend(cfg, s, c, &[(slot, h)], r.ttl),
            (false, Next::Acquire) => s.clients[c].slots[slot].phase = Phase::Idle,
            (false, Next::Extend(mut h)) => {
                h.extensions_left = h.extensions_left.saturating_sub(1);
                s.clients[c].slots[slot].phase = Phase::Holding(h);
            }
        },
        Phase::Acquiring(r) if granted && spec.fenced => {
            // `quorum::write_back`: raise the counters of a quorum to T, where our key is.
            let token = r.token;
            let value = r.value;
            forget(cfg, s, c, value);
            let mut round = Round::new(value, now, r.ttl);
            round.no = unreachable(cfg, c);
            s.clients[c].slots[slot].phase = Phase::Fencing {
                start: r.start,
                token,
                round,
            };
            log.note(|| format!("c{c} granted, token {token}: writes it back"));
            let hs = hash_slot(cfg, c, slot);
            fan_out(cfg, s, c, |m| {
                Some((cfg.place(m, hs), Req::Fence { value, token }))
            });
        }
        Phase::Acquiring(r) if granted => hold(
            cfg,
            s,
            c,
            slot,
            r.value,
            r.start,
            r.ttl,
            0,
            min_validity,
            log,
        ),
        Phase::Fencing {
            start,
            token,
            round,
        } if granted => hold(
            cfg,
            s,
            c,
            slot,
            round.value,
            start,
            round.ttl,
            token,
            min_validity,
            log,
        ),
        Phase::Acquiring(r) | Phase::Fencing { round: r, .. } => {
            cleanup(cfg, s, c, slot, r.value, log)
        }
        Phase::Extending(mut h, r) => {
            h.extensions_left = h.extensions_left.saturating_sub(1);
            if granted {
                // `Shared::push_deadline`: never earlier than it was.
                h.deadline = h.deadline.max(deadline(cfg, r.start, r.ttl));
                let d = h.deadline;
                log.note(|| format!("c{c} extended v{}: deadline {d} ms", h.value));
            } else {
                log.note(|| {
                    format!(
                        "c{c} extension of v{} failed: the old deadline stands",
                        h.value
                    )
                });
            }
            s.clients[c].slots[slot].phase = Phase::Holding(h);
        }
        _ => {}
    }
}

/// The end of `quorum::acquire`: the deadline, the `min_validity` check, the lock handed
/// to the caller.
#[allow(clippy::too_many_arguments)]
fn hold(
    cfg: &Config,
    s: &mut State,
    c: usize,
    slot: usize,
    value: Value,
    start: i64,
    ttl: u64,
    token: u64,
    min_validity: i64,
    log: &mut Log,
) {
    let now = s.now(cfg.tick_ms);
    let deadline = deadline(cfg, start, ttl);
    forget(cfg, s, c, value);
    if deadline - now <= min_validity {
        log.note(|| format!("c{c}: validity exhausted"));
        return cleanup(cfg, s, c, slot, value, log);
    }
    let spec = cfg.clients[c];
    s.clients[c].slots[slot].phase = Phase::Holding(Hold {
        value,
        deadline,
        token,
        extensions_left: spec.extensions,
    });
    let h = &mut s.history;
    h.acquired = 1;
    h.holders |= 1 << c;
    if spec.fenced {
        if token <= h.max_token {
            h.token_regressed = true;
        }
        h.max_token = h.max_token.max(token);
    }
    log.note(|| {
        let fence = if spec.fenced {
            format!(", token {token}")
        } else {
            String::new()
        };
        format!("c{c} HOLDS v{value} until {deadline} ms{fence}")
    });
}

/// A tick: every open round and verification times out, and a lock past its deadline is
/// no longer held (its keys expire by their ttl).
pub(crate) fn tick(cfg: &Config, s: &mut State, log: &mut Log) {
    let now = s.now(cfg.tick_ms);
    for c in 0..s.clients.len() {
        decide(cfg, s, c, true, log);
        guard::timeouts(cfg, s, c, log);
        for slot in &mut s.clients[c].slots {
            if let Phase::Holding(h) = slot.phase
                && !h.live(now)
            {
                slot.phase = Phase::Idle;
            }
        }
    }
}
