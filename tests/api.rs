//! The calls people reach for first, on real masters: scoped locks with one `?` (and the
//! errors kept apart when wanted), the fencing token inside a scope, Redisson's
//! `tryLock(wait, lease)`, and bringing your own `redis::Client`.

mod common;

use std::time::Duration;

use common::*;
use redquorum::{Error, LockOptions, Redlock, ScopeOptions};

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
            .with_lock_opts(["ledger"], options, |lease| async move {
                Ok::<_, Error>(lease.fencing_token())
            })
            .await
            .expect("locked");
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
        common::inspect::noscript_everywhere(&fresh).await > 0
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
    assert_eq!(common::inspect::noscript_everywhere(&masters).await, 0);
}
