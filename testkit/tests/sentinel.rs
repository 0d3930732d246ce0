//! Sentinel groups: starting, manual and automatic failovers, restarts, and the
//! replication partition.

mod common;

use std::time::{Duration, Instant};

use common::{TestResult, assert_password_required, process_exists};
use redis::Value;
use redquorum_testkit::{RawConnection, ReplyExt, Role, SentinelGroup, TestkitError};

/// Generous: elections and resyncs are slower on a loaded machine.
const WAIT: Duration = Duration::from_secs(60);

/// `SET key value` then `WAIT replicas wait_ms` on one connection (`WAIT` counts the
/// replicas that have this connection's writes); how many replicas acknowledged.
fn set_and_wait(
    group: &SentinelGroup,
    node: usize,
    (key, value): (&str, &str),
    replicas: usize,
    wait_ms: u64,
) -> Result<Option<i64>, TestkitError> {
    let mut conn = RawConnection::open(&group.url(node), Duration::from_secs(10))?;
    assert_eq!(conn.call(&["SET", key, value])?.as_str(), Some("OK"));
    let wait = [replicas.to_string(), wait_ms.to_string()];
    Ok(conn.call(&["WAIT", &wait[0], &wait[1]])?.as_int())
}

#[test]
fn starts_with_every_sentinel_knowing_the_primary_replicas_and_each_other() -> TestResult {
    let started = Instant::now();
    let group = SentinelGroup::builder()
        .replicas(2)
        .sentinels(3)
        .master_name("mymaster")
        .start()?;
    eprintln!("started in {:?}", started.elapsed());
    assert_eq!((group.len(), group.sentinel_count()), (3, 3));
    assert_eq!(group.master_name(), "mymaster");
    assert_eq!(group.primary()?, 0);
    assert_eq!(group.primary_addr()?.port(), group.port(0));
    assert_eq!(group.role(0)?, Role::Primary);
    assert_eq!(group.replicas_of(0)?, vec![1, 2]);
    for j in 0..3 {
        let master = group.sentinel_cmd(j, &["SENTINEL", "MASTER", "mymaster"])?;
        let fields: Vec<&str> = master
            .as_sequence()
            .ok_or("SENTINEL MASTER is an array")?
            .iter()
            .filter_map(ReplyExt::as_str)
            .collect();
        let field = |name: &str| {
            fields
                .iter()
                .position(|f| *f == name)
                .map(|k| fields[k + 1])
        };
        assert_eq!(field("num-slaves"), Some("2"), "sentinel {j}");
        assert_eq!(field("num-other-sentinels"), Some("2"), "sentinel {j}");
        assert_eq!(field("quorum"), Some("2"), "sentinel {j}");
    }
    assert_eq!(set_and_wait(&group, 0, ("k", "v"), 2, 5000)?, Some(2));
    assert_eq!(group.cmd(1, &["GET", "k"])?, Value::BulkString("v".into()));
    assert_eq!(
        group.sentinel_urls()[0],
        format!("redis://127.0.0.1:{}", group.sentinel_port(0))
    );
    Ok(())
}

#[test]
fn a_manual_failover_promotes_a_replica_that_the_sentinels_report() -> TestResult {
    let group = SentinelGroup::start()?;
    assert_eq!(set_and_wait(&group, 0, ("k", "v"), 2, 5000)?, Some(2));
    let promoted = group.failover()?;
    assert_ne!(promoted, 0);
    assert_eq!(group.primary()?, promoted);
    assert_eq!(group.role(promoted)?, Role::Primary);
    // The old primary and the other replica follow the new one.
    assert_eq!(group.wait_ready(WAIT)?, promoted);
    assert_eq!(group.role(0)?, Role::Replica);
    assert_eq!(group.replicas_of(promoted)?.len(), 2);
    assert_eq!(
        group.cmd(promoted, &["GET", "k"])?,
        Value::BulkString("v".into())
    );
    Ok(())
}

#[test]
fn a_killed_primary_is_replaced_and_rejoins_as_a_replica_after_a_restart() -> TestResult {
    let group = SentinelGroup::start()?;
    assert_eq!(set_and_wait(&group, 0, ("k", "kept"), 2, 5000)?, Some(2));
    group.kill(0)?;
    let successor = group.wait_failover(0, WAIT)?;
    assert_ne!(successor, 0);
    assert_eq!(
        group.cmd(successor, &["GET", "k"])?,
        Value::BulkString("kept".into())
    );

    group.restart(0)?;
    // The sentinels turn the old primary, back as an empty primary, into a replica.
    let primary = group.wait_ready(WAIT)?;
    assert_ne!(primary, 0);
    assert_eq!(group.role(0)?, Role::Replica);
    assert_eq!(
        group.cmd(0, &["GET", "k"])?,
        Value::BulkString("kept".into())
    );
    Ok(())
}

#[test]
fn a_partitioned_primary_keeps_its_clients_but_its_replicas_miss_its_writes() -> TestResult {
    let group = SentinelGroup::builder().replicas(1).start()?;
    assert_eq!(
        set_and_wait(&group, 0, ("k", "replicated"), 1, 5000)?,
        Some(1)
    );
    group.partition_replicas(0)?;
    assert_eq!(set_and_wait(&group, 0, ("k", "lost"), 1, 300)?, Some(0));
    assert_eq!(
        group.cmd(0, &["GET", "k"])?,
        Value::BulkString("lost".into())
    );
    assert_eq!(
        group.cmd(1, &["GET", "k"])?,
        Value::BulkString("replicated".into())
    );

    // The replica that missed the write is promoted: the write is gone.
    let promoted = group.failover()?;
    assert_eq!(promoted, 1);
    assert_eq!(
        group.cmd(1, &["GET", "k"])?,
        Value::BulkString("replicated".into())
    );
    group.heal_replicas(0)?;
    assert_eq!(group.wait_ready(WAIT)?, 1);
    assert_eq!(
        group.cmd(0, &["GET", "k"])?,
        Value::BulkString("replicated".into())
    );
    Ok(())
}

#[test]
fn a_restarted_sentinel_carries_on() -> TestResult {
    let group = SentinelGroup::builder().replicas(1).start()?;
    group.kill_sentinel(2)?;
    assert!(!group.is_sentinel_running(2));
    assert_eq!(group.primary()?, 0);
    group.restart_sentinel(2)?;
    assert_eq!(group.wait_ready(WAIT)?, 0);

    // Dropping the group kills every process (a paused one too) and removes the directory.
    group.pause(1)?;
    let pids: Vec<u32> = (0..2).filter_map(|i| group.pid(i)).collect();
    assert_eq!(pids.len(), 2);
    let dir = group.dir().to_path_buf();
    assert!(dir.join("sentinel-0").join("sentinel.conf").is_file());
    drop(group);
    for pid in pids {
        assert!(!process_exists(pid), "pid {pid} must be killed and reaped");
    }
    assert!(!dir.exists(), "{} must be removed", dir.display());
    Ok(())
}

#[test]
fn invalid_options_are_rejected_before_anything_starts() {
    for builder in [
        SentinelGroup::builder().sentinels(0),
        SentinelGroup::builder().sentinels(3).quorum(4),
        SentinelGroup::builder().master_name("my master"),
        SentinelGroup::builder().down_after(Duration::from_millis(1)),
    ] {
        let err = builder.start();
        assert!(
            matches!(err, Err(TestkitError::InvalidOption { .. })),
            "{err:?}"
        );
    }
}

#[test]
fn a_password_protects_the_data_nodes_and_the_sentinels_still_manage_them() -> TestResult {
    let group = SentinelGroup::builder()
        .replicas(1)
        .sentinels(1)
        .password("s3cret")
        .start()?;
    assert_password_required(&group.url(0), group.port(0))?;
    assert_eq!(set_and_wait(&group, 0, ("k", "v"), 1, 5000)?, Some(1));
    assert_eq!(group.failover()?, 1);
    assert_eq!(group.cmd(1, &["GET", "k"])?, Value::BulkString("v".into()));
    Ok(())
}
