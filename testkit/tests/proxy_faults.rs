//! Blackhole, drop, reset and refuse on a link.

mod common;

use std::time::Duration;

use common::{TestResult, wait_until};
use redis::Value;
use redquorum_testkit::{Direction, Fault, LocalCluster, RawConnection};

const TIMEOUT: Duration = Duration::from_secs(2);
/// How long a request is given before it is considered lost.
const LOST: Duration = Duration::from_millis(300);

#[test]
fn blackhole_times_out_and_keeps_the_connection_open() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let links = cluster.links()?;
    let link = links.link(0);
    let mut conn = RawConnection::open(&link.url(), LOST)?;
    link.set(Direction::Both, Fault::Blackhole);
    let lost = conn.call(&["SET", "hole", "1"]);
    assert!(lost.as_ref().is_err_and(|e| e.is_timeout()), "{lost:?}");
    assert_eq!(
        cluster.cmd(0, &["GET", "hole"])?,
        Value::Nil,
        "nothing reached Redis"
    );
    assert!(link.stats().to_server.dropped_chunks >= 1);

    // Lifting the fault: the connection that lost bytes is reset at its next request (a
    // TCP stream cannot lose data and carry on); a new connection works.
    link.set(Direction::Both, Fault::Pass);
    conn.set_timeout(TIMEOUT)?;
    let stale = conn.call(&["PING"]);
    assert!(stale.as_ref().is_err_and(|e| !e.is_timeout()), "{stale:?}");
    let mut fresh = RawConnection::open(&link.url(), TIMEOUT)?;
    assert_eq!(fresh.call(&["PING"])?, Value::SimpleString("PONG".into()));
    Ok(())
}

#[test]
fn drop_to_client_applies_the_write_but_loses_the_reply() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let links = cluster.links()?;
    let link = links.link(0);
    let mut conn = RawConnection::open(&link.url(), LOST)?;
    link.set(Direction::ToClient, Fault::Drop);
    let unacknowledged = conn.call(&["SET", "applied", "yes"]);
    assert!(
        unacknowledged.as_ref().is_err_and(|e| e.is_timeout()),
        "{unacknowledged:?}"
    );
    wait_until(TIMEOUT, "the SET to be applied on the server", || {
        cluster
            .cmd(0, &["GET", "applied"])
            .is_ok_and(|r| r == Value::BulkString("yes".into()))
    })?;
    let stats = link.stats();
    assert!(stats.to_client.dropped_chunks >= 1, "{stats:?}");
    assert_eq!(stats.to_client.bytes, 0);
    Ok(())
}

#[test]
fn drop_to_server_loses_the_request() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let links = cluster.links()?;
    let link = links.link(0);
    let mut conn = RawConnection::open(&link.url(), LOST)?;
    link.set(Direction::ToServer, Fault::Drop);
    let lost = conn.call(&["SET", "lost", "1"]);
    assert!(lost.as_ref().is_err_and(|e| e.is_timeout()), "{lost:?}");
    assert_eq!(cluster.cmd(0, &["GET", "lost"])?, Value::Nil);
    Ok(())
}

#[test]
fn reset_connections_closes_current_connections_only() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let links = cluster.links()?;
    let link = links.link(0);
    let mut conn = RawConnection::open(&link.url(), TIMEOUT)?;
    assert_eq!(conn.call(&["PING"])?, Value::SimpleString("PONG".into()));
    link.reset_connections();
    let closed = conn.read_reply();
    assert!(
        closed.as_ref().is_err_and(|e| e.is_connection_closed()),
        "{closed:?}"
    );
    wait_until(TIMEOUT, "the reset connection to be gone", || {
        link.stats().connections_open == 0
    })?;
    let mut fresh = RawConnection::open(&link.url(), TIMEOUT)?;
    assert_eq!(fresh.call(&["PING"])?, Value::SimpleString("PONG".into()));
    Ok(())
}

#[test]
fn refuse_new_resets_new_connections_but_not_existing_ones() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let links = cluster.links()?;
    let link = links.link(0);
    let mut existing = RawConnection::open(&link.url(), TIMEOUT)?;
    existing.call(&["PING"])?;
    link.refuse_new(true);
    let refused = RawConnection::open(&link.url(), TIMEOUT).and_then(|mut c| c.call(&["PING"]));
    assert!(
        refused.as_ref().is_err_and(|e| e.is_connection_closed()),
        "{refused:?}"
    );
    assert_eq!(link.stats().connections_refused, 1);
    assert_eq!(
        existing.call(&["PING"])?,
        Value::SimpleString("PONG".into())
    );
    link.refuse_new(false);
    let mut again = RawConnection::open(&link.url(), TIMEOUT)?;
    assert_eq!(again.call(&["PING"])?, Value::SimpleString("PONG".into()));
    Ok(())
}

#[test]
fn a_link_to_a_dead_node_resets_the_client() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let links = cluster.links()?;
    cluster.kill(0)?;
    let result =
        RawConnection::open(&links.link(0).url(), TIMEOUT).and_then(|mut c| c.call(&["PING"]));
    assert!(
        result.as_ref().is_err_and(|e| e.is_connection_closed()),
        "{result:?}"
    );
    Ok(())
}
