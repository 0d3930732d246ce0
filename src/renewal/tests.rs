//! Renewal task tests against simulated masters under paused time: batching, retries,
//! loss signals, stopping, limits.

use std::sync::Mutex;

use super::sizer::FIRST_BATCH;
use super::*;
use crate::held::Held;
use crate::lease::Lease;
use crate::quorum::{Grant, Request};
use crate::settings::Timing;
use crate::stats::AttemptStats;
use crate::testing::{Act, Fake};
use crate::value::LockValue;

const TTL: Duration = Duration::from_millis(3000);
const DRIFT: Duration = Duration::from_millis(32);
const NODE_TIMEOUT: Duration = Duration::from_millis(50);
const EVERY: Duration = Duration::from_millis(1000);

fn timing() -> Timing {
    Timing {
        ttl: TTL,
        drift: DRIFT,
        node_timeout: NODE_TIMEOUT,
        min_validity: Duration::from_millis(300),
    }
}

fn plan() -> Plan {
    Plan {
        every: EVERY,
        slack: EVERY / 4,
        max_extensions: None,
        max_hold: None,
    }
}

fn masters(n: usize, act: Act, delay_ms: u64) -> Arc<[Fake]> {
    (0..n).map(|_| Fake::new(act, delay_ms)).collect()
}

/// A lock as if just acquired: deadline `now + ttl - drift`.
fn held(name: &str) -> Arc<Held> {
    let req = Arc::new(Request::new(
        vec![format!("lock:{name}")].into(),
        None,
        LockValue::random(),
        TTL,
    ));
    let grant = Grant {
        deadline: Instant::now() + (TTL - DRIFT),
        stats: Arc::new(Mutex::new(AttemptStats::pending(5, 3, 1))),
        tail: None,
        token: None,
    };
    Arc::new(Held::new(
        vec![name.to_owned()].into(),
        req,
        timing(),
        grant,
    ))
}

fn batches(nodes: &[Fake]) -> Vec<Vec<usize>> {
    nodes.iter().map(Fake::batch_sizes).collect()
}

#[tokio::test(start_paused = true)]
async fn locks_due_together_travel_in_batches_of_the_measured_size() {
    let nodes = masters(5, Act::Grant, 2);
    let renewer = Renewer::new(nodes.clone(), NODE_TIMEOUT);
    let start = Instant::now();
    let locks: Vec<_> = (0..100).map(|i| held(&i.to_string())).collect();
    for lock in &locks {
        renewer.start(lock.clone(), plan());
    }
    // The first renewal is due when a third of the ttl has passed: the first batch is of
    // the size that nothing measured yet allows, the rest goes in a second one at once.
    tokio::time::sleep(EVERY + Duration::from_millis(10)).await;
    assert_eq!(
        batches(&nodes),
        vec![vec![FIRST_BATCH, 100 - FIRST_BATCH]; 5]
    );
    for lock in &locks {
        assert_eq!(lock.status().deadline, start + EVERY + (TTL - DRIFT));
    }
    // Measured (2 ms for 64), the batch may grow to twice the largest one: all 100 fit.
    tokio::time::sleep(EVERY).await;
    assert_eq!(
        batches(&nodes),
        vec![vec![FIRST_BATCH, 100 - FIRST_BATCH, 100]; 5]
    );
    let stats = renewer.stats();
    assert_eq!(stats.ticks, 3);
    assert_eq!(stats.round_trips, vec![3; 5]);
    assert_eq!(stats.renewed, 200);
    assert_eq!(stats.scheduled, 100);
    assert!(stats.batch_size >= 100, "{stats:?}");
}

/// Today's failure, simulated: 5,000 locks due at once, each extension costing a master
/// 20 µs, so that one batch of all of them (100 ms) could never be answered within the
/// 50 ms node timeout. Bounded batches, sized by their answer times, are all answered in
/// time and keep every lock.
#[tokio::test(start_paused = true)]
async fn a_burst_of_locks_goes_out_in_batches_answered_within_the_node_timeout() {
    const LOCKS: usize = 5_000;
    let nodes = masters(5, Act::Grant, 0);
    for n in nodes.iter() {
        n.set_per_renewal(Duration::from_micros(20));
    }
    let renewer = Renewer::new(nodes.clone(), NODE_TIMEOUT);
    let locks: Vec<_> = (0..LOCKS).map(|i| held(&i.to_string())).collect();
    for lock in &locks {
        renewer.start(lock.clone(), plan());
    }
    // Three intervals, and the 100 ms a master needs to run one round of them all.
    tokio::time::sleep(EVERY * 3 + Duration::from_millis(300)).await;
    let stats = renewer.stats();
    assert_eq!(
        (stats.failed, stats.rescued, stats.lost),
        (0, 0, 0),
        "{stats:?}"
    );
    assert_eq!(stats.renewed, 3 * LOCKS as u64);
    // The first batch is what keeps up with 5,000 renewals a second should every batch
    // take the node timeout (5,000 × 50 ms × 1.5 / 2 = 188); batches then grow while
    // answered within a quarter of the node timeout, never past what is answered within
    // half of it (25 ms / 20 µs = 1250).
    let sizes = nodes[0].batch_sizes();
    assert_eq!(sizes[0], 188);
    assert!(sizes.iter().all(|&s| s <= 1250), "{sizes:?}");
    assert!(sizes.len() < LOCKS * 3 / 188, "{} batches", sizes.len());
    for lock in &locks {
        assert!(lock.status().lost.is_none());
        assert!(lock.status().deadline > Instant::now() + (TTL - DRIFT - EVERY));
    }
}

/// Locks taken over a whole interval are renewed each about an interval after its last
/// renewal — in many small batches spread over the interval, not all at one tick.
#[tokio::test(start_paused = true)]
async fn renewals_are_spread_over_the_interval() {
    const LOCKS: u32 = 200;
    let nodes = masters(3, Act::Grant, 1);
    let renewer = Renewer::new(nodes.clone(), NODE_TIMEOUT);
    let mut locks = Vec::new();
    for i in 0..LOCKS {
        let lock = held(&i.to_string());
        renewer.start(lock.clone(), plan());
        locks.push(lock);
        tokio::time::sleep(EVERY / LOCKS).await;
    }
    for _ in 0..12 {
        tokio::time::sleep(EVERY / 4).await;
        let now = Instant::now();
        for lock in &locks {
            // Renewed no later than an interval after the last renewal (plus the answers'
            // latency), and no earlier than its slack allows.
            let renewed_at = lock.status().deadline - (TTL - DRIFT);
            let age = now - renewed_at;
            assert!(
                age <= EVERY + Duration::from_millis(2),
                "last renewed {age:?} ago"
            );
        }
    }
    let sizes = nodes[0].batch_sizes();
    let per_interval = sizes.len() as f64 / 3.0;
    // A batch takes what is due and what falls due within the slack (a quarter of the
    // interval), and those locks stay together: about four groups, of which some merge when
    // the gap between them is within the slack, and none holds all the locks.
    assert!(per_interval >= 3.0, "{sizes:?}");
    assert!(sizes.iter().all(|&s| s < LOCKS as usize / 2), "{sizes:?}");
    let renewed_at: std::collections::BTreeSet<_> =
        locks.iter().map(|l| l.status().deadline).collect();
    assert!(
        renewed_at.len() >= 3,
        "renewals at {} moments",
        renewed_at.len()
    );
    assert_eq!(renewer.stats().renewed, sizes.iter().sum::<usize>() as u64);
}

/// A batch that failed goes again on its own, even when other locks fall due at the same
/// moment: the retry never rides with other renewals that could fail it again.
#[tokio::test(start_paused = true)]
async fn a_failed_batch_is_retried_alone() {
    let nodes = masters(5, Act::Fail, 1);
    let renewer = Renewer::new(nodes.clone(), NODE_TIMEOUT);
    let first: Vec<_> = (0..10).map(|i| held(&format!("a{i}"))).collect();
    for lock in &first {
        renewer.start(lock.clone(), plan());
    }
    // The first batch fails at EVERY + 1 ms; its retry is due a quarter of the validity
    // left later (1,967 ms / 4). Locks taken now fall due just before the retry, within
    // its slack.
    tokio::time::sleep(Duration::from_millis(491)).await;
    let second: Vec<_> = (0..50).map(|i| held(&format!("b{i}"))).collect();
    for lock in &second {
        renewer.start(lock.clone(), plan());
    }
    tokio::time::sleep(EVERY - Duration::from_millis(491) + Duration::from_millis(10)).await;
    // Failed, and waiting for the retry (counted as failed when it goes).
    assert_eq!(batches(&nodes), vec![vec![10]; 5]);
    assert_eq!(renewer.stats().failed, 0);
    for n in nodes.iter() {
        n.set(Act::Grant, 1);
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(batches(&nodes), vec![vec![10, 50, 10]; 5]);
    let stats = renewer.stats();
    assert_eq!((stats.ticks, stats.retried, stats.failed), (3, 1, 10));
    assert_eq!((stats.renewed, stats.lost), (60, 0));
}

/// Every master slowing down past the node timeout: the batches in flight miss it, but their
/// late answers still complete the quorums before the retries are due (an extension's
/// deadline runs from its start, whenever the answer comes), so nothing is sent again; and
/// measured, the late answers shrink the next batches to what fits.
#[tokio::test(start_paused = true)]
async fn late_answers_rescue_the_renewals_and_shrink_the_batches() {
    const LOCKS: usize = 400;
    let nodes = masters(3, Act::Grant, 0);
    for n in nodes.iter() {
        n.set_per_renewal(Duration::from_micros(50));
    }
    let renewer = Renewer::new(nodes.clone(), NODE_TIMEOUT);
    let locks: Vec<_> = (0..LOCKS).map(|i| held(&i.to_string())).collect();
    for lock in &locks {
        renewer.start(lock.clone(), plan());
    }
    tokio::time::sleep(EVERY + Duration::from_millis(100)).await;
    // Grown while answered within 12.5 ms (at 50 µs each, up to 250).
    assert!(renewer.stats().batch_size >= 128, "{:?}", renewer.stats());
    // Every master becomes twelve times slower: 150 renewals take 90 ms, past the timeout.
    for n in nodes.iter() {
        n.set_per_renewal(Duration::from_micros(600));
    }
    tokio::time::sleep(EVERY * 3).await;
    let stats = renewer.stats();
    assert!(
        stats.rescued > 0,
        "batches missed the node timeout: {stats:?}"
    );
    assert_eq!(
        (stats.failed, stats.retried, stats.lost),
        (0, 0, 0),
        "{stats:?}"
    );
    // Cut to what is answered within half the node timeout: 25 ms / 600 µs = 41.
    assert!(stats.batch_size <= 42, "{stats:?}");
    // Renewed at most a little late: a quarter of an interval.
    for lock in &locks {
        assert!(lock.status().lost.is_none());
        let left = lock.status().deadline - Instant::now();
        assert!(left > TTL - DRIFT - EVERY - EVERY / 4, "{left:?} left");
    }
}

/// A quorum that answers just after the node timeout (or exactly at it): the batch is
/// decided as failed, but the answers still extend the lock — its deadline runs from the
/// batch's start — and the retry is cancelled.
#[tokio::test(start_paused = true)]
async fn answers_just_past_the_node_timeout_still_extend_the_lock() {
    for delay in [
        NODE_TIMEOUT.as_millis() as u64,
        NODE_TIMEOUT.as_millis() as u64 + 30,
    ] {
        let nodes = masters(5, Act::Grant, delay);
        for n in nodes.iter().skip(3) {
            n.set(Act::Never, 0);
        }
        let renewer = Renewer::new(nodes.clone(), NODE_TIMEOUT);
        let lock = held("just-late");
        let start = Instant::now();
        renewer.start(lock.clone(), plan());
        tokio::time::sleep(EVERY + NODE_TIMEOUT * 2).await;
        assert_eq!(
            lock.status().deadline,
            start + EVERY + (TTL - DRIFT),
            "answers after {delay} ms"
        );
        let stats = renewer.stats();
        assert_eq!(
            (stats.renewed, stats.failed, stats.retried),
            (1, 0, 0),
            "{stats:?}"
        );
        // Renewed again an interval after the first, not retried in between.
        tokio::time::sleep(EVERY).await;
        assert_eq!(nodes[0].batch_sizes(), [1, 1], "answers after {delay} ms");
    }
}

/// Masters that stop answering altogether for a while: the batches fail, and their locks
/// are retried — in batches of failed renewals only — until the masters answer again.
#[tokio::test(start_paused = true)]
async fn failed_batches_are_retried_in_batches_of_their_own_until_they_succeed() {
    const LOCKS: usize = 300;
    let nodes = masters(3, Act::Grant, 1);
    let renewer = Renewer::new(nodes.clone(), NODE_TIMEOUT);
    let locks: Vec<_> = (0..LOCKS).map(|i| held(&i.to_string())).collect();
    for lock in &locks {
        renewer.start(lock.clone(), plan());
    }
    tokio::time::sleep(EVERY - Duration::from_millis(5)).await;
    for n in nodes.iter() {
        n.set(Act::Never, 0);
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    for n in nodes.iter() {
        n.set(Act::Grant, 1);
    }
    tokio::time::sleep(EVERY).await;
    // Every renewal failed at least once (masters skipped once they had too many calls
    // outstanding fail a retry at once); none was lost.
    let stats = renewer.stats();
    assert!(stats.failed >= LOCKS as u64, "{stats:?}");
    assert!(stats.retried >= 1);
    assert_eq!((stats.lost, stats.rescued), (0, 0));
    // The first five batches (nothing measured: 64 each) failed; every batch after them
    // was one of retries only, until they succeeded.
    let sizes = nodes[0].batch_sizes();
    assert_eq!(sizes[..5].iter().sum::<usize>(), LOCKS, "{sizes:?}");
    assert_eq!(stats.ticks - stats.retried, 5, "{stats:?}");
    for lock in &locks {
        assert!(lock.status().deadline > Instant::now() + (TTL - DRIFT - EVERY));
    }
}

/// Two masters that never answer: batches are decided by the quorum that does, at the
/// speed of its answers, and the silent masters are no longer asked once each has a few
/// calls outstanding (until they answer or the calls are given up on).
#[tokio::test(start_paused = true)]
async fn silent_masters_slow_nothing_and_stop_being_asked() {
    const LOCKS: usize = 20_000;
    let nodes = masters(5, Act::Grant, 1);
    for n in nodes.iter().skip(3) {
        n.set(Act::Never, 0);
    }
    let renewer = Renewer::new(nodes.clone(), NODE_TIMEOUT);
    let locks: Vec<_> = (0..LOCKS).map(|i| held(&i.to_string())).collect();
    for lock in &locks {
        renewer.start(lock.clone(), plan());
    }
    tokio::time::sleep(EVERY).await;
    // All due now; the quorum answers each batch in 1 ms.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stats = renewer.stats();
    assert_eq!(stats.renewed, LOCKS as u64, "{stats:?}");
    assert_eq!(stats.failed, 0);
    assert_eq!(stats.round_trips[3], MAX_PENDING as u64);
    assert!(stats.round_trips[0] > MAX_PENDING as u64);
}

/// More locks than the masters can renew in time: the load says so (and the task warns)
/// while every lock is still held.
#[tokio::test(start_paused = true)]
async fn overload_shows_before_any_lock_is_lost() {
    const LOCKS: usize = 20_000;
    let nodes = masters(3, Act::Grant, 0);
    for n in nodes.iter() {
        // 1,000 per 10 ms batch, two batches at a time: 200,000 a second at most, where
        // 20,000 locks renewed every second need 20,000.
        n.set_per_renewal(Duration::from_micros(10));
    }
    let renewer = Renewer::new(nodes.clone(), NODE_TIMEOUT);
    let locks: Vec<_> = (0..LOCKS).map(|i| held(&i.to_string())).collect();
    for lock in &locks {
        renewer.start(lock.clone(), plan());
    }
    tokio::time::sleep(EVERY * 3).await;
    let load = renewer.load();
    assert_eq!(load.held, LOCKS);
    assert_eq!(load.interval, EVERY);
    assert!(!load.is_overloaded(), "{load}");
    assert!(load.headroom().expect("measured") > 4.0, "{load}");
    // The masters become twenty times slower: 10,000 a second at most.
    for n in nodes.iter() {
        n.set_per_renewal(Duration::from_micros(200));
    }
    let mut waited = Duration::ZERO;
    let load = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        waited += Duration::from_millis(100);
        let load = renewer.load();
        if load.is_overloaded() {
            break load;
        }
        assert!(waited < TTL, "no overload shown: {load}");
    };
    let headroom = load.headroom().expect("measured");
    assert!(headroom < 1.0, "{load}");
    assert_eq!(renewer.stats().lost, 0, "{load}");
    assert!(locks.iter().all(|l| l.status().lost.is_none()));
    assert!(
        load.to_string().contains("20000 kept-alive locks"),
        "{load}"
    );
}

#[tokio::test(start_paused = true)]
async fn locks_taken_at_different_moments_fall_into_one_batch() {
    let nodes = masters(3, Act::Grant, 1);
    let renewer = Renewer::new(nodes.clone(), NODE_TIMEOUT);
    let first = held("first");
    renewer.start(first, plan());
    // Within the slack (a quarter of the interval) of the first one.
    tokio::time::sleep(EVERY / 8).await;
    let second = held("second");
    renewer.start(second.clone(), plan());
    tokio::time::sleep(EVERY).await;
    assert_eq!(
        batches(&nodes),
        vec![vec![2]; 3],
        "renewed together, a little early"
    );
    // Once batched together, they stay together.
    tokio::time::sleep(EVERY * 2).await;
    assert_eq!(batches(&nodes), vec![vec![2, 2, 2]; 3]);
}

#[tokio::test(start_paused = true)]
async fn failed_renewals_are_retried_and_loss_fires_at_the_deadline() {
    let nodes = masters(5, Act::Grant, 1);
    let renewer = Renewer::new(nodes.clone(), NODE_TIMEOUT);
    let lock = held("flaky");
    let deadline = lock.status().deadline;
    renewer.start(lock.clone(), plan());
    for n in nodes.iter().take(3) {
        n.set(Act::Never, 0);
    }
    let lease = Lease::new(lock.clone(), Duration::ZERO);
    let reason = lease.lost().await;
    assert_eq!(reason, LossReason::Expired);
    assert_eq!(Instant::now(), deadline, "no later than the deadline");
    let tries = nodes[0].batch_sizes().len();
    assert!(
        tries >= 3,
        "the renewal was retried while valid ({tries} tries)"
    );
    assert!(renewer.stats().failed >= 3);
    // Nothing is renewed after the loss, even when the masters recover.
    for n in nodes.iter() {
        n.set(Act::Grant, 1);
    }
    tokio::time::sleep(TTL).await;
    assert_eq!(nodes[0].batch_sizes().len(), tries);
    assert!(!renewer.stats().task_running);
}

#[tokio::test(start_paused = true)]
async fn a_quorum_answering_not_ours_marks_the_lock_lost_at_the_next_renewal() {
    let nodes = masters(5, Act::Take, 1);
    let renewer = Renewer::new(nodes.clone(), NODE_TIMEOUT);
    let lock = held("stolen");
    let start = Instant::now();
    renewer.start(lock.clone(), plan());
    let reason = Lease::new(lock.clone(), Duration::ZERO).lost().await;
    assert!(
        matches!(reason, LossReason::NotOurs { masters } if masters >= 3),
        "{reason:?}"
    );
    // At the first renewal (plus the answers' latency), long before the deadline.
    assert!(start.elapsed() <= EVERY + Duration::from_millis(5));
    assert_eq!(renewer.stats().lost, 1);
}

#[tokio::test(start_paused = true)]
async fn stopping_waits_for_the_extension_in_flight_and_ends_renewal() {
    let nodes = masters(3, Act::Grant, 40);
    let renewer = Renewer::new(nodes.clone(), NODE_TIMEOUT);
    let lock = held("stopping");
    renewer.start(lock.clone(), plan());
    tokio::time::sleep(EVERY + Duration::from_millis(10)).await;
    assert_eq!(
        nodes[0].batch_sizes().len(),
        1,
        "the extension is in flight"
    );
    let before = Instant::now();
    lock.control.stop().await;
    // The extension answers 40 ms after it was sent, 10 ms of which had passed.
    assert_eq!(before.elapsed(), Duration::from_millis(30));
    tokio::time::sleep(EVERY * 3).await;
    assert_eq!(
        nodes[0].batch_sizes().len(),
        1,
        "never renewed after the stop"
    );
    let stats = renewer.stats();
    assert_eq!(stats.scheduled, 0);
    assert!(!stats.task_running);
}

#[tokio::test(start_paused = true)]
async fn hold_limits_stop_the_renewals_and_the_lock_runs_out() {
    let nodes = masters(3, Act::Grant, 1);
    let renewer = Renewer::new(nodes.clone(), NODE_TIMEOUT);
    let lock = held("limited");
    let start = Instant::now();
    renewer.start(
        lock.clone(),
        Plan {
            max_extensions: Some(2),
            ..plan()
        },
    );
    let reason = Lease::new(lock.clone(), Duration::ZERO).lost().await;
    assert_eq!(reason, LossReason::Expired);
    assert_eq!(nodes[0].batch_sizes(), [1, 1]);
    // Two renewals, one interval apart, then the full validity of the last one.
    assert_eq!(start.elapsed(), EVERY * 2 + (TTL - DRIFT));
}

#[tokio::test(start_paused = true)]
async fn a_later_keep_alive_supersedes_an_earlier_one() {
    let nodes = masters(3, Act::Grant, 1);
    let renewer = Renewer::new(nodes.clone(), NODE_TIMEOUT);
    let lock = held("twice");
    renewer.start(lock.clone(), plan());
    renewer.start(lock.clone(), plan());
    tokio::time::sleep(EVERY * 2 + Duration::from_millis(10)).await;
    assert_eq!(
        nodes[0].batch_sizes(),
        [1, 1],
        "one renewal per interval, not two"
    );
}

#[test]
fn retries_leave_room_to_finish_before_the_deadline() {
    let now = Instant::now();
    let nt = Duration::from_millis(50);
    assert_eq!(
        retry_at(now, now + Duration::from_secs(2), nt),
        Some(now + Duration::from_millis(500))
    );
    assert_eq!(
        retry_at(now, now + Duration::from_millis(120), nt),
        Some(now + nt)
    );
    assert_eq!(
        retry_at(now, now + Duration::from_millis(60), nt),
        Some(now + Duration::from_millis(10))
    );
    assert_eq!(
        retry_at(now, now + Duration::from_millis(30), nt),
        Some(now)
    );
    assert_eq!(retry_at(now, now, nt), None);
}
