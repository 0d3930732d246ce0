//! Waiting for a busy lock (DESIGN §2.9): woken by the release's announcement, subscribed
//! before the attempt whose refusal makes the caller wait; woken at the holder's expiry when
//! nobody releases; many waiters all served; polling where `SUBSCRIBE` is refused.
//!
//! Every test makes polling impossible to pass for waking: the retry policy's delay is a
//! minute, so a waiter that is served within [`PATIENCE`] was woken by something else — and
//! the attempt count says by what.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redquorum::{LockOptions, Redlock, RetryPolicy};
use redquorum_testkit::{Direction, Fault};

use crate::common::{PATIENCE, builder, cluster, conn, wait_until};

/// Waiting options whose poll would take a minute: only a wake-up serves within
/// [`PATIENCE`].
fn waiting() -> LockOptions {
    LockOptions::new()
        .wait(PATIENCE)
        .ttl(Duration::from_secs(60))
        .retry(RetryPolicy::default().delay(Duration::from_secs(60), Duration::ZERO))
}

fn client(urls: Vec<String>) -> Redlock {
    builder(urls)
        .ttl(Duration::from_secs(60))
        .build()
        .expect("valid config")
}

/// The release lands between the waiting attempt's refusal (on the masters) and the
/// waiter reading it: the proxies hold every reply to the waiter's client for 300 ms, and
/// the holder releases as soon as the waiting attempt (the one with `PTTL`) was written to
/// every master. A waiter that subscribed only after reading the refusal would miss the
/// announcement and sleep for the holder's 60 s ttl; ours subscribed (confirmed) before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_between_refusal_and_wait_is_heard() {
    let cluster = cluster(3);
    let links = cluster.links().expect("proxies");
    let holder = client(cluster.urls());
    // Room for the 300 ms the proxies add to every reply (the subscription connection's
    // handshake takes two of them).
    let waiter = builder(links.urls())
        .ttl(Duration::from_secs(60))
        .node_timeout(Duration::from_secs(2))
        .connect_timeout(Duration::from_secs(5))
        .build()
        .expect("valid config");
    assert!(waiter.connect().await.iter().all(Result::is_ok));
    let held = holder.try_lock("handover").await.expect("holder");
    for link in links.links() {
        link.set_tap(true);
    }
    links.set_all(
        Direction::ToClient,
        Fault::delay(Duration::from_millis(300)),
    );
    let waiting_call = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.lock_with(["handover"], waiting()).await }
    });
    // The waiting attempt is the second `SET` on each link (the first attempt's is the
    // first): once every master has it, its refusal is on the way back, held by the proxies.
    wait_until(
        PATIENCE,
        "the waiting attempt reached every master",
        || async {
            links.links().iter().all(|l| {
                l.tap()
                    .iter()
                    .filter(|e| e.text().contains("$3\r\nSET\r\n"))
                    .count()
                    >= 2
            })
        },
    )
    .await;

    assert!(!waiting_call.is_finished());
    held.release().await.expect("release");
    let lock = tokio::time::timeout(PATIENCE, waiting_call)
        .await
        .expect("the waiter was woken by the release")
        .expect("task")
        .expect("lock");
    // Plain attempt, waiting attempt (refused), and the one after the announcement.
    assert_eq!(lock.stats().attempt(), 3, "{:?}", lock.stats());
    lock.release().await.expect("release");
}

/// A holder that never releases (its key written behind the library's back, with a
/// 1.5 s expiry): the waiter sleeps exactly until the key has run out — one attempt after
/// the waiting one, never a poll.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_wakes_at_the_holders_expiry() {
    let cluster = cluster(3);
    let waiter = client(cluster.urls());
    for url in cluster.urls() {
        let mut c = conn(&url).await;
        let _: () = redis::cmd("SET")
            .arg("redquorum:lock:expiring")
            .arg("someone-else")
            .arg("PX")
            .arg(1500)
            .query_async(&mut c)
            .await
            .expect("set");
    }
    let lock = waiter
        .lock_with(["expiring"], waiting())
        .await
        .expect("served at the holder's expiry");
    assert_eq!(lock.stats().attempt(), 3, "{:?}", lock.stats());
    // The order of events: the foreign key was gone when the waiter got the lock.
    for url in cluster.urls() {
        let mut c = conn(&url).await;
        let value: Option<String> = redis::cmd("GET")
            .arg("redquorum:lock:expiring")
            .query_async(&mut c)
            .await
            .expect("get");
        assert_ne!(value.as_deref(), Some("someone-else"));
    }
    lock.release().await.expect("release");
}

/// Sixteen waiters on one resource, each holding it briefly: every one is served, none
/// overlaps another, and nobody polls (a poll would take a minute).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_waiters_are_all_served() {
    let cluster = cluster(5);
    let redlock = client(cluster.urls());
    let inside = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (redlock, inside) = (redlock.clone(), inside.clone());
            tokio::spawn(async move {
                let asked = tokio::time::Instant::now();
                let lock = redlock.lock_with(["sixteen"], waiting()).await?;
                let waited = asked.elapsed();
                assert!(!inside.swap(true, Ordering::SeqCst), "two holders at once");
                tokio::time::sleep(Duration::from_millis(2)).await;
                inside.store(false, Ordering::SeqCst);
                lock.release().await?;
                Ok::<_, redquorum::Error>(waited)
            })
        })
        .collect();
    let mut max = Duration::ZERO;
    for task in tasks {
        let waited = task.await.expect("task").expect("served");
        max = max.max(waited);
    }
    println!("16 waiters served; max wait {max:?}");
}

/// A master whose ACL refuses pub/sub: its waiters fall back to polling (short delays
/// here), are served, and the client says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_where_subscribe_is_refused() {
    let cluster = cluster(3);
    let mut urls = Vec::new();
    for (i, url) in cluster.urls().iter().enumerate() {
        let mut c = conn(url).await;
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg("nopubsub")
            .arg("on")
            .arg(">secret")
            .arg("~*")
            .arg("resetchannels")
            .arg("+@all")
            .arg("-@pubsub")
            .query_async(&mut c)
            .await
            .expect("acl");
        urls.push(format!(
            "redis://nopubsub:secret@127.0.0.1:{}",
            cluster.port(i)
        ));
    }
    let holder = client(cluster.urls());
    let waiter = client(urls);
    let held = holder.try_lock("polled").await.expect("holder");
    let polling = LockOptions::new()
        .wait(PATIENCE)
        .retry(RetryPolicy::default().delay(Duration::from_millis(20), Duration::ZERO));
    let call = tokio::spawn({
        let waiter = waiter.clone();
        async move { waiter.lock_with(["polled"], polling).await }
    });
    wait_until(PATIENCE, "the masters' refusals were noted", || async {
        waiter.waiting_notes().len() == 3
    })
    .await;
    held.release().await.expect("release");
    let lock = call.await.expect("task").expect("served by polling");
    println!("polling fallback: {:?}", waiter.waiting_notes());
    lock.release().await.expect("release");
}

/// The other kinds too: a holder that crashed (its hold of 1.5 s never released) is waited
/// out exactly — each refusal says when its blocker runs out — by a reader behind a writer,
/// a writer behind a reader, and a permit behind a full semaphore: served on the attempt
/// after the waiting one, never by a poll (a minute) nor after the waiter's own ttl (a
/// minute too).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_wakes_at_a_crashed_holders_expiry() {
    let cluster = cluster(3);
    let holder = client(cluster.urls());
    let waiter = client(cluster.urls());
    let crashed = |options: LockOptions| options.ttl(Duration::from_millis(1500));
    let cases = [
        (
            "rw-behind-writer",
            LockOptions::new().write(),
            waiting().read(),
        ),
        (
            "rw-behind-reader",
            LockOptions::new().read(),
            waiting().write(),
        ),
        (
            "permit-behind-full",
            LockOptions::new().permits(1),
            waiting().permits(1),
        ),
    ];
    for (resource, held, wanted) in cases {
        let lock = holder
            .lock_with([resource], crashed(held))
            .await
            .expect("free");
        // Crashed: never released, never renewed.
        std::mem::forget(lock);
        let lock = waiter
            .lock_with([resource], wanted)
            .await
            .unwrap_or_else(|e| panic!("{resource}: served at the holder's expiry: {e}"));
        assert_eq!(lock.stats().attempt(), 3, "{resource}: {:?}", lock.stats());
        lock.release().await.expect("release");
    }
}

/// How many subscribers the master at `url` counts on `channel`.
async fn subscribers(url: &str, channel: &str) -> i64 {
    let mut c = conn(url).await;
    let reply: (String, i64) = redis::cmd("PUBSUB")
        .arg("NUMSUB")
        .arg(channel)
        .query_async(&mut c)
        .await
        .expect("PUBSUB NUMSUB");
    reply.1
}

/// The subscriptions last only while someone waits: two waiters of one client wait
/// subscribed on every master, and once both are served the last one's leaving
/// unsubscribes the channel everywhere (with the unsubscribe left out, the last wait below
/// times out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_waiter_to_leave_unsubscribes() {
    let cluster = cluster(3);
    let holder = client(cluster.urls());
    let waiters = client(cluster.urls());
    let channel = "redquorum:lock:subscribed";
    let held = holder.try_lock("subscribed").await.expect("free");
    let calls: Vec<_> = (0..2)
        .map(|_| {
            let waiters = waiters.clone();
            tokio::spawn(async move {
                let lock = waiters.lock_with(["subscribed"], waiting()).await?;
                lock.release().await?;
                Ok::<_, redquorum::Error>(())
            })
        })
        .collect();
    wait_until(
        PATIENCE,
        "the waiters subscribed on every master",
        || async {
            let mut all = true;
            for url in cluster.urls() {
                all &= subscribers(&url, channel).await == 1;
            }
            all && waiters.waiting_notes().is_empty()
        },
    )
    .await;
    held.release().await.expect("release");
    for call in calls {
        call.await.expect("task").expect("served");
    }
    wait_until(PATIENCE, "no subscriber left on any master", || async {
        let mut none = true;
        for url in cluster.urls() {
            none &= subscribers(&url, channel).await == 0;
        }
        none
    })
    .await;
}
