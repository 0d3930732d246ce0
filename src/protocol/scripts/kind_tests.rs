//! Pins the read-write and semaphore scripts' contracts against a real redis-server.

use redis::aio::MultiplexedConnection;
use redis::{AsyncCommands, Value};
use redquorum_testkit::LocalCluster;

use super::*;

async fn server() -> (LocalCluster, MultiplexedConnection) {
    let cluster = LocalCluster::start(1).expect("start redis-server");
    let conn = redis::Client::open(cluster.url(0))
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("connect");
    (cluster, conn)
}

const READERS: &str = "rw-readers:doc";
const WRITER: &str = "rw-writer:doc";
const PENDING: &str = "rw-pending:doc";

/// `rw_acquire` for `mode` with `value` (writers use `intent`); `(granted, blocker)`.
async fn rw(
    c: &mut MultiplexedConnection,
    mode: &str,
    value: &str,
    intent: &str,
    prefer: bool,
    ttl: u64,
) -> (bool, String) {
    let reply: Vec<Value> = rw_acquire()
        .key(WRITER)
        .key(READERS)
        .key(PENDING)
        .arg(value)
        .arg(ttl)
        .arg(mode)
        .arg(intent)
        .arg(u8::from(prefer))
        .arg(0)
        .arg(0)
        .arg(0)
        .invoke_async(c)
        .await
        .expect("script runs");
    match reply.as_slice() {
        [Value::Int(1), ..] => (true, String::new()),
        [Value::Int(0), blocker, ..] => (false, crate::error::node_failure::text_of(blocker)),
        other => panic!("unexpected {other:?}"),
    }
}

async fn release(c: &mut MultiplexedConnection, keys: &[&str], args: &[&str]) -> i64 {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(holder_release_body())
        .arg(keys.len())
        .arg(keys)
        .arg(args);
    cmd.query_async(c).await.expect("release runs")
}

#[tokio::test]
async fn readers_share_writers_exclude_and_preferred_writers_hold_readers_back() {
    let (_cluster, mut c) = server().await;
    assert_eq!(
        rw(&mut c, "read", "r1", "", false, 10_000).await,
        (true, String::new())
    );
    assert_eq!(
        rw(&mut c, "read", "r2", "", false, 10_000).await,
        (true, String::new())
    );
    // A writer waits for the readers; preferred, it leaves its intent.
    assert_eq!(
        rw(&mut c, "write", "w1", "i1", true, 10_000).await,
        (false, "readers".into())
    );
    let pending: Option<String> = c.get(PENDING).await.expect("GET");
    assert_eq!(pending.as_deref(), Some("i1"));
    // New readers wait for it; the readers already in can leave.
    assert_eq!(
        rw(&mut c, "read", "r3", "", false, 10_000).await,
        (false, "pending-writer".into())
    );
    for r in ["r1", "r2"] {
        assert_eq!(release(&mut c, &[READERS], &[r, "holder", ""]).await, 1);
    }
    let readers: bool = c.exists(READERS).await.expect("EXISTS");
    assert!(!readers, "the set goes with its last reader");
    // The writer gets in (another attempt, same intent) and clears its marker.
    assert_eq!(
        rw(&mut c, "write", "w2", "i1", true, 10_000).await,
        (true, String::new())
    );
    let pending: bool = c.exists(PENDING).await.expect("EXISTS");
    assert!(!pending);
    assert_eq!(
        rw(&mut c, "read", "r4", "", false, 10_000).await,
        (false, "writer".into())
    );
    assert_eq!(
        rw(&mut c, "write", "w3", "i2", false, 10_000).await,
        (false, "writer".into())
    );
    // Only its own value releases the writer.
    assert_eq!(
        release(&mut c, &[READERS, WRITER, PENDING], &["w3", "writer", "i2"]).await,
        0
    );
    assert_eq!(
        release(&mut c, &[READERS, WRITER, PENDING], &["w2", "writer", "i1"]).await,
        1
    );
    assert_eq!(
        rw(&mut c, "read", "r5", "", false, 10_000).await,
        (true, String::new())
    );
}

#[tokio::test]
async fn a_reader_whose_hold_ran_out_no_longer_blocks_a_writer() {
    let (_cluster, mut c) = server().await;
    assert!(rw(&mut c, "read", "short", "", false, 50).await.0);
    assert!(rw(&mut c, "read", "long", "", false, 10_000).await.0);
    assert_eq!(
        release(&mut c, &[READERS], &["long", "holder", ""]).await,
        1
    );
    tokio::time::sleep(std::time::Duration::from_millis(80)).await;
    assert!(
        rw(&mut c, "write", "w", "i", false, 10_000).await.0,
        "the short reader ran out"
    );
    // Extending a reader that ran out never recreates it.
    let extended: i64 = holder_extend()
        .key(READERS)
        .arg("short")
        .arg(10_000)
        .arg(0)
        .invoke_async(&mut c)
        .await
        .expect("runs");
    assert_eq!(extended, 0);
}

/// `sem_acquire` for `k` permits; `(granted, blocker)`.
async fn permit(c: &mut MultiplexedConnection, value: &str, k: u64, ttl: u64) -> (bool, String) {
    let reply: Vec<Value> = sem_acquire()
        .key("permits:pool")
        .arg(value)
        .arg(ttl)
        .arg(k)
        .arg(0)
        .arg(0)
        .arg(0)
        .invoke_async(c)
        .await
        .expect("script runs");
    match reply.as_slice() {
        [Value::Int(1), ..] => (true, String::new()),
        [Value::Int(0), blocker, ..] => (false, crate::error::node_failure::text_of(blocker)),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn a_semaphore_admits_k_holders_whose_permits_expire_and_one_count() {
    let (_cluster, mut c) = server().await;
    for v in ["a", "b"] {
        assert!(permit(&mut c, v, 3, 10_000).await.0);
    }
    assert!(permit(&mut c, "c", 3, 60).await.0);
    assert_eq!(permit(&mut c, "d", 3, 10_000).await, (false, "full".into()));
    assert_eq!(
        permit(&mut c, "e", 4, 10_000).await,
        (false, "count-mismatch".into()),
        "every client must use the same k"
    );
    // A crashed holder's permit comes back after its ttl.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(permit(&mut c, "d", 3, 10_000).await.0);
    // Extend: only a live permit of ours, never recreated.
    let extend = |value: &'static str| {
        let mut call = holder_extend().prepare_invoke();
        call.key("permits:pool").arg(value).arg(60_000).arg(0);
        call
    };
    let ours: i64 = extend("a").invoke_async(&mut c).await.expect("runs");
    let gone: i64 = extend("c").invoke_async(&mut c).await.expect("runs");
    assert_eq!((ours, gone), (1, 0));
    let score: f64 = c.zscore("permits:pool", "a").await.expect("ZSCORE");
    let (s, us): (i64, i64) = redis::cmd("TIME").query_async(&mut c).await.expect("TIME");
    let now = (s * 1000 + us / 1000) as f64;
    assert!(score > now + 59_000.0, "{score} vs {now}");
    // Release: ours only; the set goes with its last permit.
    for v in ["a", "b", "d"] {
        assert_eq!(
            release(&mut c, &["permits:pool"], &[v, "holder", ""]).await,
            1
        );
    }
    assert_eq!(
        release(&mut c, &["permits:pool"], &["zz", "holder", ""]).await,
        0
    );
    let left: bool = c.exists("permits:pool").await.expect("EXISTS");
    assert!(!left);
}

#[tokio::test]
async fn holder_sets_of_an_application_are_left_alone() {
    let (_cluster, mut c) = server().await;
    let _: () = c.zadd("permits:pool", "app", 1).await.expect("ZADD");
    let err = sem_acquire()
        .key("permits:pool")
        .arg("v")
        .arg(1000)
        .arg(2)
        .arg(0)
        .arg(0)
        .arg(0)
        .invoke_async::<Value>(&mut c)
        .await
        .expect_err("not ours");
    assert_eq!(err.code(), Some("REDQUORUM_FOREIGN"));
    assert_eq!(
        release(&mut c, &["permits:pool"], &["app", "holder", ""]).await,
        0
    );
    let members: Vec<String> = c.zrange("permits:pool", 0, -1).await.expect("ZRANGE");
    assert_eq!(members, ["app"]);
}

/// The `left` of a refusal: milliseconds until what blocks runs out.
fn left_of(reply: &[Value]) -> i64 {
    match reply {
        [Value::Int(0), _, _, Value::Int(left)] => *left,
        other => panic!("a refusal with its time left, not {other:?}"),
    }
}

/// Every refusal says how long its blocker has left, so that a waiter that hears no
/// release (the holder crashed) tries again when it has run out rather than after its own
/// ttl: the writer's PTTL for a reader or writer, the last reader's hold for a writer, the
/// pending marker's PTTL for a reader, the earliest permit's hold for a full semaphore.
#[tokio::test]
async fn refusals_say_when_their_blocker_runs_out() {
    let (_cluster, mut c) = server().await;
    let raw_rw = |value: &str, mode: &str, ttl: u64, prefer: bool| {
        let mut call = rw_acquire().prepare_invoke();
        call.key(WRITER)
            .key(READERS)
            .key(PENDING)
            .arg(value)
            .arg(ttl)
            .arg(mode)
            .arg(format!("intent-{value}"))
            .arg(u8::from(prefer))
            .arg(0)
            .arg(0)
            .arg(0);
        call
    };
    let within = |left: i64, ttl: i64| assert!(ttl - 1_000 < left && left <= ttl, "{left}");
    // Readers of 20 s and 30 s: a writer is told the later one, 30 s.
    for (value, ttl) in [("r1", 20_000), ("r2", 30_000)] {
        let granted: Vec<Value> = raw_rw(value, "read", ttl, false)
            .invoke_async(&mut c)
            .await
            .expect("runs");
        assert_eq!(granted.first(), Some(&Value::Int(1)));
    }
    let refused: Vec<Value> = raw_rw("w1", "write", 5_000, true)
        .invoke_async(&mut c)
        .await
        .expect("runs");
    within(left_of(&refused), 30_000);
    // The preferred writer left its marker (one ttl, 5 s): a reader is told that.
    let refused: Vec<Value> = raw_rw("r3", "read", 5_000, false)
        .invoke_async(&mut c)
        .await
        .expect("runs");
    within(left_of(&refused), 5_000);
    // A writer of 40 s: a reader is told 40 s.
    let _: () = c.del(&[READERS, PENDING]).await.expect("DEL");
    let granted: Vec<Value> = raw_rw("w2", "write", 40_000, false)
        .invoke_async(&mut c)
        .await
        .expect("runs");
    assert_eq!(granted.first(), Some(&Value::Int(1)));
    let refused: Vec<Value> = raw_rw("r4", "read", 5_000, false)
        .invoke_async(&mut c)
        .await
        .expect("runs");
    within(left_of(&refused), 40_000);
    // Permits of 50 s and 20 s, k = 2: full, and the earlier one frees first, 20 s.
    let raw_permit = |value: &str, ttl: u64| {
        let mut call = sem_acquire().prepare_invoke();
        call.key("permits:left")
            .arg(value)
            .arg(ttl)
            .arg(2)
            .arg(0)
            .arg(0)
            .arg(0);
        call
    };
    for (value, ttl) in [("p1", 50_000), ("p2", 20_000)] {
        let granted: Vec<Value> = raw_permit(value, ttl)
            .invoke_async(&mut c)
            .await
            .expect("runs");
        assert_eq!(granted.first(), Some(&Value::Int(1)));
    }
    let refused: Vec<Value> = raw_permit("p3", 5_000)
        .invoke_async(&mut c)
        .await
        .expect("runs");
    within(left_of(&refused), 20_000);
}

/// Guarded with the epoch marker and without the ttl records (a Redis Cluster member keeps
/// its records in a slot of their own): each acquire script grants, answers with the
/// marker's epoch, and writes no records; with the records key, it writes them.
#[tokio::test]
async fn a_guarded_acquire_may_leave_the_records_out() {
    let (_cluster, mut c) = server().await;
    let marker = "guard";
    let _: () = c
        .hset_multiple(marker, &[("redquorum", "guard"), ("epoch", "E1")])
        .await
        .expect("marker");
    let epoch_of = |reply: &[Value]| match reply {
        [Value::Int(1), _, Value::BulkString(e)] => String::from_utf8_lossy(e).into_owned(),
        other => panic!("not a grant with an epoch: {other:?}"),
    };
    for records in [None, Some("ttls")] {
        let _: () = c
            .del(&["lock:a", WRITER, READERS, PENDING, "permits:pool"])
            .await
            .expect("del");
        let mut call = acquire().prepare_invoke();
        call.key("lock:a").key(marker);
        records.map(|r| call.key(r));
        call.arg("v").arg(5_000).arg(1).arg(0).arg(1).arg(0);
        let reply: Vec<Value> = call.invoke_async(&mut c).await.expect("acquire runs");
        assert_eq!(epoch_of(&reply), "E1");

        let mut call = rw_acquire().prepare_invoke();
        call.key(WRITER).key(READERS).key(PENDING).key(marker);
        records.map(|r| call.key(r));
        call.arg("w")
            .arg(5_000)
            .arg("write")
            .arg("i")
            .arg(0)
            .arg(0)
            .arg(1)
            .arg(0);
        let reply: Vec<Value> = call.invoke_async(&mut c).await.expect("rw_acquire runs");
        assert_eq!(epoch_of(&reply), "E1");

        let mut call = sem_acquire().prepare_invoke();
        call.key("permits:pool").key(marker);
        records.map(|r| call.key(r));
        call.arg("p").arg(5_000).arg(2).arg(0).arg(1).arg(0);
        let reply: Vec<Value> = call.invoke_async(&mut c).await.expect("sem_acquire runs");
        assert_eq!(epoch_of(&reply), "E1");

        let written: bool = c.exists("ttls").await.expect("exists");
        assert_eq!(
            written,
            records.is_some(),
            "records written iff their key was given"
        );
    }
}
