//! Attacks on the restart guard found by a review of v3 (issue 19), kept as regression
//! tests on real masters. Each forces its interleaving with the fault proxy and waits on
//! conditions; each fails if the resource is granted to a second holder while the first
//! still holds it.
//!
//! 1. A record round still in flight when a lost master is verified: v3's first design
//!    restored ("vouched for") the lost master's records from readers that had not yet
//!    received the round's records, and a second loss then let a 1 s client take a 20 s
//!    lock. Readers are now believed only if their epoch is older than twice the longest
//!    ttl (or commissioned), which no such race can fake.
//! 2. A single master: with nobody else to read, a flushed master must not be believed
//!    about itself.
//! 3. Commissioning through a client that knows only the master being commissioned: the
//!    other members' memory of it must be asked, so it is refused.

use std::time::Duration;

use crate::common::inspect::{cmd, lock_key, value_of};
use crate::common::*;
use redquorum::{GuardStatus, Lock, Redlock, RetryPolicy, Vote};
use redquorum_testkit::{Direction, Fault, ReplyExt};

fn guarded(urls: Vec<String>, ttl: Duration, node_timeout: Duration) -> Redlock {
    builder(urls)
        .ttl(ttl)
        .node_timeout(node_timeout)
        .restart_guard(true)
        .retry(RetryPolicy::once())
        .build()
        .expect("valid")
}

async fn status(redlock: &Redlock, i: usize) -> GuardStatus {
    redlock
        .health_with(Duration::from_millis(20))
        .await
        .expect("not strict")
        .nodes[i]
        .guard
        .clone()
}

async fn has_record(masters: &redquorum_testkit::LocalCluster, i: usize, ttl_ms: &str) -> bool {
    cmd(masters, i, &["HGET", "redquorum:ttls", ttl_ms]).await != redis::Value::Nil
}

fn granted(lock: &Lock) -> Vec<usize> {
    lock.stats()
        .votes()
        .iter()
        .filter(|v| matches!(v.vote, Vote::Granted))
        .map(|v| v.node)
        .collect()
}

/// B's verdict on master `i` once its verification (triggered by a probe lock) is done:
/// any settled status (counted, quarantined, or unverified with a reason).
async fn verdict(b: &Redlock, i: usize, probe: &str) -> GuardStatus {
    eventually(PATIENCE, "B's verdict", || async {
        if let Ok(lock) = b.try_lock(probe).await {
            let _ = lock.release().await;
        }
        match status(b, i).await {
            s @ (GuardStatus::Quarantined { .. }
            | GuardStatus::Counted { .. }
            | GuardStatus::Unverified { reason: Some(_) }) => Some(s),
            _ => None,
        }
    })
    .await
}

/// `b` tries `resource` `rounds` times, 100 ms apart: it must never be granted while `held`
/// is valid.
async fn never_granted_while_held(b: &Redlock, resource: &str, held: &Lock, rounds: u32) {
    for _ in 0..rounds {
        if held.is_expired() {
            return;
        }
        if let Ok(lock) = b.try_lock(resource).await {
            assert!(
                held.is_expired(),
                "two holders of {resource}: B on {:?} while the first holds it for {:?} more",
                granted(&lock),
                held.remaining()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Attack 1: a verification races a record round. N = 3, Q = 2.
/// A (ttl 20 s) sends its record round; master 0 acks, then is flushed; B (ttl 1 s)
/// verifies 0 while A's records to 1 and 2 are still in flight (v3's first design vouched
/// for 0 with 1 s here).
/// A's round then completes ({0, 1} acked). A's lock X goes to 1 (at once) and 2 (late);
/// master 1 is flushed just after X's SET; B verifies 1 reading 0 and 2 (X's record still
/// in flight). Master 0's epoch is new, so it is not believed: B must not be granted r.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verification_racing_a_record_round_never_grants_twice() {
    let masters = cluster(3);
    commission(&masters).await;
    let a_links = masters.links().expect("proxies");
    let b_links = masters.links().expect("proxies");
    let a = guarded(
        a_links.urls(),
        Duration::from_secs(20),
        Duration::from_secs(6),
    );
    let b = guarded(
        b_links.urls(),
        Duration::from_secs(1),
        Duration::from_millis(200),
    );

    // Both verify every master (no 20 s record anywhere); B takes one lock to warm up.
    for i in 0..3 {
        assert!(status(&a, i).await.counts(), "A counts {i}");
        assert!(status(&b, i).await.counts(), "B counts {i}");
    }
    let warm = eventually(PATIENCE, "B warm", || async {
        b.try_lock("warm").await.ok()
    })
    .await;
    warm.release().await.expect("released");
    for i in 0..3 {
        assert!(!has_record(&masters, i, "20000").await);
    }

    // A's requests to 1 arrive 3 s late, to 2 nine seconds late (replies are prompt).
    a_links
        .link(1)
        .set(Direction::ToServer, Fault::delay(Duration::from_secs(3)));
    a_links
        .link(2)
        .set(Direction::ToServer, Fault::delay(Duration::from_secs(9)));
    let t0 = std::time::Instant::now();
    let a2 = a.clone();
    let lock_a = tokio::spawn(async move { a2.try_lock("r").await });

    wait_until(PATIENCE, "A's record on 0", || {
        has_record(&masters, 0, "20000")
    })
    .await;
    masters.cmd(0, &["FLUSHALL"]).expect("FLUSHALL 0");
    // A's later requests to 0 never arrive (so X's key never lands there). Only towards the
    // server: the answer to A's record may still be on its way back (on a loaded machine it
    // was, and A's record round then missed its quorum and A never locked).
    a_links.link(0).set(Direction::ToServer, Fault::Blackhole);
    let v0 = verdict(&b, 0, "p0").await;
    println!("{:?} B's verdict on 0: {v0:?}", t0.elapsed());
    assert!(
        !has_record(&masters, 1, "20000").await,
        "B read 1 before A's record arrived"
    );

    wait_until(PATIENCE, "A's record on 1", || {
        has_record(&masters, 1, "20000")
    })
    .await;
    println!("{:?} A's record landed on 1", t0.elapsed());
    a_links.link(1).set(Direction::ToServer, Fault::Pass);
    a_links.link(2).set(Direction::ToServer, Fault::Pass); // queued chunks keep their time

    wait_until(PATIENCE, "X's key on 1", || async {
        value_of(&masters, 1, &lock_key("r")).await.is_some()
    })
    .await;
    masters.cmd(1, &["FLUSHALL"]).expect("FLUSHALL 1");
    println!("{:?} master 1 flushed after X's SET", t0.elapsed());
    let v1 = verdict(&b, 1, "p1").await;
    println!("{:?} B's verdict on 1: {v1:?}", t0.elapsed());
    println!(
        "master 2 holds A's 20 s record yet: {}",
        has_record(&masters, 2, "20000").await
    );

    let lock_a = lock_a.await.expect("task").expect("A granted r");
    println!(
        "{:?} A granted r on {:?}, valid for {:?}",
        t0.elapsed(),
        granted(&lock_a),
        lock_a.remaining()
    );
    assert_eq!(
        value_of(&masters, 2, &lock_key("r")).await.as_deref(),
        Some(lock_a.value()),
        "A's key is on master 2"
    );
    never_granted_while_held(&b, "r", &lock_a, 50).await;
}

/// Attack 2: one master (N = 1). After a flush nobody can say how long a lock may still
/// run: B (1 s) must not be granted the lock A (20 s) holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_flushed_master_is_not_believed_about_itself() {
    let masters = cluster(1);
    commission(&masters).await;
    let a = guarded(
        masters.urls(),
        Duration::from_secs(20),
        Duration::from_millis(500),
    );
    let b = guarded(
        masters.urls(),
        Duration::from_secs(1),
        Duration::from_millis(200),
    );
    let lock_a = a.try_lock("r").await.expect("A");
    masters.cmd(0, &["FLUSHALL"]).expect("FLUSHALL");
    let v = verdict(&b, 0, "probe").await;
    assert!(
        matches!(v, GuardStatus::Unverified { .. }),
        "no one can vouch for the only master: {v:?}"
    );
    never_granted_while_held(&b, "r", &lock_a, 40).await;
}

/// Attack 3: commissioning a flushed master through a client that knows only that master
/// (as `redquorum guard commission --node URL` once did): refused, since no other member
/// can be asked whether it remembers the server; with every master listed, refused by the
/// memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commissioning_a_flushed_master_alone_is_refused() {
    let masters = cluster(3);
    commission(&masters).await;
    let a = guarded(
        masters.urls(),
        Duration::from_secs(20),
        Duration::from_millis(500),
    );
    let lock_a = eventually(PATIENCE, "A", || async { a.try_lock("r").await.ok() }).await;
    wait_until(PATIENCE, "master 0 remembered on the others", || async {
        cmd(&masters, 1, &["HLEN", "redquorum:members"])
            .await
            .as_int()
            .unwrap_or(0)
            > 0
            && matches!(status(&a, 0).await, GuardStatus::Counted { .. })
    })
    .await;
    masters.cmd(0, &["FLUSHALL"]).expect("FLUSHALL 0");
    let full = guarded(
        masters.urls(),
        Duration::from_secs(5),
        Duration::from_millis(500),
    );
    let err = full.commission(0, false).await.expect_err("remembered");
    assert!(err.to_string().contains("remembers"), "{err}");
    let one = guarded(
        vec![masters.url(0)],
        Duration::from_secs(5),
        Duration::from_millis(500),
    );
    let err = one.commission(0, false).await.expect_err("nobody to ask");
    assert!(err.to_string().contains("no other member"), "{err}");
    let b = guarded(
        masters.urls(),
        Duration::from_secs(1),
        Duration::from_millis(200),
    );
    never_granted_while_held(&b, "r", &lock_a, 30).await;
}
