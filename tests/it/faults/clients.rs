//! Mutual exclusion when clients misbehave or crowd in: a stale holder releasing or
//! extending after its lock expired and a rival took it, and sixteen clients splitting the
//! votes. 0 overlaps, 0 lost updates, the rival's key never touched, and the losers'
//! partial grants cleaned up. (Paused clients are in `faults_paused_clients.rs`.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::hold::{lease_without_renewal, load_scripts, short_hold};
use crate::common::inspect::*;
use crate::common::scenario::*;
use crate::common::{PATIENCE, all, builder, cluster, exists_anywhere, wait_until};
use rand::RngExt;
use redquorum::RetryPolicy;
use redquorum_testkit::{Checker, Direction, Fault, Hold};

const TTL: Duration = Duration::from_secs(1);
const MARGIN: Duration = Duration::from_millis(100);

/// A holder that acts only after its lock expired and a rival took it: `extend` is refused
/// without a request, and the `release` it still sends (value-checked) leaves the rival's
/// key — value and PTTL — as it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_holders_late_extend_and_release_never_touch_the_new_holders_key() {
    let rounds = 2 * soak();
    let masters = cluster(5);
    let checker = Checker::start("stale holder's late extend and release")
        .expect("referee")
        .min_hand_overs(2 * rounds as usize - 1);
    let a_links = masters.links_seeded(checker.seed()).expect("links");
    let b_links = masters.links_seeded(checker.seed() ^ 1).expect("links");
    let a = builder(a_links.urls())
        .ttl(TTL)
        .node_timeout(Duration::from_millis(200))
        .retry(RetryPolicy::new().attempts(10))
        .build()
        .expect("valid");
    // B's ttl is longer, so that any extension of B's key by A would show in its PTTL.
    let b = builder(b_links.urls())
        .ttl(TTL * 4)
        .node_timeout(Duration::from_millis(100))
        .retry(
            RetryPolicy::new()
                .unlimited_attempts()
                .timeout(TTL * 10)
                .delay(Duration::from_millis(10), Duration::from_millis(5)),
        )
        .build()
        .expect("valid");
    a.connect().await;
    b.connect().await;
    // Extensions are `EVALSHA`s: cache the script so a late one is one command per master.
    load_scripts(&masters).await;
    let mut session_a = checker.referee().session().await.expect("referee");
    let mut session_b = checker.referee().session().await.expect("referee");
    let key = lock_key("stale");
    for _ in 0..rounds {
        let lock_a = a.lock("stale").await.expect("free");
        let acquired_a = Instant::now();
        let lease_a = lease_without_renewal(&lock_a, MARGIN)
            .await
            .expect("fresh lock");
        let read = session_a.read("stale").await.expect("read");
        if lease_a.check().is_ok() {
            session_a.write("stale", read).await.expect("write");
        }
        // A goes quiet; B takes the lock once A's keys expire.
        let lock_b = b
            .lock("stale")
            .await
            .expect("B locks after A's keys expire");
        let acquired_b = Instant::now();
        let snapshot_at = Instant::now();
        let mut b_state: Vec<(usize, i64)> = Vec::new();
        for i in 0..5 {
            if value_of(&masters, i, &key).await.as_deref() == Some(lock_b.value()) {
                b_state.push((i, pttl_of(&masters, i, &key).await));
            }
        }
        assert!(b_state.len() >= 3, "B holds a quorum");
        // A wakes up late.
        let written = start_tap(&a_links);
        for r in [lock_a.extend().await, lock_a.extend_with(TTL * 8).await] {
            assert!(r.as_ref().is_err_and(|e| e.is_lost()), "{r:?}");
        }
        let deadline_a = lease_a.deadline().into_std();
        let released_a = Instant::now();
        let release = lock_a.release().await;
        assert!(release.as_ref().is_err_and(|e| e.is_lost()), "{release:?}");
        checker
            .recorder()
            .record(Hold::new(0, "stale", acquired_a, deadline_a, released_a));
        wait_written(
            &masters,
            &a_links,
            &written,
            1,
            "A's late release to reach every master",
        )
        .await;
        // No extension at all; the release reached every master (a chunk or two of it: a
        // loaded machine may split a write, or send the release once more).
        let seen: Vec<(usize, usize)> = a_links
            .links()
            .iter()
            .map(|l| (count_extensions(l), count_releases(l)))
            .collect();
        assert!(
            seen.iter().all(|&(ext, rel)| ext == 0 && rel >= 1),
            "an expired lock must not send an extension: (extensions, releases) per link {seen:?}"
        );
        for &(i, pttl_before) in &b_state {
            assert_eq!(
                value_of(&masters, i, &key).await.as_deref(),
                Some(lock_b.value()),
                "A's late release touched B's key on master {i}"
            );
            let pttl = pttl_of(&masters, i, &key).await;
            // Measured after the read: the key cannot have aged more than this since the
            // snapshot (plus Redis's millisecond rounding).
            let decay = i64::try_from(snapshot_at.elapsed().as_millis()).unwrap_or(i64::MAX) + 2;
            assert!(
                pttl <= pttl_before && pttl >= pttl_before - decay,
                "B's PTTL on master {i} went from {pttl_before} to {pttl} in {decay} ms"
            );
        }
        short_hold(1, "stale", lock_b, acquired_b, &checker, &mut session_b).await;
    }
    let report = checker.report().expect("referee");
    report.assert_safe();
}

/// Sixteen clients start `try_lock` on one resource together, round after round: at most
/// one wins a round, and the losers' partial grants are released at once (not left to
/// expire), so no key but the winner's remains.
///
/// Started at the same instant, sixteen clients split the votes nearly every round, on a
/// fast machine or a slow one; with their starts spread over a few milliseconds, one of
/// them usually wins. Each round picks, from the seed, either no spread or a random one, and
/// the rounds go on until there are enough wins (hand-overs) *and* enough splits (cleanups
/// after a split) — both are what the scenario is about — within a generous budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixteen_clients_splitting_votes_have_at_most_one_winner_and_clean_up() {
    const CLIENTS: usize = 16;
    /// The widest start stagger of a round, in milliseconds (tokio's timer resolution).
    const MAX_SPREAD_MS: u64 = 30;
    let needed_splits = 4 * soak() as usize;
    let budget = Duration::from_secs(60) * soak();
    let masters = Arc::new(cluster(5));
    let checker = Arc::new(
        Checker::start("16 clients splitting votes")
            .expect("referee")
            .min_hand_overs(4 * soak() as usize),
    );
    let jitter = Fault::Delay {
        base: Duration::ZERO,
        jitter: Duration::from_millis(3),
    };
    let mut links = Vec::new();
    let mut clients = Vec::new();
    for c in 0..CLIENTS {
        let set = masters
            .links_seeded(redquorum_testkit::derive_seed(checker.seed(), c as u64))
            .expect("links");
        set.set_all(Direction::Both, jitter);
        let redlock = builder(set.urls())
            .ttl(Duration::from_secs(5))
            .node_timeout(Duration::from_millis(200))
            .retry(RetryPolicy::once())
            .build()
            .expect("valid");
        redlock.connect().await;
        links.push(set);
        clients.push(redlock);
    }
    let key = lock_key("split");
    let mut session = checker.referee().session().await.expect("referee");
    let mut rng = checker.rng(1);
    let (mut rounds, mut won, mut split) = (0, 0, 0);
    let started = Instant::now();
    while (checker.recorder().hand_overs() < checker.needed_hand_overs() || split < needed_splits)
        && started.elapsed() < budget
    {
        rounds += 1;
        let spread = if rng.random_bool(0.5) {
            0
        } else {
            rng.random_range(1..=MAX_SPREAD_MS)
        };
        let start = Arc::new(tokio::sync::Barrier::new(CLIENTS));
        let tasks: Vec<_> = clients
            .iter()
            .cloned()
            .enumerate()
            .map(|(c, redlock)| {
                let start = start.clone();
                let stagger = Duration::from_millis(rng.random_range(0..=spread));
                tokio::spawn(async move {
                    start.wait().await;
                    if !stagger.is_zero() {
                        tokio::time::sleep(stagger).await;
                    }
                    let r = redlock.try_lock("split").await;
                    (c, r, Instant::now())
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            let (c, result, at) = task.await.expect("no panic");
            match result {
                Ok(lock) => winners.push((c, lock, at)),
                Err(e) => assert!(e.is_contended() || e.is_no_quorum(), "{e}"),
            }
        }
        assert!(
            winners.len() <= 1,
            "round {rounds}: {} winners",
            winners.len()
        );
        let winner_value = winners.first().map(|(_, l, _)| l.value().to_owned());
        // The losers' cleanup: only the winner's key may remain. (A key left to expire
        // would also vanish in the end; `expired_keys` below tells the two apart.)
        wait_until(PATIENCE, "the losers' keys to be released", || async {
            for i in 0..5 {
                let v = value_of(&masters, i, &key).await;
                if v.is_some() && v != winner_value {
                    return false;
                }
            }
            true
        })
        .await;
        match winners.pop() {
            Some((c, lock, at)) => {
                won += 1;
                short_hold(c, "split", lock, at, &checker, &mut session).await;
            }
            None => split += 1,
        }
        wait_until(PATIENCE, "the round's keys to be gone", || async {
            !exists_anywhere(&masters, &all(5), &key).await
        })
        .await;
    }
    let expired = expired_everywhere(&masters).await;
    let report = checker
        .report_with(format!(
            "{rounds} rounds: {won} won, {split} split ({needed_splits} splits needed)"
        ))
        .expect("referee");
    assert_eq!(expired, 0, "no key may be left to expire by its ttl");
    assert!(
        split >= needed_splits,
        "{report}\ninconclusive: only {split} rounds split the votes, {needed_splits} needed, \
         in {rounds} rounds within {budget:?}: the losers' cleanup was hardly exercised"
    );
    report.assert_safe();
}
