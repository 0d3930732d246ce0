//! The client side of the restart guard: whether a grant counts, and the verification of
//! a member, as `notes/guard-v3.md` ("Verification of master m", steps 1–6) designs it
//! and `RestartGuard::verify` / `quarantine` / `read_records` do it; with the v2 reader
//! rule (every answering reader counts), the first v3 design's vouch step and a reader
//! rule without the age as controls; and the old guard (`src/guard.rs`: `Guard::admit`,
//! `Guard::verify`) for control (b).

use std::time::Duration;

use redquorum::rules;

use crate::cluster;
use crate::config::{Config, GuardMode, ReaderRule};
use crate::group;
use crate::log::Log;
use crate::master::{Ctx, ReaderInfo, Reply};
use crate::state::{BASE_MS, Reading, Req, State, Verify, View};
use crate::trace;

/// A view that counts at once: verified `epoch` (or `run_id`), no quarantine.
pub(crate) fn verified(id: u8) -> View {
    View {
        verified: Some(id),
        counts_from: i64::MIN,
        verify: Verify::Idle,
        last_run: Some(id),
        marker_gone: false,
        known: true,
        id: 0,
    }
}

/// A view of a member nobody has verified on this connection.
pub(crate) fn unverified() -> View {
    View {
        verified: None,
        counts_from: i64::MIN,
        verify: Verify::Idle,
        last_run: None,
        marker_gone: false,
        known: false,
        id: 0,
    }
}

/// Whether a grant from a member, which read back `reply`'s marker, counts toward the
/// quorum at local time `now` (old: `Guard::admit`). A grant whose marker shows a
/// restart or a loss makes the view unverified; so does, with `check_id` (a cluster slot
/// with `ClusterSpec::grant_identity`) or [`grant_identity`], a grant from a node other
/// than the one verified.
pub(crate) fn admit(
    cfg: &Config,
    view: &mut View,
    reply: &Reply,
    now: i64,
    check_id: bool,
) -> Result<(), &'static str> {
    let Reply::Granted {
        epoch,
        old_marker,
        id,
        ..
    } = *reply
    else {
        return Err("not a grant");
    };
    let check_id = check_id || grant_identity(cfg);
    if check_id && view.verified.is_some() && id != view.id {
        view.verified = None;
        return Err("another node (or a promotion since): re-verify");
    }
    let read = match cfg.guard {
        GuardMode::Off => return Ok(()),
        GuardMode::Epochs(_) => epoch,
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

/// Whether every grant is checked against the identity verified on its connection, with a
/// Sentinel group member whose `GroupSpec::grant_identity` is on (`INFO replication` read
/// back after the grant, `RestartGuard::admit_seen`). The library reads it back after
/// grants through the group only; the model checks every member's grants then, which
/// changes nothing on a single master (its identity changes only at a restart, which
/// breaks every connection to it).
fn grant_identity(cfg: &Config) -> bool {
    cfg.group.is_some_and(|g| g.grant_identity)
}

/// Whether a view of place `k` keeps the identity it was verified on: a cluster slot's, or
/// every view when grants are checked against it ([`grant_identity`]).
fn keeps_id(cfg: &Config, k: usize) -> bool {
    cfg.in_cluster(k) || grant_identity(cfg)
}

/// Client `c` needs place `m` verified (a member, or a cluster slot: a new connection, or a
/// marker that changed): the verification request is queued on that connection at once, as
/// the library spawns it at once. A client with nothing left to do verifies nothing.
pub(crate) fn need(cfg: &Config, s: &mut State, c: usize, m: usize) {
    let places = cfg.places();
    let spec = cfg.clients[c];
    let client = &mut s.clients[c];
    let done = client.idle()
        && client
            .slots
            .iter()
            .all(|slot| slot.started >= spec.acquisitions);
    if cfg.guard == GuardMode::Off
        || done
        || !cfg.reaches(c, cfg.member_of(m))
        || client.views[m].verify != Verify::Idle
    {
        return;
    }
    client.views[m].verify = Verify::Script;
    s.chans[c * places + m].push(Req::Verify);
}

/// A `MOVED` answer for cluster place `p` (the slot is on another node now, after a
/// failover or a move): the slot map is refreshed, and nothing verified for the slot on
/// the old node counts; the slot is verified on its new node (in control (a), the
/// member's epoch, in slot `s0`, is).
pub(crate) fn moved(cfg: &Config, s: &mut State, c: usize, p: usize) {
    let e = cfg.epoch_place(p);
    let known = s.clients[c].views[e].known;
    s.clients[c].views[e] = View {
        known,
        ..unverified()
    };
    need(cfg, s, c, e);
}

/// Client `c`'s connection to member `m` is new (the server restarted, a failover, a
/// teardown): with per-connection verification, nothing verified on the old one counts.
pub(crate) fn reconnected(cfg: &Config, s: &mut State, c: usize, m: usize) {
    if !cfg.epochs().is_some_and(|g| g.per_connection) {
        return;
    }
    let known = s.clients[c].views[m].known;
    s.clients[c].views[m] = View {
        known,
        ..unverified()
    };
    // Reads of `m` for other verifications were on the old connection: failed.
    for k in 0..cfg.places() {
        if let Verify::Reading(r) = &mut s.clients[c].views[k].verify {
            r.answered |= r.asked & (1 << m);
        }
    }
    need(cfg, s, c, m);
}

/// Client `c` handles place `k`'s answer to a verification request or a read.
pub(crate) fn on_reply(
    cfg: &Config,
    s: &mut State,
    c: usize,
    k: usize,
    req: Req,
    reply: Reply,
    log: &mut Log,
) {
    match (req, reply) {
        (Req::Verify, Reply::Epoch { .. }) => on_epoch(cfg, s, c, k, reply, log),
        (Req::Verify, Reply::Info { run, uptime_s }) => on_info(cfg, s, c, k, run, uptime_s, log),
        (Req::Read { of }, Reply::Read(info)) => {
            on_read(cfg, s, c, cfg.member_of(k), of.into(), info, log)
        }
        _ => {}
    }
}

/// Step 1 answered: the epoch `guard.lua` confirmed or began (for place `k`: a member, or
/// a cluster slot). Then step 2: read every other member this client reaches.
fn on_epoch(cfg: &Config, s: &mut State, c: usize, k: usize, reply: Reply, log: &mut Log) {
    let Reply::Epoch {
        epoch,
        since,
        now_m,
        vouched,
        id,
    } = reply
    else {
        return;
    };
    let n = cfg.n();
    let now = s.now(cfg.tick_ms);
    if s.clients[c].views[k].verify != Verify::Script {
        return;
    }
    // Step 2: once `MAX_TTL + drift` has passed since the epoch began, every lock whose
    // key the master could have lost has run out (`RestartGuard::quarantine`).
    let hard = millis(redquorum::MAX_TTL).saturating_add(millis(rules::drift_allowance(
        redquorum::MAX_TTL,
        cfg.drift.factor(),
    )));
    if rules::quarantine_left_ms(abs(since), hard, abs(now_m)) == 0 {
        let view = &mut s.clients[c].views[k];
        view.verify = Verify::Idle;
        view.verified = Some(epoch);
        view.known = true;
        view.id = if keeps_id(cfg, k) { id } else { 0 };
        remember(cfg, s, c, cfg.member_of(k));
        log.note(|| format!("epoch {epoch} began over MAX_TTL ago: counts at once"));
        return;
    }
    let asked = (0..n)
        .filter(|&j| j != cfg.member_of(k) && cfg.reaches(c, j))
        .fold(0u8, |set, j| set | 1 << j);
    s.clients[c].views[k].verify = Verify::Reading(Reading {
        epoch,
        since,
        now_m,
        at: now,
        vouched,
        // Only a cluster slot's view keeps the node identity (or every view, with grants
        // checked against it).
        id: if keeps_id(cfg, k) { id } else { 0 },
        asked,
        answered: 0,
        trusted: 0,
        longest: 0,
    });
    let atomic = cfg.epochs().is_some_and(|g| g.atomic_reads);
    for j in (0..n).filter(|j| asked & (1 << j) != 0) {
        if atomic && cfg.is_cluster(j) {
            let info = cluster::read(cfg, s, c, j, now);
            on_read(cfg, s, c, j, k, info, log);
        } else if atomic {
            let srv = group::server(cfg, s, c, j);
            let master = &mut s.masters[srv];
            let now_j = master.clock(now);
            master.expire(now_j);
            let info = master.read(cfg, j, now_j);
            on_read(cfg, s, c, j, k, info, log);
        } else {
            let p = cfg.record_place(j, 0);
            s.chans[c * cfg.places() + p].push(Req::Read { of: k as u8 });
        }
    }
    if asked == 0 {
        decide(cfg, s, c, k, log);
    }
}

/// Step 3: one reader's answer (`RestartGuard::read_records`). Trusted
/// (`rules::reader_trusted`) iff its marker is present, belongs to the live server
/// (`rules::same_incarnation`), and its epoch began at least `rules::trust_age_ms(Tmax)`
/// ago; the controls change that rule.
#[allow(clippy::too_many_arguments)]
fn on_read(
    cfg: &Config,
    s: &mut State,
    c: usize,
    j: usize,
    k: usize,
    info: ReaderInfo,
    log: &mut Log,
) {
    let Some(g) = cfg.epochs() else {
        return;
    };
    // Behind a Sentinel group, with `GroupSpec::wait_reads`: `WAIT` after the read.
    let confirmed = group::reader_confirmed(cfg, s, c, j);
    let old = cfg.is_group(j) && group::server(cfg, s, c, j) != group::current(cfg, s, j);
    let Verify::Reading(r) = &mut s.clients[c].views[k].verify else {
        return;
    };
    let bit = 1 << j;
    if r.asked & bit == 0 || r.answered & bit != 0 {
        return;
    }
    r.answered |= bit;
    r.longest = r.longest.max(info.longest);
    let trusted = reader_trusted(cfg, g.readers, g.declared_ms, j, &info) && confirmed;
    if trusted {
        r.trusted |= bit;
    }
    log.note(|| {
        let verdict = match (g.readers, trusted) {
            (_, false) if !confirmed => "NOT trusted (WAIT not acknowledged: not the primary)",
            (ReaderRule::Any, _) => "counted (v2: every reader)",
            (ReaderRule::Vouched, true) if info.marker.is_some_and(|m| m.0) => "trusted (vouched)",
            (_, true) => "trusted",
            (_, false) => "NOT trusted",
        };
        let srv = if old { " (its old primary)" } else { "" };
        format!(
            "m{j}{srv} for {}: longest {} ms, {verdict}",
            trace::place(cfg, k),
            info.longest
        )
    });
    if r.answered == r.asked {
        decide(cfg, s, c, k, log);
    }
}

/// Whether member `j`'s answer `info` may be believed as a reader, under `rule`.
pub(crate) fn reader_trusted(
    cfg: &Config,
    rule: ReaderRule,
    declared_ms: Option<u64>,
    j: usize,
    info: &ReaderInfo,
) -> bool {
    let tmax = declared_ms.unwrap_or(millis(redquorum::MAX_TTL));
    let Some((vouched, since, run_eq, durable)) = info.marker else {
        return rule == ReaderRule::Any;
    };
    let replicated = cfg.is_group(j) || cfg.is_cluster(j);
    let same = rules::same_incarnation(run_eq, durable, info.live_durable, replicated);
    let age = (info.now_m - since).max(0) as u64;
    match rule {
        ReaderRule::Any => true,
        ReaderRule::Trusted => rules::reader_trusted(true, same, age, tmax),
        ReaderRule::Vouched => same && (vouched || age >= rules::trust_age_ms(tmax)),
        ReaderRule::NoAge => same,
    }
}

/// Client `c`'s verifications whose reads are still out when a tick passes: the missing
/// readers timed out.
pub(crate) fn timeouts(cfg: &Config, s: &mut State, c: usize, log: &mut Log) {
    for k in 0..cfg.places() {
        if matches!(s.clients[c].views[k].verify, Verify::Reading(_)) {
            decide(cfg, s, c, k, log);
        }
    }
}

/// Steps 4–6: enough trusted readers (or a declared `deployment_max_ttl`) give the
/// quarantine, `since + L` on the member's clock; otherwise the member stays unverified
/// (out) and is verified again at its next grant (the library retries every second). In
/// the vouch control, a verification with enough trusted readers also vouches for the
/// epoch.
fn decide(cfg: &Config, s: &mut State, c: usize, k: usize, log: &mut Log) {
    let (Some(g), Verify::Reading(r)) = (cfg.epochs(), s.clients[c].views[k].verify) else {
        return;
    };
    let n = cfg.n();
    let needed = rules::trusted_readers_needed(n, rules::majority(n));
    let trusted = r.trusted.count_ones() as usize;
    let own = s.clients[c].longest_ms;
    let enough = trusted >= needed;
    let l = if enough {
        Some(r.longest.max(own))
    } else {
        g.declared_ms.map(|d| r.longest.max(d).max(own))
    };
    let view = &mut s.clients[c].views[k];
    view.verify = Verify::Idle;
    let Some(l) = l else {
        log.note(|| {
            format!(
                "{}: {trusted} trusted readers of {needed} needed: stays out, verified again later",
                trace::place(cfg, k)
            )
        });
        return;
    };
    let left = rules::quarantine_left_ms(abs(r.since), l, abs(r.now_m));
    let wait = ceil_ms(rules::local_wait(left, cfg.drift.factor()));
    view.counts_from = view.counts_from.max(r.at + wait);
    view.verified = Some(r.epoch);
    view.known = true;
    view.id = r.id;
    let until = view.counts_from;
    log.note(|| {
        format!(
            "{} epoch {} since {}; {trusted} trusted readers; L = {l} ms (records: {} ms): counts from {}",
            trace::place(cfg, k),
            r.epoch,
            show(r.since),
            r.longest,
            show(until)
        )
    });
    remember(cfg, s, c, cfg.member_of(k));
    if !r.vouched && g.readers == ReaderRule::Vouched {
        let vouch = Req::Vouch {
            epoch: r.epoch,
            ttl: l,
        };
        if g.atomic_reads {
            let srv = group::server(cfg, s, c, k);
            let now = s.now(cfg.tick_ms);
            let master = &mut s.masters[srv];
            let now_m = master.clock(now);
            let ctx = Ctx {
                cfg,
                member: k,
                known: true,
                records: true,
            };
            let reply = master.apply(ctx, vouch, now_m, &mut s.next_epoch, &mut s.history);
            log.note(|| format!("m{k}: {} => {}", trace::req(&vouch), trace::reply(&reply)));
        } else {
            s.chans[c * cfg.places() + k].push(vouch);
        }
    }
}

/// "Every successful verification records the member's identity on every other
/// reachable member" (`{prefix}members`); done at once here (it only makes commissioning
/// more careful).
fn remember(cfg: &Config, s: &mut State, c: usize, k: usize) {
    if !cfg.tracks_memory() {
        return;
    }
    for j in (0..cfg.n()).filter(|&j| j != k && cfg.reaches(c, j)) {
        let srv = group::server(cfg, s, c, j);
        s.masters[srv].data.members |= 1 << k;
    }
}

/// Old guard (`Guard::verify`): the client's own longest ttl, its own last `run_id`.
fn on_info(cfg: &Config, s: &mut State, c: usize, k: usize, run: u8, uptime_s: u64, log: &mut Log) {
    let now = s.now(cfg.tick_ms);
    let longest = s.clients[c].longest_ms;
    let view = &mut s.clients[c].views[k];
    if view.verify != Verify::Script {
        return;
    }
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

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
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
