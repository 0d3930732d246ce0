//! The scenario runner of the fault tests: several clients, each behind its own fault
//! proxies ([`LinkSet`]), compete for a few resources; every critical section is recorded
//! in the checker and increments the referee's counter, guarded by the lock's [`Lease`].
//! A chaos thread injects the scenario's faults meanwhile.
//!
//! A run lasts at least [`Scenario::run_for`] and until [`Scenario::min_hand_overs`]
//! hand-overs happened (and, with [`Scenario::wait_for_mark`], until the chaos thread's
//! faults are over and every client has locked since), but never longer than
//! [`Scenario::max_run`]: it waits on what it needs to see, with a bound, instead of on the
//! speed of the machine. A run that ends at the bound without enough hand-overs is
//! *inconclusive*, and fails.
//!
//! # Soak
//! `REDQUORUM_SOAK=1` multiplies durations, hand-overs and round counts by 10 (or by `n`
//! with `REDQUORUM_SOAK=n`, `n ≥ 2`); see [`soak`]. `REDQUORUM_SEED=<n>` replays a seed;
//! `REDQUORUM_SUMMARY_FILE=<path>` collects every summary line.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rand::RngExt;
use rand::rngs::StdRng;
use redquorum::{Redlock, RetryPolicy};
use redquorum_testkit::{Checker, LinkSet, LocalCluster, Report, soak_factor};

use super::builder;
use super::chaos::{Chaos, Mark, Stop};
use super::hold::{HoldStyle, hold, random_upto};

/// Durations, counts and rounds are multiplied by this in the soak tier.
pub fn soak() -> u32 {
    soak_factor()
}

/// One scenario's clients and workload.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: &'static str,
    pub clients: usize,
    pub resources: usize,
    pub ttl: Duration,
    pub node_timeout: Duration,
    pub drift_factor: f64,
    pub restart_guard: bool,
    pub retry: RetryPolicy,
    pub hold: HoldStyle,
    /// Longest pause between two acquisitions of one client.
    pub think: Duration,
    /// Shortest run (× soak).
    pub run_for: Duration,
    /// Longest run (× soak).
    pub max_run: Duration,
    /// Hand-overs for a conclusive run (× soak).
    pub min_hand_overs: usize,
    /// Negative controls: end the run as soon as the checker finds an overlap.
    pub stop_on_overlap: bool,
    /// Waiting clients retry at the policy's delay ([`LockOptions::poll`](redquorum::LockOptions::poll))
    /// instead of waiting for a release's announcement or the holder's expiry: a scenario
    /// probing the moment a holder's keys run out wants attempts all along that moment.
    pub poll: bool,
    /// The chaos thread sets its [`Mark`] when its faults are over: the run does not end
    /// before the mark is set and every client has acquired after it (within `max_run`),
    /// whatever the machine's speed.
    pub wait_for_mark: bool,
}

impl Scenario {
    /// Four clients on two resources with short critical sections, ttl 2 s, node timeout
    /// 100 ms, for 3 s and at least 10 hand-overs.
    pub fn new(name: &'static str) -> Self {
        Self {
            name,
            clients: 4,
            resources: 2,
            ttl: Duration::from_secs(2),
            node_timeout: Duration::from_millis(100),
            drift_factor: 0.01,
            restart_guard: false,
            retry: RetryPolicy::new()
                .unlimited_attempts()
                .timeout(Duration::from_secs(1))
                .delay(Duration::from_millis(10), Duration::from_millis(10)),
            hold: HoldStyle::Short {
                max_pause: Duration::from_millis(20),
            },
            think: Duration::from_millis(20),
            run_for: Duration::from_secs(3),
            max_run: Duration::from_secs(20),
            min_hand_overs: 10,
            stop_on_overlap: false,
            poll: false,
            wait_for_mark: false,
        }
    }

    /// Three clients on one resource: each holder keeps the lock until just before its
    /// deadline (no renewal) while the others poll every few milliseconds, so a key that
    /// expires on a quorum before the deadline is taken over while still held.
    pub fn holding_to_the_deadline(name: &'static str, ttl: Duration) -> Self {
        Self {
            clients: 3,
            resources: 1,
            ttl,
            hold: HoldStyle::ToDeadline {
                margin: Duration::from_millis(10),
            },
            retry: RetryPolicy::new()
                .unlimited_attempts()
                .timeout(ttl * 2)
                .delay(Duration::from_millis(5), Duration::from_millis(4)),
            think: Duration::from_millis(50),
            run_for: ttl * 4,
            min_hand_overs: 3,
            poll: true,
            ..Self::new(name)
        }
    }

    /// A client over `links` with this scenario's options.
    pub fn client(&self, links: &LinkSet) -> Redlock {
        builder(links.urls())
            .ttl(self.ttl)
            .node_timeout(self.node_timeout)
            .drift_factor(self.drift_factor)
            .restart_guard(self.restart_guard)
            .retry(self.retry)
            .build()
            .expect("valid scenario options")
    }

    /// Starts the checker (printing the seed), one link set and one client per client
    /// slot, and connects every client.
    pub async fn start(self, cluster: Arc<LocalCluster>) -> Run {
        let checker = Checker::start(self.name)
            .expect("start the referee")
            .min_hand_overs(self.min_hand_overs * soak() as usize);
        let links: Vec<Arc<LinkSet>> = (0..self.clients)
            .map(|i| {
                let seed = redquorum_testkit::derive_seed(checker.seed(), 1000 + i as u64);
                Arc::new(cluster.links_seeded(seed).expect("start the fault proxies"))
            })
            .collect();
        let clients: Vec<Redlock> = links.iter().map(|l| self.client(l)).collect();
        for client in &clients {
            client.connect().await;
        }
        Run {
            scenario: self,
            checker: Arc::new(checker),
            cluster,
            links,
            clients,
        }
    }
}

/// A started scenario: faults can be set on its links before [`run`](Run::run).
pub struct Run {
    pub scenario: Scenario,
    pub checker: Arc<Checker>,
    pub cluster: Arc<LocalCluster>,
    pub links: Vec<Arc<LinkSet>>,
    pub clients: Vec<Redlock>,
}

/// Per-client counters, summed over clients at the end.
#[derive(Debug, Default, Clone)]
pub struct ClientStats {
    pub acquired: u64,
    pub contended: u64,
    pub no_quorum: u64,
    pub other_failures: u64,
    pub abandoned: u64,
    pub late_releases: u64,
    /// Acquisitions that returned after the instant in `Outcome::mark` was set.
    pub acquired_after_mark: u64,
    pub first_other: Option<String>,
}

impl ClientStats {
    fn add(&mut self, o: &ClientStats) {
        self.acquired += o.acquired;
        self.contended += o.contended;
        self.no_quorum += o.no_quorum;
        self.other_failures += o.other_failures;
        self.abandoned += o.abandoned;
        self.late_releases += o.late_releases;
        self.acquired_after_mark += o.acquired_after_mark;
        if self.first_other.is_none() {
            self.first_other.clone_from(&o.first_other);
        }
    }

    /// The scenario-specific part of the summary line.
    pub fn notes(&self) -> String {
        format!(
            "failed: contended={} no-quorum={} other={} | abandoned={} late-releases={}",
            self.contended, self.no_quorum, self.other_failures, self.abandoned, self.late_releases
        )
    }
}

/// A finished run.
pub struct Outcome {
    pub report: Report,
    pub stats: ClientStats,
    pub per_client: Vec<ClientStats>,
    /// The clients, still connected: dropping a client closes its connections, and the
    /// proxies then discard the requests they were still delaying.
    pub clients: Vec<Redlock>,
}

impl Run {
    /// Runs the clients with no faults injected during the run (faults set on the links
    /// beforehand stay).
    pub async fn run(self) -> Outcome {
        self.run_with_chaos(
            |chaos, _| {
                while chaos.stop.sleep(Duration::from_millis(50)) {}
            },
        )
        .await
    }

    /// Runs the clients while `chaos` runs on its own thread. `chaos` should loop until its
    /// stop signal is set (or return earlier if its schedule is finite) and leave every
    /// node running and every link passing when it returns.
    pub async fn run_with_chaos<F>(self, chaos: F) -> Outcome
    where
        F: FnOnce(Chaos, Mark) + Send + 'static,
    {
        let sc = self.scenario.clone();
        let factor = soak();
        let run_for = sc.run_for * factor;
        let max_run = sc.max_run * factor;
        let started = Instant::now();
        let stop_clients = Arc::new(AtomicBool::new(false));
        let mark = Mark::new(self.clients.len());
        let chaos_stop = Stop::default();
        let chaos_thread = {
            let ctx = Chaos {
                cluster: self.cluster.clone(),
                links: self.links.clone(),
                rng: self.checker.rng(1),
                stop: chaos_stop.clone(),
                started,
            };
            let mark = mark.clone();
            std::thread::Builder::new()
                .name(format!("chaos-{}", sc.name))
                .spawn(move || chaos(ctx, mark))
                .expect("spawn the chaos thread")
        };
        let tasks: Vec<_> = self
            .clients
            .iter()
            .enumerate()
            .map(|(id, redlock)| {
                let ctx = ClientCtx {
                    id,
                    redlock: redlock.clone(),
                    checker: self.checker.clone(),
                    scenario: sc.clone(),
                    stop: stop_clients.clone(),
                    mark: mark.clone(),
                    rng: self.checker.rng(100 + id as u64),
                };
                tokio::spawn(client_loop(ctx))
            })
            .collect();
        loop {
            let elapsed = started.elapsed();
            let recorder = self.checker.recorder();
            let enough = if sc.stop_on_overlap {
                !redquorum_testkit::find_overlaps(&recorder.holds()).is_empty()
            } else {
                elapsed >= run_for
                    && recorder.hand_overs() >= self.checker.needed_hand_overs()
                    && (!sc.wait_for_mark || mark.is_set())
                    && (!mark.is_set() || mark.every_client_after())
            };
            if enough || elapsed >= max_run {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        chaos_stop.set();
        // The chaos thread restores the cluster; joining it blocks only briefly (a restart
        // in progress at most), so it is done off the runtime's worker.
        tokio::task::spawn_blocking(move || chaos_thread.join())
            .await
            .expect("join the chaos thread")
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        stop_clients.store(true, Ordering::SeqCst);
        let mut stats = ClientStats::default();
        let mut per_client = Vec::with_capacity(tasks.len());
        for task in tasks {
            // A client finishes its current acquire (bounded by the retry timeout) and hold.
            let client = tokio::time::timeout(Duration::from_secs(60), task)
                .await
                .expect("a client did not stop within 60 s")
                .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
            stats.add(&client);
            per_client.push(client);
        }
        let report = self
            .checker
            .report_with(stats.notes())
            .expect("read the referee");
        Outcome {
            report,
            stats,
            per_client,
            clients: self.clients,
        }
    }
}

struct ClientCtx {
    id: usize,
    redlock: Redlock,
    checker: Arc<Checker>,
    scenario: Scenario,
    stop: Arc<AtomicBool>,
    mark: Mark,
    rng: StdRng,
}

async fn client_loop(mut ctx: ClientCtx) -> ClientStats {
    let mut stats = ClientStats::default();
    let mut session = ctx
        .checker
        .referee()
        .session()
        .await
        .expect("connect to the referee");
    while !ctx.stop.load(Ordering::SeqCst) {
        let resource = format!("res-{}", ctx.rng.random_range(0..ctx.scenario.resources));
        let options = redquorum::LockOptions::new().poll(ctx.scenario.poll);
        match ctx.redlock.lock_with([&resource], options).await {
            Ok(lock) => {
                let acquired = Instant::now();
                stats.acquired += 1;
                if ctx.mark.count(ctx.id, acquired) {
                    stats.acquired_after_mark += 1;
                }
                let pause = match ctx.scenario.hold {
                    HoldStyle::Short { max_pause } => random_upto(&mut ctx.rng, max_pause),
                    HoldStyle::ToDeadline { .. } | HoldStyle::Renewed { .. } => Duration::ZERO,
                };
                hold(
                    ctx.id,
                    &resource,
                    lock,
                    acquired,
                    ctx.scenario.hold,
                    pause,
                    &ctx.checker,
                    &mut session,
                    &mut stats,
                )
                .await;
            }
            Err(e) if e.is_contended() => stats.contended += 1,
            Err(e) if e.is_no_quorum() => stats.no_quorum += 1,
            Err(e) => {
                stats.other_failures += 1;
                if stats.first_other.is_none() {
                    stats.first_other = Some(e.to_string());
                }
            }
        }
        let think = random_upto(&mut ctx.rng, ctx.scenario.think);
        tokio::time::sleep(think).await;
    }
    stats
}
