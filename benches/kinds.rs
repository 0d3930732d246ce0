//! What each lock kind costs against the mutex, on five local masters over loopback:
//! acquire (and release) latency of a read hold, a write hold and a semaphore permit, each as
//! a ratio to the mutex measured in the same run, interleaved in short slices so that a
//! noisy machine affects every kind alike.
//!
//! `cargo bench --bench kinds` (`KINDS_CYCLES=n` per kind, default 3000; `KINDS_SLICE=n`
//! cycles per slice, default 100). The restart guard is off (the masters are seconds old)
//! and locks are taken on distinct resources, one worker at a time.

use std::time::{Duration, Instant};

use redquorum::{LockOptions, Redlock, RetryPolicy};
use redquorum_testkit::LocalCluster;

/// A kind's name and its options.
type Kind = (&'static str, fn() -> LockOptions);

const KINDS: [Kind; 4] = [
    ("mutex", LockOptions::new),
    ("read", || LockOptions::new().read()),
    ("write", || LockOptions::new().write()),
    ("permit (k=3)", || LockOptions::new().permits(3)),
];

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn main() {
    let cycles = env("KINDS_CYCLES", 3000);
    let slice = env("KINDS_SLICE", 100).max(1);
    let masters = LocalCluster::start(5).expect("start five redis-server masters");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let redlock = Redlock::builder()
        .nodes(masters.urls())
        .restart_guard(false)
        .retry(RetryPolicy::once())
        .build()
        .expect("valid");
    let (acquire, release) = runtime.block_on(async {
        redlock.connect().await;
        let mut acquire: Vec<Vec<Duration>> = vec![Vec::new(); KINDS.len()];
        let mut release: Vec<Vec<Duration>> = vec![Vec::new(); KINDS.len()];
        let mut seq = 0u64;
        // Warm-up: every kind's scripts cached on every master.
        for (_, options) in KINDS {
            let lock = redlock
                .lock_with(["warm-up"], options())
                .await
                .expect("free");
            let _ = lock.release().await;
        }
        while acquire[0].len() < cycles {
            for (k, (_, options)) in KINDS.iter().enumerate() {
                for _ in 0..slice {
                    seq += 1;
                    let resource = format!("bench:kinds:{seq}");
                    let started = Instant::now();
                    let lock = redlock
                        .lock_with([resource], options())
                        .await
                        .expect("a fresh resource is free");
                    acquire[k].push(started.elapsed());
                    let started = Instant::now();
                    lock.release().await.expect("released");
                    release[k].push(started.elapsed());
                }
            }
        }
        (acquire, release)
    });
    let mut rows = Vec::new();
    for (k, (name, _)) in KINDS.iter().enumerate() {
        let mut a = acquire[k].clone();
        let mut r = release[k].clone();
        a.sort_unstable();
        r.sort_unstable();
        rows.push((
            name,
            percentile(&a, 50.0),
            percentile(&a, 99.0),
            percentile(&r, 50.0),
        ));
    }
    let (mutex_acquire, mutex_release) = (rows[0].1, rows[0].3);
    println!("{cycles} cycles per kind, interleaved in slices of {slice}, five local masters");
    println!(
        "{:<14} {:>12} {:>12} {:>9} {:>12} {:>9}",
        "kind", "acquire p50", "acquire p99", "vs mutex", "release p50", "vs mutex"
    );
    for (name, p50, p99, rel) in rows {
        println!(
            "{:<14} {:>10.1}µs {:>10.1}µs {:>8.2}× {:>10.1}µs {:>8.2}×",
            name,
            p50.as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6,
            p50.as_secs_f64() / mutex_acquire.as_secs_f64(),
            rel.as_secs_f64() * 1e6,
            rel.as_secs_f64() / mutex_release.as_secs_f64(),
        );
    }
}
