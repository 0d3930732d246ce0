//! The clock shim against real redis-server: expiry at a skewed rate, `TIME` offsets,
//! continuity, restarts, and no hang under load.

mod common;

use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{TestResult, wait_until};
use redis::Value;
use redquorum_testkit::{APPLY_LATENCY, LocalCluster, RawConnection, ReplyExt};

const TIMEOUT: Duration = Duration::from_secs(2);

/// One `GET` of the expiring key: when it was sent, when its reply came, what it said.
#[derive(Debug, Clone, Copy)]
struct Sample {
    sent: Duration,
    answered: Duration,
    present: bool,
}

/// Sets `k` with `PX 2000` on `url`, then samples `GET k` until a sample finds it gone and
/// at least 2.3 s have passed since the `SET` (for at most 30 s: a loaded machine may answer
/// the `SET` late, which moves the expiry just as late). Returns the samples relative to the
/// moment the `SET` was sent, and the `SET`'s RTT.
fn watch_expiry(url: &str) -> Result<(Vec<Sample>, Duration), redquorum_testkit::TestkitError> {
    let mut conn = RawConnection::open(url, TIMEOUT)?;
    let set_sent = Instant::now();
    conn.call(&["SET", "k", "v", "PX", "2000"])?;
    let set_rtt = set_sent.elapsed();
    let mut samples: Vec<Sample> = Vec::new();
    while (set_sent.elapsed() < Duration::from_millis(2300) || samples.iter().all(|s| s.present))
        && set_sent.elapsed() < Duration::from_secs(30)
    {
        // Coarse polling until 1.7 s, then every 2 ms through the interesting window.
        let pause = if set_sent.elapsed() < Duration::from_millis(1700) {
            50
        } else {
            2
        };
        thread::sleep(Duration::from_millis(pause));
        let sent = set_sent.elapsed();
        let reply = conn.call(&["GET", "k"])?;
        samples.push(Sample {
            sent,
            answered: set_sent.elapsed(),
            present: reply != Value::Nil,
        });
    }
    Ok((samples, set_rtt))
}

/// The first sample that saw the key gone.
fn first_gone(samples: &[Sample]) -> Option<Sample> {
    samples.iter().copied().find(|s| !s.present)
}

#[test]
fn a_fast_clock_expires_keys_early_and_rate_one_changes_nothing() -> TestResult {
    let cluster = LocalCluster::builder().nodes(2).clock_shim(true).start()?;
    let fast = cluster.clock(0).ok_or("clock_shim(true) gives a clock")?;
    fast.set_rate(1.05)?;
    assert!((fast.rate() - 1.05).abs() < 1e-12);
    thread::sleep(APPLY_LATENCY * 2);
    let (url0, url1) = (cluster.url(0), cluster.url(1));
    let fast_run = thread::spawn(move || watch_expiry(&url0));
    let normal_run = thread::spawn(move || watch_expiry(&url1));
    let (fast_samples, fast_rtt) = fast_run.join().map_err(|_| "sampler panicked")??;
    let (normal_samples, normal_rtt) = normal_run.join().map_err(|_| "sampler panicked")??;

    // Expiry at 1.05: 2000 ms / 1.05 = 1904.8 ms after the SET was processed, which is
    // between its send and its reply. Each check below follows from that alone, whatever
    // the load: a GET answered "present" was processed before expiry, so it was sent before
    // it; a GET answered "gone" was processed after expiry, so its reply came after it.
    for s in &fast_samples {
        if s.present {
            assert!(
                s.sent < Duration::from_millis(1950) + fast_rtt,
                "5 % fast: the key must be gone by ~1.95 s, still there at {s:?}"
            );
        } else {
            assert!(
                s.answered > Duration::from_millis(1800),
                "5 % fast: the key must still be there at ~1.8 s, gone at {s:?}"
            );
        }
    }
    for s in &normal_samples {
        if s.present {
            assert!(
                s.sent < Duration::from_millis(2005) + normal_rtt,
                "rate 1: {s:?}"
            );
        } else {
            assert!(
                s.answered > Duration::from_millis(1950),
                "rate 1 must not expire early: {s:?}"
            );
        }
    }
    let fast_gone = first_gone(&fast_samples).ok_or("the fast node's key never expired")?;
    let normal_gone = first_gone(&normal_samples).ok_or("the normal node's key never expired")?;
    eprintln!(
        "rate 1.05: last present {:?}, first gone {fast_gone:?}; rate 1.0: first gone {normal_gone:?}",
        fast_samples.iter().rev().find(|s| s.present)
    );
    Ok(())
}

/// `TIME` as microseconds since the epoch, with the real time before and after the call.
fn server_time(
    cluster: &LocalCluster,
    i: usize,
) -> Result<(i64, i64, i64), Box<dyn std::error::Error + Send + Sync>> {
    let before = real_us();
    let reply = cluster.cmd(i, &["TIME"])?;
    let after = real_us();
    let parts = reply.as_sequence().ok_or("TIME returns an array")?;
    let secs = parts
        .first()
        .and_then(ReplyExt::as_int)
        .ok_or("TIME seconds")?;
    let micros = parts
        .get(1)
        .and_then(ReplyExt::as_int)
        .ok_or("TIME microseconds")?;
    Ok((before, secs * 1_000_000 + micros, after))
}

fn real_us() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_micros()).unwrap_or(i64::MAX)
}

#[test]
fn time_reports_offsets_and_reset_restores_real_time() -> TestResult {
    let cluster = LocalCluster::builder().nodes(1).clock_shim(true).start()?;
    let clock = cluster.clock(0).ok_or("clock_shim(true) gives a clock")?;
    for offset in [3_600_000_000_i64, -60_000_000, 0] {
        if offset == 0 {
            clock.reset()?;
        } else {
            clock.set_offset_us(offset)?;
        }
        assert_eq!(clock.offset_us(), offset);
        // The change reaches Redis within APPLY_LATENCY; poll rather than guess.
        wait_until(TIMEOUT, "TIME to show the offset", || {
            server_time(&cluster, 0).is_ok_and(|(b, t, a)| t >= b + offset && t <= a + offset + 1)
        })?;
        let (before, time, after) = server_time(&cluster, 0)?;
        assert!(
            time >= before + offset && time <= after + offset + 1,
            "offset {offset}: TIME {time} not in [{}, {}]",
            before + offset,
            after + offset
        );
    }
    Ok(())
}

#[test]
fn a_rate_change_is_continuous_and_time_runs_at_the_rate() -> TestResult {
    let cluster = LocalCluster::builder().nodes(1).clock_shim(true).start()?;
    let clock = cluster.clock(0).ok_or("clock_shim(true) gives a clock")?;
    clock.set_offset_us(10_000_000)?;
    let before = Instant::now();
    clock.set_rate(2.0)?;
    let offset_now = clock.offset_us();
    // At rate 2 the offset grows by the real time since the change, and by nothing else:
    // at most the time since just before the call (plus a microsecond of rounding).
    let since = i64::try_from(before.elapsed().as_micros()).unwrap_or(i64::MAX);
    assert!(
        (10_000_000..=10_000_001 + since).contains(&offset_now),
        "no jump: {offset_now} µs, {since} µs after the change"
    );
    thread::sleep(APPLY_LATENCY * 2);
    wait_until(TIMEOUT, "the rate to apply", || {
        server_time(&cluster, 0).is_ok_and(|(_, t, a)| t > a + 10_000_000)
    })?;
    let (a0, ta, a1) = server_time(&cluster, 0)?;
    thread::sleep(Duration::from_millis(300));
    let (b0, tb, b1) = server_time(&cluster, 0)?;
    let fake = tb - ta;
    assert!(
        fake >= 2 * (b0 - a1) - 2 && fake <= 2 * (b1 - a0) + 2,
        "at rate 2 the node's clock advanced {fake} µs for {}..{} µs of real time",
        b0 - a1,
        b1 - a0
    );
    Ok(())
}

#[test]
fn a_clock_step_expires_keys_and_survives_a_restart() -> TestResult {
    let cluster = LocalCluster::builder().nodes(1).clock_shim(true).start()?;
    let clock = cluster.clock(0).ok_or("clock_shim(true) gives a clock")?;
    cluster.cmd(0, &["SET", "k", "v", "PX", "60000"])?;
    clock.set_offset(Duration::from_secs(120), true)?;
    wait_until(TIMEOUT, "the key to expire after a 120 s step", || {
        cluster.cmd(0, &["GET", "k"]).is_ok_and(|r| r == Value::Nil)
    })?;
    cluster.restart(0)?;
    let (before, time, after) = server_time(&cluster, 0)?;
    assert!(
        time >= before + 120_000_000 && time <= after + 120_000_001,
        "the skew survives a restart"
    );
    assert!(
        LocalCluster::start(1)?.clock(0).is_none(),
        "no shim, no clock"
    );
    Ok(())
}

#[test]
fn redis_with_the_shim_keeps_answering_under_load_and_rate_changes() -> TestResult {
    let cluster = LocalCluster::builder()
        .nodes(1)
        .clock_shim(true)
        .persistence(redquorum_testkit::Persistence::AofAlways)
        .start()?;
    let clock = cluster.clock(0).ok_or("clock_shim(true) gives a clock")?;
    let workers: Vec<_> = (0..3)
        .map(|t| {
            let url = cluster.url(0);
            thread::spawn(move || -> Result<(), redquorum_testkit::TestkitError> {
                let mut conn = RawConnection::open(&url, TIMEOUT)?;
                for n in 0..300 {
                    let key = format!("k{t}-{n}");
                    conn.call(&["SET", &key, "v", "PX", "50"])?;
                    conn.call(&["GET", &key])?;
                    conn.call(&["INCR", "counter"])?;
                }
                Ok(())
            })
        })
        .collect();
    for n in 0..50 {
        clock.set_rate(if n % 2 == 0 { 1.5 } else { 0.8 })?;
        thread::sleep(Duration::from_millis(3));
    }
    for worker in workers {
        worker.join().map_err(|_| "worker panicked")??;
    }
    assert_eq!(cluster.cmd(0, &["GET", "counter"])?.as_int(), Some(900));
    // A fork (AOF rewrite) with the shim preloaded completes too.
    cluster.cmd(0, &["BGREWRITEAOF"])?;
    wait_until(Duration::from_secs(10), "the AOF rewrite to finish", || {
        cluster.cmd(0, &["INFO", "persistence"]).is_ok_and(|r| {
            r.info_field("aof_rewrite_in_progress") == Some("0")
                && r.info_field("aof_rewrite_scheduled") == Some("0")
        })
    })?;
    assert_eq!(
        cluster.cmd(0, &["PING"])?,
        Value::SimpleString("PONG".into())
    );
    Ok(())
}
