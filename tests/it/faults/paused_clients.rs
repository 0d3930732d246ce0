//! Mutual exclusion when a client is paused — its runtime thread blocked, as by a GC pause
//! or a stopped VM — while its acquire replies are in flight, or while it holds the lock.
//! The paused client must not return a lock that expired during the pause, must see its
//! deadline passed when it wakes (and skip its write), and its late cleanup must leave the
//! rival's key alone. 0 overlaps, 0 lost updates.
//!
//! The paused client P runs on its own thread with a current-thread runtime, which a
//! `std::thread::sleep` freezes entirely — its timers, its connections, its renewal task —
//! while the masters, the fault proxies and the rival R go on. Rounds alternate P and R.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::hold::{lease_without_renewal, load_scripts, short_hold};
use crate::common::inspect::*;
use crate::common::scenario::*;
use crate::common::{builder, cluster};
use redquorum::{Redlock, RetryPolicy};
use redquorum_testkit::{Checker, Direction, Fault, Hold, LinkSet, LocalCluster, RefereeSession};
use tokio::sync::watch;

const TTL: Duration = Duration::from_secs(1);
/// The client pause: two ttls, so that a rival has the lock well before the client wakes.
const PAUSE: Duration = Duration::from_secs(2);
const MARGIN: Duration = Duration::from_millis(100);

/// Where a round between the paused client P and the rival R stands: a step number that
/// only grows ([`advance`]), so a waiter never misses a step that was quickly followed by
/// the next.
fn pausing(round: u32) -> u32 {
    4 * round + 1
}

/// R holds the lock (and has noted which masters granted it): P, frozen, may wake.
fn rival_locked(round: u32) -> u32 {
    4 * round + 2
}

/// P woke, finished, and its cleanup reached every master.
fn woke(round: u32) -> u32 {
    4 * round + 3
}

/// R released.
fn rival_done(round: u32) -> u32 {
    4 * round + 4
}

/// P has played its last round; R stops.
const FINISHED: u32 = u32::MAX;

/// Moves the round forward to `step` (never back).
fn advance(phase: &watch::Sender<u32>, step: u32) {
    phase.send_modify(|s| *s = (*s).max(step));
}

/// Waits until the round has reached `step`, for at most a minute (the other side may have
/// panicked).
async fn reach(phase: &mut watch::Receiver<u32>, step: u32) {
    tokio::time::timeout(Duration::from_secs(60), phase.wait_for(|s| *s >= step))
        .await
        .expect("the other client stalled")
        .expect("the other client is gone");
}

/// P's pause: blocks P's thread — its runtime, timers, connections and renewals with it —
/// for at least [`PAUSE`] and until R holds the lock, so that every pause is taken over
/// whatever the machine's speed (for at most a minute: R may have failed; the round then
/// counts as not taken over, which fails the test).
fn freeze(phase: &watch::Receiver<u32>, round: u32) {
    std::thread::sleep(PAUSE);
    let limit = Instant::now() + Duration::from_secs(60);
    while *phase.borrow() < rival_locked(round) && Instant::now() < limit {
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn client(links: &LinkSet, node_timeout: Duration) -> Redlock {
    builder(links.urls())
        .ttl(TTL)
        .node_timeout(node_timeout)
        .retry(
            RetryPolicy::new()
                .unlimited_attempts()
                .timeout(PAUSE * 3)
                .delay(Duration::from_millis(20), Duration::from_millis(10)),
        )
        .build()
        .expect("valid")
}

/// The rival: its ttl far outlasts P's pause, so it still holds the lock when P wakes.
fn rival_client(links: &LinkSet) -> Redlock {
    builder(links.urls())
        .ttl(PAUSE * 4)
        .node_timeout(Duration::from_millis(100))
        .retry(
            RetryPolicy::new()
                .unlimited_attempts()
                .timeout(PAUSE * 3)
                .delay(Duration::from_millis(20), Duration::from_millis(10)),
        )
        .build()
        .expect("valid")
}

/// Runs `body` on a new thread with its own current-thread runtime: the paused client.
fn spawn_paused_client<F, Fut>(body: F) -> std::thread::JoinHandle<()>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("client runtime")
            .block_on(body());
    })
}

/// R's side of a round: waits for P to freeze, takes the lock once P's keys expired, lets
/// P wake, runs its critical section, holds on until P woke and cleaned up, checks that its
/// key is still its own on every master that granted it, and releases. Returns whether R
/// had the lock before P woke (the round then shows something), or `None` once P has
/// finished its rounds.
async fn rival_round(
    round: u32,
    masters: &LocalCluster,
    rival: &Redlock,
    checker: &Checker,
    session: &mut RefereeSession,
    phase: &watch::Sender<u32>,
) -> Option<bool> {
    let mut seen = phase.subscribe();
    reach(&mut seen, pausing(round)).await;
    if *seen.borrow() == FINISHED {
        return None;
    }
    let lock = match rival.lock("frozen").await {
        Ok(lock) => lock,
        Err(e) => panic!("the rival never got the lock while P was frozen: {e}"),
    };
    let acquired = Instant::now();
    let key = lock_key("frozen");
    let mut mine = Vec::new();
    for i in 0..5 {
        if value_of(masters, i, &key).await.as_deref() == Some(lock.value()) {
            mine.push(i);
        }
    }
    let lease = lease_without_renewal(&lock, MARGIN)
        .await
        .expect("fresh lock");
    // Whether R got the lock before P woke; P waits for this step to wake.
    let before_wake = *phase.borrow() < woke(round);
    advance(phase, rival_locked(round));
    let read = session.read("frozen").await.expect("read");
    tokio::time::sleep(Duration::from_millis(30)).await;
    if lease.check().is_ok() {
        session.write("frozen", read).await.expect("write");
    }
    reach(&mut seen, woke(round)).await;
    for &i in &mine {
        assert_eq!(
            value_of(masters, i, &key).await.as_deref(),
            Some(lock.value()),
            "P's late cleanup touched the rival's key on master {i}"
        );
    }
    let deadline = lease.deadline().into_std();
    let released = Instant::now();
    lock.release().await.expect("R released in time");
    checker
        .recorder()
        .record(Hold::new(1, "frozen", acquired, deadline, released));
    advance(phase, rival_done(round));
    Some(before_wake)
}

/// R's rounds, until P has finished; returns how many were taken over during P's pause.
async fn rival_rounds(
    masters: &LocalCluster,
    rival: &Redlock,
    checker: &Checker,
    phase: &watch::Sender<u32>,
) -> u32 {
    let mut session = checker.referee().session().await.expect("referee");
    let mut shown = 0;
    for round in 0.. {
        match rival_round(round, masters, rival, checker, &mut session, phase).await {
            Some(true) => shown += 1,
            Some(false) => {}
            None => break,
        }
    }
    shown
}

/// P's normal hold after R released, so that holds alternate between the clients.
async fn normal_hold(
    p: &Redlock,
    checker: &Checker,
    session: &mut RefereeSession,
    phase: &watch::Receiver<u32>,
    round: u32,
) {
    let mut phase = phase.clone();
    reach(&mut phase, rival_done(round)).await;
    let lock = p
        .lock("frozen")
        .await
        .expect("P locks again once R released");
    let acquired = Instant::now();
    short_hold(0, "frozen", lock, acquired, checker, session).await;
}

/// Both scenarios: five masters, a checker, the paused client P's links and the rival R.
struct Setup {
    masters: Arc<LocalCluster>,
    checker: Arc<Checker>,
    p_links: Arc<LinkSet>,
    /// Kept alive: dropping a link set stops its proxies.
    r_links: LinkSet,
    rival: Redlock,
    phase: watch::Sender<u32>,
}

impl Setup {
    async fn start(name: &'static str, rounds: u32) -> Self {
        let masters = Arc::new(cluster(5));
        let checker = Arc::new(
            Checker::start(name)
                .expect("referee")
                .min_hand_overs(2 * rounds as usize - 1),
        );
        let p_links = Arc::new(masters.links_seeded(checker.seed()).expect("links"));
        let r_links = masters.links_seeded(checker.seed() ^ 1).expect("links");
        let rival = rival_client(&r_links);
        rival.connect().await;
        let (phase, _) = watch::channel(0_u32);
        Self {
            masters,
            checker,
            p_links,
            r_links,
            rival,
            phase,
        }
    }
}

/// P is frozen once a quorum of its acquire requests has been written to the masters, while
/// their replies (held 100 ms by the proxies) are still on their way; R takes the lock
/// during the pause. The freeze is polled before the attempt in every poll of P's task, and
/// the attempt can only decide on replies to requests the tap has already seen written, so
/// the attempt is undecided when the pause begins; should it still decide first (a proxy
/// stalled for a whole node timeout), the round is played out but not counted, and rounds
/// go on until `rounds` of them were frozen in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_paused_with_its_acquire_replies_in_flight_never_returns_an_expired_lock() {
    let rounds = 2 * soak();
    let max_rounds = 5 * rounds;
    let Setup {
        masters,
        checker,
        p_links,
        r_links: _r_links,
        rival,
        phase,
    } = Setup::start("client paused with acquire replies in flight", rounds).await;
    // What P saw in each round: (attempt undecided when the pause began, result).
    let (report_tx, mut report_rx) = tokio::sync::mpsc::unbounded_channel();

    let p_thread = {
        let (masters, checker, p_links) = (masters.clone(), checker.clone(), p_links.clone());
        let phase_tx = phase.clone();
        let phase_rx = phase.subscribe();
        spawn_paused_client(move || async move {
            // The replies, delayed 100 ms, are still awaited when the pause begins.
            let p = client(&p_links, Duration::from_millis(200));
            p.connect().await;
            let mut session = checker.referee().session().await.expect("referee");
            // The extend script cached on every master (releases are self-contained `EVAL`s).
            load_scripts(&masters).await;
            let (mut round, mut frozen_rounds) = (0, 0);
            while frozen_rounds < rounds && round < max_rounds {
                let written = start_tap(&p_links);
                p_links.set_all(
                    Direction::ToClient,
                    Fault::delay(Duration::from_millis(100)),
                );
                let decided = std::cell::Cell::new(false);
                let attempt = async {
                    let r = p.try_lock("frozen").await;
                    decided.set(true);
                    r
                };
                let freeze_in_flight = async {
                    // Once a quorum of requests has been written to the masters (the
                    // replies are then held 100 ms by the proxies), block this thread.
                    loop {
                        if decided.get() {
                            return false;
                        }
                        let sent = p_links
                            .links()
                            .iter()
                            .filter(|l| count_tapped(l, "NX") > 0)
                            .count();
                        if sent >= 3 {
                            advance(&phase_tx, pausing(round));
                            freeze(&phase_rx, round);
                            return true;
                        }
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                };
                // `biased`: the freeze is polled first, so the attempt never gets to use a
                // reply that arrived since the freeze last looked.
                let (frozen, result) = tokio::join!(biased; freeze_in_flight, attempt);
                let woke_at = Instant::now();
                p_links.set_all(Direction::ToClient, Fault::Pass);
                let outcome = match result {
                    Ok(lock) => {
                        // Must not happen after a freeze: record it, so the checker shows
                        // what it means.
                        let deadline = lock.deadline().into_std();
                        checker.recorder().record(Hold::new(
                            0,
                            "frozen",
                            woke_at,
                            deadline,
                            Instant::now(),
                        ));
                        let _ = lock.release().await;
                        format!(
                            "returned a lock with {:?} left",
                            deadline.saturating_duration_since(woke_at)
                        )
                    }
                    Err(e) => {
                        assert!(e.is_retryable(), "{e}");
                        // The failed attempt's cleanup (a value-checked release to every
                        // master) must have reached them before R checks its key.
                        wait_written(
                            &masters,
                            &p_links,
                            &written,
                            1,
                            "P's cleanup to reach every master",
                        )
                        .await;
                        format!("failed: {e}")
                    }
                };
                frozen_rounds += u32::from(frozen);
                report_tx.send((frozen, outcome)).expect("test alive");
                advance(&phase_tx, woke(round));
                normal_hold(&p, &checker, &mut session, &phase_rx, round).await;
                round += 1;
            }
            advance(&phase_tx, FINISHED);
        })
    };

    let shown = rival_rounds(&masters, &rival, &checker, &phase).await;
    tokio::task::spawn_blocking(move || p_thread.join())
        .await
        .expect("join")
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    let mut outcomes = Vec::new();
    while let Ok(o) = report_rx.try_recv() {
        outcomes.push(o);
    }
    let frozen = outcomes.iter().filter(|(f, _)| *f).count();
    let report = checker
        .report_with(format!(
            "{frozen} of {} rounds frozen in flight; {shown} taken over during the pause",
            outcomes.len()
        ))
        .expect("referee");
    assert!(
        frozen >= rounds as usize,
        "inconclusive: only {frozen} of {} attempts were still undecided when the pause \
         began, {rounds} needed: {outcomes:?}",
        outcomes.len()
    );
    for (_, outcome) in outcomes.iter().filter(|(f, _)| *f) {
        assert!(
            outcome.starts_with("failed"),
            "P, paused {PAUSE:?} with its acquire replies in flight, {outcome}"
        );
    }
    assert_eq!(
        shown as usize, frozen,
        "inconclusive: R did not lock during every pause"
    );
    report.assert_safe();
}

/// P is frozen in the middle of its critical section, for at least [`PAUSE`] and until R has
/// taken the lock over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_paused_while_holding_sees_its_deadline_passed() {
    let rounds = 2 * soak();
    let Setup {
        masters,
        checker,
        p_links,
        r_links: _r_links,
        rival,
        phase,
    } = Setup::start("client paused while holding", rounds).await;

    let p_thread = {
        let (masters, checker, p_links) = (masters.clone(), checker.clone(), p_links.clone());
        let phase_tx = phase.clone();
        let phase_rx = phase.subscribe();
        spawn_paused_client(move || async move {
            let p = client(&p_links, Duration::from_millis(100));
            p.connect().await;
            let mut session = checker.referee().session().await.expect("referee");
            // The extend script cached on every master (releases are self-contained `EVAL`s).
            load_scripts(&masters).await;
            let mut seen = phase_rx.clone();
            for round in 0..rounds {
                if round > 0 {
                    reach(&mut seen, rival_done(round - 1)).await;
                }
                let lock = p.lock("frozen").await.expect("P locks");
                let acquired = Instant::now();
                let lease = lease_without_renewal(&lock, MARGIN)
                    .await
                    .expect("fresh lock");
                let read = session.read("frozen").await.expect("read");
                let written = start_tap(&p_links);
                // The pause: in the middle of the critical section, between read and write.
                advance(&phase_tx, pausing(round));
                freeze(&phase_rx, round);
                // On waking, the client must see that its lock is gone.
                assert!(lock.is_expired(), "the lock outlived a {PAUSE:?} pause");
                assert_eq!(lease.remaining(), Duration::ZERO);
                let check = lease.check();
                assert!(check.as_ref().is_err_and(|e| e.is_lost()), "{check:?}");
                let extend = lock.extend().await;
                assert!(extend.as_ref().is_err_and(|e| e.is_lost()), "{extend:?}");
                // So its guarded write is skipped, and the release reports the overrun.
                if lease.check().is_ok() {
                    session.write("frozen", read).await.expect("write");
                }
                let deadline = lease.deadline().into_std();
                let released = Instant::now();
                let release = lock.release().await;
                assert!(release.as_ref().is_err_and(|e| e.is_lost()), "{release:?}");
                checker
                    .recorder()
                    .record(Hold::new(0, "frozen", acquired, deadline, released));
                // No extension was sent; the release (value-checked) was, once per master.
                wait_written(
                    &masters,
                    &p_links,
                    &written,
                    1,
                    "P's late release to reach every master",
                )
                .await;
                assert!(
                    p_links
                        .links()
                        .iter()
                        .all(|l| count_scripts(l) == 1 && count_extensions(l) == 0),
                    "only the release may be sent after the deadline"
                );
                advance(&phase_tx, woke(round));
            }
            reach(&mut seen, rival_done(rounds - 1)).await;
            advance(&phase_tx, FINISHED);
        })
    };

    let shown = rival_rounds(&masters, &rival, &checker, &phase).await;
    tokio::task::spawn_blocking(move || p_thread.join())
        .await
        .expect("join")
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    let report = checker
        .report_with(format!(
            "{shown} of {rounds} locks taken over during the pause"
        ))
        .expect("referee");
    assert_eq!(
        shown, rounds,
        "inconclusive: R did not lock during every pause"
    );
    assert!(report.analysis.max_overrun >= PAUSE - TTL, "{report}");
    report.assert_safe();
}
