//! The client side of the restart guard: whether a grant counts, and what a client does
//! with the answers of a verification. The v2 rules follow `notes/guard-v2.md`
//! ("Epoch verification", steps 1–5); the old ones follow `src/guard.rs` (`Guard::admit`,
//! `Guard::verify`).

use std::time::Duration;

use redquorum::rules;

use crate::config::{Config, GuardMode};
use crate::log::Log;
use crate::master::Reply;
use crate::state::{BASE_MS, Req, State, Verify, View};

/// A view that counts at once: verified `epoch` (or `run_id`), no quarantine.
pub(crate) fn verified(id: u8) -> View {
    View {
        verified: Some(id),
        counts_from: i64::MIN,
        verify: Verify::Idle,
        last_run: Some(id),
        marker_gone: false,
    }
}

/// A view of a master nobody has verified on this connection.
pub(crate) fn unverified() -> View {
    View {
        verified: None,
        counts_from: i64::MIN,
        verify: Verify::Idle,
        last_run: None,
        marker_gone: false,
    }
}

/// Whether client `c`'s grant from master `m`, which read back `reply`'s marker, counts
/// toward the quorum at local time `now` (v2 step 5; old: `Guard::admit`). A grant whose
/// marker shows a restart or a loss makes the view unverified.
pub(crate) fn admit(
    cfg: &Config,
    view: &mut View,
    reply: &Reply,
    now: i64,
) -> Result<(), &'static str> {
    let Reply::Granted {
        epoch, old_marker, ..
    } = *reply
    else {
        return Err("not a grant");
    };
    let read = match cfg.guard {
        GuardMode::Off => return Ok(()),
        GuardMode::V2 { .. } => epoch,
        GuardMode::Old => old_marker,
    };
    match (view.verified, read) {
        (Some(v), Some(r)) if v == r => {
            if now >= view.counts_from {
                Ok(())
            } else {
                Err("quarantined")
            }
        }
        (None, _) => Err("not verified on this connection"),
        (Some(_), r) => {
            view.verified = None;
            view.marker_gone = r.is_none();
            Err(if r.is_none() {
                "marker gone: re-verify"
            } else {
                "marker changed: re-verify"
            })
        }
    }
}

/// Client `c` needs master `m` verified (a new connection, or a marker that changed):
/// the verification request is queued on that connection at once, as the library spawns
/// it at once. A client with nothing left to do verifies nothing.
pub(crate) fn need(cfg: &Config, s: &mut State, c: usize, m: usize) {
    let n = cfg.n();
    let client = &mut s.clients[c];
    if cfg.guard == GuardMode::Off
        || client.started >= cfg.clients[c].acquisitions
            && client.phase == crate::state::Phase::Idle
        || client.views[m].verify != Verify::Idle
    {
        return;
    }
    client.views[m].verify = Verify::Script;
    s.chans[c * n + m].push(Req::Verify);
}

/// Client `c` handles master `k`'s answer to its verification request.
pub(crate) fn on_reply(
    cfg: &Config,
    s: &mut State,
    c: usize,
    k: usize,
    reply: Reply,
    log: &mut Log,
) {
    let n = cfg.n();
    let now = s.now(cfg.tick_ms);
    let factor = cfg.drift.factor();
    let longest = s.clients[c].longest_ms;
    if s.clients[c].views[k].verify != Verify::Script {
        return;
    }
    match reply {
        Reply::Epoch {
            epoch,
            since,
            now_m,
        } => {
            // Step 3: an epoch older than any ttl counts without reading records.
            let max = redquorum::MAX_TTL + cfg.drift.allowance(redquorum::MAX_TTL);
            let view = &mut s.clients[c].views[k];
            view.verify = Verify::Idle;
            if now_m - since >= max.as_millis() as i64 {
                view.verified = Some(epoch);
                log.note(|| format!("epoch {epoch} is old: counts at once"));
                return;
            }
            // Step 3: the deployment's longest ttl, read (`ttl_read.lua`) from the other
            // masters. Read here, at the reply: a read can only happen later, when it may
            // see more records (new locks) but not fewer (records run out only as time
            // passes, and the reads finish within a node timeout, below a tick).
            let mut seen = 0;
            let mut readers = 0;
            for other in (0..n).filter(|&o| o != k) {
                let m = &mut s.masters[other];
                let now_o = m.clock(now);
                m.expire(now_o);
                seen = seen.max(m.longest(now_o));
                readers += 1;
            }
            if readers < rules::ttl_readers(n, cfg.q()) {
                return;
            }
            // Step 4: quarantined until since + L on the master's clock, as a local wait.
            let l = longest.max(seen);
            let left = rules::quarantine_left_ms(abs(since), l, abs(now_m));
            let wait = ceil_ms(rules::local_wait(left, factor));
            let view = &mut s.clients[c].views[k];
            view.counts_from = view.counts_from.max(now + wait);
            view.verified = Some(epoch);
            let until = view.counts_from;
            log.note(|| {
                format!(
                    "epoch {epoch} since {}; longest ttl {l} ms (records: {seen} ms): counts from {}",
                    show(since),
                    show(until)
                )
            });
        }
        Reply::Info { run, uptime_s } => {
            // Old guard (`Guard::verify`): the client's own longest ttl, its own last
            // run_id.
            let view = &mut s.clients[c].views[k];
            let ttl = Duration::from_millis(longest);
            let uptime = Duration::from_secs(uptime_s);
            let restarted = view.last_run.is_some_and(|p| p != run);
            let since_boot = ttl.saturating_sub(uptime.saturating_sub(Duration::from_secs(1)));
            let quarantine = if view.marker_gone && !restarted {
                ttl
            } else {
                since_boot
            };
            view.verified = Some(run);
            view.last_run = Some(run);
            view.counts_from = now + quarantine.as_millis() as i64;
            view.verify = Verify::Idle;
            let until = view.counts_from;
            log.note(|| format!("run {run}, up {uptime_s} s: counts from {}", show(until)));
        }
        _ => {}
    }
}

/// Master-relative milliseconds as the absolute time the library's functions take.
fn abs(ms: i64) -> u64 {
    (BASE_MS as i64 + ms).max(0) as u64
}

/// A wait rounded up to whole milliseconds.
fn ceil_ms(d: Duration) -> i64 {
    d.as_micros().div_ceil(1000) as i64
}

/// A master-relative time for traces.
pub(crate) fn show(ms: i64) -> String {
    if ms <= -(BASE_MS as i64) {
        "0 (commissioned)".to_owned()
    } else if ms == i64::MIN {
        "always".to_owned()
    } else {
        format!("{ms} ms")
    }
}
