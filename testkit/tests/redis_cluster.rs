//! Local Redis Clusters: forming, routing keys, forced and automatic failovers, restarts,
//! the replication partition, and slot moves.

mod common;

use std::time::{Duration, Instant};

use common::{TestResult, assert_password_required, process_exists, wait_until};
use redis::Value;
use redquorum_testkit::{
    FailoverMode, RawConnection, RedisCluster, ReplyExt, Role, TestkitError, key_slot,
};

/// Generous: forming and failing over are slower on a loaded machine.
const WAIT: Duration = Duration::from_secs(60);

#[test]
fn starts_ready_with_every_slot_covered_and_keys_on_the_right_primary() -> TestResult {
    let started = Instant::now();
    let cluster = RedisCluster::start()?;
    eprintln!("formed in {:?}", started.elapsed());
    assert_eq!(cluster.len(), 6);
    assert_eq!(cluster.primaries()?, vec![0, 1, 2]);
    for p in 0..3 {
        assert_eq!(cluster.role(p)?, Role::Primary);
        assert_eq!(cluster.replicas_of(p)?, vec![3 + p]);
        assert_eq!(cluster.role(3 + p)?, Role::Replica);
    }
    for i in 0..cluster.len() {
        let info = cluster.cmd(i, &["CLUSTER", "INFO"])?;
        assert_eq!(info.info_field("cluster_state"), Some("ok"), "node {i}");
        assert_eq!(
            info.info_field("cluster_slots_ok"),
            Some("16384"),
            "node {i}"
        );
    }
    for key in ["foo", "bar", "{user1000}.following", "lock:a"] {
        let reply = cluster.cmd(0, &["CLUSTER", "KEYSLOT", key])?;
        assert_eq!(reply.as_int(), Some(i64::from(key_slot(key))), "{key}");
    }
    let key = "lock:{orders}";
    let primary = cluster.primary_for_key(key)?;
    assert_eq!(
        cluster.cmd(primary, &["SET", key, "v1"])?.as_str(),
        Some("OK")
    );
    assert_eq!(
        cluster.cmd_for_key(key, &["GET", key])?,
        Value::BulkString("v1".into())
    );
    let other = (primary + 1) % 3;
    let moved = cluster.cmd(other, &["GET", key])?;
    assert!(
        moved.as_error().is_some_and(|e| e.code() == "MOVED"
            && e.details()
                .is_some_and(|d| d.ends_with(&format!("127.0.0.1:{}", cluster.port(primary))))),
        "a plain-text client must be sent to the plain port: {moved:?}"
    );
    let seeds = cluster.seed_urls();
    assert_eq!(seeds[0], format!("redis://127.0.0.1:{}", cluster.port(0)));
    Ok(())
}

/// `SET key value` then `WAIT 1 wait_ms` on one connection (`WAIT` counts the replicas
/// that have this connection's writes); returns how many replicas acknowledged.
fn set_and_wait(
    cluster: &RedisCluster,
    node: usize,
    key: &str,
    value: &str,
    wait_ms: u64,
) -> Result<Option<i64>, TestkitError> {
    let mut conn = RawConnection::open(&cluster.url(node), Duration::from_secs(10))?;
    assert_eq!(conn.call(&["SET", key, value])?.as_str(), Some("OK"));
    Ok(conn.call(&["WAIT", "1", &wait_ms.to_string()])?.as_int())
}

/// Reads `key` on a replica (which answers `MOVED` unless the connection is `READONLY`).
fn read_on_replica(
    cluster: &RedisCluster,
    replica: usize,
    key: &str,
) -> Result<Value, TestkitError> {
    let mut conn = RawConnection::open(&cluster.url(replica), Duration::from_secs(2))?;
    assert_eq!(conn.call(&["READONLY"])?.as_str(), Some("OK"));
    conn.call(&["GET", key])
}

#[test]
fn a_forced_failover_promotes_the_replica_and_the_cluster_is_ready_again() -> TestResult {
    let cluster = RedisCluster::start()?;
    let key = "lock:{failover}";
    let primary = cluster.primary_for_key(key)?;
    let replica = cluster.replicas_of(primary)?[0];
    // Replicated before the failover.
    assert_eq!(set_and_wait(&cluster, primary, key, "v1", 5000)?, Some(1));

    cluster.failover(replica)?;
    assert_eq!(cluster.primary_for_key(key)?, replica);
    assert_eq!(cluster.role(replica)?, Role::Primary);
    assert_eq!(cluster.role(primary)?, Role::Replica);
    assert_eq!(cluster.replicas_of(replica)?, vec![primary]);
    assert_eq!(
        cluster.cmd_for_key(key, &["GET", key])?,
        Value::BulkString("v1".into())
    );

    // And back, the coordinated way.
    cluster.failover_with(primary, FailoverMode::Coordinated, WAIT)?;
    assert_eq!(cluster.primary_for_key(key)?, primary);

    let err = cluster.failover(primary);
    assert!(
        matches!(err, Err(TestkitError::ActionFailed { .. })),
        "failing over to a primary is refused: {err:?}"
    );
    Ok(())
}

#[test]
fn a_killed_primary_is_replaced_and_comes_back_as_a_replica() -> TestResult {
    // The default node time-out (2 s): short, and still no spurious failovers when the
    // machine is loaded.
    let cluster = RedisCluster::start()?;
    let primary = 1;
    let replica = cluster.replicas_of(primary)?[0];
    let key = cluster.key_on(primary, "lock:")?;
    assert_eq!(cluster.primary_for_key(&key)?, primary);
    assert_eq!(
        set_and_wait(&cluster, primary, &key, "kept", 5000)?,
        Some(1)
    );

    cluster.kill(primary)?;
    assert!(!cluster.is_running(primary));
    let successor = cluster.wait_failover(primary, WAIT)?;
    assert_eq!(successor, replica);
    assert_eq!(cluster.primary_for_key(&key)?, replica);
    assert_eq!(
        cluster.cmd(replica, &["GET", &key])?,
        Value::BulkString("kept".into())
    );

    cluster.restart(primary)?;
    cluster.wait_ready(WAIT)?;
    assert_eq!(cluster.role(primary)?, Role::Replica);
    assert_eq!(cluster.replicas_of(replica)?, vec![primary]);
    assert_eq!(
        read_on_replica(&cluster, primary, &key)?,
        Value::BulkString("kept".into())
    );
    Ok(())
}

#[test]
fn a_partitioned_primary_keeps_its_clients_and_a_forced_failover_loses_its_writes() -> TestResult {
    let cluster = RedisCluster::start()?;
    let primary = 0;
    let replica = cluster.replicas_of(primary)?[0];
    let key = cluster.key_on(primary, "lock:")?;
    assert_eq!(
        set_and_wait(&cluster, primary, &key, "replicated", 5000)?,
        Some(1)
    );
    let link = cluster.replication_link(primary);
    assert!(
        link.stats().to_client.bytes > 0,
        "replication must cross the primary's replication proxy: {:?}",
        link.stats()
    );

    cluster.partition_replicas(primary);
    // Clients still reach the primary and its writes succeed, unacknowledged.
    assert_eq!(set_and_wait(&cluster, primary, &key, "lost", 300)?, Some(0));
    assert_eq!(
        cluster.cmd(primary, &["GET", &key])?,
        Value::BulkString("lost".into())
    );
    assert_eq!(
        read_on_replica(&cluster, replica, &key)?,
        Value::BulkString("replicated".into())
    );

    // The replica that missed the write takes over: the write is gone.
    cluster.failover(replica)?;
    assert_eq!(cluster.primary_for_key(&key)?, replica);
    assert_eq!(
        cluster.cmd_for_key(&key, &["GET", &key])?,
        Value::BulkString("replicated".into())
    );
    // The old primary now replicates from its successor, through the successor's link.
    assert_eq!(cluster.role(primary)?, Role::Replica);
    assert_eq!(
        read_on_replica(&cluster, primary, &key)?,
        Value::BulkString("replicated".into())
    );
    cluster.heal_replicas(primary);
    Ok(())
}

#[test]
fn client_proxies_are_what_the_nodes_announce() -> TestResult {
    let cluster = RedisCluster::builder()
        .primaries(3)
        .replicas_per_primary(0)
        .client_proxies(true)
        .start()?;
    assert_eq!(cluster.len(), 3);
    let key = "lock:{proxied}";
    let primary = cluster.primary_for_key(key)?;
    let proxy = cluster
        .client_link(primary)
        .ok_or("client proxies are on")?;
    assert_eq!(cluster.seed_urls()[primary], proxy.url());
    let moved = cluster.cmd((primary + 1) % 3, &["SET", key, "v"])?;
    assert!(
        moved
            .as_error()
            .and_then(|e| e.details())
            .is_some_and(|d| d.ends_with(&format!("127.0.0.1:{}", proxy.port()))),
        "MOVED must point at the client proxy: {moved:?}"
    );
    let mut conn = RawConnection::open(&proxy.url(), Duration::from_secs(2))?;
    assert_eq!(conn.call(&["SET", key, "v"])?.as_str(), Some("OK"));
    assert!(proxy.stats().connections_accepted >= 1);
    drop(conn);

    // Dropping the cluster kills every node (a paused one too), stops every proxy and
    // removes the directory.
    let proxy_port = proxy.port();
    let replication_port = cluster.replication_link(0).port();
    cluster.pause(2)?;
    let pids: Vec<u32> = (0..3).filter_map(|i| cluster.pid(i)).collect();
    assert_eq!(pids.len(), 3);
    let dir = cluster.dir().to_path_buf();
    drop(cluster);
    for pid in pids {
        assert!(!process_exists(pid), "pid {pid} must be killed and reaped");
    }
    assert!(!dir.exists(), "{} must be removed", dir.display());
    for port in [proxy_port, replication_port] {
        wait_until(
            Duration::from_secs(5),
            "a stopped proxy to refuse connections",
            || std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        )?;
    }
    Ok(())
}

#[test]
fn invalid_options_are_rejected_before_anything_starts() {
    for builder in [
        RedisCluster::builder().primaries(0),
        RedisCluster::builder().primaries(65),
        RedisCluster::builder()
            .primaries(3)
            .replicas_per_primary(100),
        RedisCluster::builder().node_timeout(Duration::from_millis(10)),
        RedisCluster::builder().password(""),
    ] {
        let err = builder.start();
        assert!(
            matches!(err, Err(TestkitError::InvalidOption { .. })),
            "{err:?}"
        );
    }
}

#[test]
fn a_password_protects_every_node_and_replicas_still_sync() -> TestResult {
    let cluster = RedisCluster::builder()
        .primaries(1)
        .replicas_per_primary(1)
        .password("s3cret")
        .start()?;
    assert_password_required(&cluster.url(0), cluster.port(0))?;
    assert_eq!(set_and_wait(&cluster, 0, "k", "v", 5000)?, Some(1));
    assert_eq!(
        read_on_replica(&cluster, 1, "k")?,
        Value::BulkString("v".into())
    );
    Ok(())
}

/// A hash tag whose keys fall in `slot`.
fn tag_in(slot: u16) -> String {
    (0..)
        .map(|n| format!("t{n}"))
        .find(|tag| key_slot(tag) == slot)
        .unwrap_or_default()
}

/// What node `i` answers to `GET key`: the value, or where it redirects.
fn get_on(cluster: &RedisCluster, i: usize, key: &str) -> Result<Value, TestkitError> {
    cluster.cmd(i, &["GET", key])
}

#[test]
fn a_slot_moves_with_its_keys_and_ttls_every_node_agrees_and_it_moves_back() -> TestResult {
    let cluster = RedisCluster::builder()
        .primaries(3)
        .replicas_per_primary(1)
        // `MIGRATE` must authenticate on the target.
        .password("s3cret")
        .start()?;
    let slot = cluster.slots_of(0)?[0].start() + 7;
    let tag = tag_in(slot);
    // More keys than one `MIGRATE` batch; half with a time to live.
    let keys: Vec<String> = (0..250).map(|i| format!("{{{tag}}}:{i}")).collect();
    for (i, key) in keys.iter().enumerate() {
        let reply = if i % 2 == 0 {
            cluster.cmd(0, &["SET", key, &format!("v{i}"), "PX", "600000"])?
        } else {
            cluster.cmd(0, &["SET", key, &format!("v{i}")])?
        };
        assert_eq!(reply, Value::Okay, "{key}");
    }
    let count = |i: usize| -> Result<Option<i64>, TestkitError> {
        Ok(cluster
            .cmd(i, &["CLUSTER", "COUNTKEYSINSLOT", &slot.to_string()])?
            .as_int())
    };

    cluster.move_slot(slot, 1)?;
    assert_eq!(cluster.primary_for_slot(slot)?, 1);
    assert_eq!((count(0)?, count(1)?), (Some(0), Some(250)));
    for (i, key) in keys.iter().enumerate() {
        assert_eq!(
            get_on(&cluster, 1, key)?,
            Value::BulkString(format!("v{i}").into())
        );
        let pttl = cluster.cmd(1, &["PTTL", key])?.as_int().unwrap_or(-3);
        if i % 2 == 0 {
            assert!(pttl > 0 && pttl <= 600_000, "{key}: pttl {pttl}");
        } else {
            assert_eq!(pttl, -1, "{key} has no time to live");
        }
    }
    // Every other node, replicas included, sends a client to node 1.
    let to_node_1 = format!("MOVED {slot} 127.0.0.1:{}", cluster.port(1));
    for i in (0..cluster.len()).filter(|&i| i != 1) {
        let reply = get_on(&cluster, i, &keys[0])?;
        let redirect = reply
            .as_error()
            .map(|e| format!("{} {}", e.code(), e.details().unwrap_or_default()));
        assert_eq!(redirect.as_deref(), Some(to_node_1.as_str()), "node {i}");
    }

    // Half-way: one key moved, the other not.
    let slot2 = cluster.slots_of(0)?[0].start() + 8;
    let tag2 = tag_in(slot2);
    let (a, b) = (format!("{{{tag2}}}:a"), format!("{{{tag2}}}:b"));
    cluster.cmd(0, &["SET", &a, "va"])?;
    cluster.cmd(0, &["SET", &b, "vb"])?;
    assert_eq!(cluster.begin_slot_move(slot2, 2)?, 0);
    cluster.migrate_keys(slot2, 2, &[&a])?;
    let ask = get_on(&cluster, 0, &a)?;
    assert!(
        ask.as_error().is_some_and(|e| e.code() == "ASK"
            && e.details() == Some(&format!("{slot2} 127.0.0.1:{}", cluster.port(2)))),
        "{ask:?}"
    );
    assert_eq!(get_on(&cluster, 0, &b)?, Value::BulkString("vb".into()));
    let both = cluster.cmd(0, &["MGET", &a, &b])?;
    assert!(
        both.as_error().is_some_and(|e| e.code() == "TRYAGAIN"),
        "{both:?}"
    );
    assert_eq!(cluster.primary_for_slot(slot2)?, 0, "still node 0's");
    cluster.finish_slot_move(slot2, 2)?;
    assert_eq!(get_on(&cluster, 2, &a)?, Value::BulkString("va".into()));
    assert_eq!(get_on(&cluster, 2, &b)?, Value::BulkString("vb".into()));

    // And back.
    cluster.move_slot(slot, 0)?;
    assert_eq!((count(0)?, count(1)?), (Some(250), Some(0)));
    assert_eq!(
        get_on(&cluster, 0, &keys[1])?,
        Value::BulkString("v1".into())
    );
    let pttl = cluster.cmd(0, &["PTTL", &keys[0]])?.as_int().unwrap_or(-3);
    assert!(pttl > 0 && pttl <= 600_000, "pttl {pttl}");

    // Nowhere to go: a replica, or where the slot is already.
    for to in [3, 0] {
        let err = cluster.move_slot(slot, to);
        assert!(
            matches!(err, Err(TestkitError::ActionFailed { .. })),
            "to {to}: {err:?}"
        );
    }
    cluster.wait_ready(WAIT)?;
    Ok(())
}
