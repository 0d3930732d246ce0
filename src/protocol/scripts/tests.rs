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

/// Runs the acquire script (guarded when `guard` names the marker and records keys);
/// returns `(granted, token, epoch)`.
async fn take(
    conn: &mut MultiplexedConnection,
    locks: &[&str],
    fences: &[&str],
    guard: Option<(&str, &str)>,
    value: &str,
) -> (bool, i64, Option<String>) {
    let mut call = acquire().prepare_invoke();
    for k in locks.iter().chain(fences) {
        call.key(*k);
    }
    if let Some((marker, records)) = guard {
        call.key(marker).key(records);
    }
    call.arg(value)
        .arg(10_000)
        .arg(locks.len())
        .arg(u8::from(!fences.is_empty()))
        .arg(u8::from(guard.is_some()))
        .arg(0);
    let reply: Vec<redis::Value> = call.invoke_async(conn).await.expect("script runs");
    match reply.as_slice() {
        // A refusal says how long the blocking key has left (-1: no expiry).
        [
            redis::Value::Int(0),
            _,
            redis::Value::Int(0),
            redis::Value::Int(pttl),
        ] => {
            assert!(*pttl == -1 || *pttl > 0, "pttl {pttl}");
            (false, 0, None)
        }
        [redis::Value::Int(1), redis::Value::Int(t), m] => {
            let epoch = match m {
                redis::Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
                _ => None,
            };
            (true, *t, epoch)
        }
        other => panic!("unexpected reply {other:?}"),
    }
}

/// A fence counter's token.
async fn token(c: &mut MultiplexedConnection, key: &str) -> Option<i64> {
    c.hget(key, "token").await.expect("HGET")
}

/// The error code a script failed with.
async fn failure(call: redis::ScriptInvocation<'_>, c: &mut MultiplexedConnection) -> String {
    let err = call
        .invoke_async::<redis::Value>(c)
        .await
        .expect_err("refused");
    err.code().unwrap_or_default().to_owned()
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
async fn acquire_counts_fences_records_the_ttl_and_reports_the_epoch() {
    let (_cluster, mut c) = server().await;
    let _: () = c
        .hset_multiple("f:y", &[("redquorum", "fence"), ("token", "41")])
        .await
        .expect("hset");
    let guard = Some(("guard", "ttls"));
    let got = take(&mut c, &["x", "y"], &["f:x", "f:y"], guard, "v").await;
    assert_eq!(
        got,
        (true, 42, None),
        "the largest counter after increment, no epoch yet"
    );
    let recorded: Option<i64> = c.hget("ttls", "10000").await.expect("hget");
    let now = server_ms(&mut c).await;
    let until = recorded.expect("the ttl is recorded");
    assert!(
        until > now + 19_000 && until <= now + 20_000,
        "{until} vs {now}"
    );
    let _: () = c
        .hset_multiple("guard", &[("redquorum", "guard"), ("epoch", "e-1")])
        .await
        .expect("hset");
    let _: () = c.del(&["x", "y"]).await.expect("del");
    let got = take(&mut c, &["x", "y"], &["f:x", "f:y"], guard, "w").await;
    assert_eq!(got, (true, 43, Some("e-1".to_owned())));
    let ttl: i64 = c.pttl("f:x").await.expect("pttl");
    assert_eq!(
        (token(&mut c, "f:x").await, ttl),
        (Some(2), -1),
        "counters never expire"
    );
    // A refused acquisition counts nothing.
    assert!(!take(&mut c, &["x"], &["f:x"], guard, "z").await.0);
    assert_eq!(token(&mut c, "f:x").await, Some(2));
}

/// The master's clock in ms.
async fn server_ms(c: &mut MultiplexedConnection) -> i64 {
    let (s, us): (i64, i64) = redis::cmd("TIME").query_async(c).await.expect("TIME");
    s * 1000 + us / 1000
}

#[tokio::test]
async fn scripts_never_write_over_data_they_did_not_create() {
    let (_cluster, mut c) = server().await;
    // An application's keys where redquorum's own would be (an empty prefix).
    let _: () = c.set("fence:r", 7).await.expect("set");
    let _: () = c
        .hset_multiple("guard", &[("owner", "app")])
        .await
        .expect("hset");
    let _: () = c.set("ttls", "app data").await.expect("set");
    let mut call = acquire().prepare_invoke();
    call.key("lock:r")
        .key("fence:r")
        .arg("v")
        .arg(1000)
        .arg(1)
        .arg(1)
        .arg(0)
        .arg(0);
    assert_eq!(failure(call, &mut c).await, "REDQUORUM_FOREIGN");
    let mut call = acquire().prepare_invoke();
    call.key("lock:r")
        .key("guard")
        .key("ttls")
        .arg("v")
        .arg(1000)
        .arg(1)
        .arg(0)
        .arg(1)
        .arg(0);
    assert_eq!(failure(call, &mut c).await, "REDQUORUM_FOREIGN");
    let mut call = guard().prepare_invoke();
    call.key("guard").arg("run").arg(0).arg(5).arg("e").arg("");
    assert_eq!(failure(call, &mut c).await, "REDQUORUM_FOREIGN");
    let ttl_read = Script::new(ttl_read_source());
    let mut call = ttl_read.prepare_invoke();
    call.key("ttls").key("nothing");
    assert_eq!(failure(call, &mut c).await, "REDQUORUM_FOREIGN");
    let mut call = ttl_read.prepare_invoke();
    call.key("nothing").key("guard");
    assert_eq!(failure(call, &mut c).await, "REDQUORUM_FOREIGN");
    // Nothing was written: not the lock key, not the application's keys.
    let lock: bool = c.exists("lock:r").await.expect("exists");
    let fence: i64 = c.get("fence:r").await.expect("get");
    let owner: Vec<String> = c.hkeys("guard").await.expect("hkeys");
    let ttls: String = c.get("ttls").await.expect("get");
    assert!(!lock);
    assert_eq!(
        (fence, owner, ttls.as_str()),
        (7, vec!["owner".to_owned()], "app data")
    );
}

#[tokio::test]
async fn ttl_records_keep_the_longest_live_ttl_and_expire_with_the_last() {
    let (_cluster, mut c) = server().await;
    let script = Script::new(record_source());
    let record = |ttl: &'static str| {
        let mut call = script.prepare_invoke();
        call.key("ttls").arg(ttl);
        call
    };
    let ttl_read = Script::new(ttl_read_source());
    let read = || {
        let mut call = ttl_read.prepare_invoke();
        call.key("ttls").key("guard");
        call
    };
    let first = |reply: Vec<redis::Value>| match reply.first() {
        Some(redis::Value::Int(n)) => *n,
        other => panic!("ttl_read answered {other:?}"),
    };
    let longest: i64 = first(read().invoke_async(&mut c).await.expect("read"));
    assert_eq!(longest, 0, "nothing recorded");
    let _: i64 = record("300").invoke_async(&mut c).await.expect("record");
    let _: i64 = record("100").invoke_async(&mut c).await.expect("record");
    let longest: i64 = first(read().invoke_async(&mut c).await.expect("read"));
    assert_eq!(longest, 300);
    let pttl: i64 = c.pttl("ttls").await.expect("pttl");
    assert!(
        pttl > 500 && pttl <= 600,
        "the key lives as long as its last record: {pttl}"
    );
    // Records run out after twice their ttl; the 300 ms one last.
    tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    let longest: i64 = first(read().invoke_async(&mut c).await.expect("read"));
    assert_eq!(
        longest, 300,
        "the 100 ms record ran out, the 300 ms one did not"
    );
    let mut gone = false;
    for _ in 0..200 {
        let exists: bool = c.exists("ttls").await.expect("exists");
        if !exists {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(gone, "the records key expires with its last record");
}

/// Runs `guard.lua`; returns `(epoch, since, now, cause, durable)`.
async fn verify(
    c: &mut MultiplexedConnection,
    run_id: &str,
    durable: bool,
    uptime: u64,
    fresh: &str,
    known: &str,
) -> (String, i64, i64, String, i64) {
    guard()
        .key("guard")
        .arg(run_id)
        .arg(u8::from(durable))
        .arg(crate::rules::restart_anchor_offset_ms(uptime))
        .arg(fresh)
        .arg(known)
        .invoke_async(c)
        .await
        .expect("guard runs")
}

#[tokio::test]
async fn epochs_begin_on_loss_and_survive_durable_restarts_only() {
    let (_cluster, mut c) = server().await;
    // First sight: a new epoch since now.
    let (e1, since, now, cause, ..) = verify(&mut c, "run-a", true, 100, "e1", "").await;
    assert_eq!((e1.as_str(), cause.as_str()), ("e1", "first-seen"));
    assert_eq!(since, now);
    // Confirmed as it is by anyone else, whatever fresh id they bring.
    let (e, s, ..) = verify(&mut c, "run-a", true, 101, "other", "").await;
    assert_eq!((e.as_str(), s), ("e1", since));
    // A restart of a durable master keeps the epoch.
    let (e, s, ..) = verify(&mut c, "run-b", true, 2, "e2", "e1").await;
    assert_eq!((e.as_str(), s), ("e1", since));
    // Durability withdrawn, then a restart: a new epoch since the boot.
    let (e, ..) = verify(&mut c, "run-b", false, 3, "x", "e1").await;
    assert_eq!(e, "e1");
    let (e3, since3, now3, cause, ..) = verify(&mut c, "run-c", true, 5, "e3", "e1").await;
    assert_eq!((e3.as_str(), cause.as_str()), ("e3", "restarted"));
    assert_eq!(
        since3,
        (now3 - 4_000).max(since),
        "no earlier than the boot (uptime less a second), never before the old epoch"
    );
    // The marker gone while a client knew the master: data lost, since now.
    let _: () = c.del("guard").await.expect("del");
    let (e4, since4, now4, cause, ..) = verify(&mut c, "run-c", true, 9, "e4", "e3").await;
    assert_eq!(
        (e4.as_str(), cause.as_str(), since4),
        ("e4", "data-lost", now4)
    );
}

#[tokio::test]
async fn commissioning_refuses_masters_in_service_and_reset_begins_an_epoch() {
    let (_cluster, mut c) = server().await;
    // A master a client has only looked at (first seen) may still be commissioned.
    let _ = verify(&mut c, "run-a", true, 1, "seen", "").await;
    let act = |verb: &'static str, force: u8, fresh: &'static str| {
        let mut call = commission().prepare_invoke();
        call.key("guard")
            .arg(verb)
            .arg("run-a")
            .arg(1)
            .arg(fresh)
            .arg(force);
        call
    };
    let reply: Vec<redis::Value> = act("commission", 0, "c1")
        .invoke_async(&mut c)
        .await
        .expect("runs");
    assert_eq!(reply[0], redis::Value::Int(1));
    let (e, since, _, cause, ..) = verify(&mut c, "run-a", true, 1, "x", "").await;
    assert_eq!(
        (e.as_str(), since, cause.as_str()),
        ("c1", 0, "commissioned")
    );
    // In service now: refused unless forced.
    let reply: Vec<redis::Value> = act("commission", 0, "c2")
        .invoke_async(&mut c)
        .await
        .expect("runs");
    assert_eq!(reply[0], redis::Value::Int(0));
    let reply: Vec<redis::Value> = act("commission", 1, "c3")
        .invoke_async(&mut c)
        .await
        .expect("runs");
    assert_eq!(reply[0], redis::Value::Int(1));
    // A reset begins an epoch since now.
    let _: Vec<redis::Value> = act("reset", 0, "r1")
        .invoke_async(&mut c)
        .await
        .expect("runs");
    let (e, since, now, cause, ..) = verify(&mut c, "run-a", true, 1, "x", "").await;
    assert_eq!((e.as_str(), cause.as_str()), ("r1", "reset"));
    assert!(since <= now && since > now - 5_000);
}

#[tokio::test]
async fn fence_raises_counters_only_while_we_hold_the_lock() {
    let (_cluster, mut c) = server().await;
    let _: () = c.set("lock", "ours").await.expect("set");
    let _: () = c
        .hset_multiple("fence", &[("redquorum", "fence"), ("token", "3")])
        .await
        .expect("hset");
    assert_eq!(
        run(fence(), &mut c, &["lock", "fence"], &["ours", "9", "0"]).await,
        1
    );
    assert_eq!(token(&mut c, "fence").await, Some(9));
    // Never lowered.
    assert_eq!(
        run(fence(), &mut c, &["lock", "fence"], &["ours", "5", "0"]).await,
        1
    );
    assert_eq!(token(&mut c, "fence").await, Some(9));
    // Not ours: nothing changes.
    assert_eq!(
        run(fence(), &mut c, &["lock", "fence"], &["other", "20", "0"]).await,
        0
    );
    assert_eq!(token(&mut c, "fence").await, Some(9));
    // A bounded counter expires when idle.
    assert_eq!(
        run(
            fence(),
            &mut c,
            &["lock", "fence"],
            &["ours", "10", "60000"]
        )
        .await,
        1
    );
    let pttl: i64 = c.pttl("fence").await.expect("pttl");
    assert!(pttl > 59_000 && pttl <= 60_000, "{pttl}");
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
    assert_eq!(
        run(extend(), &mut c, &["ours", "ttls"], &["v1", "60000", "1"]).await,
        1
    );
    let pttl: i64 = c.pttl("ours").await.expect("pttl");
    assert!(pttl > 59000, "{pttl}");
    let recorded: Option<i64> = c.hget("ttls", "60000").await.expect("hget");
    assert!(recorded.is_some(), "a guarded extension records its ttl");
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
    // A missing key is not recreated, and records nothing.
    assert_eq!(
        run(extend(), &mut c, &["gone", "ttls"], &["v1", "90000", "1"]).await,
        0
    );
    let recorded: Option<i64> = c.hget("ttls", "90000").await.expect("hget");
    assert!(recorded.is_none());
    let exists: bool = c.exists("gone").await.expect("exists");
    assert!(!exists);
}

/// Runs `extend_many.lua` (as `script`) on `keys` (then `records` when given) with
/// `values`; its answers.
async fn extend_batch(
    script: &Script,
    c: &mut MultiplexedConnection,
    ttl: &str,
    keys: &[&str],
    records: Option<&str>,
    values: &[&str],
) -> Vec<i64> {
    let mut call = script.prepare_invoke();
    for k in keys.iter().chain(&records) {
        call.key(*k);
    }
    call.arg(ttl).arg(u8::from(records.is_some()));
    for v in values {
        call.arg(*v);
    }
    call.invoke_async(c).await.expect("script runs")
}

/// `extend_many.lua` as a master before Redis 7 runs it (PTTL and PEXPIRE, no `GT`).
fn extend_many_before_redis_7() -> Script {
    let source = extend_many_source();
    let gate = "(redis.REDIS_VERSION_NUM or 0)";
    assert!(source.contains(gate));
    Script::new(&source.replace(gate, "0"))
}

#[tokio::test]
async fn extend_many_raises_the_expiry_of_each_key_that_holds_its_value_only() {
    extend_many_contract(extend_many()).await;
}

#[tokio::test]
async fn extend_many_keeps_its_contract_before_redis_7() {
    extend_many_contract(&extend_many_before_redis_7()).await;
}

async fn extend_many_contract(script: &Script) {
    let (_cluster, mut c) = server().await;
    let _: () = c.set_ex("a", "va", 5).await.expect("set");
    let _: () = c.set_ex("b", "vb", 5).await.expect("set");
    // Someone else's value in the middle of the batch, and someone else's data of another
    // type.
    let _: () = c.set_ex("c", "theirs", 5).await.expect("set");
    let _: () = c.hset("h", "f", "x").await.expect("hset");
    let _: () = c.set_ex("d", "vd", 5).await.expect("set");
    let answers = extend_batch(
        script,
        &mut c,
        "60000",
        &["a", "b", "c", "gone", "h", "d"],
        Some("ttls"),
        &["va", "vb", "vc", "vg", "vh", "vd"],
    )
    .await;
    assert_eq!(answers, [1, 1, 0, 0, 0, 1], "one answer per key, in order");
    for ours in ["a", "b", "d"] {
        let pttl: i64 = c.pttl(ours).await.expect("pttl");
        assert!(pttl > 59000, "{ours}: {pttl}");
    }
    // The foreign value is untouched: its value and its expiry.
    let theirs: String = c.get("c").await.expect("get");
    let pttl: i64 = c.pttl("c").await.expect("pttl");
    assert_eq!(theirs, "theirs");
    assert!(pttl <= 5000, "{pttl}");
    let pttl: i64 = c.pttl("h").await.expect("pttl");
    assert_eq!(pttl, -1, "the hash keeps no expiry");
    // The absent key is not recreated.
    let exists: bool = c.exists("gone").await.expect("exists");
    assert!(!exists);
    // The ttl is recorded once, for at least twice the ttl from before the extension.
    let recorded: Option<i64> = c.hget("ttls", "60000").await.expect("hget");
    let now = server_ms(&mut c).await;
    let recorded = recorded.expect("a guarded batch records its ttl");
    assert!(
        recorded > now + 119_000 && recorded <= now + 120_000,
        "{recorded} vs {now}"
    );
    let fields: Vec<String> = c.hkeys("ttls").await.expect("hkeys");
    assert_eq!(fields.len(), 2, "the kind and the one ttl: {fields:?}");
    let pttl: i64 = c.pttl("ttls").await.expect("pttl");
    assert!(
        pttl > 119_000,
        "the records key outlives the extension: {pttl}"
    );

    // A shorter ttl never shortens, and unguarded records nothing.
    let answers = extend_batch(script, &mut c, "1000", &["a", "b"], None, &["va", "vb"]).await;
    assert_eq!(answers, [1, 1]);
    let pttl: i64 = c.pttl("a").await.expect("pttl");
    assert!(pttl > 59000, "{pttl}");
    // A key of ours without an expiry keeps none (the later of never and now + ttl).
    let _: () = c.set("p", "vp").await.expect("set");
    let answers = extend_batch(script, &mut c, "1000", &["p"], None, &["vp"]).await;
    assert_eq!(answers, [1]);
    let pttl: i64 = c.pttl("p").await.expect("pttl");
    assert_eq!(pttl, -1);
    let recorded: Option<i64> = c.hget("ttls", "1000").await.expect("hget");
    assert!(recorded.is_none());

    // No key holds its value: nothing changes, and nothing is recorded.
    let answers = extend_batch(
        script,
        &mut c,
        "90000",
        &["c", "gone"],
        Some("ttls"),
        &["va", "vb"],
    )
    .await;
    assert_eq!(answers, [0, 0]);
    let recorded: Option<i64> = c.hget("ttls", "90000").await.expect("hget");
    assert!(recorded.is_none());
    let exists: bool = c.exists("gone").await.expect("exists");
    assert!(!exists);
}

#[tokio::test]
async fn extend_many_changes_nothing_when_the_records_are_not_ours() {
    let (_cluster, mut c) = server().await;
    let _: () = c.set_ex("a", "va", 5).await.expect("set");
    let _: () = c.set("ttls", "app data").await.expect("set");
    let mut call = extend_many().prepare_invoke();
    call.key("a").key("ttls").arg(60000).arg(1).arg("va");
    assert_eq!(failure(call, &mut c).await, "REDQUORUM_FOREIGN");
    let pttl: i64 = c.pttl("a").await.expect("pttl");
    assert!(pttl <= 5000, "not extended: {pttl}");
    let ttls: String = c.get("ttls").await.expect("get");
    assert_eq!(ttls, "app data");
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

/// A release announces each key it deleted on the channel named like the key, and nothing
/// for a key that was not ours.
#[tokio::test]
async fn release_announces_what_it_deleted() {
    let (cluster, mut c) = server().await;
    let client = redis::Client::open(cluster.url(0)).expect("url");
    let mut sub = client.get_async_pubsub().await.expect("pubsub");
    sub.subscribe(&["a", "b"]).await.expect("subscribe");
    let _: () = c.set("a", "v1").await.expect("set");
    let _: () = c.set("b", "v2").await.expect("set");
    assert_eq!(
        run(&Script::new(release_body()), &mut c, &["a", "b"], &["v1"]).await,
        1
    );
    // Then a marker on `b` itself: the only messages before it are the release's.
    let _: i64 = c.publish("b", "marker").await.expect("publish");
    let mut stream = sub.on_message();
    let first = futures::StreamExt::next(&mut stream)
        .await
        .expect("message");
    assert_eq!(first.get_channel_name(), "a");
    assert_eq!(first.get_payload::<String>().expect("text"), "released");
    let second = futures::StreamExt::next(&mut stream)
        .await
        .expect("message");
    assert_eq!(second.get_channel_name(), "b");
    assert_eq!(second.get_payload::<String>().expect("text"), "marker");
}

/// `set_or_mine.lua`: SET NX PX, or OK when the key already holds our value (expiry left
/// alone), nil when it holds another.
#[tokio::test]
async fn set_or_mine_is_an_idempotent_set_nx() {
    let (_cluster, mut c) = server().await;
    let script = Script::new(set_or_mine_body());
    let call = |key: &'static str, value: &'static str, ttl: u64| {
        let mut cmd = script.prepare_invoke();
        cmd.key(key).arg(value).arg(ttl);
        cmd
    };
    let set: redis::Value = call("k", "mine", 10_000)
        .invoke_async(&mut c)
        .await
        .expect("runs");
    assert_eq!(set, redis::Value::Okay);
    let again: redis::Value = call("k", "mine", 60_000)
        .invoke_async(&mut c)
        .await
        .expect("runs");
    assert_eq!(again, redis::Value::Okay);
    let pttl: i64 = c.pttl("k").await.expect("pttl");
    assert!(pttl > 0 && pttl <= 10_000, "expiry untouched: {pttl}");
    let theirs: redis::Value = call("k", "other", 10_000)
        .invoke_async(&mut c)
        .await
        .expect("runs");
    assert_eq!(theirs, redis::Value::Nil);
}

/// Runs `ttl_read.lua`; returns `(longest, present, run_id, durable, since)`.
async fn read_records(c: &mut MultiplexedConnection) -> (i64, i64, String, i64, i64) {
    let reply: Vec<redis::Value> = Script::new(ttl_read_source())
        .key("ttls")
        .key("guard")
        .invoke_async(c)
        .await
        .expect("ttl_read runs");
    match reply.as_slice() {
        [
            redis::Value::Int(longest),
            redis::Value::Int(present),
            run_id,
            redis::Value::Int(durable),
            redis::Value::Int(since),
            redis::Value::Int(now),
            _cause,
        ] => {
            assert!(since <= now, "since {since} after now {now}");
            let run_id = match run_id {
                redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                other => panic!("run_id {other:?}"),
            };
            (*longest, *present, run_id, *durable, *since)
        }
        other => panic!("ttl_read answered {other:?}"),
    }
}

#[tokio::test]
async fn ttl_reads_carry_the_readers_marker_so_its_answer_can_be_judged() {
    let (_cluster, mut c) = server().await;
    assert_eq!(read_records(&mut c).await, (0, 0, String::new(), 0, 0));
    let (_, since, ..) = verify(&mut c, "run-a", true, 100, "e1", "").await;
    assert_eq!(
        read_records(&mut c).await,
        (0, 1, "run-a".to_owned(), 1, since)
    );
    let _: i64 = Script::new(record_source())
        .key("ttls")
        .arg(5_000)
        .invoke_async(&mut c)
        .await
        .expect("record");
    assert_eq!(read_records(&mut c).await.0, 5_000);
    // Commissioned: an epoch since 0, which every reader rule believes.
    let reply: Vec<redis::Value> = commission()
        .key("guard")
        .arg("commission")
        .arg("run-a")
        .arg(0)
        .arg("c1")
        .arg(1)
        .invoke_async(&mut c)
        .await
        .expect("commission runs");
    assert_eq!(reply[0], redis::Value::Int(1));
    assert_eq!(
        read_records(&mut c).await,
        (5_000, 1, "run-a".to_owned(), 0, 0)
    );
}

/// Behind a Sentinel group a believed read must be followed by `WAIT`, which counts
/// replicas only up to the connection's last write: asked to, the read leaves a trace in
/// its own marker (and nowhere else, and not in a marker that is missing).
#[tokio::test]
async fn a_ttl_read_asked_to_leaves_a_trace_that_replicates_in_its_own_marker_only() {
    let (_cluster, mut c) = server().await;
    let script = Script::new(ttl_read_source());
    let read = |probe: u8| {
        let mut invocation = script.key("ttls");
        invocation.key("guard").arg(probe);
        invocation
    };
    let _: redis::Value = read(1).invoke_async(&mut c).await.expect("runs");
    let exists: bool = c.exists("guard").await.expect("exists");
    assert!(!exists, "no marker: nothing written");
    let _ = verify(&mut c, "run-a", true, 100, "e1", "").await;
    let _: redis::Value = read(0).invoke_async(&mut c).await.expect("runs");
    let probe: Option<i64> = c.hget("guard", "probe").await.expect("HGET");
    assert_eq!(probe, None, "not asked: nothing written");
    let _: redis::Value = read(1).invoke_async(&mut c).await.expect("runs");
    let probe: Option<i64> = c.hget("guard", "probe").await.expect("HGET");
    assert!(
        probe.is_some(),
        "asked: the marker's probe field is set (a write, which replicates)"
    );
    let epoch: String = c.hget("guard", "epoch").await.expect("HGET");
    assert_eq!(epoch, "e1", "the epoch is left alone");
}

#[tokio::test]
async fn durability_is_withdrawn_and_never_given_back_within_an_epoch() {
    let (_cluster, mut c) = server().await;
    let withdraw = Script::new(withdraw_source());
    let cleared: i64 = withdraw
        .key("guard")
        .invoke_async(&mut c)
        .await
        .expect("runs");
    assert_eq!(cleared, 0);
    let exists: bool = c.exists("guard").await.expect("exists");
    assert!(!exists, "withdrawing never creates the marker");
    let _ = verify(&mut c, "run-a", true, 100, "e1", "").await;
    let cleared: i64 = withdraw
        .key("guard")
        .invoke_async(&mut c)
        .await
        .expect("runs");
    assert_eq!(cleared, 1);
    assert_eq!(read_records(&mut c).await.3, 0);
    // A later look that says "durable" does not give it back…
    let (e, _, _, _, durable) = verify(&mut c, "run-a", true, 101, "x", "e1").await;
    assert_eq!((e.as_str(), durable), ("e1", 0));
    // …so a restart, even of a server that now persists every write, begins a new epoch.
    let (e, _, _, cause, ..) = verify(&mut c, "run-b", true, 2, "e2", "e1").await;
    assert_eq!((e.as_str(), cause.as_str()), ("e2", "restarted"));
}

#[tokio::test]
async fn members_are_remembered_by_address_for_good_and_by_run_id_for_a_while() {
    let (_cluster, mut c) = server().await;
    let members = Script::new(members_source());
    let recall = |run: &'static str, addr: &'static str| {
        let mut call = members.prepare_invoke();
        call.key("members").arg("recall").arg(run).arg(0).arg(addr);
        call
    };
    let known: Vec<i64> = recall("r1", "a1").invoke_async(&mut c).await.expect("runs");
    assert_eq!(known, vec![0, 0]);
    let _: i64 = members
        .key("members")
        .arg("remember")
        .arg("r1")
        .arg(200)
        .arg("a1")
        .arg("a1-ip")
        .invoke_async(&mut c)
        .await
        .expect("runs");
    let known: Vec<i64> = recall("r1", "a1").invoke_async(&mut c).await.expect("runs");
    assert_eq!(known, vec![1, 1]);
    let known: Vec<i64> = recall("r2", "a2").invoke_async(&mut c).await.expect("runs");
    assert_eq!(known, vec![0, 0]);
    let known: Vec<i64> = recall("r2", "a1-ip")
        .invoke_async(&mut c)
        .await
        .expect("runs");
    assert_eq!(known, vec![0, 1], "any of its addresses");
    // The run_id is forgotten once its time is up; the address is not.
    let mut forgotten = false;
    for _ in 0..500 {
        let known: Vec<i64> = recall("r1", "a1").invoke_async(&mut c).await.expect("runs");
        if known == vec![0, 1] {
            forgotten = true;
            break;
        }
        assert_eq!(known, vec![1, 1]);
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(forgotten, "the run_id was remembered past its time");
    let _: () = c.set("app", "data").await.expect("set");
    let call = {
        let mut call = members.prepare_invoke();
        call.key("app").arg("recall").arg("r").arg(0).arg("a");
        call
    };
    assert_eq!(failure(call, &mut c).await, "REDQUORUM_FOREIGN");
}
