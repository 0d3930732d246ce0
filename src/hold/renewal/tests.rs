//! Renewal task tests against simulated masters under paused time: batching, retries,
//! loss signals, stopping, limits.

use std::sync::Mutex;

use super::*;
use crate::config::validated::Timing;
use crate::hold::held::Held;
use crate::hold::lease::Lease;
use crate::protocol::quorum::{Grant, Request};
use crate::protocol::testing::{Act, Fake};
use crate::stats::AttemptStats;
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
async fn locks_due_together_travel_in_one_round_trip_per_master() {
    let nodes = masters(5, Act::Grant, 2);
    let renewer = Renewer::new(nodes.clone(), NODE_TIMEOUT);
    let start = Instant::now();
    let locks: Vec<_> = (0..100).map(|i| held(&i.to_string())).collect();
    for lock in &locks {
        renewer.start(lock.clone(), plan());
    }
    // The first renewal is due when a third of the ttl has passed.
    tokio::time::sleep(EVERY + Duration::from_millis(10)).await;
    assert_eq!(batches(&nodes), vec![vec![100]; 5]);
    for lock in &locks {
        assert_eq!(lock.status().deadline, start + EVERY + (TTL - DRIFT));
    }
    tokio::time::sleep(EVERY).await;
    assert_eq!(batches(&nodes), vec![vec![100, 100]; 5]);
    let stats = renewer.stats();
    assert_eq!(stats.ticks, 2);
    assert_eq!(stats.round_trips, vec![2; 5]);
    assert_eq!(stats.renewed, 200);
    assert_eq!(stats.scheduled, 100);
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
