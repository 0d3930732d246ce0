//! What a client does, as the library does it: each function names the library code it
//! models (`src/quorum.rs`, `src/lock.rs`, `src/renewal.rs`).

use std::time::Duration;

use redquorum::rules;

use crate::config::{Config, Kind};
use crate::guard;
use crate::log::Log;
use crate::master::Reply;
use crate::state::{Hold, Next, Phase, Req, Round, State, Value};

/// The value of client `c`'s `i`-th acquisition.
pub(crate) fn value_of(c: usize, i: u8) -> Value {
    (c as u8) * 16 + i
}

/// `start + ttl − drift` (`quorum::acquire`, `quorum::extend`): the library's validity
/// window, in whole milliseconds (rounded down: a deadline never later than the library's).
pub(crate) fn deadline(cfg: &Config, start: i64, ttl_ms: u64) -> i64 {
    let ttl = Duration::from_millis(ttl_ms);
    let window = rules::validity_window(ttl, cfg.drift.allowance(ttl));
    start + window.as_millis() as i64
}

/// Sends `req` to every master (a fan-out: one request per connection, all at once).
fn fan_out(cfg: &Config, s: &mut State, c: usize, req: impl Fn(usize) -> Req) {
    let n = cfg.n();
    for m in 0..n {
        s.chans[c * n + m].push(req(m));
    }
}

/// Masters on which client `c` holds a ttl record `>= ttl` sent less than `ttl/2` ago
/// (`rules::record_due` says no), as a bit set.
fn fresh(s: &State, c: usize, now: i64, ttl: u64) -> u8 {
    let mut set = 0;
    for (m, r) in s.clients[c].recorded.iter().enumerate() {
        let since = r
            .filter(|&(_, t)| t >= ttl)
            .map(|(sent, _)| Duration::from_millis((now - sent).max(0) as u64));
        if !rules::record_due(since, Duration::from_millis(ttl)) {
            set |= 1 << m;
        }
    }
    set
}

/// The fix for finding 1: when the cached records of `ttl` do not cover a quorum, a
/// record round (`record.lua` on every master not covered) comes first. Returns whether
/// it started.
fn record_first(cfg: &Config, s: &mut State, c: usize, value: Value, ttl: u64, next: Next) -> bool {
    let now = s.now(cfg.tick_ms);
    let covered = fresh(s, c, now, ttl);
    if !cfg.record_first() || covered.count_ones() as usize >= cfg.q() {
        return false;
    }
    let mut round = Round::new(value, now, ttl);
    round.yes = covered;
    s.clients[c].phase = Phase::Recording(round, next);
    let n = cfg.n();
    for m in (0..n).filter(|m| covered & (1 << m) == 0) {
        s.chans[c * n + m].push(Req::Record { ttl });
    }
    true
}

/// `quorum::acquire`: one attempt, `start` taken before the first request.
pub(crate) fn acquire(cfg: &Config, s: &mut State, c: usize) {
    let spec = cfg.clients[c];
    let client = &mut s.clients[c];
    let value = value_of(c, client.started);
    client.started += 1;
    client.longest_ms = client.longest_ms.max(spec.ttl_ms);
    if !record_first(cfg, s, c, value, spec.ttl_ms, Next::Acquire) {
        send_acquire(cfg, s, c, value);
    }
}

/// The acquire round itself.
fn send_acquire(cfg: &Config, s: &mut State, c: usize, value: Value) {
    let now = s.now(cfg.tick_ms);
    let spec = cfg.clients[c];
    let ttl = spec.ttl_ms;
    // The hot path (single key, unfenced mutex) records only when `rules::record_due`
    // says so; the scripts always record. Without the v2 guard nobody records.
    let hot = cfg.kind == Kind::Mutex && !spec.fenced;
    let covered = fresh(s, c, now, ttl);
    s.clients[c].phase = Phase::Acquiring(Round::new(value, now, ttl));
    fan_out(cfg, s, c, |m| Req::Acquire {
        value,
        ttl,
        mode: spec.mode,
        record: cfg.v2() && (!hot || covered & (1 << m) == 0),
        fenced: spec.fenced,
    });
}

/// The round guard's cleanup (`Round::drop` → `spawn_release`): the value-checked release
/// to every master, from a task that outlives the caller.
fn cleanup(cfg: &Config, s: &mut State, c: usize, value: Value, log: &mut Log) {
    forget(cfg, s, c, value);
    fan_out(cfg, s, c, |_| Req::Release { value });
    s.clients[c].phase = Phase::Idle;
    log.note(|| format!("c{c} gives up: releases v{value} on every master"));
}

/// `Lock::release`: stops the keep-alive (the gate waits for an extension in flight, so
/// this is only enabled while no extension round is open), then the value-checked delete
/// on every master from a spawned task: a cancelled caller cannot stop it.
pub(crate) fn release(cfg: &Config, s: &mut State, c: usize) {
    if let Phase::Holding(h) = s.clients[c].phase {
        let value = h.value;
        forget(cfg, s, c, value);
        fan_out(cfg, s, c, |_| Req::Release { value });
        s.clients[c].phase = Phase::Idle;
    }
}

/// Drops the acquire and write-back requests of `value` still queued on `c`'s connections,
/// once their round is decided. Their late arrival would only set an entry of ours that
/// nobody counts (and that a release then deletes), write a ttl record, or raise a
/// counter, none of which can let anyone in; dropping them is the behaviour where they
/// were lost. Extensions stay: a late extension is exactly what control (c) is about.
fn forget(cfg: &Config, s: &mut State, c: usize, value: Value) {
    let n = cfg.n();
    for m in 0..n {
        s.chans[c * n + m].retain(|r| {
            !matches!(r, Req::Acquire { value: v, .. } | Req::Fence { value: v, .. } if *v == value)
        });
    }
}

/// A caller dropping its acquisition mid-round: the round guard releases every master.
pub(crate) fn cancel(cfg: &Config, s: &mut State, c: usize, log: &mut Log) {
    let value = match &s.clients[c].phase {
        Phase::Acquiring(r) | Phase::Fencing { round: r, .. } => r.value,
        Phase::Recording(_, Next::Acquire) => {
            s.clients[c].phase = Phase::Idle;
            return;
        }
        _ => return,
    };
    cleanup(cfg, s, c, value, log);
}

/// `Lock::extend_with` / a keep-alive renewal (`renewal::Inner::renew`): the value-checked
/// extension on every master.
pub(crate) fn extend(cfg: &Config, s: &mut State, c: usize) {
    let spec = cfg.clients[c];
    let Phase::Holding(h) = s.clients[c].phase else {
        return;
    };
    let ttl = spec.extend_ttl_ms.unwrap_or(spec.ttl_ms);
    if cfg.v2() {
        // The v2 guard counts `extend_with` ttls in the client's longest ttl; the old one
        // did not.
        s.clients[c].longest_ms = s.clients[c].longest_ms.max(ttl);
    }
    if !record_first(cfg, s, c, h.value, ttl, Next::Extend(h)) {
        send_extend(cfg, s, c, h, ttl);
    }
}

fn send_extend(cfg: &Config, s: &mut State, c: usize, h: Hold, ttl: u64) {
    let now = s.now(cfg.tick_ms);
    s.clients[c].phase = Phase::Extending(h, Round::new(h.value, now, ttl));
    let value = h.value;
    fan_out(cfg, s, c, |_| Req::Extend { value, ttl });
}

/// Client `c` handles master `m`'s answer to `req`, then decides its round if it can.
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
        Req::Verify => return guard::on_reply(cfg, s, c, m, reply, log),
        Req::Release { .. } => return,
        _ => {}
    }
    let mut reverify = false;
    let client = &mut s.clients[c];
    let (round, yes) = match (&mut client.phase, req, reply) {
        (Phase::Acquiring(r), Req::Acquire { value, record, .. }, reply) if r.value == value => {
            let counted = match reply {
                Reply::Granted { .. } => {
                    if record {
                        client.recorded[m] = Some((r.start, r.ttl));
                    }
                    let admitted = guard::admit(cfg, &mut client.views[m], &reply, now);
                    if client.views[m].verified.is_none() {
                        reverify = true;
                    }
                    admitted
                }
                _ => Err("taken"),
            };
            if let (Ok(()), Reply::Granted { token, .. }) = (counted, reply) {
                r.token = r.token.max(token);
            }
            if let Err(why) = counted {
                log.note(|| format!("not counted: {why}"));
            }
            (r, counted.is_ok())
        }
        (Phase::Fencing { round: r, .. }, Req::Fence { value, .. }, Reply::Flag(ok))
            if r.value == value =>
        {
            (r, ok)
        }
        (Phase::Recording(r, _), Req::Record { ttl }, Reply::Flag(ok)) if r.ttl == ttl => {
            client.recorded[m] = Some((r.start, ttl));
            (r, ok)
        }
        (Phase::Extending(_, r), Req::Extend { value, ttl }, Reply::Flag(ok))
            if r.value == value =>
        {
            if ok && cfg.v2() {
                client.recorded[m] = Some((r.start, ttl));
            }
            (r, ok)
        }
        _ => return,
    };
    if round.pending(m) {
        if yes {
            round.yes |= 1 << m;
        } else {
            round.no |= 1 << m;
        }
    }
    if reverify {
        guard::need(cfg, s, c, m);
    }
    decide(cfg, s, c, false, log);
}

/// `quorum::decide` with `rules::decision`, and what follows a decided round. At a tick
/// (`timeout`) the masters still pending have failed (their node timeout is below a tick).
pub(crate) fn decide(cfg: &Config, s: &mut State, c: usize, timeout: bool, log: &mut Log) {
    let (n, q) = (cfg.n(), cfg.q());
    let now = s.now(cfg.tick_ms);
    let round = match &s.clients[c].phase {
        Phase::Acquiring(r)
        | Phase::Fencing { round: r, .. }
        | Phase::Extending(_, r)
        | Phase::Recording(r, _) => *r,
        _ => return,
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
    match s.clients[c].phase {
        Phase::Recording(r, next) => match (granted, next) {
            (true, Next::Acquire) => send_acquire(cfg, s, c, r.value),
            (true, Next::Extend(h)) => send_extend(cfg, s, c, h, r.ttl),
            (false, Next::Acquire) => s.clients[c].phase = Phase::Idle,
            (false, Next::Extend(mut h)) => {
                h.extensions_left = h.extensions_left.saturating_sub(1);
                s.clients[c].phase = Phase::Holding(h);
            }
        },
        Phase::Acquiring(r) if granted && spec.fenced => {
            // `quorum::write_back`: raise the counters of a quorum to T, where our key is.
            let token = r.token;
            let value = r.value;
            forget(cfg, s, c, value);
            s.clients[c].phase = Phase::Fencing {
                start: r.start,
                token,
                round: Round::new(value, now, r.ttl),
            };
            log.note(|| format!("c{c} granted, token {token}: writes it back"));
            fan_out(cfg, s, c, |_| Req::Fence { value, token });
        }
        Phase::Acquiring(r) if granted => {
            hold(cfg, s, c, r.value, r.start, r.ttl, 0, min_validity, log)
        }
        Phase::Fencing {
            start,
            token,
            round,
        } if granted => hold(
            cfg,
            s,
            c,
            round.value,
            start,
            round.ttl,
            token,
            min_validity,
            log,
        ),
        Phase::Acquiring(r) | Phase::Fencing { round: r, .. } => cleanup(cfg, s, c, r.value, log),
        Phase::Extending(mut h, r) => {
            h.extensions_left = h.extensions_left.saturating_sub(1);
            if granted {
                // `Shared::push_deadline`: never earlier than it was.
                h.deadline = h.deadline.max(deadline(cfg, r.start, r.ttl));
                let d = h.deadline;
                log.note(|| format!("c{c} extended: deadline {d} ms"));
            } else {
                log.note(|| format!("c{c} extension failed: the old deadline stands"));
            }
            s.clients[c].phase = Phase::Holding(h);
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
        return cleanup(cfg, s, c, value, log);
    }
    let spec = cfg.clients[c];
    s.clients[c].phase = Phase::Holding(Hold {
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

/// A tick: every open round times out, and a lock past its deadline is no longer held
/// (its keys expire by their ttl).
pub(crate) fn tick(cfg: &Config, s: &mut State, log: &mut Log) {
    let now = s.now(cfg.tick_ms);
    for c in 0..s.clients.len() {
        decide(cfg, s, c, true, log);
        if let Phase::Holding(h) = s.clients[c].phase
            && !h.live(now)
        {
            s.clients[c].phase = Phase::Idle;
        }
    }
}
