//! Counterexample traces, one line per step: `t=3 c1 -> m0 acquire v16 (ttl 1000 ms) =>
//! granted`, with what the step changed noted after it.

use stateright::Path;

use crate::config::Mode;
use crate::log::Log;
use crate::master::Reply;
use crate::model::{Action, Redlock};
use crate::state::{Req, State};

/// A request in words.
pub(crate) fn req(r: &Req) -> String {
    match *r {
        Req::Acquire {
            value,
            ttl,
            mode,
            record,
            fenced,
        } => {
            let mode = if mode == Mode::Read { " read" } else { "" };
            let rec = if record { " +record" } else { "" };
            let fence = if fenced { " +fence counter" } else { "" };
            format!("acquire{mode} v{value} (ttl {ttl} ms{rec}{fence})")
        }
        Req::Record { ttl } => format!("record ttl {ttl} ms"),
        Req::Fence { value, token } => format!("write back token {token} for v{value}"),
        Req::Extend { value, ttl } => format!("extend v{value} to {ttl} ms"),
        Req::Release { value } => format!("release v{value}"),
        Req::Verify => "verify (guard script)".to_owned(),
    }
}

/// A reply in words.
pub(crate) fn reply(r: &Reply) -> String {
    match *r {
        Reply::Granted {
            token,
            epoch,
            old_marker,
        } => {
            let mut s = "granted".to_owned();
            if token > 0 {
                s += &format!(", counter {token}");
            }
            if let Some(e) = epoch {
                s += &format!(", epoch {e}");
            }
            if let Some(m) = old_marker {
                s += &format!(", marker run {m}");
            }
            s
        }
        Reply::Taken => "taken".to_owned(),
        Reply::Flag(true) => "ok".to_owned(),
        Reply::Flag(false) => "not ours".to_owned(),
        Reply::Released(d) => if d { "deleted" } else { "nothing to delete" }.to_owned(),
        Reply::Epoch {
            epoch,
            since,
            now_m,
        } => format!(
            "epoch {epoch}, since {}, now {now_m} ms",
            crate::guard::show(since)
        ),
        Reply::Info { run, uptime_s } => format!("run {run}, up {uptime_s} s; marker written"),
    }
}

/// One step in words.
pub(crate) fn step(model: &Redlock, s: &State, a: Action) -> String {
    let cfg = &model.cfg;
    let n = cfg.n();
    let t = s.now(cfg.tick_ms);
    let head = |c: u8, m: u8| {
        s.chans[usize::from(c) * n + usize::from(m)]
            .first()
            .map(req)
            .unwrap_or_default()
    };
    let what = match a {
        Action::Tick => format!("time passes: t={} ms", t + cfg.tick_ms as i64),
        Action::Acquire(c) => {
            let spec = cfg.clients[usize::from(c)];
            format!(
                "c{c} starts acquiring (ttl {} ms), to every master",
                spec.ttl_ms
            )
        }
        Action::Release(c) => format!("c{c} releases, to every master"),
        Action::Extend(c) => format!("c{c} extends, to every master"),
        Action::Cancel(c) => format!("c{c}'s caller drops the acquisition"),
        Action::Deliver(c, m) => format!("c{c} -> m{m} {}", head(c, m)),
        Action::LoseReply(c, m) => format!("c{c} -> m{m} {} (reply lost)", head(c, m)),
        Action::Duplicate(c, m) => {
            format!("c{c} -> m{m} {} (duplicated: stays queued)", head(c, m))
        }
        Action::Drop(c, m) => format!("c{c} -> m{m} {} LOST", head(c, m)),
        Action::Restart(m, keep) => {
            if cfg.masters[usize::from(m)].durable {
                format!("m{m} restarts (appendfsync always: keeps its data)")
            } else if keep {
                format!("m{m} restarts, loses its lock keys and ttl records, keeps its marker")
            } else {
                format!("m{m} restarts empty")
            }
        }
        Action::Flush(m) => format!("FLUSHALL on m{m}"),
        Action::Gain(m) => format!("m{m}'s clock jumps {} ms ahead", cfg.faults.gain_ms),
    };
    let mut after = s.clone();
    let mut log = Log::verbose();
    model.apply(&mut after, a, &mut log);
    let notes = log.lines();
    let mut line = format!("t={t:>5} {what}");
    for note in notes {
        line += " | ";
        line += &note;
    }
    line
}

/// A whole path, one line per step, ending with who holds the lock.
pub(crate) fn lines(model: &Redlock, path: &Path<State, Action>) -> Vec<String> {
    let cfg = &model.cfg;
    let mut out = Vec::new();
    let steps = path.clone().into_vec();
    for (s, a) in &steps {
        if let Some(a) = a {
            out.push(step(model, s, *a));
        }
    }
    if let Some((last, _)) = steps.last() {
        let now = last.now(cfg.tick_ms);
        let held: Vec<String> = model
            .holders(last)
            .iter()
            .map(|&(c, _)| {
                let h = last.clients[c].held(now).copied();
                let d = h.map(|h| h.deadline).unwrap_or_default();
                format!("c{c} (until {d} ms)")
            })
            .collect();
        out.push(format!("t={now:>5} holding now: {}", held.join(", ")));
        if let Some((m, victim, culprit)) = last.history.overwrite {
            out.push(format!(
                "        m{m}: v{culprit}'s request changed v{victim}'s entry"
            ));
        }
    }
    out
}
