//! Many kept-alive locks in one client: whether every renewal succeeds, how many round trips
//! each master sees per renewal interval, the process's CPU and memory per held lock, and
//! the acquire latency of the same client while it keeps them all alive.
//!
//! `cargo bench --bench renewal` (5 local masters from the test kit). The library's defaults
//! are the bench's defaults; the environment changes them:
//!
//! | variable | default | what |
//! |---|---|---|
//! | `LOCKS` | 10000 | kept-alive locks held by the one client |
//! | `HOLD_SECS` | 60 | how long they are held |
//! | `TTL_MS` | 10000 (`DEFAULT_TTL`) | their ttl; renewal every third of it |
//! | `NODE_TIMEOUT_MS` | 50 (`DEFAULT_NODE_TIMEOUT`) | the client's node timeout |
//! | `PROBE_EVERY_MS` | 5 | pause between two acquisitions of the latency probe |
//! | `BASELINE_SECS` | 10 | the probe's run with no held lock, before and after the hold |
//! | `RENEWAL_CONNECTION` | `own` | `shared`: renewal batches on the connection of acquisitions, through its outbox (needs `RUSTFLAGS="--cfg redquorum_unsafe"`) |
//!
//! The restart guard is off: the test kit's masters are seconds old, and the guard would
//! keep them out of the quorum for a ttl (`restart_guard.rs` tests it).
//!
//! The latency probe is one worker acquiring and releasing a lock of its own (a new resource
//! each time) every `PROBE_EVERY_MS`, from the same client: first with no held lock (the
//! baseline), then through the second half of the hold, then again with no held lock once
//! they are released. The process CPU of the renewals alone is that of the first half.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use redquorum::{
    DEFAULT_NODE_TIMEOUT, DEFAULT_TTL, KeepAliveOptions, LockOptions, Redlock, RetryPolicy,
};
use redquorum_testkit::{LocalCluster, ReplyExt};

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Fields of `/proc/self/stat` after the command name (which is in parentheses and may
/// contain spaces).
fn stat_fields() -> Vec<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    after
        .split_whitespace()
        .map(|f| f.parse().unwrap_or(0))
        .collect()
}

/// User + system CPU time of this process (clock ticks of 10 ms).
fn cpu_time() -> Duration {
    let fields = stat_fields();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let ticks = |i: usize| fields.get(i).copied().unwrap_or(0);
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// Resident set size of this process, in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// `EVALSHA` calls (the extend calls, one per up to 256 plain locks) and the microseconds
/// they took on master `i`, from `INFO commandstats`.
fn evalsha_stats(masters: &LocalCluster, i: usize) -> (u64, u64) {
    let Ok(reply) = masters.cmd(i, &["INFO", "commandstats"]) else {
        return (0, 0);
    };
    let text = reply.as_str().unwrap_or_default().to_owned();
    let Some(line) = text.lines().find(|l| l.starts_with("cmdstat_evalsha:")) else {
        return (0, 0);
    };
    let figure = |name: &str| {
        line.split([':', ','])
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (figure("calls"), figure("usec"))
}

/// Acquire latencies of the probe.
#[derive(Default)]
struct Latencies {
    samples: Vec<Duration>,
    failed: u64,
}

impl Latencies {
    fn quantile(&self, q: f64) -> Duration {
        if self.samples.is_empty() {
            return Duration::ZERO;
        }
        let mut sorted = self.samples.clone();
        sorted.sort_unstable();
        let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
        sorted[i]
    }

    fn line(&self) -> String {
        format!(
            "{} acquisitions ({} failed): p50 {:.2?}  p90 {:.2?}  p99 {:.2?}  max {:.2?}",
            self.samples.len(),
            self.failed,
            self.quantile(0.5),
            self.quantile(0.9),
            self.quantile(0.99),
            self.quantile(1.0)
        )
    }
}

/// Acquires and releases a lock of the probe's own every `every` until `stop` is set (or
/// for `run` when given), recording each acquisition's latency.
async fn probe(
    redlock: Redlock,
    every: Duration,
    run: Option<Duration>,
    stop: Arc<AtomicBool>,
) -> Latencies {
    let mut out = Latencies::default();
    let start = Instant::now();
    // A resource of its own each time: a release that failed (a master that did not answer
    // in time) leaves its key for a ttl, and must not fail the next acquisitions.
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) && run.is_none_or(|r| start.elapsed() < r) {
        n += 1;
        let sent = Instant::now();
        match redlock.try_lock(&format!("latency-probe-{n}")).await {
            Ok(lock) => {
                out.samples.push(sent.elapsed());
                let _ = lock.release().await;
            }
            Err(_) => out.failed += 1,
        }
        tokio::time::sleep(every).await;
    }
    out
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let locks = env("LOCKS", 10_000) as usize;
    let hold = Duration::from_secs(env("HOLD_SECS", 60));
    let ttl = Duration::from_millis(env("TTL_MS", millis(DEFAULT_TTL)));
    let node_timeout = Duration::from_millis(env("NODE_TIMEOUT_MS", millis(DEFAULT_NODE_TIMEOUT)));
    let probe_every = Duration::from_millis(env("PROBE_EVERY_MS", 5));
    let baseline = Duration::from_secs(env("BASELINE_SECS", 10));
    let shared = std::env::var("RENEWAL_CONNECTION").is_ok_and(|v| v == "shared");
    let masters = LocalCluster::start(5)?;
    let builder = Redlock::builder()
        .nodes(masters.urls())
        .ttl(ttl)
        .node_timeout(node_timeout)
        .retry(RetryPolicy::new().attempts(5))
        // Masters started a moment ago: the restart guard would not count them for a ttl.
        .restart_guard(false);
    #[cfg(redquorum_unsafe)]
    let builder = builder.renewal_shares_connection(shared);
    #[cfg(not(redquorum_unsafe))]
    if shared {
        return Err("RENEWAL_CONNECTION=shared needs RUSTFLAGS=\"--cfg redquorum_unsafe\"".into());
    }
    let redlock = builder.build()?;
    redlock.connect().await;
    let every = ttl / 3;
    println!(
        "{locks} locks, ttl {ttl:?} (renewal every {every:?}), node timeout {node_timeout:?}, \
         hold {hold:?}, renewals on {} connection",
        if shared { "the shared" } else { "their own" }
    );

    let no_stop = Arc::new(AtomicBool::new(false));
    let cpu_before = cpu_time();
    let before_hold = probe(
        redlock.clone(),
        probe_every,
        Some(baseline),
        no_stop.clone(),
    )
    .await;
    let probe_cpu = cpu_time() - cpu_before;
    println!(
        "latency, no held lock:   {} (process CPU {:.1}% of one core)",
        before_hold.line(),
        probe_cpu.as_secs_f64() / baseline.as_secs_f64() * 100.0
    );

    let rss_before = rss();
    let started = Instant::now();
    let held: Vec<_> = futures::stream::iter(0..locks)
        .map(|i| {
            let redlock = redlock.clone();
            async move {
                let lock = redlock
                    .lock_with([format!("held-{i}")], LockOptions::new())
                    .await
                    .expect("free resource");
                let keep = lock
                    .keep_alive_with(KeepAliveOptions::new())
                    .expect("valid");
                (lock, keep)
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;
    let rss_held = rss();
    println!("acquired {locks} locks in {:.2?}", started.elapsed());

    let before = redlock.renewal_stats();
    let evalsha_before: Vec<_> = (0..masters.len())
        .map(|i| evalsha_stats(&masters, i))
        .collect();
    // The first half of the hold measures the renewals' CPU alone; the probe runs through
    // the second half.
    let cpu_before = cpu_time();
    let wall = Instant::now();
    tokio::time::sleep(hold / 2).await;
    let quiet_cpu = cpu_time() - cpu_before;
    let quiet_wall = wall.elapsed();
    let stop = Arc::new(AtomicBool::new(false));
    let during = tokio::spawn(probe(redlock.clone(), probe_every, None, stop.clone()));
    tokio::time::sleep(hold - hold / 2).await;
    let cpu = cpu_time() - cpu_before;
    let wall = wall.elapsed();
    let after = redlock.renewal_stats();
    let evalsha_after: Vec<_> = (0..masters.len())
        .map(|i| evalsha_stats(&masters, i))
        .collect();
    stop.store(true, Ordering::Relaxed);
    let during = during.await?;
    let rss_after = rss();

    let ticks = after.ticks - before.ticks;
    let renewed = after.renewed - before.renewed;
    let alive = held.iter().filter(|(l, _)| !l.is_expired()).count();
    let intervals = wall.as_secs_f64() / every.as_secs_f64();
    println!("held {locks} locks for {wall:.1?} ({intervals:.1} renewal intervals)");
    println!(
        "  batches sent:           {ticks} ({:.1} per interval; {} of retries), batch size now {}",
        ticks as f64 / intervals,
        after.retried - before.retried,
        after.batch_size
    );
    for (node, (a, b)) in after
        .round_trips
        .iter()
        .zip(&before.round_trips)
        .enumerate()
    {
        println!(
            "  master {node}: {} round trips, {:.1} per renewal interval",
            a - b,
            (a - b) as f64 / intervals
        );
    }
    println!(
        "  renewals:               {renewed} ({:.0} per interval, {:.0} per batch)",
        renewed as f64 / intervals,
        renewed as f64 / ticks.max(1) as f64
    );
    println!(
        "  failed / lost:          {} / {} ({} rescued by late answers)",
        after.failed - before.failed,
        after.lost - before.lost,
        after.rescued - before.rescued
    );
    println!("  still held:             {alive} of {locks}");
    println!("  renewal load:           {}", after.load);
    let (calls, usec) = evalsha_after
        .iter()
        .zip(&evalsha_before)
        .fold((0, 0), |(c, u), (a, b)| (c + a.0 - b.0, u + a.1 - b.1));
    println!(
        "  on the masters:         {calls} extend calls, {:.2} µs each, {:.2} µs per renewed lock \
         and master, {:.1}% of one core per master",
        usec as f64 / calls.max(1) as f64,
        usec as f64 / (renewed.max(1) as f64 * masters.len() as f64),
        usec as f64 / 1e6 / masters.len() as f64 / wall.as_secs_f64() * 100.0
    );
    println!(
        "  process CPU time:       {quiet_cpu:.2?} over the first {quiet_wall:.1?} ({:.1}% of one core); \
         {cpu:.2?} over {wall:.1?} with the probe in the second half ({:.1}%)",
        quiet_cpu.as_secs_f64() / quiet_wall.as_secs_f64() * 100.0,
        cpu.as_secs_f64() / wall.as_secs_f64() * 100.0
    );
    println!(
        "  memory per held lock:   {:.0} bytes (RSS {:.1} MiB -> {:.1} MiB held, {:.1} MiB after the hold)",
        rss_held.saturating_sub(rss_before) as f64 / locks.max(1) as f64,
        rss_before as f64 / 1048576.0,
        rss_held as f64 / 1048576.0,
        rss_after as f64 / 1048576.0
    );
    println!("latency, {locks} held:   {}", during.line());

    // Released at the pace of the acquisitions, and waited for: dropping a hundred thousand
    // locks at once would queue their releases ahead of the probe's requests.
    let released = Instant::now();
    futures::stream::iter(held)
        .map(|(lock, keep)| async move {
            keep.stop().await;
            let _ = lock.release().await;
        })
        .buffer_unordered(64)
        .collect::<Vec<()>>()
        .await;
    println!("released {locks} locks in {:.2?}", released.elapsed());
    let after_hold = probe(redlock.clone(), probe_every, Some(baseline), no_stop).await;
    println!("latency, none held:     {}", after_hold.line());
    let base = before_hold.quantile(0.99).max(Duration::from_nanos(1));
    println!(
        "acquire p99 while held / with none held (before): {:.2}x",
        during.quantile(0.99).as_secs_f64() / base.as_secs_f64()
    );
    Ok(())
}
