//! What a node keeps across a kill and restart, per `Persistence` mode.

mod common;

use common::TestResult;
use redis::Value;
use redquorum_testkit::{LocalCluster, Persistence, ReplyExt};

#[test]
fn aof_always_keeps_an_acknowledged_write_across_sigkill() -> TestResult {
    let cluster = LocalCluster::builder()
        .nodes(1)
        .persistence(Persistence::AofAlways)
        .start()?;
    let aof = cluster.cmd(0, &["CONFIG", "GET", "appendfsync"])?;
    assert_eq!(
        aof.as_sequence()
            .and_then(|a| a.get(1))
            .and_then(ReplyExt::as_str),
        Some("always")
    );
    assert_eq!(
        cluster.cmd(0, &["SET", "k", "v", "PX", "600000"])?,
        Value::Okay
    );
    cluster.kill(0)?;
    cluster.restart(0)?;
    assert_eq!(
        cluster.cmd(0, &["GET", "k"])?,
        Value::BulkString("v".into())
    );
    let pttl = cluster
        .cmd(0, &["PTTL", "k"])?
        .as_int()
        .ok_or("PTTL is an integer")?;
    assert!(
        pttl > 0 && pttl <= 600_000,
        "the expiry survives too: {pttl}"
    );
    Ok(())
}

#[test]
fn aof_always_keeps_writes_across_a_graceful_stop() -> TestResult {
    let cluster = LocalCluster::builder()
        .nodes(1)
        .persistence(Persistence::AofAlways)
        .start()?;
    cluster.cmd(0, &["SET", "k", "v"])?;
    cluster.stop(0)?;
    cluster.restart(0)?;
    assert_eq!(
        cluster.cmd(0, &["GET", "k"])?,
        Value::BulkString("v".into())
    );
    Ok(())
}

#[test]
fn no_persistence_loses_everything_on_restart() -> TestResult {
    let cluster = LocalCluster::start(1)?;
    let appendonly = cluster.cmd(0, &["CONFIG", "GET", "appendonly"])?;
    assert_eq!(
        appendonly
            .as_sequence()
            .and_then(|a| a.get(1))
            .and_then(ReplyExt::as_str),
        Some("no")
    );
    cluster.cmd(0, &["SET", "k", "v"])?;
    cluster.kill(0)?;
    cluster.restart(0)?;
    assert_eq!(cluster.cmd(0, &["GET", "k"])?, Value::Nil);
    // Even a graceful stop saves nothing: `--save ""`.
    cluster.cmd(0, &["SET", "k", "v"])?;
    cluster.stop(0)?;
    cluster.restart(0)?;
    assert_eq!(cluster.cmd(0, &["GET", "k"])?, Value::Nil);
    Ok(())
}
