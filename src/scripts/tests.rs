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

#[tokio::test]
async fn acquire_sets_all_keys_or_none() {
    let (_cluster, mut c) = server().await;
    assert_eq!(
        run(acquire(), &mut c, &["a", "b"], &["v1", "10000"]).await,
        1
    );
    let a: String = c.get("a").await.expect("get");
    let pttl: i64 = c.pttl("b").await.expect("pttl");
    assert_eq!(a, "v1");
    assert!(pttl > 9000 && pttl <= 10000, "{pttl}");
    // One conflicting key refuses the whole set and creates nothing.
    assert_eq!(
        run(acquire(), &mut c, &["b", "c"], &["v2", "10000"]).await,
        0
    );
    let exists: bool = c.exists("c").await.expect("exists");
    assert!(!exists);
    // Our own value does not re-enter.
    assert_eq!(run(acquire(), &mut c, &["a"], &["v1", "10000"]).await, 0);
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
        run(release(), &mut c, &["a", "b", "missing"], &["v1"]).await,
        1
    );
    let a: bool = c.exists("a").await.expect("exists");
    let b: String = c.get("b").await.expect("get");
    assert!(!a);
    assert_eq!(b, "v2");
    assert_eq!(run(release(), &mut c, &["a"], &["v1"]).await, 0);
}
