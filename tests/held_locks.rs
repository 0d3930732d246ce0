//! Held locks on real masters: `with_lock` keeps a lock exclusive past its ttl, signals and
//! aborts on loss, and nothing outlives a release or a cancellation.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::*;
use rand::RngExt;
use redis::AsyncCommands;
use redquorum::{
    Error, KeepAliveOptions, LockOptions, LossPolicy, LossReason, Redlock, RetryPolicy,
    ScopeOptions,
};
use tokio::time::Instant;

fn client_with_ttl(urls: Vec<String>, ttl: Duration) -> Redlock {
    builder(urls)
        .ttl(ttl)
        .node_timeout(Duration::from_millis(100))
        .build()
        .expect("valid")
}

#[tokio::test]
async fn a_one_second_lock_held_for_five_seconds_stays_exclusive_and_is_gone_after() {
    let masters = cluster(5);
    let holder = client_with_ttl(masters.urls(), Duration::from_secs(1));
    let rival = client_with_ttl(masters.urls(), Duration::from_secs(1));
    let key = "redquorum:lock:long-job";
    let refusals = holder
        .scoped(["long-job"], ScopeOptions::new(), |lease| {
            let rival = rival.clone();
            async move {
                let started = Instant::now();
                let mut refusals = 0;
                while started.elapsed() < Duration::from_secs(5) {
                    match rival.try_lock("long-job").await {
                        Err(e) if e.is_contended() => refusals += 1,
                        other => panic!("the rival must be refused, got {other:?}"),
                    }
                    assert!(lease.check().is_ok(), "lost after {:?}", started.elapsed());
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                refusals
            }
        })
        .await
        .expect("held to the end");
    assert!(refusals >= 20, "only {refusals} attempts by the rival");
    // `with_lock` returns once a quorum has deleted the key; the rest follow at once.
    wait_until(
        Duration::from_millis(500),
        "the key to be gone everywhere once the body returned",
        || async { !exists_anywhere(&masters, &all(5), key).await },
    )
    .await;
    assert!(holder.renewal_stats().renewed >= 10);
}

#[tokio::test]
async fn killing_a_majority_signals_the_loss_no_later_than_the_deadline() {
    let masters = cluster(5);
    let redlock = client_with_ttl(masters.urls(), Duration::from_secs(1));
    let options = ScopeOptions::new().on_loss(LossPolicy::Signal);
    let masters = &masters;
    let (reason, overshoot) = redlock
        .scoped(["doomed"], options, |lease| async move {
            for i in [0, 1, 2] {
                masters.kill(i).expect("kill");
            }
            let reason = lease.lost().await;
            let overshoot = Instant::now().saturating_duration_since(lease.deadline());
            (reason, overshoot)
        })
        .await
        .expect("the signal policy returns the body's value");
    assert_eq!(reason, LossReason::Expired);
    // The signal is a timer at the deadline: allow only for scheduling latency.
    assert!(
        overshoot < Duration::from_millis(50),
        "signalled {overshoot:?} after the deadline"
    );
}

#[tokio::test]
async fn with_the_abort_policy_the_body_is_cancelled_and_the_loss_returned() {
    let masters = cluster(5);
    let redlock = client_with_ttl(masters.urls(), Duration::from_secs(1));
    let finished = AtomicBool::new(false);
    let started = Instant::now();
    let err = redlock
        .scoped(["aborted"], ScopeOptions::new(), |_lease| async {
            for i in [2, 3, 4] {
                masters.kill(i).expect("kill");
            }
            tokio::time::sleep(Duration::from_secs(30)).await;
            finished.store(true, Ordering::SeqCst);
        })
        .await
        .expect_err("the lock is lost");
    assert!(
        matches!(
            err,
            Error::Lost {
                reason: LossReason::Expired
            }
        ),
        "{err}"
    );
    assert!(!finished.load(Ordering::SeqCst));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "cancelled at the deadline"
    );
}

#[tokio::test]
async fn another_value_on_every_master_fires_the_loss_at_the_next_renewal() {
    let masters = cluster(5);
    let redlock = client_with_ttl(masters.urls(), Duration::from_secs(3));
    let key = "redquorum:lock:overwritten";
    let options = ScopeOptions::new().on_loss(LossPolicy::Signal);
    let masters_ref = &masters;
    let (reason, waited, before, after) = redlock
        .scoped(["overwritten"], options, |lease| async move {
            let masters = masters_ref;
            for i in 0..5 {
                let _: () = conn(&masters.url(i))
                    .await
                    .pset_ex(key, "intruder", 60_000)
                    .await
                    .expect("SET");
            }
            let before = pttl(masters, 0, key).await;
            let overwritten = Instant::now();
            let reason = lease.lost().await;
            let waited = overwritten.elapsed();
            (reason, waited, before, pttl(masters, 0, key).await)
        })
        .await
        .expect("signal policy");
    assert!(
        matches!(reason, LossReason::NotOurs { masters } if masters >= 3),
        "{reason:?}"
    );
    // Renewal happens every third of the ttl: the loss shows at the next one.
    assert!(
        waited <= Duration::from_millis(1100),
        "noticed after {waited:?}"
    );
    assert!(
        after <= before,
        "the intruder's ttl went from {before} to {after}"
    );
    assert_eq!(
        holders(&masters, &all(5), key, "intruder").await,
        5,
        "release left it alone"
    );
}

#[tokio::test]
async fn cancelled_scopes_and_dropped_keep_alives_leave_no_key_and_no_renewal() {
    let masters = cluster(5);
    let ttl = Duration::from_secs(1);
    let redlock = builder(masters.urls())
        .ttl(ttl)
        .node_timeout(Duration::from_millis(100))
        .retry(
            RetryPolicy::new()
                .attempts(10)
                .delay(Duration::from_millis(20), Duration::from_millis(20)),
        )
        .build()
        .expect("valid");

    // 400 kept-alive locks whose keep-alive handles will be dropped while the locks are
    // kept: their keys must run out, proving the renewals stopped.
    let mut kept = Vec::new();
    for i in 0..400 {
        let lock = redlock
            .lock_with([format!("kept-{i}")], LockOptions::new())
            .await
            .expect("free resource");
        let keep_alive = lock.keep_alive().expect("valid options");
        kept.push((lock, keep_alive));
    }
    // 400 scopes, each cancelled at a random point: acquiring, in the body, or releasing.
    let entered = Arc::new(AtomicUsize::new(0));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..400 {
        let redlock = redlock.clone();
        let entered = entered.clone();
        let task = tokio::spawn(async move {
            let _ = redlock
                .scoped(
                    [format!("scope-{i}")],
                    ScopeOptions::new(),
                    |_lease| async move {
                        entered.fetch_add(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_secs(60)).await;
                    },
                )
                .await;
        });
        tasks.push((task, rand::rng().random_range(0..1500u64)));
    }
    tasks.sort_by_key(|(_, at)| *at);
    for (task, at) in tasks {
        tokio::time::sleep_until(start + Duration::from_millis(at)).await;
        task.abort();
    }
    let entered = entered.load(Ordering::SeqCst);
    assert!(entered > 0, "some bodies were running when cancelled");
    let locks: Vec<_> = kept
        .into_iter()
        .map(|(lock, keep_alive)| {
            drop(keep_alive);
            lock
        })
        .collect();

    tokio::time::sleep(ttl * 3).await;
    for i in 0..5 {
        let keys: Vec<String> = conn(&masters.url(i))
            .await
            .keys("redquorum:lock:*")
            .await
            .expect("KEYS");
        assert!(
            keys.is_empty(),
            "master {i} still holds {} keys, e.g. {:?}",
            keys.len(),
            keys.first()
        );
    }
    wait_until(
        Duration::from_secs(2),
        "the renewal task to stop",
        || async {
            let stats = redlock.renewal_stats();
            stats.scheduled == 0 && !stats.task_running
        },
    )
    .await;
    assert!(locks.iter().all(|l| l.is_expired()));
    println!("{entered} of 400 scopes were in their body when cancelled");
}

#[tokio::test]
async fn a_release_during_an_extension_never_leaves_a_key_alive() {
    let masters = cluster(5);
    let redlock = builder(masters.urls())
        .ttl(Duration::from_secs(2))
        .node_timeout(Duration::from_millis(300))
        .build()
        .expect("valid");
    redlock.connect().await;
    let options = KeepAliveOptions::new().renew_after(Duration::from_millis(200));
    for round in 0..5 {
        let resource = format!("racing-{round}");
        let lock = redlock
            .lock_with([resource.as_str()], LockOptions::new())
            .await
            .expect("free");
        let _keep = lock.keep_alive_with(options).expect("valid options");
        let ticks = redlock.renewal_stats().ticks;
        // Two paused masters hold the extension in flight until their timeout.
        masters.pause(0).expect("SIGSTOP");
        masters.pause(1).expect("SIGSTOP");
        wait_until(
            Duration::from_secs(2),
            "an extension to be sent",
            || async { redlock.renewal_stats().ticks > ticks },
        )
        .await;
        let release = tokio::spawn(lock.release());
        tokio::time::sleep(Duration::from_millis(50)).await;
        masters.resume(0).expect("SIGCONT");
        masters.resume(1).expect("SIGCONT");
        release.await.expect("joined").expect("released in time");
        let key = format!("redquorum:lock:{resource}");
        wait_until(Duration::from_secs(2), "no key on any master", || async {
            !exists_anywhere(&masters, &all(5), &key).await
        })
        .await;
    }
}

#[tokio::test]
async fn lease_run_cuts_long_work_off_before_the_deadline() {
    let masters = cluster(3);
    let redlock = client_with_ttl(masters.urls(), Duration::from_secs(1));
    let lock = redlock.try_lock("cut-off").await.expect("free");
    let keep_alive = lock
        .keep_alive_with(KeepAliveOptions::new().max_extensions(1))
        .expect("valid");
    let lease = keep_alive.lease().with_margin(Duration::from_millis(200));
    let err = lease
        .run(tokio::time::sleep(Duration::from_secs(10)))
        .await
        .expect_err("cut off");
    assert!(matches!(err, Error::TooLate { .. }), "{err}");
    let left = lease.remaining();
    assert!(
        left > Duration::from_millis(100) && left <= Duration::from_millis(200),
        "{left:?}"
    );
    assert!(lease.check().is_err());
    assert!(
        lease.run(async { 7 }).await.is_err(),
        "no new work once too late"
    );
    drop(keep_alive);
    lock.release().await.expect("still valid: released");
}
