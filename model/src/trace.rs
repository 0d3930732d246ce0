//! Counterexample traces, one line per step: `t=3 c1 -> m0 acquire v16 (ttl 1000 ms) =>
//! granted`, with what the step changed noted after it.

use stateright::Path;

use crate::cluster;
use crate::config::{Config, Mode};
use crate::log::Log;
use crate::master::Reply;
use crate::model::{Action, Redlock};
use crate::state::{Req, State};

/// A place in words: `m1`, or `m0/s1` for a slot of a cluster member.
pub(crate) fn place(cfg: &Config, p: usize) -> String {
    if cfg.in_cluster(p) {
        format!("m{}/s{}", cfg.member_of(p), cfg.slot_at(p))
    } else {
        format!("m{p}")
    }
}

/// Where client `c` sends a request for place `p`: the place, and for a cluster slot the
/// node its slot map names (`m0/s1@B'`).
fn dest(cfg: &Config, s: &State, c: usize, p: usize) -> String {
    if cfg.in_cluster(p) {
        let node = s.clients[c].route[usize::from(cfg.slot_at(p))];
        format!("{}@{}", place(cfg, p), cluster::name(node))
    } else {
        place(cfg, p)
    }
}

/// A request in words.
pub(crate) fn req(r: &Req) -> String {
    match *r {
        Req::Acquire {
            value,
            ttl,
            mode,
            res,
            record,
            fenced,
        } => {
            let mode = if mode == Mode::Read { " read" } else { "" };
            let rec = if record { " +record" } else { "" };
            let fence = if fenced { " +fence counter" } else { "" };
            let res = if res == 1 {
                String::new()
            } else {
                format!(" resources {}", resources(res))
            };
            format!("acquire{mode} v{value}{res} (ttl {ttl} ms{rec}{fence})")
        }
        Req::Record { ttl } => format!("record ttl {ttl} ms"),
        Req::Fence { value, token } => format!("write back token {token} for v{value}"),
        Req::Extend {
            value,
            also: None,
            ttl,
        } => format!("extend v{value} to {ttl} ms"),
        Req::Extend {
            value,
            also: Some(v),
            ttl,
        } => format!("extend v{value} and v{v} to {ttl} ms (one batch)"),
        Req::Release { value } => format!("release v{value}"),
        Req::Verify => "verify (guard script)".to_owned(),
        Req::Read { of } => format!("read ttl records (verifying m{of})"),
        Req::Vouch { epoch, ttl } => format!("vouch epoch {epoch}: record {ttl} ms"),
    }
}

/// A resource set as `{r0, r1}`.
fn resources(set: u8) -> String {
    let names: Vec<String> = (0..8)
        .filter(|r| set & (1 << r) != 0)
        .map(|r| format!("r{r}"))
        .collect();
    format!("{{{}}}", names.join(", "))
}

/// A reply in words.
pub(crate) fn reply(r: &Reply) -> String {
    match *r {
        Reply::Granted {
            token,
            epoch,
            old_marker,
            ..
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
        Reply::Flag(false) => "no".to_owned(),
        Reply::Extended(a, b) => {
            let word = |ok: bool| if ok { "ok" } else { "not ours" };
            match b {
                None => word(a).to_owned(),
                Some(b) => format!("{}, {}", word(a), word(b)),
            }
        }
        Reply::NotReplicated => "WAIT: not replicated".to_owned(),
        Reply::Moved { slot, node } => format!("MOVED (s{slot} is on {})", cluster::name(node)),
        Reply::Read(info) => {
            let marker = match info.marker {
                None => "no marker".to_owned(),
                Some((vouched, since, same_run, durable)) => format!(
                    "marker since {}{}{}{}",
                    crate::guard::show(since),
                    if vouched { ", vouched" } else { "" },
                    if same_run { "" } else { ", other run_id" },
                    if durable { ", durable" } else { "" },
                ),
            };
            format!("longest {} ms, {marker}", info.longest)
        }
        Reply::Released(d) => if d { "deleted" } else { "nothing to delete" }.to_owned(),
        Reply::Epoch {
            epoch,
            since,
            now_m,
            vouched,
            ..
        } => format!(
            "epoch {epoch}, since {}, now {now_m} ms{}",
            crate::guard::show(since),
            if vouched { ", vouched" } else { "" }
        ),
        Reply::Info { run, uptime_s } => format!("run {run}, up {uptime_s} s; marker written"),
    }
}

/// One step in words.
pub(crate) fn step(model: &Redlock, s: &State, a: Action) -> String {
    let cfg = &model.cfg;
    let n = cfg.places();
    let t = s.now(cfg.tick_ms);
    let head = |c: u8, m: u8| {
        s.chans[usize::from(c) * n + usize::from(m)]
            .first()
            .map(req)
            .unwrap_or_default()
    };
    let to = |c: u8, p: u8| dest(cfg, s, usize::from(c), usize::from(p));
    let k = cfg.cluster.map_or(0, |g| g.member);
    let what = match a {
        Action::Tick => format!("time passes: t={} ms", t + cfg.tick_ms as i64),
        Action::Acquire(c, l) => {
            let spec = cfg.clients[usize::from(c)];
            let lock = if spec.slots() > 1 {
                format!(" lock {l} {}", resources(spec.locks[usize::from(l)]))
            } else if spec.locks[0] != 1 {
                format!(" {}", resources(spec.locks[0]))
            } else {
                String::new()
            };
            format!(
                "c{c} starts acquiring{lock} (ttl {} ms), to every master it reaches",
                spec.ttl_ms
            )
        }
        Action::Release(c, l) => format!("c{c} releases lock {l}"),
        Action::Extend(c) => format!("c{c} renews (keep-alive tick)"),
        Action::Cancel(c, l) => format!("c{c}'s caller drops the acquisition of lock {l}"),
        Action::Lag(c, m) => format!("c{c} -> {} {} | WAIT times out", to(c, m), head(c, m)),
        Action::Teardown(c, m) => format!("c{c}'s connection to m{m} is torn down"),
        Action::DeliverStale(c, m) => {
            let r = s
                .stale_head(usize::from(c) * n + usize::from(m))
                .map(|(_, r)| req(&r))
                .unwrap_or_default();
            format!("m{m} runs c{c}'s old-connection bytes: {r}")
        }
        Action::DropStale(c, m) => format!("m{m} discards c{c}'s old connection"),
        Action::ConfigSet(m) => format!("CONFIG SET appendfsync everysec on m{m}"),
        Action::Replace(m) => format!("m{m}'s server is replaced by a new, empty one"),
        Action::Commission(m) => format!("the operator commissions m{m}"),
        Action::Failover => "the group fails over: its replica is the new primary".to_owned(),
        Action::Sync => "the group's replica catches up".to_owned(),
        Action::Deliver(c, m) => format!("c{c} -> {} {}", to(c, m), head(c, m)),
        Action::LoseReply(c, m) => format!("c{c} -> {} {} (reply lost)", to(c, m), head(c, m)),
        Action::Duplicate(c, m) => {
            format!(
                "c{c} -> {} {} (duplicated: stays queued)",
                to(c, m),
                head(c, m)
            )
        }
        Action::Drop(c, m) => format!("c{c} -> {} {} LOST", to(c, m), head(c, m)),
        Action::ShardFailover(h) if cluster::failed(s, h) => format!(
            "shard {h} of m{k} fails back: {} resynchronises in full from {} (losing what only it had) and is promoted again",
            cluster::name(2 * h),
            cluster::name(2 * h + 1)
        ),
        Action::ShardFailover(h) => {
            let (old, new) = (2 * h, 2 * h + 1);
            format!(
                "shard {h} of m{k} fails over: {} (with what it last replicated) is its primary, {} is cut off",
                cluster::name(new),
                cluster::name(old)
            )
        }
        Action::Move(hs) => {
            let from = s.cluster.owner[usize::from(hs)];
            let to = cluster::primary(s, 1 - cluster::shard(from));
            format!(
                "slot s{hs} of m{k} moves from {} to {} (every key migrated)",
                cluster::name(from),
                cluster::name(to)
            )
        }
        Action::Restart(m, keep) => {
            if cfg.masters[usize::from(m)].durable {
                if s.masters[usize::from(m)].everysec {
                    format!(
                        "m{m} crashes (everysec: loses what is not on disk) and restarts with appendfsync always"
                    )
                } else {
                    format!("m{m} restarts (appendfsync always: keeps its data)")
                }
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
    lines_of(model, &path.clone().into_vec())
}

/// [`lines`] of `(state, action taken from it)` pairs, the last with no action.
pub(crate) fn lines_of(model: &Redlock, steps: &[(State, Option<Action>)]) -> Vec<String> {
    let cfg = &model.cfg;
    let mut out = Vec::new();
    for (s, a) in steps {
        if let Some(a) = a {
            out.push(step(model, s, *a));
        }
    }
    if let Some((last, _)) = steps.last() {
        let now = last.now(cfg.tick_ms);
        let held: Vec<String> = model
            .holders(last)
            .iter()
            .map(|&(c, l, _, res)| {
                let h = last.clients[c].slots[l].held(now).copied();
                let d = h.map(|h| h.deadline).unwrap_or_default();
                let v = h.map(|h| h.value).unwrap_or_default();
                let res = if res == 1 {
                    String::new()
                } else {
                    format!(" {}", resources(res))
                };
                format!("c{c} v{v}{res} (until {d} ms)")
            })
            .collect();
        out.push(format!("t={now:>5} holding now: {}", held.join(", ")));
        for (i, m) in last.masters.iter().enumerate() {
            for e in m
                .data
                .holders
                .iter()
                .filter(|e| m.released & (1 << e.value) != 0)
            {
                out.push(format!(
                    "        m{i}: v{}'s key is there, until {} ms, after its release was answered",
                    e.value, e.expiry
                ));
            }
        }
        if let Some((m, victim, culprit)) = last.history.overwrite {
            out.push(format!(
                "        m{m}: v{culprit}'s request changed v{victim}'s entry"
            ));
        }
    }
    out
}
