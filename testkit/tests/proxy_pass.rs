//! The fault proxy without faults: forwarding, statistics, the tap, restarts, teardown.

mod common;

use std::time::Duration;

use common::{TestResult, wait_until};
use redis::Value;
use redquorum_testkit::{LocalCluster, RawConnection};

const TIMEOUT: Duration = Duration::from_secs(2);

#[test]
fn traffic_passes_through_and_is_counted() -> TestResult {
    let cluster = LocalCluster::start(2)?;
    let links = cluster.links()?;
    assert_eq!(links.len(), 2);
    let urls = links.urls();
    assert_eq!(
        urls[1],
        format!("redis://127.0.0.1:{}", links.link(1).port())
    );
    assert_eq!(links.link(1).target_port(), cluster.port(1));
    assert_ne!(links.link(1).port(), cluster.port(1));

    let mut conn = RawConnection::open(&urls[1], TIMEOUT)?;
    assert_eq!(conn.call(&["SET", "k", "via-proxy"])?, Value::Okay);
    assert_eq!(
        cluster.cmd(1, &["GET", "k"])?,
        Value::BulkString("via-proxy".into())
    );

    let request = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$9\r\nvia-proxy\r\n".len() as u64;
    // Counters are bumped just after each write, so the client can see a reply first.
    wait_until(TIMEOUT, "the reply to be counted", || {
        links.link(1).stats().to_client.bytes == "+OK\r\n".len() as u64
    })?;
    let stats = links.link(1).stats();
    assert_eq!(stats.connections_accepted, 1);
    assert_eq!(stats.connections_open, 1);
    assert_eq!(stats.to_server.bytes, request);
    assert_eq!(stats.to_server.dropped_chunks, 0);
    assert_eq!(links.link(0).stats().connections_accepted, 0);

    drop(conn);
    wait_until(TIMEOUT, "the closed connection to be forgotten", || {
        links.link(1).stats().connections_open == 0
    })?;
    Ok(())
}

#[tokio::test]
async fn the_redis_crate_works_through_the_proxy() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let links = cluster.links()?;
    let client = redis::Client::open(links.link(0).url())?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let _: () = redis::cmd("SET")
        .arg("a")
        .arg(1)
        .query_async(&mut conn)
        .await?;
    let a: i64 = redis::cmd("INCR").arg("a").query_async(&mut conn).await?;
    assert_eq!(a, 2);
    Ok(())
}

#[test]
fn the_tap_records_requests_when_written_to_the_server() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let links = cluster.links()?;
    let link = links.link(0);
    let mut conn = RawConnection::open(&link.url(), TIMEOUT)?;
    conn.call(&["PING"])?;
    assert!(link.tap().is_empty(), "the tap is off by default");
    link.set_tap(true);
    let before = std::time::Instant::now();
    conn.call(&["SET", "tapped", "1"])?;
    let after = std::time::Instant::now();
    let events = link.tap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0].at >= before && events[0].at <= after);
    assert_eq!(events[0].len, events[0].data.len());
    assert!(events[0].text().contains("tapped"));
    assert_eq!(events[0].connection, 0);
    link.clear_tap();
    assert!(link.tap().is_empty());
    link.set_tap(false);
    conn.call(&["PING"])?;
    assert!(link.tap().is_empty());
    Ok(())
}

#[test]
fn a_link_follows_its_node_across_a_restart() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let links = cluster.links()?;
    let mut old = RawConnection::open(&links.link(0).url(), TIMEOUT)?;
    assert_eq!(old.call(&["PING"])?, Value::SimpleString("PONG".into()));
    cluster.kill(0)?;
    let dead = old.call(&["PING"]);
    assert!(
        dead.is_err(),
        "the connection to a killed node must fail: {dead:?}"
    );
    cluster.restart(0)?;
    let mut new = RawConnection::open(&links.link(0).url(), TIMEOUT)?;
    assert_eq!(new.call(&["PING"])?, Value::SimpleString("PONG".into()));
    Ok(())
}

#[test]
fn dropping_the_link_set_closes_listeners_and_connections() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let links = cluster.links()?;
    let url = links.link(0).url();
    let mut conn = RawConnection::open(&url, TIMEOUT)?;
    conn.call(&["PING"])?;
    drop(links);
    let closed = conn.read_reply();
    assert!(
        closed.as_ref().is_err_and(|e| e.is_connection_closed()),
        "{closed:?}"
    );
    wait_until(TIMEOUT, "the listener to close", || {
        RawConnection::open(&url, TIMEOUT).is_err()
    })?;
    Ok(())
}

#[test]
fn dropping_the_cluster_stops_its_links() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let links = cluster.links()?;
    let mut conn = RawConnection::open(&links.link(0).url(), TIMEOUT)?;
    conn.call(&["PING"])?;
    drop(cluster);
    let closed = conn.read_reply();
    assert!(
        closed.as_ref().is_err_and(|e| e.is_connection_closed()),
        "{closed:?}"
    );
    Ok(())
}
