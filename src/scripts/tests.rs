//! Pins each script's contract against a real redis-server.

use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
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

async fn run(
    script: &Script,
    conn: &mut MultiplexedConnection,
    keys: &[&str],
    args: &[&str],
) -> i64 {
    let mut call = script.prepare_invoke();
    for k in keys {
        call.key(*k);
    }
    for a in args {
        call.arg(*a);
    }
    call.invoke_async(conn).await.expect("script runs")
}

/// Runs the acquire script; returns `(granted, token, marker)`.
async fn take(
    conn: &mut MultiplexedConnection,
    locks: &[&str],
    fences: &[&str],
    marker: Option<&str>,
    value: &str,
) -> (bool, i64, Option<String>) {
    let mut call = acquire().prepare_invoke();
    for k in locks.iter().chain(fences).chain(marker.iter()) {
        call.key(*k);
    }
    call.arg(value)
        .arg(10_000)
        .arg(locks.len())
        .arg(u8::from(!fences.is_empty()))
        .arg(u8::from(marker.is_some()));
    let reply: Vec<redis::Value> = call.invoke_async(conn).await.expect("script runs");
    match reply.as_slice() {
        [redis::Value::Int(0)] => (false, 0, None),
        [redis::Value::Int(1), redis::Value::Int(t), m] => {
            let marker = match m {
                redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
                _ => None,
            };
            (true, *t, marker)
        }
        other => panic!("unexpected reply {other:?}"),
    }
}

#[tokio::test]
async fn acquire_sets_all_keys_or_none() {
    let (_cluster, mut c) = server().await;
    assert_eq!(
        take(&mut c, &["a", "b"], &[], None, "v1").await,
        (true, 0, None)
    );
    let a: String = c.get("a").await.expect("get");
    let pttl: i64 = c.pttl("b").await.expect("pttl");
    assert_eq!(a, "v1");
    assert!(pttl > 9000 && pttl <= 10000, "{pttl}");
    // One conflicting key refuses the whole set and creates nothing.
    assert!(!take(&mut c, &["b", "c"], &[], None, "v2").await.0);
    let exists: bool = c.exists("c").await.expect("exists");
    assert!(!exists);
    // Our own value does not re-enter.
    assert!(!take(&mut c, &["a"], &[], None, "v1").await.0);
}

#[tokio::test]
async fn acquire_counts_fences_and_reports_the_guard_marker() {
    let (_cluster, mut c) = server().await;
    let _: () = c.set("f:y", 41).await.expect("set");
    let got = take(&mut c, &["x", "y"], &["f:x", "f:y"], Some("guard"), "v").await;
    assert_eq!(
        got,
        (true, 42, None),
        "the largest counter after increment, no marker yet"
    );
    let _: () = c.set("guard", "run-1").await.expect("set");
    let _: () = c.del(&["x", "y"]).await.expect("del");
    let got = take(&mut c, &["x", "y"], &["f:x", "f:y"], Some("guard"), "w").await;
    assert_eq!(got, (true, 43, Some("run-1".to_owned())));
    let fx: i64 = c.get("f:x").await.expect("get");
    let ttl: i64 = c.pttl("f:x").await.expect("pttl");
    assert_eq!((fx, ttl), (2, -1), "counters never expire");
    // A refused acquisition counts nothing.
    assert!(!take(&mut c, &["x"], &["f:x"], Some("guard"), "z").await.0);
    let fx: i64 = c.get("f:x").await.expect("get");
    assert_eq!(fx, 2);
}

#[tokio::test]
async fn fence_raises_counters_only_while_we_hold_the_lock() {
    let (_cluster, mut c) = server().await;
    let _: () = c.set("lock", "ours").await.expect("set");
    let _: () = c.set("fence", 3).await.expect("set");
    assert_eq!(
        run(fence(), &mut c, &["lock", "fence"], &["ours", "9"]).await,
        1
    );
    let f: i64 = c.get("fence").await.expect("get");
    assert_eq!(f, 9);
    // Never lowered.
    assert_eq!(
        run(fence(), &mut c, &["lock", "fence"], &["ours", "5"]).await,
        1
    );
    let f: i64 = c.get("fence").await.expect("get");
    assert_eq!(f, 9);
    // Not ours: nothing changes.
    assert_eq!(
        run(fence(), &mut c, &["lock", "fence"], &["other", "20"]).await,
        0
    );
    let f: i64 = c.get("fence").await.expect("get");
    assert_eq!(f, 9);
}

#[tokio::test]
async fn fenced_set_refuses_older_tokens() {
    let (_cluster, mut c) = server().await;
    assert_eq!(
        run(fenced_set(), &mut c, &["data", "data:t"], &["a", "5"]).await,
        1
    );
    assert_eq!(
        run(fenced_set(), &mut c, &["data", "data:t"], &["b", "5"]).await,
        1,
        "same token rewrites"
    );
    assert_eq!(
        run(fenced_set(), &mut c, &["data", "data:t"], &["c", "4"]).await,
        0
    );
    let d: String = c.get("data").await.expect("get");
    assert_eq!(d, "b");
    assert_eq!(
        run(fenced_set(), &mut c, &["data", "data:t"], &["d", "6"]).await,
        1
    );
}

#[tokio::test]
async fn extend_only_raises_the_expiry_of_our_own_keys() {
    let (_cluster, mut c) = server().await;
    let _: () = c.set_ex("ours", "v1", 5).await.expect("set");
    let _: () = c.set_ex("theirs", "v2", 5).await.expect("set");
    assert_eq!(run(extend(), &mut c, &["ours"], &["v1", "60000"]).await, 1);
    let pttl: i64 = c.pttl("ours").await.expect("pttl");
    assert!(pttl > 59000, "{pttl}");
    // A shorter ttl never shortens.
    assert_eq!(run(extend(), &mut c, &["ours"], &["v1", "1000"]).await, 1);
    let pttl: i64 = c.pttl("ours").await.expect("pttl");
    assert!(pttl > 59000, "{pttl}");
    // Someone else's key in the set: nothing changes, not even our key.
    assert_eq!(
        run(extend(), &mut c, &["ours", "theirs"], &["v1", "90000"]).await,
        0
    );
    let pttl: i64 = c.pttl("ours").await.expect("pttl");
    assert!(pttl <= 60000, "{pttl}");
    let pttl: i64 = c.pttl("theirs").await.expect("pttl");
    assert!(pttl <= 5000, "{pttl}");
    // A missing key is not recreated.
    assert_eq!(run(extend(), &mut c, &["gone"], &["v1", "60000"]).await, 0);
    let exists: bool = c.exists("gone").await.expect("exists");
    assert!(!exists);
}

#[tokio::test]
async fn release_deletes_only_our_keys() {
    let (_cluster, mut c) = server().await;
    let _: () = c.set("a", "v1").await.expect("set");
    let _: () = c.set("b", "v2").await.expect("set");
    assert_eq!(
        run(
            &Script::new(release_body()),
            &mut c,
            &["a", "b", "missing"],
            &["v1"]
        )
        .await,
        1
    );
    let a: bool = c.exists("a").await.expect("exists");
    let b: String = c.get("b").await.expect("get");
    assert!(!a);
    assert_eq!(b, "v2");
    assert_eq!(
        run(&Script::new(release_body()), &mut c, &["a"], &["v1"]).await,
        0
    );
}
