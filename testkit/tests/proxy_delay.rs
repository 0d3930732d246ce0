//! `Fault::Delay`: at least the base latency on every chunk in each direction (also below
//! a millisecond, where the proxy's own timer thread keeps time), and byte order preserved
//! under jitter, across fault changes and when a socket is full.

mod common;

use std::time::{Duration, Instant};

use common::TestResult;
use redis::Value;
use redquorum_testkit::{Direction, Fault, LocalCluster, RawConnection, ReplyExt};

const TIMEOUT: Duration = Duration::from_secs(5);

#[test]
fn delay_adds_at_least_the_base_latency_per_direction() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let links = cluster.links()?;
    let link = links.link(0);
    let mut conn = RawConnection::open(&link.url(), TIMEOUT)?;

    link.set(Direction::ToServer, Fault::delay(Duration::from_millis(80)));
    let sent = Instant::now();
    assert_eq!(conn.call(&["PING"])?, Value::SimpleString("PONG".into()));
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
    assert_eq!(conn.call(&["PING"])?, Value::SimpleString("PONG".into()));
    assert!(
        sent.elapsed() >= Duration::from_millis(120),
        "{:?}",
        sent.elapsed()
    );

    link.set(Direction::Both, Fault::Pass);
    assert_eq!(conn.call(&["PING"])?, Value::SimpleString("PONG".into()));
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
            Value::Int(expected),
            "reply {i} out of order"
        );
    }
    assert!(
        started.elapsed() >= Duration::from_millis(2),
        "delay applied"
    );
    let list = cluster.cmd(0, &["LRANGE", "order", "0", "-1"])?;
    let got: Vec<String> = list
        .as_sequence()
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
    assert_eq!(conn.call(&["PING"])?, Value::SimpleString("PONG".into()));
    link.set(
        Direction::ToClient,
        Fault::delay(Duration::from_millis(100)),
    );
    let sent = Instant::now();
    conn.call(&["PING"])?;
    assert!(sent.elapsed() >= Duration::from_millis(100));
    Ok(())
}

#[test]
fn every_chunk_waits_at_least_its_delay_in_each_direction() -> TestResult {
    const ROUNDS: usize = 200;
    let to_server = Duration::from_micros(600);
    let jitter = Duration::from_micros(300);
    let to_client = Duration::from_micros(250);
    let cluster = LocalCluster::start(1)?;
    let links = cluster.links_seeded(7)?;
    let link = links.link(0);
    link.set(
        Direction::ToServer,
        Fault::Delay {
            base: to_server,
            jitter,
        },
    );
    link.set(Direction::ToClient, Fault::delay(to_client));
    link.set_tap(true);
    let mut conn = RawConnection::open(&link.url(), TIMEOUT)?;
    for i in 1..=ROUNDS {
        link.clear_tap();
        let sent = Instant::now();
        conn.send(&["RPUSH", "rounds", &i.to_string()])?;
        assert_eq!(conn.read_reply()?, Value::Int(i64::try_from(i)?));
        let received = Instant::now();
        let tap = link.tap();
        let written = tap.first().ok_or("the request was tapped")?.at;
        // The tap's timestamp is taken just before the write to the server: the request
        // cannot have left the proxy earlier, and the reply cannot have come back before it.
        assert!(
            written >= sent + to_server,
            "round {i}: request held {:?}, less than {to_server:?}",
            written - sent
        );
        assert!(
            received >= written + to_client,
            "round {i}: reply held {:?}, less than {to_client:?}",
            received - written
        );
    }
    Ok(())
}

#[test]
fn chunks_without_delay_queue_behind_delayed_ones() -> TestResult {
    const COMMANDS: usize = 400;
    let cluster = LocalCluster::start(1)?;
    let links = cluster.links_seeded(11)?;
    let link = links.link(0);
    // Sub-millisecond jitter larger than the spacing of the chunks, then no delay at all
    // for the second half while the first half may still be queued.
    link.set(
        Direction::Both,
        Fault::Delay {
            base: Duration::from_micros(50),
            jitter: Duration::from_micros(900),
        },
    );
    let mut conn = RawConnection::open(&link.url(), TIMEOUT)?;
    for i in 0..COMMANDS {
        if i == COMMANDS / 2 {
            link.set(Direction::Both, Fault::Pass);
        }
        conn.send(&["RPUSH", "mixed", &i.to_string()])?;
        if i % 5 == 4 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    for i in 0..COMMANDS {
        assert_eq!(
            conn.read_reply()?,
            Value::Int(i64::try_from(i + 1)?),
            "reply {i} out of order"
        );
    }
    let list = cluster.cmd(0, &["LRANGE", "mixed", "0", "-1"])?;
    let got: Vec<&str> = list
        .as_sequence()
        .ok_or("LRANGE returns an array")?
        .iter()
        .filter_map(ReplyExt::as_str)
        .collect();
    let want: Vec<String> = (0..COMMANDS).map(|i| i.to_string()).collect();
    assert_eq!(got, want, "the server must see requests in the order sent");
    Ok(())
}

#[test]
fn a_reply_larger_than_the_socket_buffers_arrives_whole_and_in_order() -> TestResult {
    // A reply of several MiB to a client that does not read for a while fills the
    // client's socket: the proxy keeps what it could not write and writes it as the socket
    // drains, before anything released after it.
    let value: String = (0..6 * 1024 * 1024)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let cluster = LocalCluster::start(1)?;
    let mut direct = RawConnection::open(&cluster.urls()[0], TIMEOUT)?;
    assert_eq!(direct.call(&["SET", "big", &value])?, Value::Okay);
    let links = cluster.links()?;
    let link = links.link(0);
    link.set(
        Direction::ToClient,
        Fault::delay(Duration::from_micros(300)),
    );
    let mut conn = RawConnection::open(&link.url(), TIMEOUT)?;
    conn.send_pipeline(&[&["GET", "big"], &["PING"], &["GET", "big"]])?;
    std::thread::sleep(Duration::from_millis(200));
    let first = conn.read_reply()?;
    assert!(
        first.as_str() == Some(value.as_str()),
        "the value came back altered"
    );
    assert_eq!(conn.read_reply()?, Value::SimpleString("PONG".into()));
    let second = conn.read_reply()?;
    assert!(
        second.as_str() == Some(value.as_str()),
        "the value came back altered"
    );
    let stats = link.stats();
    assert_eq!(stats.to_client.dropped_chunks, 0);
    assert!(stats.to_client.bytes >= 2 * value.len() as u64);
    Ok(())
}
