//! Negative control: the seed bug. A naive renewal (`SET key value XX PX ttl`, or a bare
//! `PEXPIRE`) that the network delays past the lock's expiry and a rival's acquisition
//! renews — and, with `SET`, steals — the rival's lock: the checker must find the overlap.
//! redquorum's value-checked `extend` (with the lock's ttl, and with a ttl longer than the
//! rival's so that any touch would show) and its release, delayed the same way, change
//! nothing: 0 overlaps, and the rival's value and PTTL stay as they were.

use std::time::{Duration, Instant};

use crate::common::hold::{lease_without_renewal, load_scripts};
use crate::common::inspect::*;
use crate::common::{builder, cluster};
use redquorum::{Error, LockOptions, Redlock, RetryPolicy};
use redquorum_testkit::{Checker, Direction, Fault, Hold, LinkSet, LocalCluster, Report};

/// How holder A renews.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Renewal {
    /// `SET key value XX PX ttl` on every master, sent by the test itself.
    NaiveSetXx,
    /// `PEXPIRE key ttl` on every master, sent by the test itself.
    NaivePexpire,
    /// redquorum's value-checked `Lock::extend`.
    Redquorum,
}

const A_TTL: Duration = Duration::from_secs(1);
/// Every request A sends after its acquisition is delayed this long on the way to the
/// masters: past its keys' expiry and the rival's acquisition.
const A_DELAY: Duration = Duration::from_millis(1500);
/// B's ttl differs from A's so that any change to B's key shows in its PTTL.
const B_TTL: Duration = Duration::from_secs(4);

/// What one round of the delayed-renewal scenario showed.
struct Round {
    /// Masters on which B's key lost its value or had its PTTL changed by A's requests.
    touched: usize,
    /// Masters on which B held the key.
    b_masters: usize,
}

/// One round: A locks, its links start delaying, A renews at +300 ms (arriving at
/// +1.8 s), works until +1.4 s and releases (arriving at +2.9 s); B takes the lock when A's
/// keys expire (+1 s). `None` if B did not lock before A's renewal reached the masters
/// (the round shows nothing and is repeated).
async fn delayed_renewal_round(
    masters: &LocalCluster,
    checker: &Checker,
    renewal: Renewal,
    resource: &str,
) -> Option<Round> {
    let key = lock_key(resource);
    let a_links = masters.links_seeded(checker.seed()).expect("links");
    let b_links = masters.links_seeded(checker.seed() ^ 1).expect("links");
    let client = |links: &LinkSet, ttl: Duration| -> Redlock {
        builder(links.urls())
            .ttl(ttl)
            .node_timeout(Duration::from_millis(200))
            .build()
            .expect("valid")
    };
    let (a, b) = (client(&a_links, A_TTL), client(&b_links, B_TTL));
    a.connect().await;
    b.connect().await;
    // Every master caches the scripts first: a delayed `EVALSHA` of a script a master lacks
    // fails with NOSCRIPT and is never retried (its reply comes too late), which would make
    // "A's extension changed nothing" vacuous.
    load_scripts(masters).await;
    let noscript = noscript_everywhere(masters).await;
    // The naive renewal's own connections through A's links, opened before the delay.
    let mut naive = Vec::new();
    if renewal != Renewal::Redquorum {
        for url in a_links.urls() {
            let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
            naive.push(
                redis::Client::open(url)
                    .expect("url")
                    .get_multiplexed_async_connection_with_config(&config)
                    .await
                    .expect("connect through A's link"),
            );
        }
    }

    // Retried: an attempt a stalled machine lets time out is no part of the scenario.
    let lock_a = a
        .lock_with(
            [resource],
            LockOptions::new().retry(RetryPolicy::new().attempts(10)),
        )
        .await
        .expect("free resource");
    let t0 = Instant::now();
    let value_a = lock_a.value().to_owned();
    let margin = Duration::from_millis(50);
    let lease_a = lease_without_renewal(&lock_a, margin)
        .await
        .expect("fresh lock");
    let mut session_a = checker.referee().session().await.expect("referee");
    let read_a = session_a.read(resource).await.expect("read");
    let written = start_tap(&a_links);
    a_links.set_all(Direction::ToServer, Fault::delay(A_DELAY));

    let renew = async {
        tokio::time::sleep_until((t0 + Duration::from_millis(300)).into()).await;
        let started = Instant::now();
        let ttl_ms = A_TTL.as_millis().to_string();
        match renewal {
            Renewal::Redquorum => {
                // With A's own ttl, and with a ttl longer than B's, so that an extension
                // that touched B's key would show in its PTTL whichever way it went.
                for ttl in [None, Some(B_TTL * 2)] {
                    let r = match ttl {
                        None => lock_a.extend().await,
                        Some(ttl) => lock_a.extend_with(ttl).await,
                    };
                    assert!(
                        matches!(r, Err(Error::ExtendFailed { .. })),
                        "a delayed extension cannot reach a quorum in time: {r:?}"
                    );
                }
                None
            }
            Renewal::NaiveSetXx | Renewal::NaivePexpire => {
                let calls = naive.iter_mut().map(|conn| {
                    let (key, value, ttl_ms) = (&key, &value_a, &ttl_ms);
                    async move {
                        let cmd = match renewal {
                            Renewal::NaiveSetXx => {
                                let mut c = redis::cmd("SET");
                                c.arg(key).arg(value).arg("XX").arg("PX").arg(ttl_ms);
                                c
                            }
                            _ => {
                                let mut c = redis::cmd("PEXPIRE");
                                c.arg(key).arg(ttl_ms);
                                c
                            }
                        };
                        let reply: redis::Value =
                            cmd.query_async(conn).await.expect("naive renewal reply");
                        matches!(reply, redis::Value::Okay | redis::Value::Int(1))
                    }
                });
                let ok = futures::future::join_all(calls)
                    .await
                    .into_iter()
                    .filter(|&ok| ok)
                    .count();
                // The naive client believes the lock renewed from the moment it sent the
                // renewal, as Redlock computes validity.
                (ok >= 3).then(|| started + A_TTL - Duration::from_millis(12))
            }
        }
    };
    let a_work = async {
        let until = t0 + Duration::from_millis(1400);
        if renewal == Renewal::Redquorum {
            let worked = lease_a
                .run(tokio::time::sleep_until(until.into()))
                .await
                .is_ok();
            if worked && lease_a.check().is_ok() {
                session_a.write(resource, read_a).await.expect("write");
            }
        } else {
            // The naive holder works on, trusting its renewal.
            tokio::time::sleep_until(until.into()).await;
            session_a.write(resource, read_a).await.expect("write");
        }
        Instant::now()
    };
    let renewal_written = |link: &redquorum_testkit::LinkProxy| {
        link.tap()
            .iter()
            .find(|e| {
                let text = e.text();
                match renewal {
                    Renewal::NaiveSetXx => text.contains("XX"),
                    Renewal::NaivePexpire => text.contains("PEXPIRE"),
                    Renewal::Redquorum => text.contains("EVALSHA"),
                }
            })
            .map(|e| e.at)
    };
    // B tries from shortly before A's keys expire until A's renewal reaches a master: a
    // lock taken after that shows nothing (the round is then repeated).
    let b_side = async {
        tokio::time::sleep_until((t0 + Duration::from_millis(800)).into()).await;
        let mut session_b = checker.referee().session().await.expect("referee");
        while !a_links.links().iter().any(|l| renewal_written(l).is_some()) {
            if let Ok(lock_b) = b.try_lock(resource).await {
                let acquired = Instant::now();
                // B's key as B left it, before any of A's delayed requests arrive.
                let snapshot_at = Instant::now();
                let mut state: Vec<(usize, i64)> = Vec::new();
                for i in 0..5 {
                    if value_of(masters, i, &key).await.as_deref() == Some(lock_b.value()) {
                        state.push((i, pttl_of(masters, i, &key).await));
                    }
                }
                let lease_b = lease_without_renewal(&lock_b, margin)
                    .await
                    .expect("fresh lock");
                let read = session_b.read(resource).await.expect("read");
                tokio::time::sleep(Duration::from_millis(30)).await;
                if lease_b.check().is_ok() {
                    session_b.write(resource, read).await.expect("write");
                }
                return Some((lock_b, lease_b, acquired, snapshot_at, state));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        None
    };
    let (renewed_until, a_done, b_got) = tokio::join!(renew, a_work, b_side);
    let deadline_a = renewed_until.map_or(lease_a.deadline().into_std(), |d| {
        d.max(lease_a.deadline().into_std())
    });
    let released_a = a_done;
    let _ = lock_a.release().await;
    checker
        .recorder()
        .record(Hold::new(0, resource, t0, deadline_a, released_a));
    let (lock_b, lease_b, acquired_b, before, b_state) = b_got?;
    let first_renewal = a_links.links().iter().filter_map(renewal_written).min();
    if first_renewal.is_some_and(|at| at <= before) {
        return None;
    }
    // Wait until A's renewal and release have reached every master, and every master has
    // executed them: two extensions and the release for redquorum, the renewal and the
    // release for the naive clients.
    let needed = if renewal == Renewal::Redquorum { 3 } else { 1 };
    wait_tapped(
        masters,
        &a_links,
        &written,
        "A's delayed requests to reach the masters",
        |link| renewal_written(link).is_some() && count_scripts(link) >= needed,
    )
    .await;
    let mut touched = 0;
    for &(i, pttl_before) in &b_state {
        let value = value_of(masters, i, &key).await;
        let pttl = pttl_of(masters, i, &key).await;
        // Measured after the read: the key cannot have aged more than this since the
        // snapshot (plus Redis's millisecond rounding).
        let decay = i64::try_from(before.elapsed().as_millis()).unwrap_or(i64::MAX) + 2;
        if value.as_deref() != Some(lock_b.value())
            || pttl > pttl_before
            || pttl < pttl_before - decay
        {
            touched += 1;
        }
    }
    let deadline_b = lease_b.deadline().into_std();
    let released_b = Instant::now();
    let _ = lock_b.release().await;
    checker
        .recorder()
        .record(Hold::new(1, resource, acquired_b, deadline_b, released_b));
    let noscript_after = noscript_everywhere(masters).await;
    assert_eq!(
        noscript_after, noscript,
        "every delayed script call ran (none was refused with NOSCRIPT)"
    );
    Some(Round {
        touched,
        b_masters: b_state.len(),
    })
}

/// Rounds until one is conclusive (B locked before A's renewal arrived); at most five.
async fn delayed_renewal(name: &'static str, renewal: Renewal) -> (Report, Round) {
    const ROUNDS: usize = 5;
    let masters = cluster(5);
    let checker = Checker::start(name).expect("referee").min_hand_overs(1);
    for attempt in 0..ROUNDS {
        let resource = format!("seed-bug-{attempt}");
        if let Some(round) = delayed_renewal_round(&masters, &checker, renewal, &resource).await {
            let report = checker
                .report_with(format!(
                    "B's key touched by A on {} of {} masters",
                    round.touched, round.b_masters
                ))
                .expect("referee");
            return (report, round);
        }
        println!("round {attempt}: B did not lock before A's renewal arrived; repeating");
    }
    panic!("inconclusive: in {ROUNDS} rounds B never locked before A's delayed renewal arrived");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_naive_set_xx_renewal_steals_the_rivals_lock() {
    let (report, round) = delayed_renewal(
        "negative: delayed naive SET XX PX renewal",
        Renewal::NaiveSetXx,
    )
    .await;
    report.assert_overlap_found();
    assert!(round.touched >= 3, "the naive renewal rewrote B's keys");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_naive_pexpire_renewal_extends_the_rivals_lock() {
    let (report, round) = delayed_renewal(
        "negative: delayed naive PEXPIRE renewal",
        Renewal::NaivePexpire,
    )
    .await;
    report.assert_overlap_found();
    assert!(round.touched >= 3, "the naive renewal changed B's PTTL");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_redquorum_extend_and_release_never_touch_the_rivals_lock() {
    let (report, round) =
        delayed_renewal("delayed redquorum extend and release", Renewal::Redquorum).await;
    report.assert_safe();
    assert!(round.b_masters >= 3, "B held a quorum");
    assert_eq!(
        round.touched, 0,
        "A's late extend or release changed B's value or PTTL"
    );
}
