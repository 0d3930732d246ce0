//! `redquorum bench`: what a quorum lock costs, measured against the floor — raw Redis
//! commands to the same masters, waiting for the same majority — in the same run. The floor
//! itself is the `redquorum-floor` crate, which `benches/hotpath.rs` measures too.

mod engine;
mod fleet;
mod linkcheck;
mod masters;
mod plot;
mod profile;
mod record;
mod report;
mod result;
mod workload;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use redquorum::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_NODE_TIMEOUT, LockKind, RetryPolicy};

use self::engine::Plan;
use self::fleet::{Fleet, Setup};
use self::masters::Masters;
use self::profile::Profile;
use self::result::{BenchResult, ProfileRun, WorkloadResult};
use self::workload::Workload;
use crate::args::{self, MasterArgs, human, parse_duration};
use crate::exit::{self, Failure};

/// Measure what a quorum lock costs, against raw Redis commands on the same masters.
///
/// The floor is a raw `SET NX PX` and a compare-and-delete to the same masters, stopping at
/// the same majority; it alternates with redquorum in the same run so that machine noise
/// hits both. The ratio of redquorum to the floor per percentile is the headline figure.
///
/// With no --node, N local redis-server masters are started (--spawn) and --profile can
/// put simulated distance between them and the client; each simulated link's round trip
/// is checked against its profile before measuring (--link-tolerance).
#[derive(Debug, Args)]
#[command(after_long_help = exit::HELP)]
pub(crate) struct BenchArgs {
    #[command(flatten)]
    masters: MasterArgs,

    /// With no --node: start this many local redis-server masters.
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..=63))]
    spawn: u16,

    /// Workloads to run, comma-separated: latency, throughput, contention, extend, or all.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "all")]
    workload: Vec<Workload>,

    /// Workers of the throughput and contention workloads.
    #[arg(long, value_name = "C", default_value_t = 64, value_parser = clap::value_parser!(u16).range(1..))]
    concurrency: u16,

    /// Workers of the handover workload, all on one resource.
    #[arg(long, value_name = "K", default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..))]
    waiters: u16,

    /// How long each handover worker holds the lock before releasing it.
    #[arg(long, value_name = "DURATION", default_value = "1ms", value_parser = parse_duration)]
    hold: Duration,

    /// Handover waiters poll (sleep the retry delay, 200 ms ± 100 ms) instead of being woken
    /// by the release: the behaviour before wake-on-release, for comparison.
    #[arg(long)]
    poll: bool,

    /// Shared keys of the contention workload.
    #[arg(long, value_name = "K", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..))]
    keys: u32,

    /// Simulated distance (spawned masters only): loopback (default, no proxy), lan,
    /// one-far-dc (1,1,1,1,15 ms one way), three-regions (1,1,10±1,10±1,40±2 ms), or a
    /// list of one-way delays such as 1ms,1ms,1ms,1ms,15ms~2ms (`~` adds jitter). Repeat to
    /// measure several profiles in one run.
    #[arg(long, value_name = "PROFILE", value_parser = profile::parse)]
    profile: Vec<Profile>,

    /// One-way delay per master, e.g. 1ms,1ms,1ms,1ms,15ms~2ms: the same as --profile LIST.
    #[arg(long, value_name = "LIST", value_parser = profile::parse)]
    link: Vec<Profile>,

    /// Largest accepted deviation, in percent, of a simulated link's median round trip from
    /// its profile (2 × one-way + jitter + the master's loopback round trip), checked before
    /// measuring; beyond it the benchmark exits 70 without measuring.
    #[arg(long, value_name = "PERCENT", default_value_t = linkcheck::DEFAULT_TOLERANCE_PCT, value_parser = linkcheck::parse_tolerance)]
    link_tolerance: f64,

    /// Lock clients, each a Redlock with its own connections, floor and tokio runtime, all
    /// against the same masters; every workload runs its workers in each client, and the
    /// report adds aggregate and per-client figures.
    #[arg(long, value_name = "K", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    clients: u16,

    /// SIGSTOP this master (0-based, spawned masters only) while measuring.
    #[arg(long, value_name = "I")]
    pause_node: Option<usize>,

    /// Lock time-to-live.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    ttl: Duration,

    /// Acquire fenced locks (a second round trip for the token write-back), to measure
    /// what fencing costs; the floor stays a plain `SET NX PX`.
    #[arg(long)]
    fencing: bool,

    /// Measured time per workload, both systems together [default: 5s unless --ops].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    duration: Option<Duration>,

    /// Measured cycles per workload and system (with --duration: whichever ends first).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    ops: Option<u64>,

    /// Unmeasured warm-up before each workload.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    warmup: Duration,

    /// Write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,

    /// Draw latency CDFs of redquorum and the floor to FILE (SVG).
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,

    /// Longest slice of one system before switching to the other.
    #[arg(long, value_name = "DURATION", default_value = "200ms", value_parser = parse_duration, hide = true)]
    slice: Duration,
}

pub(crate) async fn main(args: BenchArgs) -> Result<u8, Failure> {
    let workloads = workloads(&args.workload);
    let mut profiles: Vec<Profile> = args.profile.iter().chain(&args.link).cloned().collect();
    if profiles.is_empty() {
        profiles.push(Profile::Loopback);
    }
    let given = !args.masters.nodes.is_empty();
    let mut masters = if given {
        if args.pause_node.is_some() {
            return Err(Failure::usage(
                "--pause-node stops a master the benchmark started itself: leave out --node.",
            ));
        }
        Masters::Given(args.masters.urls()?)
    } else {
        let n = usize::from(args.spawn);
        let masters = Masters::spawn(n).await?;
        eprintln!(
            "no --node given: started {n} local redis-server masters ({}).",
            masters.urls().join(", ")
        );
        eprintln!(
            "the restart guard is off for them: they are seconds old, and the guard (rightly) does not count a master up for less than a ttl."
        );
        masters
    };
    if let Some(i) = args.pause_node
        && i >= masters.len()
    {
        return Err(Failure::usage(format!(
            "--pause-node {i} is out of range: the masters are numbered 0 to {}.",
            masters.len() - 1
        )));
    }
    let node_timeout = args
        .masters
        .node_timeout
        .unwrap_or_else(|| DEFAULT_NODE_TIMEOUT.min(args.ttl / 10));
    let guard = !masters.is_spawned() && !args.masters.no_restart_guard;
    let outcome = run_profiles(
        &args,
        &mut masters,
        &profiles,
        &workloads,
        node_timeout,
        guard,
    )
    .await;
    let urls: Vec<String> = masters.urls().iter().map(|u| args::redact(u)).collect();
    masters.stop().await;
    let runs = outcome?;
    let result = BenchResult {
        masters: urls.len(),
        quorum: urls.len() / 2 + 1,
        spawned: !given,
        urls,
        ttl_ms: u64::try_from(args.ttl.as_millis()).unwrap_or(u64::MAX),
        restart_guard: guard,
        fencing: args.fencing,
        paused_node: args.pause_node,
        clients: usize::from(args.clients),
        runs,
    };
    write_outputs(&args, &result)?;
    let acquired: u64 = result
        .runs
        .iter()
        .flat_map(|r| &r.workloads)
        .map(|w| w.redquorum.acquired)
        .sum();
    if acquired == 0 {
        return Err(Failure::unavailable(
            "redquorum acquired no lock at all during the benchmark: see the failures above.",
        ));
    }
    Ok(exit::OK)
}

fn workloads(asked: &[Workload]) -> Vec<Workload> {
    let mut out = Vec::new();
    for w in asked {
        let each: &[Workload] = if *w == Workload::All {
            &Workload::EACH
        } else {
            std::slice::from_ref(w)
        };
        for w in each {
            if !out.contains(w) {
                out.push(*w);
            }
        }
    }
    out
}

async fn run_profiles(
    args: &BenchArgs,
    masters: &mut Masters,
    profiles: &[Profile],
    workloads: &[Workload],
    node_timeout: Duration,
    guard: bool,
) -> Result<Vec<ProfileRun>, Failure> {
    let hold = masters.hold(args.pause_node);
    let shown: Vec<String> = masters.urls().iter().map(|u| args::redact(u)).collect();
    let mut runs = Vec::new();
    for profile in profiles {
        let urls = masters.urls_for(profile)?;
        let links = profile
            .links(urls.len())
            .map_err(Failure::usage)?
            .unwrap_or_default();
        let setup = Setup {
            builder: args
                .masters
                .builder(urls.clone(), args.ttl)
                .node_timeout(node_timeout)
                .retry(RetryPolicy::once())
                .restart_guard(guard)
                .fencing(args.fencing),
            urls: urls.clone(),
            node_timeout,
            ttl_ms: u64::try_from(args.ttl.as_millis()).unwrap_or(u64::MAX),
            tag: run_tag(),
            keys: args.keys as usize,
            hold: args.hold,
            poll: args.poll,
        };
        let fleet = Fleet::start(usize::from(args.clients), &setup).await?;
        let client = fleet.first();
        println!(
            "profile {}: {} masters, quorum {}, ttl {}, node timeout {}{}{}{}",
            profile.name(),
            client.nodes(),
            client.quorum(LockKind::Mutex),
            human(args.ttl),
            human(node_timeout),
            if links.is_empty() {
                String::new()
            } else {
                format!(", one-way delays {}", Profile::Links(links.clone()).name())
            },
            args.pause_node.map_or_else(String::new, |i| format!(
                ", master {i} paused while measuring"
            )),
            if args.clients > 1 {
                format!(
                    ", {} clients (each its own Redlock, floor and runtime)",
                    args.clients
                )
            } else {
                String::new()
            },
        );
        let link_check = if links.is_empty() {
            None
        } else {
            let check = linkcheck::run(
                &masters.urls(),
                &urls,
                &links,
                args.link_tolerance,
                DEFAULT_CONNECT_TIMEOUT,
            )
            .await;
            let check = match check {
                Ok(check) => check,
                Err(failure) => {
                    fleet.stop().await;
                    return Err(failure);
                }
            };
            println!("{}", linkcheck::table(&check));
            if !check.passed {
                fleet.stop().await;
                return Err(linkcheck::refusal(&check));
            }
            Some(check)
        };
        let mut results = Vec::new();
        for &workload in workloads {
            let workers =
                workload.workers(usize::from(args.concurrency), usize::from(args.waiters));
            let plan = Plan {
                workers,
                ops: args.ops,
                duration: args
                    .duration
                    .or(args.ops.is_none().then_some(Duration::from_secs(5))),
                warmup: args.warmup,
                slice: args.slice.max(Duration::from_millis(1)),
                node_timeout,
            };
            let bar = progress(&format!("{} {workload}", profile.name()));
            let measured = engine::measure(fleet.members(), workload, plan, &bar, &*hold).await;
            bar.finish_and_clear();
            let mut result = WorkloadResult::new(workload, workers, args.keys as usize, &measured);
            if workload == Workload::Handover {
                result.handover = Some(result::HandoverSetup {
                    hold_us: args.hold.as_secs_f64() * 1e6,
                    poll: args.poll,
                });
            }
            println!("{}", report::table(&result, &shown));
            results.push(result);
        }
        fleet.stop().await;
        runs.push(ProfileRun {
            profile: profile.name(),
            links,
            link_check,
            workloads: results,
        });
    }
    Ok(runs)
}

/// A tag that keeps this run's keys apart from any other run's.
fn run_tag() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{:x}{nanos:08x}", std::process::id())
}

/// A progress bar on stderr when it is a terminal, else a hidden one.
fn progress(label: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0).with_prefix(label.to_owned());
    if let Ok(style) = ProgressStyle::with_template("{prefix:>24} [{bar:40}] {percent:>3}%") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

fn write_outputs(args: &BenchArgs, result: &BenchResult) -> Result<(), Failure> {
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(result)
            .map_err(|e| Failure::io(format!("could not encode the results as JSON: {e}.")))?;
        create_parent(path)?;
        std::fs::write(path, json + "\n")
            .map_err(|e| Failure::io(format!("could not write {}: {e}.", path.display())))?;
        eprintln!("wrote {}", path.display());
    }
    if let Some(path) = &args.plot {
        create_parent(path)?;
        plot::write(result, path)
            .map_err(|e| Failure::io(format!("could not draw {}: {e}.", path.display())))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

fn create_parent(path: &std::path::Path) -> Result<(), Failure> {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => std::fs::create_dir_all(dir)
            .map_err(|e| Failure::io(format!("could not create {}: {e}.", dir.display()))),
        _ => Ok(()),
    }
}
