//! The result of a benchmark as data: what the table prints, `--json` writes and
//! `--plot` draws.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::engine::Measured;
use super::linkcheck::LinkCheck;
use super::profile::Link;
use super::record::{Latency, Recorder, Summary};
use super::workload::{System, Workload};

/// A whole `redquorum bench` run.
#[derive(Debug, Serialize)]
pub(crate) struct BenchResult {
    pub(crate) masters: usize,
    pub(crate) quorum: usize,
    /// Whether the masters were started by the benchmark.
    pub(crate) spawned: bool,
    /// The masters' URLs, passwords redacted (direct, not through the proxies).
    pub(crate) urls: Vec<String>,
    pub(crate) ttl_ms: u64,
    pub(crate) restart_guard: bool,
    /// Whether redquorum's locks were fenced.
    pub(crate) fencing: bool,
    pub(crate) paused_node: Option<usize>,
    /// Lock clients, each with its own `Redlock`, floor and runtime (`--clients`).
    pub(crate) clients: usize,
    pub(crate) runs: Vec<ProfileRun>,
}

/// Every workload measured under one profile.
#[derive(Debug, Serialize)]
pub(crate) struct ProfileRun {
    pub(crate) profile: String,
    /// One-way delay per master; empty on loopback.
    pub(crate) links: Vec<Link>,
    /// Each link's raw round trip against the profile, measured before the workloads
    /// (none on loopback).
    pub(crate) link_check: Option<LinkCheck>,
    pub(crate) workloads: Vec<WorkloadResult>,
}

/// One workload: redquorum, the floor, and their ratios.
#[derive(Debug, Serialize)]
pub(crate) struct WorkloadResult {
    pub(crate) workload: &'static str,
    /// Workers per client.
    pub(crate) workers: usize,
    /// Lock clients; `redquorum` and `floor` are the whole fleet's figures.
    pub(crate) clients: usize,
    /// Shared keys (contention only).
    pub(crate) keys: Option<usize>,
    /// The operation the CDF and the plot are about (`acquire`, or `extend`).
    pub(crate) headline: &'static str,
    pub(crate) redquorum: SystemResult,
    pub(crate) floor: SystemResult,
    /// redquorum / floor: above 1 means slower for latencies, faster for rates.
    pub(crate) ratio: Ratios,
    /// Each client's own figures, in client order.
    pub(crate) per_client: Vec<ClientResult>,
    /// Hand-over only: each grant's hold, in µs, and whether the waiters polled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) handover: Option<HandoverSetup>,
}

/// How the hand-over workload ran.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct HandoverSetup {
    pub(crate) hold_us: f64,
    pub(crate) poll: bool,
}

/// One client of the fleet.
#[derive(Debug, Serialize)]
pub(crate) struct ClientResult {
    pub(crate) client: usize,
    pub(crate) redquorum: ClientSystem,
    pub(crate) floor: ClientSystem,
}

/// What one client did with one system: its rates and its headline latency.
#[derive(Debug, Serialize)]
pub(crate) struct ClientSystem {
    pub(crate) attempts: u64,
    pub(crate) acquired: u64,
    pub(crate) cycles: u64,
    pub(crate) acquisitions_per_s: f64,
    pub(crate) cycles_per_s: f64,
    /// The headline operation's latency (acquire, or extend).
    pub(crate) latency: Option<Summary>,
}

impl ClientSystem {
    fn new(rec: &Recorder, elapsed: Duration, workload: Workload) -> Self {
        let secs = elapsed.as_secs_f64();
        let per_s = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
        Self {
            attempts: rec.attempts,
            acquired: rec.acquired,
            cycles: rec.cycles,
            acquisitions_per_s: per_s(rec.acquired),
            cycles_per_s: per_s(rec.cycles),
            latency: headline(rec, workload).summary(),
        }
    }
}

fn headline(rec: &Recorder, workload: Workload) -> &Latency {
    match workload {
        Workload::Extend => &rec.extend,
        _ => &rec.acquire,
    }
}

/// What one system did in its slices of a workload.
#[derive(Debug, Serialize)]
pub(crate) struct SystemResult {
    pub(crate) elapsed_s: f64,
    pub(crate) attempts: u64,
    pub(crate) acquired: u64,
    pub(crate) cycles: u64,
    pub(crate) cycles_per_s: f64,
    pub(crate) acquisitions_per_s: f64,
    pub(crate) acquire: Option<Summary>,
    pub(crate) extend: Option<Summary>,
    pub(crate) release: Option<Summary>,
    /// Hand-over gaps (release acknowledged → next grant), redquorum only.
    pub(crate) gap: Option<Summary>,
    /// Hand-over grants that came before the release's acknowledgement reached its holder.
    pub(crate) early_grants: u64,
    pub(crate) failures: BTreeMap<String, u64>,
    /// Each master's votes in the headline operation (redquorum only).
    pub(crate) votes: Vec<VoteResult>,
    /// The headline operation's latency distribution: `[latency_us, quantile]` points.
    pub(crate) cdf: Vec<[f64; 2]>,
}

/// One master's votes in the headline operation.
#[derive(Debug, Serialize)]
pub(crate) struct VoteResult {
    pub(crate) node: usize,
    /// Answers in by the time the round was decided.
    pub(crate) answered: u64,
    pub(crate) failed: u64,
    /// Rounds decided without this master.
    pub(crate) pending: u64,
    pub(crate) latency: Option<Summary>,
}

/// redquorum's figures divided by the floor's.
#[derive(Debug, Serialize)]
pub(crate) struct Ratios {
    pub(crate) acquire: Option<PercentileRatios>,
    pub(crate) extend: Option<PercentileRatios>,
    pub(crate) release: Option<PercentileRatios>,
    pub(crate) cycles_per_s: Option<f64>,
    pub(crate) acquisitions_per_s: Option<f64>,
}

/// Latency ratios per statistic.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct PercentileRatios {
    pub(crate) mean: f64,
    pub(crate) p50: f64,
    pub(crate) p90: f64,
    pub(crate) p99: f64,
    pub(crate) p999: f64,
    pub(crate) max: f64,
}

impl PercentileRatios {
    fn of(ours: Option<Summary>, floor: Option<Summary>) -> Option<Self> {
        let (a, b) = (ours?.columns(), floor?.columns());
        let r = |i: usize| if b[i] > 0.0 { a[i] / b[i] } else { f64::NAN };
        Some(Self {
            mean: r(0),
            p50: r(1),
            p90: r(2),
            p99: r(3),
            p999: r(4),
            max: r(5),
        })
    }

    pub(crate) fn columns(&self) -> [f64; 6] {
        [self.mean, self.p50, self.p90, self.p99, self.p999, self.max]
    }
}

impl WorkloadResult {
    pub(crate) fn new(workload: Workload, workers: usize, keys: usize, m: &Measured) -> Self {
        let system = |s: System| {
            SystemResult::new(
                &m.recorders[s as usize],
                m.elapsed[s as usize],
                workload,
                s == System::Redquorum,
            )
        };
        let (ours, floor) = (system(System::Redquorum), system(System::Floor));
        let rate = |a: f64, b: f64| (b > 0.0).then(|| a / b);
        let ratio = Ratios {
            acquire: PercentileRatios::of(ours.acquire, floor.acquire),
            extend: PercentileRatios::of(ours.extend, floor.extend),
            release: PercentileRatios::of(ours.release, floor.release),
            cycles_per_s: rate(ours.cycles_per_s, floor.cycles_per_s),
            acquisitions_per_s: rate(ours.acquisitions_per_s, floor.acquisitions_per_s),
        };
        let per_client = m
            .clients
            .iter()
            .enumerate()
            .map(|(client, recs)| {
                let system = |s: System| {
                    ClientSystem::new(&recs[s as usize], m.elapsed[s as usize], workload)
                };
                ClientResult {
                    client,
                    redquorum: system(System::Redquorum),
                    floor: system(System::Floor),
                }
            })
            .collect();
        Self {
            workload: workload.name(),
            workers,
            clients: m.clients.len(),
            keys: (workload == Workload::Contention).then_some(keys),
            handover: None,
            headline: workload.headline(),
            redquorum: ours,
            floor,
            ratio,
            per_client,
        }
    }
}

impl SystemResult {
    fn new(rec: &Recorder, elapsed: Duration, workload: Workload, votes: bool) -> Self {
        let secs = elapsed.as_secs_f64();
        let per_s = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
        let headline = headline(rec, workload);
        Self {
            elapsed_s: secs,
            attempts: rec.attempts,
            acquired: rec.acquired,
            cycles: rec.cycles,
            cycles_per_s: per_s(rec.cycles),
            acquisitions_per_s: per_s(rec.acquired),
            acquire: rec.acquire.summary(),
            extend: rec.extend.summary(),
            release: rec.release.summary(),
            gap: rec.gap.summary(),
            early_grants: rec.early_grants,
            failures: rec
                .failures
                .iter()
                .map(|(k, v)| ((*k).to_owned(), *v))
                .collect(),
            votes: if votes {
                rec.votes
                    .iter()
                    .enumerate()
                    .map(|(node, v)| VoteResult {
                        node,
                        answered: v.answered,
                        failed: v.failed,
                        pending: v.pending,
                        latency: v.latency.summary(),
                    })
                    .collect()
            } else {
                Vec::new()
            },
            cdf: cdf(headline),
        }
    }
}

/// Points of the distribution: every percent, then finer in the tail.
fn cdf(latency: &Latency) -> Vec<[f64; 2]> {
    let Some(h) = latency.histogram() else {
        return Vec::new();
    };
    let tail = [0.995, 0.999, 0.9995, 0.9999, 1.0];
    (0..100)
        .map(|i| f64::from(i) / 100.0)
        .chain(tail)
        .map(|q| [h.value_at_quantile(q) as f64 / 1e3, q])
        .collect()
}
