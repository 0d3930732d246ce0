//! Commissioning remembers (issue 19, finding 7), on real masters. `commission` counts a
//! master at once, so it must be refused for a master already in service — even after a
//! `FLUSHALL` has deleted its own marker, when on its own data it looks new. Every commission,
//! and every client that verifies a master, notes it (its `run_id`, which survives a flush, and its address)
//! on the other masters; a fresh client asked to commission the flushed master finds that
//! memory and refuses, naming it. `force` still commissions it, and a brand-new server at an
//! address nobody has seen is still commissioned. Before guard v3 the fresh client
//! commissioned the flushed master, and it counted at once. (The CLI's side is in
//! `cli/tests/probe.rs`.)

mod common;

use std::time::Duration;

use common::*;
use redquorum::{Error, Lock, Redlock, RetryPolicy, Vote};
use redquorum_testkit::LocalCluster;

const FLUSHED: usize = 3;

fn guarded(urls: Vec<String>) -> Redlock {
    builder(urls)
        .ttl(Duration::from_secs(5))
        .node_timeout(Duration::from_millis(300))
        .restart_guard(true)
        .retry(RetryPolicy::once())
        .build()
        .expect("valid")
}

async fn all_votes(lock: &Lock) {
    wait_until(PATIENCE, "every master's vote", || async {
        lock.stats().pending_count() == 0
    })
    .await;
}

/// Five commissioned masters (commissioning notes each on the others before it returns), a
/// client that has locked through every one of them (so it verified each, and noted it on
/// the others again), then master [`FLUSHED`] flushed behind everybody's back. Returns the
/// masters.
async fn flushed_in_service() -> LocalCluster {
    let masters = cluster(5);
    commission(&masters).await;
    let user = guarded(masters.urls());
    eventually(PATIENCE, "a lock counted by every master", || async {
        let lock = user.try_lock("in-service").await.ok()?;
        all_votes(&lock).await;
        let all = lock.stats().votes().iter().all(|v| v.vote == Vote::Granted);
        lock.release().await.expect("released");
        all.then_some(())
    })
    .await;
    masters.cmd(FLUSHED, &["FLUSHALL"]).expect("FLUSHALL");
    masters
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flushed_master_in_service_is_not_commissioned_as_new_without_force() {
    let masters = flushed_in_service().await;
    // A fresh client: it never saw the masters, and the flushed one looks new on its own data.
    let fresh = guarded(masters.urls());
    let err = fresh
        .commission(FLUSHED, false)
        .await
        .expect_err("a flushed master in service must not be commissioned as new");
    let Error::GuardRefused { node, reason } = &err else {
        panic!("refused by the guard, not failed: {err}");
    };
    assert_eq!(*node, FLUSHED);
    assert!(
        reason.contains("remembers this server") && reason.contains("in service"),
        "the refusal names the memory: {reason}"
    );
    assert!(
        reason.contains("reset") && reason.contains("force"),
        "and says what to do instead: {reason}"
    );
    // It stays out: a grant on it does not count for the fresh client.
    let lock = eventually(PATIENCE, "a lock on the others", || async {
        fresh.try_lock("after-flush").await.ok()
    })
    .await;
    all_votes(&lock).await;
    assert_ne!(
        lock.stats().votes()[FLUSHED].vote,
        Vote::Granted,
        "{:?}",
        lock.stats()
    );
    lock.release().await.expect("released");

    // An operator who knows better forces it.
    fresh
        .commission(FLUSHED, true)
        .await
        .expect("force commissions it");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_brand_new_server_at_a_new_address_is_commissioned_once_no_lock_can_be_held() {
    let masters = flushed_in_service().await;
    // Master 4 is replaced by a new server at an address no member has seen. While the ttl
    // records of the lock just taken live, a lock may be held: refused; once they ran out,
    // commissioned.
    let new = cluster(1);
    let admin = guarded(replaced(&masters, &new));
    let err = admin
        .commission(4, false)
        .await
        .expect_err("the lock's ttl records are still live");
    assert!(err.to_string().contains("locks may be held"), "{err}");
    eventually(PATIENCE, "the new server commissioned", || async {
        admin.commission(4, false).await.ok()
    })
    .await;
    // And it counts at once, for a client that never saw it.
    let client = guarded(replaced(&masters, &new));
    let lock = eventually(PATIENCE, "a lock", || async {
        client.try_lock("new-server").await.ok()
    })
    .await;
    all_votes(&lock).await;
    assert_eq!(
        lock.stats().votes()[4].vote,
        Vote::Granted,
        "{:?}",
        lock.stats()
    );
    lock.release().await.expect("released");
}

/// The masters' URLs with master 4's replaced by the new server's.
fn replaced(masters: &LocalCluster, new: &LocalCluster) -> Vec<String> {
    let mut urls = masters.urls();
    urls[4] = new.url(0);
    urls
}

/// Issue 19's property lists "a replacement commissioned while locks are held" among the
/// losses the guard must survive. A holds `r` on masters 0–2 (it cannot reach 3 and 4);
/// master 2 dies, and a brand-new server at a new address takes its place; the operator
/// tries to commission it. Nothing remembers that address, but masters 0 and 1 hold A's
/// 20 s ttl record: a lock may be held, so commissioning is refused, and B — configured with
/// the replacement — is not granted `r` while A holds it. (Guard v3's first design
/// commissioned it, and B was granted `r` on it and masters 3 and 4.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replacement_at_a_new_address_does_not_count_while_the_lost_masters_locks_may_be_held() {
    let masters = cluster(5);
    commission(&masters).await;
    let mut a_urls = masters.urls();
    a_urls[3] = "redis://127.0.0.1:1".to_owned();
    a_urls[4] = "redis://127.0.0.1:2".to_owned();
    let a = builder(a_urls)
        .ttl(Duration::from_secs(20))
        .node_timeout(Duration::from_millis(300))
        .restart_guard(true)
        .retry(RetryPolicy::once())
        .build()
        .expect("valid");
    let lock_a = eventually(PATIENCE, "A granted r on 0-2", || async {
        a.try_lock("r").await.ok()
    })
    .await;
    masters.kill(2).expect("master 2 dies");
    let new = cluster(1);
    let mut urls = masters.urls();
    urls[2] = new.url(0);
    let admin = guarded(urls.clone());
    let commissioned = admin.commission(2, false).await;
    let err = commissioned.as_ref().expect_err("a lock may be held");
    assert!(err.to_string().contains("locks may be held"), "{err}");
    let b = guarded(urls);
    if let Ok(lock_b) = b.try_lock("r").await {
        panic!(
            "B was granted r while A holds it for {:?} more (commission of the replacement: {commissioned:?}): {:?}",
            lock_a.remaining(),
            lock_b.stats()
        );
    }
}
