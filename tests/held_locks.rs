//! Held locks on real masters: `with_lock` keeps a lock exclusive past its ttl, signals and
//! aborts on loss, and nothing outlives a release or a cancellation.
//!
//! Where a test must show that something happens *at* a deadline (a loss signalled, a body
//! cancelled, work cut off), it pauses the runtime's clock (`tokio::time::pause`) once the
//! round trips it needs are done: the timers then fire exactly when due, however loaded the
//! machine, and the test can compare instants instead of measuring latencies.

mod common;

use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::inspect::*;
use common::*;
use rand::RngExt;
use redis::AsyncCommands;
use redquorum::{
    Error, KeepAliveOptions, Lease, LockOptions, LossPolicy, LossReason, Redlock, RetryPolicy,
    ScopeOptions,
};
use tokio::time::Instant;

/// Tokio's timers work in whole milliseconds (a deadline is rounded up to the next tick,
/// and a paused clock advances from the current tick): with the clock paused, a timer set
/// for an instant fires less than this much after it, however loaded the machine.
const TIMER_RESOLUTION: Duration = Duration::from_millis(2);

/// A client with `ttl` and a node timeout of a tenth of it. Acquisitions retry a few times:
/// a round that a stalled machine lets time out is no part of these tests.
fn client_with_ttl(urls: Vec<String>, ttl: Duration) -> Redlock {
    builder(urls)
        .ttl(ttl)
        .node_timeout(ttl / 10)
        .retry(
            RetryPolicy::new()
                .attempts(10)
                .delay(Duration::from_millis(20), Duration::from_millis(20)),
        )
        .build()
        .expect("valid")
}

/// The holder keeps a two-second lock for five seconds and until the rival has been refused
/// twenty times and the lock renewed six times, however slowly those come (within a
/// minute). (A ttl of two seconds rather than one leaves renewals room to ride out a
/// stalled machine: a holder frozen for longer than its ttl loses the lock, rightly.)
#[tokio::test]
async fn a_two_second_lock_held_for_five_seconds_stays_exclusive_and_is_gone_after() {
    let masters = cluster(5);
    let ttl = Duration::from_secs(2);
    // The holder goes through proxies, whose taps show its release reaching every master.
    let links = masters.links().expect("links");
    let holder = client_with_ttl(links.urls(), ttl);
    let rival = client_with_ttl(masters.urls(), ttl);
    let key = "redquorum:lock:long-job";
    let (refusals, written) = holder
        .scoped(["long-job"], ScopeOptions::new(), |lease| {
            let (rival, holder, links) = (rival.clone(), &holder, &links);
            async move {
                let started = Instant::now();
                let mut refusals = 0;
                while started.elapsed() < Duration::from_secs(5)
                    || refusals < 20
                    || holder.renewal_stats().renewed < 6
                {
                    assert!(
                        started.elapsed() < Duration::from_secs(60),
                        "in a minute: {refusals} refusals, {:?}",
                        holder.renewal_stats()
                    );
                    match rival.try_lock("long-job").await {
                        Err(e) if e.is_contended() => refusals += 1,
                        // A round cut short by node timeouts on a stalled machine is refused
                        // too, but shows nothing about the holder's keys.
                        Err(e) if e.is_no_quorum() => {}
                        other => panic!("the rival must be refused, got {other:?}"),
                    }
                    assert!(lease.check().is_ok(), "lost after {:?}", started.elapsed());
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                (refusals, start_tap(links))
            }
        })
        .await
        .expect("held to the end");
    assert!(refusals >= 20, "only {refusals} attempts by the rival");
    // `with_lock` returns once a quorum has deleted the key; the rest follow at once. Once
    // the release has reached and been run by every master, no key may be left (a key that
    // merely ran out would not wait for that).
    wait_tapped(
        &masters,
        &links,
        &written,
        "the release to reach every master",
        |link| count_releases(link) >= 1,
    )
    .await;
    assert!(
        !exists_anywhere(&masters, &all(5), key).await,
        "the key outlived the release"
    );
    assert!(holder.renewal_stats().renewed >= 6);
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
            // Renewals can only fail now. With the clock paused, the signal's timer fires
            // exactly at the deadline unless something holds it back.
            tokio::time::pause();
            let reason = lease.lost().await;
            let overshoot = Instant::now().saturating_duration_since(lease.deadline());
            tokio::time::resume();
            (reason, overshoot)
        })
        .await
        .expect("the signal policy returns the body's value");
    assert_eq!(reason, LossReason::Expired);
    // The signal is a timer at the deadline.
    assert!(
        overshoot <= TIMER_RESOLUTION,
        "signalled {overshoot:?} after the deadline"
    );
}

/// Records, when the body is dropped, the instant and the lease's deadline; and lets the
/// clock run again.
struct CancelWitness<'a> {
    lease: Lease,
    at: &'a Cell<Option<(Instant, Instant)>>,
}

impl Drop for CancelWitness<'_> {
    fn drop(&mut self) {
        self.at.set(Some((Instant::now(), self.lease.deadline())));
        tokio::time::resume();
    }
}

#[tokio::test]
async fn with_the_abort_policy_the_body_is_cancelled_and_the_loss_returned() {
    let masters = cluster(5);
    let redlock = client_with_ttl(masters.urls(), Duration::from_secs(1));
    let finished = AtomicBool::new(false);
    let cancelled = Cell::new(None);
    let err = redlock
        .scoped(["aborted"], ScopeOptions::new(), |lease| async {
            for i in [2, 3, 4] {
                masters.kill(i).expect("kill");
            }
            // With the clock paused, the body's sleep and the deadline are both timers on
            // the same clock: whichever is due first fires first.
            tokio::time::pause();
            let _witness = CancelWitness {
                lease,
                at: &cancelled,
            };
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
    let (at, deadline) = cancelled.get().expect("the body was dropped");
    assert!(
        at <= deadline + TIMER_RESOLUTION,
        "cancelled {:?} after the deadline",
        at - deadline
    );
}

#[tokio::test]
async fn another_value_on_every_master_fires_the_loss_at_the_next_renewal() {
    let masters = cluster(5);
    let redlock = client_with_ttl(masters.urls(), Duration::from_secs(3));
    let key = "redquorum:lock:overwritten";
    let options = ScopeOptions::new().on_loss(LossPolicy::Signal);
    let masters_ref = &masters;
    let redlock_ref = &redlock;
    let (reason, ticks_before, ticks_at_loss, before, after) = redlock
        .scoped(["overwritten"], options, |lease| async move {
            let masters = masters_ref;
            for i in 0..5 {
                let _: () = conn(&masters.url(i))
                    .await
                    .pset_ex(key, "intruder", 60_000)
                    .await
                    .expect("SET");
            }
            let before = pttl_of(masters, 0, key).await;
            // Renewal ticks sent so far: at most one of them (in flight during the
            // overwrite) can have missed the intruder.
            let ticks_before = redlock_ref.renewal_stats().ticks;
            let reason = lease.lost().await;
            let ticks_at_loss = redlock_ref.renewal_stats().ticks;
            (
                reason,
                ticks_before,
                ticks_at_loss,
                before,
                pttl_of(masters, 0, key).await,
            )
        })
        .await
        .expect("signal policy");
    assert!(
        matches!(reason, LossReason::NotOurs { masters } if masters >= 3),
        "{reason:?}"
    );
    // The loss shows at the next renewal: the first one sent after the overwrite (or the
    // one in flight during it), not a later one.
    assert!(
        ticks_at_loss <= ticks_before + 1,
        "noticed at renewal tick {ticks_at_loss}, the overwrite came after tick {ticks_before}"
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
    // The cancellations are spread over 1.5 s from the moment the first body runs, so that
    // some bodies are surely running when cancelled, however slowly the scopes start.
    wait_until(PATIENCE, "a first body to run", || async {
        entered.load(Ordering::SeqCst) > 0
    })
    .await;
    let start = Instant::now();
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

    // Every key runs out (or was released): nothing renews them any more. Were a renewal
    // still running, its key would stay and this wait would fail.
    wait_until(PATIENCE, "every lock key to be gone", || async {
        for i in 0..5 {
            if !lock_keys(&masters, i).await.is_empty() {
                return false;
            }
        }
        true
    })
    .await;
    wait_until(PATIENCE, "the renewal task to stop", || async {
        let stats = redlock.renewal_stats();
        stats.scheduled == 0 && !stats.task_running
    })
    .await;
    assert!(locks.iter().all(|l| l.is_expired()));
    println!("{entered} of 400 scopes were in their body when cancelled");
}

/// A release called while an extension of the lock is in flight waits for it, then
/// deletes the keys. Two paused masters hold the extension in flight (their node timeout
/// is far away) until the test resumes them; the test checks that the release really is
/// parked behind the extension — its first poll returned pending while the extension's
/// tick was still open — before resuming, and counts only such rounds.
#[tokio::test]
async fn a_release_during_an_extension_never_leaves_a_key_alive() {
    const RACED: usize = 5;
    let masters = cluster(5);
    let redlock = builder(masters.urls())
        .ttl(Duration::from_secs(5))
        .node_timeout(Duration::from_secs(1))
        .build()
        .expect("valid");
    redlock.connect().await;
    let options = KeepAliveOptions::new().renew_after(Duration::from_millis(200));
    let (mut raced, mut round) = (0, 0);
    while raced < RACED {
        assert!(
            round < 4 * RACED,
            "inconclusive: in {round} rounds only {raced} releases were parked behind an \
             extension in flight, {RACED} needed"
        );
        round += 1;
        let resource = format!("racing-{round}");
        let lock = redlock
            .lock_with([resource.as_str()], LockOptions::new())
            .await
            .expect("free");
        let _keep = lock.keep_alive_with(options).expect("valid options");
        let before = redlock.renewal_stats();
        // Two paused masters hold the next extension in flight.
        masters.pause(0).expect("SIGSTOP");
        masters.pause(1).expect("SIGSTOP");
        wait_until(PATIENCE, "an extension to be sent", || async {
            redlock.renewal_stats().ticks > before.ticks
        })
        .await;
        let mut release = std::pin::pin!(lock.release());
        let pending = futures::poll!(release.as_mut()).is_pending();
        // A batch counts its locks out of `extending` only once every master has answered
        // or timed out, just as it lets go of their extension gates: still counted after
        // the release's first poll, the extension was in flight then, so that poll stopped
        // at the gate. (The batch may well be decided already: three masters answered.)
        let now = redlock.renewal_stats();
        let parked = pending && now.ticks == before.ticks + 1 && now.extending == 1;
        masters.resume(0).expect("SIGCONT");
        masters.resume(1).expect("SIGCONT");
        release.await.expect("released in time");
        let key = lock_key(&resource);
        wait_until(PATIENCE, "no key on any master", || async {
            !exists_anywhere(&masters, &all(5), &key).await
        })
        .await;
        raced += usize::from(parked);
    }
    assert_eq!(
        expired_everywhere(&masters).await,
        0,
        "a key ran out by its ttl instead of being released"
    );
}

#[tokio::test]
async fn lease_run_cuts_long_work_off_before_the_deadline() {
    let masters = cluster(3);
    let margin = Duration::from_millis(500);
    let redlock = client_with_ttl(masters.urls(), Duration::from_secs(3));
    let lock = redlock.lock("cut-off").await.expect("free");
    let keep_alive = lock
        .keep_alive_with(KeepAliveOptions::new().max_extensions(1))
        .expect("valid");
    // The one extension is a real round trip; then the clock is paused, so that the work
    // is cut off when the margin is reached, not when a loaded machine gets round to it.
    wait_until(PATIENCE, "the one extension", || async {
        let stats = redlock.renewal_stats();
        stats.renewed == 1 && stats.scheduled == 0
    })
    .await;
    tokio::time::pause();
    let lease = keep_alive.lease().with_margin(margin);
    let err = lease
        .run(tokio::time::sleep(Duration::from_secs(10)))
        .await
        .expect_err("cut off");
    assert!(matches!(err, Error::TooLate { .. }), "{err}");
    let left = lease.remaining();
    assert!(left > margin / 2 && left <= margin, "{left:?}");
    assert!(lease.check().is_err());
    assert!(
        lease.run(async { 7 }).await.is_err(),
        "no new work once too late"
    );
    tokio::time::resume();
    drop(keep_alive);
    lock.release().await.expect("still valid: released");
}
