//! The hot path against real masters: lock + release cycles of redquorum and of the naive
//! floor (raw `SET NX PX` and a compare-and-delete on one multiplexed connection per master,
//! stopping at the majority: the `redquorum-floor` crate that `redquorum bench` uses),
//! interleaved in blocks so that
//! machine noise hits both, with the **client's CPU time per cycle** next to the wall time.
//!
//! CPU time is the sum of every thread's on-CPU time from `/proc/self/task/*/schedstat`
//! (nanoseconds), so it counts the runtime's workers and the connections' driver tasks, not
//! the masters. Run it under `valgrind --tool=callgrind` with two `CYCLES` values and
//! subtract for instructions per cycle.
//!
//! `cargo bench --bench hotpath` (five local masters from the test kit; the restart guard
//! on, the masters commissioned first). Environment:
//! - `SYSTEM`: `both` (default), `redquorum` or `floor`;
//! - `WORKERS` (default 1): concurrent workers on distinct keys;
//! - `CYCLES` (default 20000): measured cycles per system;
//! - `BLOCK` (default 1000): cycles per system before switching to the other;
//! - `GUARD` (default 1): the restart guard on (1) or off (0);
//! - `FLAVOR`: `multi` (default, two workers, like the CLI) or `current`;
//! - `NODES`: comma-separated master URLs instead of spawning five (guard on: commissioned
//!   masters only).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redquorum::{DEFAULT_CONNECT_TIMEOUT, Redlock, RetryPolicy};
use redquorum_floor::Floor;
use redquorum_testkit::LocalCluster;

const TTL: Duration = Duration::from_secs(30);
/// The floor's keys live as long as redquorum's.
const FLOOR_TTL_MS: u64 = 30_000;
const NODE_TIMEOUT: Duration = Duration::from_secs(1);

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}

fn env_n(name: &str, default: u64) -> u64 {
    env(name, &default.to_string()).parse().unwrap_or(default)
}

/// On-CPU time of every thread of this process so far.
fn cpu_time() -> Duration {
    cpu_time_of("self")
}

/// On-CPU time of every thread of process `pid` so far.
fn cpu_time_of(pid: &str) -> Duration {
    let mut ns = 0u64;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
            ns += stat
                .split_whitespace()
                .next()
                .and_then(|f| f.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    Duration::from_nanos(ns)
}

/// Context switches of every thread of this process so far (voluntary and not).
fn switches() -> u64 {
    let mut n = 0u64;
    if let Ok(tasks) = std::fs::read_dir("/proc/self/task") {
        for task in tasks.flatten() {
            let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
            n += status
                .lines()
                .filter(|l| l.contains("ctxt_switches"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>();
        }
    }
    n
}

/// One lock + release cycle of the floor: the release is sent whatever the acquisition
/// decided, and awaited until a majority answered.
async fn floor_cycle(floor: &Floor, key: &str, value: &str) -> bool {
    let ok = floor.acquire(key, value, FLOOR_TTL_MS).await.is_ok();
    let _ = floor.release(key, value).await;
    ok
}

#[derive(Default)]
struct Totals {
    cycles: u64,
    wall: Duration,
    cpu: Duration,
    server_cpu: Duration,
    switches: u64,
}

/// On-CPU time of the masters named by `SERVER_PIDS` (comma-separated), if given.
fn server_cpu(pids: &[String]) -> Duration {
    pids.iter().map(|p| cpu_time_of(p)).sum()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum System {
    Redquorum,
    Floor,
}

struct Ctx {
    redlock: Redlock,
    floor: Floor,
    seq: AtomicU64,
    failures: AtomicU64,
    /// The longest cycle of each system, in µs.
    slowest: [AtomicU64; 2],
}

/// `cycles` lock + release cycles of `system` spread over `workers` tasks.
async fn block(ctx: &Arc<Ctx>, system: System, workers: u64, cycles: u64) {
    let left = Arc::new(AtomicU64::new(cycles));
    let tasks: Vec<_> = (0..workers)
        .map(|_| {
            let ctx = ctx.clone();
            let left = left.clone();
            tokio::spawn(async move {
                while left
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                    .is_ok()
                {
                    let seq = ctx.seq.fetch_add(1, Ordering::Relaxed);
                    let started = Instant::now();
                    let ok = match system {
                        System::Redquorum => match ctx.redlock.try_lock(&format!("hp:{seq}")).await
                        {
                            Ok(lock) => lock.release().await.is_ok(),
                            Err(_) => false,
                        },
                        System::Floor => {
                            floor_cycle(
                                &ctx.floor,
                                &format!("redquorum:floo:hp:{seq}"),
                                &format!("{seq:040x}"),
                            )
                            .await
                        }
                    };
                    if !ok {
                        ctx.failures.fetch_add(1, Ordering::Relaxed);
                    }
                    let took = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
                    ctx.slowest[system as usize].fetch_max(took, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("a worker");
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runtime = match env("FLAVOR", "multi").as_str() {
        "current" => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
        _ => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?,
    };
    runtime.block_on(run())
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let system = env("SYSTEM", "both");
    let workers = env_n("WORKERS", 1).max(1);
    let cycles = env_n("CYCLES", 20_000);
    let block_size = env_n("BLOCK", 1_000).max(1);
    let guard = env_n("GUARD", 1) == 1;
    let pids: Vec<String> = std::env::var("SERVER_PIDS")
        .map(|l| l.split(',').map(str::to_owned).collect())
        .unwrap_or_default();
    let (_masters, urls) = match std::env::var("NODES") {
        Ok(list) => (None, list.split(',').map(str::to_owned).collect()),
        Err(_) => {
            let masters = tokio::task::spawn_blocking(|| LocalCluster::start(5)).await??;
            let urls = masters.urls();
            (Some(masters), urls)
        }
    };
    let redlock = Redlock::builder()
        .nodes(&urls)
        .ttl(TTL)
        .node_timeout(NODE_TIMEOUT)
        .retry(RetryPolicy::once())
        .restart_guard(guard)
        .build()?;
    if guard && _masters.is_some() {
        for i in 0..urls.len() {
            redlock.commission(i, false).await?;
        }
    }
    redlock.connect().await;
    let ctx = Arc::new(Ctx {
        redlock,
        floor: Floor::connect(&urls, NODE_TIMEOUT, DEFAULT_CONNECT_TIMEOUT).await?,
        seq: AtomicU64::new(0),
        failures: AtomicU64::new(0),
        slowest: [AtomicU64::new(0), AtomicU64::new(0)],
    });
    let systems: Vec<System> = match system.as_str() {
        "redquorum" => vec![System::Redquorum],
        "floor" => vec![System::Floor],
        _ => vec![System::Redquorum, System::Floor],
    };
    // Warm-up: connections, script caches, the guard's verification.
    for &s in &systems {
        block(&ctx, s, workers, (block_size / 2).max(workers)).await;
    }
    ctx.failures.store(0, Ordering::Relaxed);
    for slowest in &ctx.slowest {
        slowest.store(0, Ordering::Relaxed);
    }
    let mut totals = [Totals::default(), Totals::default()];
    let mut round = 0u64;
    while totals
        .iter()
        .zip([System::Redquorum, System::Floor])
        .any(|(t, s)| systems.contains(&s) && t.cycles < cycles)
    {
        let mut order = systems.clone();
        if round % 2 == 1 {
            order.reverse();
        }
        for s in order {
            let t = &mut totals[s as usize];
            let n = block_size.min(cycles - t.cycles.min(cycles));
            if n == 0 {
                continue;
            }
            let (wall, cpu, sw) = (Instant::now(), cpu_time(), switches());
            let servers = server_cpu(&pids);
            block(&ctx, s, workers, n).await;
            t.wall += wall.elapsed();
            t.cpu += cpu_time().saturating_sub(cpu);
            t.server_cpu += server_cpu(&pids).saturating_sub(servers);
            t.switches += switches().saturating_sub(sw);
            t.cycles += n;
        }
        round += 1;
    }
    let show = |name: &str, t: &Totals| {
        let per_s = t.cycles as f64 / t.wall.as_secs_f64();
        let cpu_us = t.cpu.as_secs_f64() * 1e6 / t.cycles as f64;
        let wall_us = t.wall.as_secs_f64() * 1e6 / t.cycles as f64;
        let sw = t.switches as f64 / t.cycles as f64;
        let servers = if pids.is_empty() {
            String::new()
        } else {
            format!(
                "  masters cpu {:>6.1} µs/cycle",
                t.server_cpu.as_secs_f64() * 1e6 / t.cycles as f64
            )
        };
        println!(
            "{name:<10} {:>7} cycles  {per_s:>9.0}/s  wall {wall_us:>7.1} µs/cycle  client cpu {cpu_us:>6.1} µs/cycle  {sw:>5.2} switches/cycle{servers}",
            t.cycles
        );
        (per_s, cpu_us)
    };
    println!(
        "workers {workers}, guard {}, block {block_size}",
        if guard { "on" } else { "off" }
    );
    let rq = systems
        .contains(&System::Redquorum)
        .then(|| show("redquorum", &totals[0]));
    let fl = systems
        .contains(&System::Floor)
        .then(|| show("floor", &totals[1]));
    if let (Some(rq), Some(fl)) = (rq, fl) {
        println!(
            "ratio      cycles/s {:.3}×  client cpu {:.3}×",
            rq.0 / fl.0,
            rq.1 / fl.1
        );
    }
    println!(
        "failures   {}; slowest cycle: redquorum {} µs, floor {} µs",
        ctx.failures.load(Ordering::Relaxed),
        ctx.slowest[0].load(Ordering::Relaxed),
        ctx.slowest[1].load(Ordering::Relaxed)
    );
    Ok(())
}
