//! The calls people reach for first, on real masters: scoped locks with one `?` (and the
//! errors kept apart when wanted), the fencing token inside a scope, Redisson's
//! `tryLock(wait, lease)`, bringing your own `redis::Client`, and one client used from
//! one runtime after another (a static client shared by several `#[tokio::test]`s).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::*;
use redquorum::{Error, LockOptions, Redlock, RetryPolicy, ScopeOptions};
use redquorum_testkit::{Direction, Fault};

/// An application's own error type, which a redquorum error converts into.
#[derive(Debug)]
enum AppError {
    Lock(Error),
    OutOfStock,
}

impl From<Error> for AppError {
    fn from(e: Error) -> Self {
        Self::Lock(e)
    }
}

fn client_of(urls: Vec<String>) -> Redlock {
    builder(urls)
        .ttl(Duration::from_secs(5))
        .node_timeout(Duration::from_secs(1))
        .build()
        .expect("valid")
}

#[tokio::test]
async fn a_scoped_lock_needs_one_question_mark_and_keeps_errors_apart_on_request() {
    let masters = cluster(3);
    let redlock = client_of(masters.urls());
    // The body's own error type; `?` on the lease's checks converts redquorum's errors.
    let sell = |stock: u32| {
        let redlock = redlock.clone();
        async move {
            redlock
                .with_lock(["stock:4711"], |lease| async move {
                    lease.check()?;
                    stock.checked_sub(1).ok_or(AppError::OutOfStock)
                })
                .await
        }
    };
    assert!(matches!(sell(3).await, Ok(2)));
    assert!(matches!(sell(0).await, Err(AppError::OutOfStock)));
    // A lock error reaches the caller as the application's error.
    let held = redlock.lock("stock:4711").await.expect("free");
    match sell(3).await {
        Err(AppError::Lock(e)) => assert!(e.is_contended(), "{e}"),
        other => panic!("the lock is held: {other:?}"),
    }
    // `scoped` keeps the two apart: Err is the lock's, Ok carries the body's own result.
    let outcome = redlock
        .scoped(["stock:4711"], ScopeOptions::new(), |_lease| async {
            Err::<(), _>("never runs")
        })
        .await;
    assert!(outcome.is_err_and(|e| e.is_contended()));
    held.release().await.expect("released");
    let outcome = redlock
        .scoped(["stock:4711"], ScopeOptions::new(), |_lease| async {
            Err::<(), _>("the body's own failure")
        })
        .await;
    assert!(matches!(outcome, Ok(Err("the body's own failure"))));
}

#[tokio::test]
async fn the_fencing_token_is_available_inside_a_scope() {
    let masters = cluster(3);
    let redlock = client_of(masters.urls());
    let options = ScopeOptions::new().lock(LockOptions::new().fencing(true));
    let mut tokens = Vec::new();
    for _ in 0..3 {
        let token = redlock
            .scoped(["ledger"], options, |lease| async move {
                Ok::<_, Error>(lease.fencing_token())
            })
            .await
            .expect("locked")
            .expect("the body's own result");
        tokens.push(token.expect("fenced"));
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
}

#[tokio::test]
async fn wait_and_lease_in_one_call() {
    let masters = cluster(3);
    let redlock = client_of(masters.urls());
    // tryLock(wait, lease): the lease is the lock's ttl.
    let options = LockOptions::new()
        .wait(Duration::from_secs(2))
        .ttl(Duration::from_secs(30));
    let lock = redlock.lock_with(["invoice"], options).await.expect("free");
    assert_eq!(lock.ttl(), Duration::from_secs(30));
    // While it is held: a bounded wait gives up, saying so, after several attempts.
    let err = redlock
        .lock_with(
            ["invoice"],
            LockOptions::new().wait(Duration::from_millis(400)),
        )
        .await
        .expect_err("held");
    assert!(err.is_timeout() && err.is_contended(), "{err}");
    // No wait: one attempt.
    let err = redlock
        .lock_with(["invoice"], LockOptions::new().wait(Duration::ZERO))
        .await
        .expect_err("held");
    assert!(!err.is_timeout() && err.is_contended(), "{err}");
    assert_eq!(err.stats().map(|s| s.attempt()), Some(1));
    // A waiter gets the lock once the holder lets go.
    let waiter = {
        let redlock = redlock.clone();
        tokio::spawn(async move {
            redlock
                .lock_with(
                    ["invoice"],
                    LockOptions::new().wait(Duration::from_secs(20)),
                )
                .await
        })
    };
    lock.release().await.expect("released");
    let got = waiter.await.expect("no panic").expect("the waiter gets it");
    got.release().await.expect("released");
}

#[tokio::test]
async fn a_redis_client_of_your_own_is_a_master() {
    let masters = cluster(3);
    // A client built by the caller, here speaking RESP3, next to plain URLs.
    let own = redis::Client::open(format!("{}?protocol=resp3", masters.url(0))).expect("url");
    let redlock = builder(masters.urls()[1..].to_vec())
        .node_client(own)
        // No vote given up on a loaded machine: all three must be grants.
        .node_timeout(Duration::from_secs(2))
        .build()
        .expect("valid");
    assert_eq!(redlock.nodes(), 3);
    let lock = redlock.lock("own-client").await.expect("locked");
    wait_until(Duration::from_secs(5), "every vote", || async {
        lock.stats().pending_count() == 0
    })
    .await;
    assert_eq!(lock.stats().granted(), 3, "{:?}", lock.stats());
    lock.release().await.expect("released");
    // The same server twice is refused, whichever way it was given.
    let err = builder(masters.urls())
        .node_client(redis::Client::open(masters.url(0)).expect("url"))
        .build()
        .expect_err("a duplicate");
    assert!(
        matches!(err, redquorum::ConfigError::DuplicateNode { .. }),
        "{err}"
    );
}

#[tokio::test]
async fn loaded_scripts_spare_every_call_the_noscript_fallback() {
    // Control first: on fresh masters an extension's EVALSHA meets NOSCRIPT (and falls back
    // to the script's body), so the count below can see a missing script.
    let fresh = cluster(3);
    let redlock = client_of(fresh.urls());
    let lock = redlock.try_lock("stock:1").await.expect("free");
    lock.extend().await.expect("extended");
    lock.release().await.expect("released");
    wait_until(PATIENCE, "a NOSCRIPT on some master", || async {
        crate::common::inspect::noscript_everywhere(&fresh).await > 0
    })
    .await;

    // Every script a client sends as EVALSHA in one run: the restart guard's, a fenced
    // acquire's, an extension's.
    let masters = cluster(3);
    let redlock = builder(masters.urls())
        .ttl(Duration::from_secs(5))
        .node_timeout(Duration::from_secs(1))
        .restart_guard(true)
        .fencing(true)
        .build()
        .expect("valid");
    for (node, outcome) in redlock.load_scripts().await.into_iter().enumerate() {
        outcome.unwrap_or_else(|e| panic!("master {node}: {e}"));
    }
    commission(&masters).await;
    let lock = redlock.try_lock("stock:1").await.expect("free");
    assert!(lock.fencing_token().is_some());
    lock.extend().await.expect("extended");
    lock.release().await.expect("released");
    assert_eq!(
        crate::common::inspect::noscript_everywhere(&masters).await,
        0
    );
}

/// One client, its first runtime shut down (`shutdown_background`) in the middle of its
/// work, then used from a second runtime: locks there are granted, nothing hangs, and no
/// leftover of the first runtime (whose timers are gone) is polled from the second, where
/// it panicked inside the caller's `lock`. Forty-eight tasks lock and release through links
/// that hold every request and reply 50–100 ms, so at the shutdown acquires and releases
/// are in flight at every stage: queued in the outboxes, on the wire, answered late into
/// the collector.
fn switch_runtimes(first: tokio::runtime::Runtime, retry: RetryPolicy) {
    let masters = cluster(3);
    let links = masters.links().expect("proxies");
    links.set_all(
        Direction::Both,
        Fault::Delay {
            base: Duration::from_millis(50),
            jitter: Duration::from_millis(50),
        },
    );
    let redlock = builder(links.urls())
        .node_timeout(Duration::from_secs(1))
        .retry(retry)
        .build()
        .expect("valid");
    let decided = Arc::new(AtomicUsize::new(0));
    first.block_on(async {
        for task in 0..48 {
            let (redlock, decided) = (redlock.clone(), decided.clone());
            tokio::spawn(async move {
                for round in 0.. {
                    if let Ok(lock) = redlock.try_lock(&format!("first:{task}:{round}")).await {
                        let _ = lock.release().await;
                    }
                    decided.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        // Shut down while the work is at its thickest: after some rounds were decided, so
        // late answers and release tails are in the collector, with the others in flight.
        wait_until(PATIENCE, "rounds decided on the first runtime", || async {
            decided.load(Ordering::SeqCst) >= 48
        })
        .await;
    });
    first.shutdown_background();
    links.set_all(Direction::Both, Fault::Pass);
    let second = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("second runtime");
    second.block_on(async {
        for i in 0..3 {
            let lock = tokio::time::timeout(PATIENCE, redlock.lock(&format!("second:{i}")))
                .await
                .unwrap_or_else(|_| panic!("lock {i} on the second runtime hung"))
                .unwrap_or_else(|e| panic!("lock {i} on the second runtime: {e}"));
            lock.release().await.expect("released");
        }
    });
}

/// [`switch_runtimes`] from a single-threaded runtime (a `#[tokio::test]`'s): its shutdown
/// drops its tasks before it returns, so the very first attempt on the next runtime must
/// be granted.
#[test]
fn a_client_keeps_working_after_its_single_threaded_runtime_shuts_down() {
    let first = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("first runtime");
    switch_runtimes(first, RetryPolicy::once());
}

/// [`switch_runtimes`] from a multi-threaded runtime. Its workers drop its tasks after
/// `shutdown_background` has returned: a request made in that moment, on a connection whose
/// driver is about to go, may fail once (at once, never hanging), so a few attempts are
/// allowed; the next attempt runs on the second runtime alone.
#[test]
fn a_client_keeps_working_after_its_multi_threaded_runtime_shuts_down() {
    let first = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("first runtime");
    switch_runtimes(first, RetryPolicy::new().attempts(5));
}

/// A guarded client whose first runtime shuts down once `cut` holds — while its connections
/// or its restart guard's verifications are under way, every reply held 1 s — then locks
/// from a second runtime: the attempts and verifications the first runtime dropped are made
/// again there, instead of leaving the masters "connecting" or "being verified" for good.
fn cut_off(cut: impl Fn(&redquorum_testkit::LinkSet) -> bool) {
    let masters = cluster(3);
    let first = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("first runtime");
    first.block_on(commission(&masters));
    let links = masters.links().expect("proxies");
    links.set_all(Direction::ToClient, Fault::delay(Duration::from_secs(1)));
    links.links().iter().for_each(|link| link.set_tap(true));
    let redlock = builder(links.urls())
        .restart_guard(true)
        .node_timeout(Duration::from_secs(1))
        .build()
        .expect("valid");
    first.block_on(async {
        for task in 0..3 {
            let redlock = redlock.clone();
            tokio::spawn(async move { redlock.try_lock(&format!("first:{task}")).await });
        }
        wait_until(
            PATIENCE,
            "the work to be under way on every link",
            || async { cut(&links) },
        )
        .await;
    });
    first.shutdown_background();
    links.set_all(Direction::ToClient, Fault::Pass);
    let second = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("second runtime");
    second.block_on(async {
        let lock = tokio::time::timeout(PATIENCE, redlock.lock("second"))
            .await
            .expect("the lock on the second runtime hung")
            .unwrap_or_else(|e| panic!("the lock on the second runtime: {e}"));
        lock.release().await.expect("released");
    });
}

#[test]
fn connection_attempts_cut_off_by_a_runtime_shutdown_are_made_again() {
    // Accepted by every proxy, the handshake's replies held: every attempt is under way.
    cut_off(|links| {
        links
            .links()
            .iter()
            .all(|l| l.stats().connections_accepted >= 1)
    });
}

#[test]
fn verifications_cut_off_by_a_runtime_shutdown_are_made_again() {
    // The guard's first question (`INFO`) on every master, its answer held.
    cut_off(|links| {
        links
            .links()
            .iter()
            .all(|l| l.tap().iter().any(|e| e.text().contains("INFO")))
    });
}

/// The renewal task runs on the runtime of the keep-alive that started it. When that
/// runtime shuts down, the locks kept alive from another runtime go on being renewed there:
/// before, the task was gone and marked running, and no lock of the client was ever renewed
/// again.
#[test]
fn renewals_go_on_after_the_runtime_of_the_renewal_task_shuts_down() {
    let masters = cluster(3);
    let redlock = builder(masters.urls())
        .ttl(Duration::from_secs(3))
        .node_timeout(Duration::from_millis(200))
        .build()
        .expect("valid");
    let first = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("first runtime");
    let second = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("second runtime");
    // The renewal task starts on the first runtime, with the first keep-alive.
    let (ours, keep_ours) = first.block_on(async {
        let lock = redlock.lock("first").await.expect("granted");
        let keep = lock.keep_alive().expect("kept alive");
        (lock, keep)
    });
    let (theirs, keep_theirs) = second.block_on(async {
        let lock = redlock.lock("second").await.expect("granted");
        let keep = lock.keep_alive().expect("kept alive");
        (lock, keep)
    });
    first.shutdown_background();
    second.block_on(async {
        let before = theirs.deadline();
        wait_until(
            PATIENCE,
            "a renewal of the second runtime's lock",
            || async { theirs.deadline() > before },
        )
        .await;
        assert!(!theirs.is_expired(), "still held");
        drop((keep_ours, keep_theirs));
        theirs.release().await.expect("released");
        drop(ours);
    });
}
