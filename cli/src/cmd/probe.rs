//! `redquorum probe`: the health of every master (`Redlock::health`) as a table with one
//! warning line per problem, or as JSON.

use std::time::Duration;

use clap::Args;
use redquorum::{DEFAULT_CLOCK_WINDOW, GuardStatus, HealthReport, NodeHealth, Problem};
use serde::Serialize;

use crate::args::{self, MasterArgs, human, parse_duration};
use crate::exit::{self, Failure};

/// Check every master for what breaks Redlock's assumptions.
///
/// Reachability and round trip, version, role, uptime, persistence, maxmemory-policy,
/// clock offset and rate, servers listed twice, and what the restart guard makes of each
/// master (counted, or kept out for how long and why; `redquorum guard commission` lets
/// new masters count at once).
///
/// Exits 0 when no problem was found, 1 when every master is usable but problems were found
/// (a warning line per problem says what to change), 69 when a master is unusable
/// (unreachable, or a replica).
#[derive(Debug, Args)]
#[command(after_long_help = exit::HELP)]
pub(crate) struct ProbeArgs {
    #[command(flatten)]
    masters: MasterArgs,

    /// Print the report as JSON on stdout instead of the table.
    #[arg(long)]
    json: bool,

    /// How long each master's clock is sampled to measure its rate.
    #[arg(long, value_name = "DURATION", default_value = "500ms", value_parser = parse_duration)]
    clock_window: Duration,
}

pub(crate) async fn main(args: ProbeArgs) -> Result<u8, Failure> {
    let urls = args.masters.urls()?;
    let client = args::build(args.masters.builder(urls, redquorum::DEFAULT_TTL))?;
    let window = if args.clock_window.is_zero() {
        DEFAULT_CLOCK_WINDOW
    } else {
        args.clock_window
    };
    let report = client
        .health_with(window)
        .await
        .map_err(|e| Failure::from_lock(&e))?;
    let code = verdict(&report);
    if args.json {
        let json = serde_json::to_string_pretty(&Json::new(&report, code))
            .map_err(|e| Failure::io(format!("could not encode the report as JSON: {e}.")))?;
        println!("{json}");
    } else {
        print_table(&report);
        print_problems(&report);
    }
    Ok(code)
}

/// 69 if a master is unusable, 1 if there are only warnings, 0 if none.
fn verdict(report: &HealthReport) -> u8 {
    if report.nodes.iter().any(|n| n.problems.iter().any(unusable)) {
        exit::UNAVAILABLE
    } else if report.is_healthy() {
        exit::OK
    } else {
        exit::WARNINGS
    }
}

fn unusable(problem: &Problem) -> bool {
    matches!(problem, Problem::Unreachable(_) | Problem::Replica)
}

fn print_table(report: &HealthReport) {
    let header = [
        "node",
        "url",
        "rtt",
        "version",
        "role",
        "uptime",
        "aof/fsync",
        "maxmemory",
        "offset",
        "rate",
        "guard",
        "status",
    ];
    let rows: Vec<[String; 12]> = report.nodes.iter().map(row).collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        println!("{}", padded.join("  ").trim_end());
    };
    line(header.to_vec());
    for row in &rows {
        line(row.iter().map(String::as_str).collect());
    }
}

fn row(n: &NodeHealth) -> [String; 12] {
    let dash = || "-".to_owned();
    let status = if n.problems.iter().any(unusable) {
        "UNUSABLE".to_owned()
    } else if n.problems.is_empty() {
        "ok".to_owned()
    } else {
        format!("{} warning(s)", n.problems.len())
    };
    [
        n.node.to_string(),
        n.url.clone(),
        n.rtt.map_or_else(dash, human),
        n.version.clone().unwrap_or_else(dash),
        n.role.clone().unwrap_or_else(dash),
        n.uptime.map_or_else(dash, |u| format!("{}s", u.as_secs())),
        n.persistence
            .as_ref()
            .map_or_else(dash, |(aof, fsync, _)| format!("{aof}/{fsync}")),
        n.maxmemory_policy.clone().unwrap_or_else(dash),
        n.clock_offset_ms
            .map_or_else(dash, |ms| format!("{ms:+.1}ms")),
        n.clock_rate
            .map_or_else(dash, |r| format!("{:+.0}ppm", (r - 1.0) * 1e6)),
        guard_cell(&n.guard),
        status,
    ]
}

/// The restart guard's view in a few words.
fn guard_cell(status: &GuardStatus) -> String {
    match status {
        GuardStatus::Off => "off".to_owned(),
        GuardStatus::Counted { .. } => "counted".to_owned(),
        GuardStatus::Quarantined { remaining, .. } => format!("out {}", human(*remaining)),
        GuardStatus::Unverified { .. } => "unverified".to_owned(),
        GuardStatus::Unhealthy { .. } => "held out".to_owned(),
        _ => "-".to_owned(),
    }
}

fn print_problems(report: &HealthReport) {
    // Not problems: locking works there, waiters poll instead of being woken.
    for note in &report.polling {
        println!("note: {note}.");
    }
    for (node, problem) in report.all_problems() {
        let level = if unusable(problem) {
            "error"
        } else {
            "warning"
        };
        match node.and_then(|i| report.nodes.get(i)) {
            Some(n) => println!("{level}: node {} ({}): {problem}.", n.node, n.url),
            None => println!("{level}: {problem}."),
        }
    }
    let unusable_nodes = report
        .nodes
        .iter()
        .filter(|n| n.problems.iter().any(unusable))
        .count();
    let problems = report.all_problems().len();
    if problems == 0 {
        println!("{} masters, no problem found.", report.nodes.len());
    } else {
        println!(
            "{} masters: {unusable_nodes} unusable, {problems} problem(s) found.",
            report.nodes.len()
        );
    }
}

/// The JSON form of a health report.
#[derive(Debug, Serialize)]
struct Json {
    exit_code: u8,
    healthy: bool,
    nodes: Vec<NodeJson>,
    problems: Vec<ProblemJson>,
    /// Masters where waiters poll (they refused `SUBSCRIBE`), each with why.
    polling: Vec<PollingJson>,
}

#[derive(Debug, Serialize)]
struct PollingJson {
    node: usize,
    reason: String,
}

#[derive(Debug, Serialize)]
struct NodeJson {
    node: usize,
    url: String,
    reachable: bool,
    usable: bool,
    rtt_ms: Option<f64>,
    version: Option<String>,
    role: Option<String>,
    run_id: Option<String>,
    uptime_s: Option<u64>,
    appendonly: Option<String>,
    appendfsync: Option<String>,
    save: Option<String>,
    maxmemory_policy: Option<String>,
    clock_offset_ms: Option<f64>,
    clock_rate: Option<f64>,
    quarantined_ms: Option<f64>,
    /// The restart guard's view: `off`, `counted`, `quarantined`, `unverified`, `held-out`.
    guard: &'static str,
}

#[derive(Debug, Serialize)]
struct ProblemJson {
    node: Option<usize>,
    /// `error` (the master is unusable) or `warning`.
    level: &'static str,
    kind: &'static str,
    message: String,
}

impl Json {
    fn new(report: &HealthReport, exit_code: u8) -> Self {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let nodes = report
            .nodes
            .iter()
            .map(|n| {
                let (aof, fsync, save) = n
                    .persistence
                    .clone()
                    .map_or((None, None, None), |p| (Some(p.0), Some(p.1), Some(p.2)));
                NodeJson {
                    node: n.node,
                    url: args::redact(&n.url),
                    reachable: n.rtt.is_some(),
                    usable: !n.problems.iter().any(unusable),
                    rtt_ms: n.rtt.map(ms),
                    version: n.version.clone(),
                    role: n.role.clone(),
                    run_id: n.run_id.clone(),
                    uptime_s: n.uptime.map(|u| u.as_secs()),
                    appendonly: aof,
                    appendfsync: fsync,
                    save,
                    maxmemory_policy: n.maxmemory_policy.clone(),
                    clock_offset_ms: n.clock_offset_ms,
                    clock_rate: n.clock_rate,
                    quarantined_ms: n.quarantined.filter(|q| *q < Duration::MAX).map(ms),
                    guard: match n.guard {
                        GuardStatus::Off => "off",
                        GuardStatus::Counted { .. } => "counted",
                        GuardStatus::Quarantined { .. } => "quarantined",
                        GuardStatus::Unverified { .. } => "unverified",
                        _ => "held-out",
                    },
                }
            })
            .collect();
        let problems = report
            .all_problems()
            .into_iter()
            .map(|(node, p)| ProblemJson {
                node,
                level: if unusable(p) { "error" } else { "warning" },
                kind: kind(p),
                message: p.to_string(),
            })
            .collect();
        Self {
            exit_code,
            healthy: report.is_healthy(),
            nodes,
            problems,
            polling: report
                .polling
                .iter()
                .map(|note| PollingJson {
                    node: note.node,
                    reason: note.reason.to_string(),
                })
                .collect(),
        }
    }
}

fn kind(p: &Problem) -> &'static str {
    match p {
        Problem::Unreachable(_) => "unreachable",
        Problem::Replica => "replica",
        Problem::Evicting { .. } => "evicting",
        Problem::LossyPersistence { .. } => "lossy-persistence",
        Problem::UnguardedRestarts => "unguarded-restarts",
        Problem::RestartsQuarantine { .. } => "restarts-quarantine",
        Problem::Quarantined { .. } => "quarantined",
        Problem::Unverified { .. } => "unverified",
        Problem::Duplicate { .. } => "duplicate",
        Problem::ClockRate { .. } => "clock-rate",
        Problem::ClockStep { .. } => "clock-step",
        Problem::EvenCount { .. } => "even-count",
        Problem::RenewalOverloaded(_) => "renewal-overloaded",
        _ => "other",
    }
}
