//! Many held locks in one process: renewal round trips per master per tick, and the
//! process's CPU time while it keeps them all alive.
//!
//! `cargo bench --bench renewal` (5 local masters from the test kit). Environment:
//! `LOCKS` (default 10000), `HOLD_SECS` (default 30), `TTL_MS` (default 9000; renewal at a
//! third of it).

use std::time::{Duration, Instant};

use futures::StreamExt;
use redquorum::{KeepAliveOptions, LockOptions, Redlock, RetryPolicy};
use redquorum_testkit::LocalCluster;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// User + system CPU time of this process, from `/proc/self/stat` (clock ticks of 10 ms).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name, which is in parentheses and may contain spaces.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let locks = env("LOCKS", 10_000) as usize;
    let hold = Duration::from_secs(env("HOLD_SECS", 30));
    let ttl = Duration::from_millis(env("TTL_MS", 9_000));
    let masters = LocalCluster::start(5)?;
    let redlock = Redlock::builder()
        .nodes(masters.urls())
        .ttl(ttl)
        .node_timeout(Duration::from_millis(500))
        .retry(RetryPolicy::new().attempts(5))
        // Masters started a moment ago: the restart guard would not count them for a ttl.
        .restart_guard(false)
        .build()?;
    redlock.connect().await;

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
    println!("acquired {locks} locks in {:.2?}", started.elapsed());

    let before = redlock.renewal_stats();
    let cpu_before = cpu_time();
    let wall = Instant::now();
    tokio::time::sleep(hold).await;
    let cpu = cpu_time() - cpu_before;
    let wall = wall.elapsed();
    let after = redlock.renewal_stats();

    let ticks = after.ticks - before.ticks;
    let renewed = after.renewed - before.renewed;
    let alive = held.iter().filter(|(l, _)| !l.is_expired()).count();
    println!(
        "held {locks} locks for {wall:.1?} (ttl {ttl:?}, renewal every {:?})",
        ttl / 3
    );
    println!("  renewal ticks:          {ticks}");
    for (node, (a, b)) in after
        .round_trips
        .iter()
        .zip(&before.round_trips)
        .enumerate()
    {
        println!(
            "  master {node}: {} round trips, {:.2} per tick",
            a - b,
            (a - b) as f64 / ticks.max(1) as f64
        );
    }
    println!(
        "  renewals:               {renewed} ({:.0} per tick)",
        renewed as f64 / ticks.max(1) as f64
    );
    println!(
        "  failed / lost:          {} / {}",
        after.failed - before.failed,
        after.lost - before.lost
    );
    println!("  still held:             {alive} of {locks}");
    println!(
        "  process CPU time:       {cpu:.2?} over {wall:.1?} ({:.1}% of one core)",
        cpu.as_secs_f64() / wall.as_secs_f64() * 100.0
    );
    Ok(())
}
