//! `Fault::Delay`: at least the base latency, and byte order preserved under jitter.

mod common;

use std::time::{Duration, Instant};

use common::TestResult;
use redquorum_testkit::{Direction, Fault, LocalCluster, RawConnection, Reply};

const TIMEOUT: Duration = Duration::from_secs(5);

#[test]
fn delay_adds_at_least_the_base_latency_per_direction() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let links = cluster.links()?;
    let link = links.link(0);
    let mut conn = RawConnection::open(&link.url(), TIMEOUT)?;

    link.set(Direction::ToServer, Fault::delay(Duration::from_millis(80)));
    let sent = Instant::now();
    assert_eq!(conn.call(&["PING"])?, Reply::Simple("PONG".into()));
    assert!(
        sent.elapsed() >= Duration::from_millis(80),
        "{:?}",
        sent.elapsed()
    );

    link.set(Direction::Both, Fault::delay(Duration::from_millis(60)));
    assert_eq!(
        link.fault(Direction::ToClient),
        Fault::delay(Duration::from_millis(60))
    );
    let sent = Instant::now();
    assert_eq!(conn.call(&["PING"])?, Reply::Simple("PONG".into()));
    assert!(
        sent.elapsed() >= Duration::from_millis(120),
        "{:?}",
        sent.elapsed()
    );

    link.set(Direction::Both, Fault::Pass);
    assert_eq!(conn.call(&["PING"])?, Reply::Simple("PONG".into()));
    Ok(())
}

#[test]
fn jitter_never_reorders_requests_or_replies() -> TestResult {
    const COMMANDS: usize = 300;
    let cluster = LocalCluster::start(1)?;
    let links = cluster.links_seeded(42)?;
    assert_eq!(links.seed(), 42);
    let link = links.link(0);
    link.set_tap(true);
    // Jitter far larger than the spacing of chunks: without ordering, chunks would overtake.
    links.set_all(
        Direction::Both,
        Fault::Delay {
            base: Duration::from_millis(1),
            jitter: Duration::from_millis(30),
        },
    );
    let mut conn = RawConnection::open(&link.url(), TIMEOUT)?;
    let started = Instant::now();
    for i in 0..COMMANDS {
        conn.send(&["RPUSH", "order", &i.to_string()])?;
        if i % 10 == 9 {
            // Pace the writes so that the proxy reads many separate chunks.
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    for i in 0..COMMANDS {
        let expected = i64::try_from(i + 1)?;
        assert_eq!(
            conn.read_reply()?,
            Reply::Int(expected),
            "reply {i} out of order"
        );
    }
    assert!(
        started.elapsed() >= Duration::from_millis(2),
        "delay applied"
    );
    let list = cluster.cmd(0, &["LRANGE", "order", "0", "-1"])?;
    let got: Vec<String> = list
        .as_array()
        .ok_or("LRANGE returns an array")?
        .iter()
        .filter_map(|r| r.as_str().map(str::to_owned))
        .collect();
    let want: Vec<String> = (0..COMMANDS).map(|i| i.to_string()).collect();
    assert_eq!(
        got, want,
        "the server must see requests in the order they were sent"
    );

    let tap = link.tap();
    assert!(
        tap.len() >= 10,
        "the test must exercise many chunks, got {}",
        tap.len()
    );
    assert!(tap.windows(2).all(|w| w[0].at <= w[1].at));
    let stats = link.stats();
    assert_eq!(stats.to_server.chunks, tap.len() as u64);
    assert_eq!(stats.to_server.dropped_chunks, 0);
    Ok(())
}

#[test]
fn a_fault_change_applies_to_an_open_connection() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let links = cluster.links()?;
    let link = links.link(0);
    let mut conn = RawConnection::open(&link.url(), TIMEOUT)?;
    assert_eq!(conn.call(&["PING"])?, Reply::Simple("PONG".into()));
    link.set(
        Direction::ToClient,
        Fault::delay(Duration::from_millis(100)),
    );
    let sent = Instant::now();
    conn.call(&["PING"])?;
    assert!(sent.elapsed() >= Duration::from_millis(100));
    Ok(())
}
