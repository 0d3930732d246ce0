//! What a client does, as the library does it: each function names the library code it
//! models (`src/quorum.rs`, `src/lock.rs`, `src/renewal.rs`, `src/restart_guard.rs`).
//! A client holds up to two locks (slots); their renewals travel in one batch.

use std::time::Duration;

use redquorum::rules;

use crate::config::{Config, Kind};
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
/// connection, all at once).
fn fan_out(cfg: &Config, s: &mut State, c: usize, req: impl Fn(usize) -> Option<Req>) {
    let n = cfg.n();
    for m in (0..n).filter(|&m| cfg.reaches(c, m)) {
        if let Some(r) = req(m) {
            s.chans[c * n + m].push(r);
        }
    }
}

/// Members on which client `c` holds a ttl record `>= ttl` sent less than `ttl/2` ago
/// (`RestartGuard::covered`), as a bit set.
fn covered(s: &State, c: usize, now: i64, ttl: u64) -> u8 {
    recent(s, c, now, ttl, rules::record_due)
}

/// Members where the record of `ttl` needs no refresh in passing
/// (`RestartGuard::refresh_due` says no).
fn refreshed(s: &State, c: usize, now: i64, ttl: u64) -> u8 {
    recent(s, c, now, ttl, rules::record_refresh)
}

fn recent(
    s: &State,
    c: usize,
    now: i64,
    ttl: u64,
    due: fn(Option<Duration>, Duration) -> bool,
) -> u8 {
    let mut set = 0;
    for (m, r) in s.clients[c].recorded.iter().enumerate() {
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
    let covered = covered(s, c, now, ttl);
    if !cfg.record_first() || covered.count_ones() as usize >= cfg.q() {
        return false;
    }
    let mut round = Round::new(value, now, ttl);
    round.yes = covered;
    round.no = unreachable(cfg, c) & !covered;
    s.clients[c].slots[slot].phase = Phase::Recording(round, next);
    fan_out(cfg, s, c, |m| {
        (covered & (1 << m) == 0).then_some(Req::Record { ttl })
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
    let hot = cfg.kind == Kind::Mutex && !spec.fenced && spec.locks[slot].count_ones() == 1;
    let fresh = refreshed(s, c, now, ttl);
    let mut round = Round::new(value, now, ttl);
    round.no = unreachable(cfg, c);
    s.clients[c].slots[slot].phase = Phase::Acquiring(round);
    let res = spec.locks[slot];
    fan_out(cfg, s, c, |m| {
        Some(Req::Acquire {
            value,
            ttl,
            mode: spec.mode,
            res,
            record: cfg.v2() && (!hot || fresh & (1 << m) == 0),
            fenced: spec.fenced,
        })
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
    let n = cfg.n();
    for m in 0..n {
        s.chans[c * n + m].retain(|r| {
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
    let (Some(&(_, first)), second) = (batch.first(), batch.get(1)) else {
        return;
    };
    fan_out(cfg, s, c, |_| {
        Some(Req::Extend {
            value: first.value,
            also: second.map(|&(_, h)| h.value),
            ttl,
        })
    });
}

/// The slot whose open round `req` belongs to.
fn slot_of(s: &State, c: usize, value: Value) -> Option<usize> {
    s.clients[c]
        .slots
        .iter()
        .position(|slot| slot.round().is_some_and(|r| r.value == value))
}

/// Client `c` handles member `m`'s answer to `req`, then decides its rounds if it can.
pub(crate) fn on_reply(
    cfg: &Config,
    s: &mut State,
    c: usize,
    m: usize,
    req: Req,
    reply: Reply,
    log: &mut Log,
) {
    let now = s.now(cfg.tick_ms);
    match req {
        Req::Verify | Req::Read { .. } => return guard::on_reply(cfg, s, c, m, req, reply, log),
        Req::Release { .. } | Req::Vouch { .. } => return,
        Req::Record { ttl } => {
            // Every lock waiting for this ttl's records.
            for slot in 0..s.clients[c].slots.len() {
                if let Phase::Recording(r, _) = s.clients[c].slots[slot].phase
                    && r.ttl == ttl
                {
                    s.clients[c].recorded[m] = Some((r.start, ttl));
                    vote(s, c, slot, m, reply == Reply::Flag(true));
                }
            }
        }
        Req::Acquire { value, record, .. } => {
            let Some(slot) = slot_of(s, c, value) else {
                return;
            };
            let client = &mut s.clients[c];
            let Phase::Acquiring(r) = &mut client.slots[slot].phase else {
                return;
            };
            let counted = match reply {
                Reply::Granted { token, .. } => {
                    if record {
                        client.recorded[m] = Some((r.start, r.ttl));
                    }
                    let admitted = guard::admit(cfg, &mut client.views[m], &reply, now);
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
            let reverify = s.clients[c].views[m].verified.is_none();
            vote(s, c, slot, m, counted.is_ok());
            if reverify {
                guard::need(cfg, s, c, m);
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
                if ok && cfg.v2() {
                    let start = s.clients[c].slots[slot].round().map_or(now, |r| r.start);
                    s.clients[c].recorded[m] = Some((start, ttl));
                }
                vote(s, c, slot, m, ok);
            }
        }
    }
    decide(cfg, s, c, false, log);
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
            fan_out(cfg, s, c, |_| Some(Req::Fence { value, token }));
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
