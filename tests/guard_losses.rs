//! The restart guard when more than one master loses its data (issue 19, finding 1), on five
//! real masters with per-client partitions: a reader that lost its own records must not be
//! believed when it says "no ttl recorded".
//!
//! A (ttl 20 s) cannot reach masters 3 and 4 and holds `r` on 0, 1, 2. Masters 0 and 1 are
//! flushed. B (ttl 1 s) cannot reach master 2: to verify master 0 it can read the ttl records
//! of 1 (flushed: truthfully none), 3 and 4 (never had A's record). Guard v2 believed those
//! three and kept master 0 out for B's own 1 s; B was then granted `r` on 0, 1, 3 while A
//! held it. Guard v3 believes only readers that cannot have lost the records: master 1 is
//! not one, so B has two of the three it needs and keeps 0 and 1 out. A client that reaches
//! master 2 reads A's record there and quarantines master 0 for 20 s.

mod common;

use std::time::Duration;

use common::inspect::lock_key;
#[cfg(feature = "internals")]
use common::inspect::value_of;
use common::*;
use redquorum::{GuardStatus, Lock, Redlock, RetryPolicy};
use redquorum_testkit::{Direction, Fault, LinkSet, LocalCluster};

const LONG: Duration = Duration::from_secs(20);
const SHORT: Duration = Duration::from_secs(1);

/// Links to every master with the ones in `cut` blackholed.
fn links_without(masters: &LocalCluster, cut: &[usize]) -> LinkSet {
    let links = masters.links().expect("proxies");
    for &i in cut {
        links.link(i).set(Direction::Both, Fault::Blackhole);
    }
    links
}

fn guarded(urls: Vec<String>, ttl: Duration, v2_readers: bool) -> Redlock {
    let builder = builder(urls)
        .ttl(ttl)
        .node_timeout(Duration::from_millis(200))
        .restart_guard(true)
        .retry(RetryPolicy::once());
    #[cfg(feature = "internals")]
    let builder = if v2_readers {
        builder.guard_trusts_every_reader()
    } else {
        builder
    };
    #[cfg(not(feature = "internals"))]
    assert!(
        !v2_readers,
        "the v2 reader rule needs the internals feature"
    );
    builder.build().expect("valid")
}

async fn all_votes(lock: &Lock) {
    wait_until(PATIENCE, "every reachable master's vote", || async {
        lock.stats().pending_count() == 0
    })
    .await;
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

/// The set-up both tests share: five commissioned masters, A holding `r` on 0–2, B warmed
/// up on the masters it reaches, then masters 0 and 1 flushed. Returns the masters (and the
/// links, which must outlive the clients), A's lock and B.
async fn two_losses(v2_readers: bool) -> (LocalCluster, [LinkSet; 2], Lock, Redlock) {
    let masters = cluster(5);
    commission(&masters).await;
    let a_links = links_without(&masters, &[3, 4]);
    let b_links = links_without(&masters, &[2]);
    let a = guarded(a_links.urls(), LONG, false);
    let b = guarded(b_links.urls(), SHORT, v2_readers);

    let lock_a = a.try_lock("r").await.expect("masters 0-2 grant A");
    all_votes(&lock_a).await;
    assert_eq!(
        holders(&masters, &[0, 1, 2], &lock_key("r"), lock_a.value()).await,
        3
    );
    let warm = eventually(PATIENCE, "B's first lock", || async {
        b.try_lock("b-warm").await.ok()
    })
    .await;
    all_votes(&warm).await;
    warm.release().await.expect("released");

    masters.cmd(0, &["FLUSHALL"]).expect("FLUSHALL 0");
    masters.cmd(1, &["FLUSHALL"]).expect("FLUSHALL 1");
    (masters, [a_links, b_links], lock_a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_flushed_masters_never_let_a_short_client_take_a_long_lock() {
    let (masters, _links, lock_a, b) = two_losses(false).await;

    // B's verdict on the flushed masters: too few readers it can believe.
    for i in [0, 1] {
        let reason = eventually(PATIENCE, "B's verdict on a flushed master", || async {
            // Each attempt makes B look again; it must never be granted.
            if let Ok(lock) = b.try_lock("r").await {
                panic!(
                    "B was granted r while A holds it for {:?} more: {:?}",
                    lock_a.remaining(),
                    lock.stats()
                );
            }
            match status(&b, i).await {
                GuardStatus::Unverified {
                    reason: Some(reason),
                } if reason.contains("believed") => Some(reason),
                _ => None,
            }
        })
        .await;
        assert!(reason.contains("only 2 of them"), "master {i}: {reason}");
    }
    // Keep trying for several of B's ttls past its verdict: v2 granted B after one.
    for _ in 0..(SHORT * 4).as_millis() / 100 {
        if let Ok(lock) = b.try_lock("r").await {
            panic!(
                "B was granted r while A holds it for {:?} more: {:?}",
                lock_a.remaining(),
                lock.stats()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // C reaches every master: it reads A's 20 s record on master 2 and keeps master 0 out
    // for it.
    let c = guarded(masters.urls(), SHORT, false);
    let remaining = eventually(PATIENCE, "C's quarantine of master 0", || async {
        let _ = c.try_lock("c").await;
        match status(&c, 0).await {
            GuardStatus::Quarantined { remaining, .. } => Some(remaining),
            _ => None,
        }
    })
    .await;
    assert!(
        remaining > SHORT * 5,
        "master 0 out for A's 20 s ttl, not C's 1 s: {remaining:?}"
    );
    // B still cannot believe the flushed masters, and is still refused.
    if let Ok(lock) = b.try_lock("r").await {
        panic!("B was granted r while A holds it: {:?}", lock.stats());
    }
    assert!(
        matches!(status(&b, 1).await, GuardStatus::Unverified { .. }),
        "B cannot verify master 1"
    );
    assert!(
        !lock_a.is_expired(),
        "A still holds r: the scenario ran inside its ttl"
    );
    lock_a.release().await.expect("released");
}

/// The negative control: the same scenario with guard v2's reader rule (every answering
/// reader believed) grants B the lock A holds.
#[cfg(feature = "internals")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_control_v2_readers_let_a_short_client_take_a_long_lock() {
    let (masters, _links, lock_a, b) = two_losses(true).await;
    let lock_b = eventually(SHORT * 10, "B granted r while A holds it", || async {
        b.try_lock("r").await.ok()
    })
    .await;
    assert!(
        !lock_a.is_expired(),
        "A's lock is still valid while B holds r"
    );
    assert_eq!(
        value_of(&masters, 2, &lock_key("r")).await.as_deref(),
        Some(lock_a.value()),
        "A's key is still on master 2"
    );
    println!(
        "overlap: B holds r on {:?} while A holds it for {:?} more",
        lock_b
            .stats()
            .votes()
            .iter()
            .filter(|v| matches!(v.vote, redquorum::Vote::Granted))
            .map(|v| v.node)
            .collect::<Vec<_>>(),
        lock_a.remaining()
    );
}
