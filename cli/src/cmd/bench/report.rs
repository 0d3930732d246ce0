//! The tables `redquorum bench` prints, one per workload and profile.

use std::fmt::Write as _;
use std::time::Duration;

use super::record::Summary;
use super::result::{ClientSystem, PercentileRatios, SystemResult, WorkloadResult};
use crate::args::human;

const STATS: [&str; 6] = ["mean", "p50", "p90", "p99", "p99.9", "max"];

/// The table of one workload, ready to print.
pub(crate) fn table(w: &WorkloadResult, urls: &[String]) -> String {
    let mut out = String::new();
    let keys = w
        .keys
        .map_or_else(String::new, |k| format!(" on {k} shared key(s)"));
    let what = match w.workload {
        "extend" => "extensions of a held lock",
        "contention" => "one lock attempt + release",
        _ => "lock + release on distinct keys",
    };
    let fleet = if w.clients > 1 {
        format!(
            " in each of {} clients (figures for all together)",
            w.clients
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "{}: {what}, {} worker(s){fleet}{keys}; redquorum {} cycles in {:.2}s, floor {} in {:.2}s",
        w.workload,
        w.workers,
        w.redquorum.cycles,
        w.redquorum.elapsed_s,
        w.floor.cycles,
        w.floor.elapsed_s,
    );
    let _ = writeln!(
        out,
        "  {:<10} {:<10}{}",
        "",
        "",
        columns(STATS.map(str::to_owned))
    );
    let ops = [
        (
            "acquire",
            w.redquorum.acquire,
            w.floor.acquire,
            w.ratio.acquire,
        ),
        ("extend", w.redquorum.extend, w.floor.extend, w.ratio.extend),
        (
            "release",
            w.redquorum.release,
            w.floor.release,
            w.ratio.release,
        ),
    ];
    for (op, ours, floor, ratio) in ops {
        if ours.is_none() && floor.is_none() {
            continue;
        }
        let _ = writeln!(out, "  {op:<10} {:<10}{}", "redquorum", latencies(ours));
        let _ = writeln!(out, "  {:<10} {:<10}{}", "", "floor", latencies(floor));
        let _ = writeln!(out, "  {:<10} {:<10}{}", "", "ratio", ratios(ratio));
    }
    rates(&mut out, w);
    handover(&mut out, w);
    let _ = writeln!(
        out,
        "  {:<10} redquorum: {}; floor: {}",
        "failures",
        failures(&w.redquorum),
        failures(&w.floor)
    );
    votes(&mut out, w.headline, &w.redquorum, urls);
    if w.clients > 1 {
        clients(&mut out, w);
    }
    out
}

/// The hand-over figures: the gap from a release's acknowledgement to the next grant, next
/// to the floor's release + acquire round trips (what a hand-over cannot beat), acquisitions
/// per second against 1 / (hold + that floor), and round trips per acquisition.
fn handover(out: &mut String, w: &WorkloadResult) {
    let Some(setup) = w.handover else { return };
    let us = |v: f64| human(Duration::from_secs_f64(v.max(0.0) / 1e6));
    let floor_rt = match (w.floor.acquire, w.floor.release) {
        (Some(a), Some(r)) => Some(a.p50_us + r.p50_us),
        _ => None,
    };
    let mode = if setup.poll {
        "polling"
    } else {
        "woken on release"
    };
    match w.redquorum.gap {
        Some(gap) => {
            let _ = writeln!(
                out,
                "  {:<10} {mode}: gap p50 {} p90 {} p99 {} max {} ({} hand-overs, {} granted before the release was acknowledged){}",
                "handover",
                us(gap.p50_us),
                us(gap.p90_us),
                us(gap.p99_us),
                us(gap.max_us),
                gap.count,
                w.redquorum.early_grants,
                floor_rt.map_or_else(String::new, |f| format!(
                    "; floor release + acquire p50 {}, gap p50 / that {:.2}",
                    us(f),
                    gap.p50_us / f
                )),
            );
        }
        None => {
            let _ = writeln!(out, "  {:<10} {mode}: no hand-over measured", "handover");
        }
    }
    let per_acquisition = if w.redquorum.acquired > 0 {
        w.redquorum.attempts as f64 / w.redquorum.acquired as f64
    } else {
        0.0
    };
    let target = floor_rt.map(|f| 1e6 / (setup.hold_us + f));
    let _ = writeln!(
        out,
        "  {:<10} {:.0} acquisitions/s with hold {}{}; {per_acquisition:.2} acquire rounds per acquisition (+1 release)",
        "",
        w.redquorum.acquisitions_per_s,
        us(setup.hold_us),
        target.map_or_else(String::new, |t| format!(
            " (1 / (hold + floor release + acquire) = {t:.0}/s, ratio {:.2})",
            w.redquorum.acquisitions_per_s / t
        )),
    );
}

/// One line per client: its headline p50 and p99 and its rate, for both systems.
fn clients(out: &mut String, w: &WorkloadResult) {
    let (rate, per_s): (&str, fn(&ClientSystem) -> f64) = match w.workload {
        "extend" => ("extended/s", |s| s.cycles_per_s),
        _ => ("acquired/s", |s| s.acquisitions_per_s),
    };
    let p50 = format!("{} p50", w.headline);
    let p99 = format!("{} p99", w.headline);
    let _ = writeln!(
        out,
        "  {:<10} {:<10}{:>21}{:>21}{:>23}",
        "clients", "", p50, p99, rate
    );
    let _ = writeln!(
        out,
        "  {:<10} {:<10}{:>11}{:>10}{:>11}{:>10}{:>12}{:>11}",
        "", "", "redquorum", "floor", "redquorum", "floor", "redquorum", "floor"
    );
    let latency = |s: &ClientSystem, p99: bool| {
        s.latency.map_or_else(
            || "-".to_owned(),
            |l| {
                let us = if p99 { l.p99_us } else { l.p50_us };
                human(Duration::from_secs_f64(us / 1e6))
            },
        )
    };
    for c in &w.per_client {
        let (ours, floor) = (&c.redquorum, &c.floor);
        let _ = writeln!(
            out,
            "  {:<10} {:<10}{:>11}{:>10}{:>11}{:>10}{:>12.0}{:>11.0}",
            "",
            format!("client {}", c.client),
            latency(ours, false),
            latency(floor, false),
            latency(ours, true),
            latency(floor, true),
            per_s(ours),
            per_s(floor),
        );
    }
    let spread = |rates: Vec<f64>| {
        let lo = rates.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = rates.iter().copied().fold(0.0, f64::max);
        (rates.iter().sum::<f64>(), lo, hi)
    };
    let (ours, ours_lo, ours_hi) =
        spread(w.per_client.iter().map(|c| per_s(&c.redquorum)).collect());
    let (floor, floor_lo, floor_hi) =
        spread(w.per_client.iter().map(|c| per_s(&c.floor)).collect());
    let _ = writeln!(
        out,
        "  {:<10} {} clients: redquorum {ours:.0} {rate} (per client {ours_lo:.0} to {ours_hi:.0}), floor {floor:.0} (per client {floor_lo:.0} to {floor_hi:.0}), ratio {}",
        "",
        w.clients,
        if floor > 0.0 {
            format!("{:.2}×", ours / floor)
        } else {
            "-".to_owned()
        },
    );
}

fn columns(cells: [String; 6]) -> String {
    cells.iter().map(|c| format!("{c:>10}")).collect()
}

fn latencies(s: Option<Summary>) -> String {
    match s {
        Some(s) => columns(
            s.columns()
                .map(|us| human(Duration::from_secs_f64(us / 1e6))),
        ),
        None => columns(std::array::from_fn(|_| "-".to_owned())),
    }
}

fn ratios(r: Option<PercentileRatios>) -> String {
    match r {
        Some(r) => columns(r.columns().map(|x| format!("{x:.2}×"))),
        None => columns(std::array::from_fn(|_| "-".to_owned())),
    }
}

fn rates(out: &mut String, w: &WorkloadResult) {
    let ratio = |r: Option<f64>| r.map_or_else(|| "-".to_owned(), |r| format!("{r:.2}×"));
    if w.workload == "contention" {
        let refused = |s: &SystemResult| {
            let n = s.failures.get("contended").copied().unwrap_or(0);
            if s.elapsed_s > 0.0 {
                n as f64 / s.elapsed_s
            } else {
                0.0
            }
        };
        let _ = writeln!(
            out,
            "  {:<10} redquorum {:.0}/s (refused {:.0}/s), floor {:.0}/s (refused {:.0}/s), ratio {}",
            "acquired",
            w.redquorum.acquisitions_per_s,
            refused(&w.redquorum),
            w.floor.acquisitions_per_s,
            refused(&w.floor),
            ratio(w.ratio.acquisitions_per_s),
        );
    } else {
        let _ = writeln!(
            out,
            "  {:<10} redquorum {:.0}/s, floor {:.0}/s, ratio {}",
            "cycles",
            w.redquorum.cycles_per_s,
            w.floor.cycles_per_s,
            ratio(w.ratio.cycles_per_s),
        );
    }
}

fn failures(s: &SystemResult) -> String {
    if s.failures.is_empty() {
        return "none".to_owned();
    }
    s.failures
        .iter()
        .map(|(k, n)| format!("{k} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn votes(out: &mut String, op: &str, s: &SystemResult, urls: &[String]) {
    for v in &s.votes {
        let rounds = v.answered + v.failed + v.pending;
        if rounds == 0 {
            continue;
        }
        let pct = |n: u64| 100.0 * n as f64 / rounds as f64;
        let latency = v.latency.map_or_else(
            || "no answer in time".to_owned(),
            |l| {
                format!(
                    "p50 {}  p99 {}",
                    human(Duration::from_secs_f64(l.p50_us / 1e6)),
                    human(Duration::from_secs_f64(l.p99_us / 1e6))
                )
            },
        );
        let url = urls.get(v.node).map_or("", String::as_str);
        let label = if v.node == 0 { "votes" } else { "" };
        let _ = write!(
            out,
            "  {label:<10} node {} {url}: {op} {latency}; answered by the decision {:.1}%",
            v.node,
            pct(v.answered)
        );
        if v.failed > 0 {
            let _ = write!(out, ", failed {:.1}%", pct(v.failed));
        }
        out.push('\n');
    }
}
