//! Lock kinds on real masters: read-write locks (with writer preference), counting
//! semaphores with expiring permits, reentrant owners; their refusals say who blocks, they
//! extend, renew and release like the mutex, and work with the restart guard and fencing.

mod common;

use std::time::Duration;

use common::*;
use redquorum::{Error, Holder, LockKind, LockOptions, Redlock, RetryPolicy};

fn client_of(urls: Vec<String>) -> Redlock {
    // Timings a loaded machine meets: a vote that comes in late is a failure, not a bug.
    builder(urls)
        .ttl(Duration::from_secs(5))
        .node_timeout(Duration::from_secs(1))
        .build()
        .expect("valid")
}

fn read() -> LockOptions {
    LockOptions::new().read()
}

fn write() -> LockOptions {
    LockOptions::new().write()
}

fn held_by(err: &Error) -> Option<Holder> {
    assert!(err.is_contended(), "{err}");
    err.held_by()
}

#[tokio::test]
async fn readers_share_and_a_writer_excludes_everyone() {
    let masters = cluster(5);
    let redlock = client_of(masters.urls());
    let r1 = redlock.lock_with(["doc"], read()).await.expect("a reader");
    let r2 = redlock
        .lock_with(["doc"], read())
        .await
        .expect("a second reader");
    assert_eq!(r1.kind(), LockKind::Read);
    let err = redlock
        .lock_with(["doc"], write())
        .await
        .expect_err("readers hold");
    assert_eq!(held_by(&err), Some(Holder::Readers));
    assert!(err.to_string().contains("readers"), "{err}");
    r1.extend().await.expect("a reader extends");
    r1.release().await.expect("released");
    r2.release().await.expect("released");
    let w = redlock
        .lock_with(["doc"], write())
        .await
        .expect("the writer");
    assert_eq!(w.kind(), LockKind::Write);
    for options in [read(), write()] {
        let err = redlock
            .lock_with(["doc"], options)
            .await
            .expect_err("the writer holds");
        assert_eq!(held_by(&err), Some(Holder::Writer));
    }
    w.extend().await.expect("the writer extends");
    w.release().await.expect("released");
    let r = redlock
        .lock_with(["doc"], read())
        .await
        .expect("readers again");
    r.release().await.expect("released");
    // Read-write locks and semaphores cover one resource.
    let err = redlock
        .lock_with(["a", "b"], read())
        .await
        .expect_err("two");
    assert!(err.is_config(), "{err}");
}

#[tokio::test]
async fn a_preferred_writer_keeps_new_readers_out_until_it_is_in() {
    let masters = cluster(3);
    let redlock = client_of(masters.urls());
    let reader = redlock.lock_with(["doc"], read()).await.expect("a reader");
    let waiting = {
        let redlock = redlock.clone();
        tokio::spawn(async move {
            let options = write()
                .prefer_writers(true)
                .wait(Duration::from_secs(20))
                .retry(RetryPolicy::new().delay(Duration::from_millis(20), Duration::ZERO));
            redlock.lock_with(["doc"], options).await
        })
    };
    // Once the writer has tried (and left its marker), new readers wait for it.
    let err = eventually(
        Duration::from_secs(10),
        "new readers to be held back",
        || async {
            match redlock.lock_with(["doc"], read()).await {
                Ok(extra) => {
                    let _ = extra.release().await;
                    None
                }
                Err(e) => (e.held_by() == Some(Holder::PendingWriter)).then_some(e),
            }
        },
    )
    .await;
    assert!(err.is_contended());
    reader.release().await.expect("released");
    let writer = waiting
        .await
        .expect("no panic")
        .expect("the writer gets in");
    writer.release().await.expect("released");
}

#[tokio::test]
async fn a_semaphore_admits_k_holders_and_an_abandoned_permit_expires() {
    let masters = cluster(5);
    let redlock = builder(masters.urls())
        .ttl(Duration::from_millis(1500))
        .node_timeout(Duration::from_millis(100))
        .build()
        .expect("valid");
    assert_eq!(
        redlock.permit_quorum(3),
        4,
        "k = 3 on five masters needs four"
    );
    assert_eq!(redlock.permit_quorum(1), 3);
    assert_eq!(redlock.permit_quorum(4), 5);
    let permits = LockOptions::new().permits(3);
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(
            redlock
                .lock_with(["pool"], permits)
                .await
                .expect("a permit"),
        );
    }
    let err = redlock
        .lock_with(["pool"], permits)
        .await
        .expect_err("three are out");
    assert_eq!(held_by(&err), Some(Holder::PermitsFull));
    let err = redlock
        .lock_with(["pool"], LockOptions::new().permits(4))
        .await
        .expect_err("another count");
    assert_eq!(held_by(&err), Some(Holder::OtherPermitCount { k: 3 }));
    // A holder that vanishes without releasing: its permit comes back after its ttl, while
    // the two others, kept alive, stay out.
    std::mem::forget(held.pop().expect("three"));
    let keeps: Vec<_> = held
        .iter()
        .map(|p| p.keep_alive().expect("kept alive"))
        .collect();
    let again = eventually(
        Duration::from_secs(10),
        "the abandoned permit to expire",
        || async { redlock.lock_with(["pool"], permits).await.ok() },
    )
    .await;
    again.extend().await.expect("a permit extends");
    let err = redlock
        .lock_with(["pool"], permits)
        .await
        .expect_err("three again");
    assert_eq!(held_by(&err), Some(Holder::PermitsFull));
    again.release().await.expect("released");
    drop(keeps);
    for permit in held {
        permit.release().await.expect("released");
    }
    let err = redlock
        .lock_with(["pool"], LockOptions::new().permits(0))
        .await
        .expect_err("zero permits");
    assert!(err.is_config(), "{err}");
}

#[tokio::test]
async fn kinds_work_with_the_guard_fencing_and_keep_alive() {
    let masters = cluster(3);
    commission(&masters).await;
    let redlock = builder(masters.urls())
        .ttl(Duration::from_millis(900))
        .node_timeout(Duration::from_millis(100))
        .restart_guard(true)
        .fencing(true)
        .build()
        .expect("valid");
    let mut last = 0;
    for options in [write(), LockOptions::new().permits(2), write()] {
        let lock = redlock
            .lock_with(["fenced"], options)
            .await
            .expect("granted");
        let token = lock
            .fencing_token()
            .expect("writers and permits are fenced");
        assert!(token > last, "tokens increase: {token} after {last}");
        last = token;
        lock.release().await.expect("released");
    }
    let reader = redlock
        .lock_with(["fenced"], read())
        .await
        .expect("granted");
    assert_eq!(reader.fencing_token(), None, "readers are not fenced");
    // Kept alive past several ttls, the read hold keeps writers out.
    let keep = reader.keep_alive().expect("kept alive");
    wait_until(Duration::from_secs(20), "three renewals", || async {
        redlock.renewal_stats().renewed >= 3
    })
    .await;
    let err = redlock
        .lock_with(["fenced"], write())
        .await
        .expect_err("still read");
    assert_eq!(held_by(&err), Some(Holder::Readers));
    drop(keep);
    reader.release().await.expect("released in time");
}

#[tokio::test]
async fn an_owner_nests_its_holds_and_excludes_other_owners() {
    let masters = cluster(3);
    let redlock = client_of(masters.urls());
    let owner = redlock.owner();
    let other = redlock.owner();
    let outer = owner.lock("ledger").await.expect("acquired");
    // From another task of the same owner: nested at once.
    let inner = {
        let owner = owner.clone();
        tokio::spawn(async move { owner.lock("ledger").await })
            .await
            .expect("no panic")
            .expect("nested")
    };
    assert_eq!(inner.depth(), 2);
    let err = other.lock("ledger").await.expect_err("another owner");
    assert!(err.is_contended(), "{err}");
    inner.release().await.expect("inner released");
    let err = other
        .lock("ledger")
        .await
        .expect_err("the outer hold remains");
    assert!(err.is_contended(), "{err}");
    // A scoped nested hold from the owner.
    let depth = owner
        .with_lock(["ledger"], |lease| async move {
            lease.check()?;
            Ok::<_, Error>(lease.remaining() > Duration::ZERO)
        })
        .await
        .expect("nested scope");
    assert!(depth);
    outer.release().await.expect("released on the quorum");
    let theirs = eventually(Duration::from_secs(5), "the other owner", || async {
        other.lock("ledger").await.ok()
    })
    .await;
    // A dropped hold ends too (from a background task).
    drop(theirs);
    let again = eventually(
        Duration::from_secs(5),
        "the dropped hold to end",
        || async { owner.lock("ledger").await.ok() },
    )
    .await;
    assert_eq!(again.depth(), 1);
    again.release().await.expect("released");
}

/// An owner's hold dropped on a thread with no tokio runtime (a `Drop` in a plain thread, a
/// destructor at the end of `main`) still ends: the owner's count goes down, its keep-alive
/// stops and the keys are released, so another client gets the resource at once — not
/// never, as when the drop found no runtime to run on and the keep-alive renewed forever.
#[tokio::test]
async fn an_owned_lock_dropped_outside_a_runtime_ends_its_hold() {
    let masters = cluster(3);
    // A ttl longer than the wait below: the other client can only get the resource in time
    // if the keys were released, not if they merely ran out.
    let ttl = PATIENCE + Duration::from_secs(10);
    let ours = builder(masters.urls()).ttl(ttl).build().expect("valid");
    let theirs = builder(masters.urls()).ttl(ttl).build().expect("valid");
    let owner = ours.owner();
    let hold = owner.lock("ledger").await.expect("acquired");
    assert_eq!(hold.depth(), 1);
    std::thread::spawn(move || drop(hold))
        .join()
        .expect("the drop does not panic");
    let taken = eventually(PATIENCE, "another client to take the resource", || async {
        theirs.lock("ledger").await.ok()
    })
    .await;
    taken.release().await.expect("released");
    // The owner's count went back to zero: its next hold is a new outermost one.
    let again = owner.lock("ledger").await.expect("acquired again");
    assert_eq!(again.depth(), 1);
    again.release().await.expect("released");
}
