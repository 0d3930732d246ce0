//! Starting, killing, stopping, pausing, resuming and restarting nodes.

mod common;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{TestResult, process_exists};
use redis::Value;
use redquorum_testkit::{LocalCluster, RawConnection, ReplyExt, TestkitError};

#[test]
fn start_gives_distinct_ports_and_nodes_that_are_our_children() -> TestResult {
    let cluster = LocalCluster::start(3)?;
    assert_eq!(cluster.len(), 3);
    assert!(!cluster.is_empty());
    let ports: HashSet<u16> = (0..3).map(|i| cluster.port(i)).collect();
    assert_eq!(ports.len(), 3, "ports must be distinct: {ports:?}");
    for i in 0..3 {
        assert_eq!(
            cluster.url(i),
            format!("redis://127.0.0.1:{}", cluster.port(i))
        );
        assert_eq!(
            cluster.cmd(i, &["PING"])?,
            Value::SimpleString("PONG".into())
        );
        let pid = cluster.pid(i).ok_or("a started node has a pid")?;
        let info = cluster.cmd(i, &["INFO", "server"])?;
        assert_eq!(
            info.info_field("process_id"),
            Some(pid.to_string().as_str())
        );
        assert_eq!(
            info.info_field("tcp_port"),
            Some(cluster.port(i).to_string().as_str())
        );
    }
    assert_eq!(cluster.urls().len(), 3);
    assert!(matches!(
        cluster.cmd(3, &["PING"]),
        Err(TestkitError::NodeIndex { index: 3, len: 3 })
    ));
    assert!(!cluster.is_running(3));
    assert_eq!(cluster.pid(3), None);
    Ok(())
}

#[test]
fn kill_reaps_the_process_and_is_idempotent() -> TestResult {
    let cluster = LocalCluster::start(2)?;
    let pid = cluster.pid(0).ok_or("running node has a pid")?;
    cluster.kill(0)?;
    assert!(!cluster.is_running(0));
    assert_eq!(cluster.pid(0), None);
    assert!(
        !process_exists(pid),
        "killed node {pid} must be reaped, not a zombie"
    );
    cluster.kill(0)?;
    assert!(
        cluster.cmd(0, &["PING"]).is_err(),
        "a killed node must not answer"
    );
    assert_eq!(
        cluster.cmd(1, &["PING"])?,
        Value::SimpleString("PONG".into())
    );
    assert!(matches!(
        cluster.pause(0),
        Err(TestkitError::NotRunning { node: 0 })
    ));
    Ok(())
}

#[test]
fn pause_blocks_replies_and_resume_delivers_them() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let mut early = RawConnection::open(&cluster.url(0), Duration::from_secs(2))?;
    cluster.pause(0)?;
    assert!(cluster.is_running(0), "a paused node is still alive");
    let probe = cluster.cmd_with_timeout(0, &["PING"], Duration::from_millis(200));
    assert!(
        probe.as_ref().is_err_and(TestkitError::is_timeout),
        "a paused node must not answer within 200 ms: {probe:?}"
    );
    // A request sent while paused is answered after SIGCONT.
    early.send(&["ECHO", "held"])?;
    cluster.resume(0)?;
    assert_eq!(early.read_reply()?, Value::BulkString("held".into()));
    assert_eq!(
        cluster.cmd(0, &["PING"])?,
        Value::SimpleString("PONG".into())
    );
    Ok(())
}

#[test]
fn stop_shuts_down_gracefully() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let pid = cluster.pid(0).ok_or("running node has a pid")?;
    cluster.pause(0)?; // stop must also work on a paused node
    cluster.stop(0)?;
    assert!(!cluster.is_running(0));
    assert!(!process_exists(pid));
    let log = std::fs::read_to_string(cluster.log_path(0))?;
    assert!(
        log.contains("ready to exit"),
        "graceful shutdown is logged:\n{log}"
    );
    cluster.stop(0)?;
    Ok(())
}

#[test]
fn restart_keeps_the_port_and_replaces_the_process() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let port = cluster.port(0);
    let old_pid = cluster.pid(0).ok_or("running node has a pid")?;
    cluster.restart(0)?; // while running
    let new_pid = cluster.pid(0).ok_or("restarted node has a pid")?;
    assert_ne!(old_pid, new_pid);
    assert!(!process_exists(old_pid));
    assert_eq!(cluster.port(0), port);
    let info = cluster.cmd(0, &["INFO", "server"])?;
    assert_eq!(
        info.info_field("process_id"),
        Some(new_pid.to_string().as_str())
    );
    cluster.kill(0)?;
    cluster.restart(0)?; // while dead
    assert_eq!(
        cluster.cmd(0, &["PING"])?,
        Value::SimpleString("PONG".into())
    );
    Ok(())
}

#[test]
fn restart_after_returns_at_once_and_the_node_comes_back_later() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let delay = Duration::from_millis(300);
    let called = Instant::now();
    cluster.restart_after(0, delay)?;
    // Returned with the node still down: it did not wait for the delay and the restart.
    assert!(!cluster.is_running(0), "the node is killed at once");
    cluster.wait_ready(0, Duration::from_secs(10))?;
    // A lower bound, which a slow machine can only make easier to meet.
    assert!(
        called.elapsed() >= delay,
        "the node must stay down for the delay"
    );
    assert_eq!(
        cluster.cmd(0, &["PING"])?,
        Value::SimpleString("PONG".into())
    );
    Ok(())
}

#[test]
fn a_later_kill_cancels_a_pending_restart() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    cluster.restart_after(0, Duration::from_millis(100))?;
    cluster.kill(0)?;
    // An absence can only be checked by waiting well past the delay.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !cluster.is_running(0),
        "the cancelled restart must not start the node"
    );
    let waited = cluster.wait_ready(0, Duration::from_millis(50));
    assert!(waited.is_err_and(|e| e.is_timeout()));
    Ok(())
}

#[test]
fn the_cluster_can_be_shared_between_threads() -> TestResult {
    let cluster = Arc::new(LocalCluster::start(2)?);
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let cluster = Arc::clone(&cluster);
            std::thread::spawn(move || -> Result<(), TestkitError> {
                for n in 0..20 {
                    let reply = cluster.cmd(t % 2, &["INCR", "shared"])?;
                    assert!(reply.as_int().is_some_and(|v| v > 0), "{n}: {reply:?}");
                }
                Ok(())
            })
        })
        .collect();
    for handle in handles {
        handle.join().map_err(|_| "a thread panicked")??;
    }
    let total: i64 = (0..2)
        .map(|i| {
            cluster
                .cmd(i, &["GET", "shared"])
                .map(|r| r.as_int().unwrap_or(0))
        })
        .sum::<Result<i64, _>>()?;
    assert_eq!(total, 80);
    Ok(())
}

#[test]
fn a_taken_port_fails_restarts_with_typed_errors() -> TestResult {
    // Short, as a taken port is retried for the whole ready time-out; long enough for a
    // loaded machine to start redis-server within it.
    let cluster = LocalCluster::builder()
        .nodes(1)
        .ready_timeout(Duration::from_secs(1))
        .start()?;
    cluster.kill(0)?;
    let squatter = std::net::TcpListener::bind(("127.0.0.1", cluster.port(0)))?;
    let restarted = cluster.restart(0);
    assert!(
        matches!(
            restarted,
            Err(TestkitError::PortUnavailable { node: 0, .. })
        ),
        "{restarted:?}"
    );
    cluster.restart_after(0, Duration::from_millis(10))?;
    let waited = cluster.wait_ready(0, Duration::from_secs(10));
    assert!(
        matches!(waited, Err(TestkitError::DelayedRestart { node: 0, .. })),
        "{waited:?}"
    );
    drop(squatter);
    cluster.restart(0)?;
    cluster.wait_ready(0, Duration::from_secs(10))?;
    Ok(())
}
