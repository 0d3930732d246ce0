//! Coordinator tests against simulated masters under paused time: exact arithmetic and the
//! early-exit rules, for every combination of answers on up to five masters.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::*;
use crate::kind::LockKind;
use crate::protocol::testing::{Act, Fake};

const TTL: Duration = Duration::from_millis(1000);
const DRIFT: Duration = Duration::from_millis(12);
const NODE_TIMEOUT: Duration = Duration::from_millis(100);

fn timing() -> Timing {
    Timing {
        ttl: TTL,
        drift: DRIFT,
        node_timeout: NODE_TIMEOUT,
        min_validity: Duration::from_millis(100),
    }
}

fn cluster(spec: &[(Act, u64)]) -> Arc<[Fake]> {
    spec.iter().map(|&(a, d)| Fake::new(a, d)).collect()
}

fn request() -> Arc<Request> {
    Arc::new(Request::new(
        vec!["k".to_owned()].into(),
        None,
        LockValue::random(),
        TTL,
    ))
}

/// Lets detached tasks (the cleanup, the late-vote recorder) run to completion.
async fn settle() {
    tokio::time::sleep(NODE_TIMEOUT * 3).await;
}

fn releases(nodes: &[Fake]) -> Vec<usize> {
    nodes
        .iter()
        .map(|n| n.releases.load(Ordering::SeqCst))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn validity_is_ttl_minus_drift_minus_elapsed_exactly() {
    let nodes = cluster(&[
        (Act::Grant, 7),
        (Act::Grant, 3),
        (Act::Grant, 40),
        (Act::Grant, 90),
        (Act::Grant, 5),
    ]);
    let start = Instant::now();
    let grant = acquire(&nodes, &request(), timing(), 1)
        .await
        .expect("granted");
    // Decided at the third grant (7 ms), not the slowest.
    assert_eq!(start.elapsed(), Duration::from_millis(7));
    assert_eq!(grant.deadline - start, TTL - DRIFT);
    assert_eq!(
        grant.deadline - Instant::now(),
        TTL - DRIFT - Duration::from_millis(7)
    );
    let stats = grant.stats.lock().expect("not poisoned").clone();
    assert_eq!(stats.elapsed(), Duration::from_millis(7));
    assert_eq!((stats.granted(), stats.pending_count()), (3, 2));
    assert_eq!(stats.votes()[1].latency, Some(Duration::from_millis(3)));
    settle().await;
    let stats = grant.stats.lock().expect("not poisoned").clone();
    assert_eq!((stats.granted(), stats.pending_count()), (5, 0));
    assert_eq!(
        stats.elapsed(),
        Duration::from_millis(7),
        "decision time is kept"
    );
    assert_eq!(releases(&nodes), [0; 5]);
}

#[tokio::test(start_paused = true)]
async fn success_does_not_wait_for_masters_that_never_answer() {
    let nodes = cluster(&[
        (Act::Never, 0),
        (Act::Grant, 1),
        (Act::Never, 0),
        (Act::Grant, 2),
        (Act::Grant, 2),
    ]);
    let start = Instant::now();
    let grant = acquire(&nodes, &request(), timing(), 1)
        .await
        .expect("granted");
    assert_eq!(start.elapsed(), Duration::from_millis(2));
    let stats = grant.stats.lock().expect("not poisoned").clone();
    assert_eq!(stats.votes()[0].vote, Vote::Pending);
    assert_eq!(stats.votes()[2].vote, Vote::Pending);
    settle().await;
    let stats = grant.stats.lock().expect("not poisoned").clone();
    assert_eq!(
        stats.votes()[0].vote,
        Vote::Failed(NodeFailure::Timeout(NODE_TIMEOUT))
    );
    assert!(grant.tail.is_some());
}

#[tokio::test(start_paused = true)]
async fn failure_is_decided_as_soon_as_quorum_is_impossible_and_every_master_is_released() {
    let nodes = cluster(&[
        (Act::Take, 1),
        (Act::Never, 0),
        (Act::Take, 2),
        (Act::Grant, 1),
        (Act::Take, 3),
    ]);
    let start = Instant::now();
    let err = acquire(&nodes, &request(), timing(), 1)
        .await
        .expect_err("contended");
    assert_eq!(start.elapsed(), Duration::from_millis(3));
    assert!(err.is_contended(), "{err}");
    settle().await;
    // Every master, including the one that never answered and the one that granted.
    assert_eq!(releases(&nodes), [1; 5]);
}

#[tokio::test(start_paused = true)]
async fn timeouts_count_as_failures_and_give_no_quorum_with_details() {
    let nodes = cluster(&[
        (Act::Never, 0),
        (Act::Never, 0),
        (Act::Fail, 10),
        (Act::Grant, 1),
        (Act::Grant, 1),
    ]);
    let start = Instant::now();
    let err = acquire(&nodes, &request(), timing(), 1)
        .await
        .expect_err("no quorum");
    assert_eq!(start.elapsed(), NODE_TIMEOUT);
    assert!(err.is_no_quorum(), "{err}");
    let failures = err.node_failures();
    assert_eq!(failures.len(), 3);
    assert_eq!(failures[0], (0, &NodeFailure::Timeout(NODE_TIMEOUT)));
    assert!(matches!(failures[2], (2, NodeFailure::Connection(_))));
    settle().await;
    assert_eq!(releases(&nodes), [1; 5]);
}

#[tokio::test(start_paused = true)]
async fn a_quorum_that_arrives_too_late_is_released() {
    let nodes = cluster(&[(Act::Grant, 40), (Act::Grant, 40), (Act::Grant, 40)]);
    let t = Timing {
        min_validity: Duration::from_millis(960),
        ..timing()
    };
    let err = acquire(&nodes, &request(), t, 1)
        .await
        .expect_err("validity exhausted");
    match err {
        Error::ValidityExhausted {
            elapsed, validity, ..
        } => {
            assert_eq!(elapsed, Duration::from_millis(40));
            assert_eq!(validity, TTL - DRIFT - Duration::from_millis(40));
        }
        other => panic!("unexpected {other}"),
    }
    settle().await;
    assert_eq!(releases(&nodes), [1; 3]);
}

#[tokio::test(start_paused = true)]
async fn dropping_the_round_mid_flight_releases_every_master() {
    let nodes = cluster(&[(Act::Grant, 1), (Act::Never, 0), (Act::Never, 0)]);
    let req = request();
    let round = acquire(&nodes, &req, timing(), 1);
    tokio::select! {
        _ = round => panic!("cannot decide before the timeout"),
        () = tokio::time::sleep(Duration::from_millis(5)) => {}
    }
    settle().await;
    assert_eq!(releases(&nodes), [1; 3]);
}

#[tokio::test(start_paused = true)]
async fn extension_counts_like_acquisition_and_computes_its_own_deadline() {
    let nodes = cluster(&[(Act::Grant, 2), (Act::Take, 1), (Act::Grant, 4)]);
    let start = Instant::now();
    let ext = extend(&nodes, &request(), timing()).await;
    assert!(ext.extended);
    assert_eq!(ext.deadline - start, TTL - DRIFT);
    assert_eq!(ext.stats.elapsed(), Duration::from_millis(4));
    let nodes = cluster(&[(Act::Take, 2), (Act::Take, 1), (Act::Grant, 4)]);
    let ext = extend(&nodes, &request(), timing()).await;
    assert!(!ext.extended);
    assert_eq!(ext.stats.taken(), 2);
    assert_eq!(ext.stats.elapsed(), Duration::from_millis(2));
    settle().await;
    assert_eq!(releases(&nodes), [0; 3], "an extension never releases");
}

/// What the coordinator must decide for one assignment of answers, computed independently:
/// replay the answers in time order and stop at the first decisive one.
fn expected(spec: &[(Act, u64)]) -> (bool, Duration, bool) {
    let n = spec.len();
    let q = LockKind::Mutex.quorum(n);
    let mut answers: Vec<(Duration, Act)> = spec
        .iter()
        .map(|&(act, delay)| match act {
            Act::Never => (NODE_TIMEOUT, Act::Fail),
            _ => (Duration::from_millis(delay), act),
        })
        .collect();
    answers.sort_by_key(|a| a.0);
    let (mut yes, mut taken, mut failed) = (0, 0, 0);
    for (at, act) in answers {
        match act {
            Act::Grant => yes += 1,
            Act::Take => taken += 1,
            _ => failed += 1,
        }
        if yes >= q {
            return (true, at, false);
        }
        if taken + failed > n - q {
            return (false, at, failed > n - q);
        }
    }
    unreachable!("every round is decided once all answers are in")
}

#[tokio::test(start_paused = true)]
async fn every_combination_of_answers_on_one_to_five_masters() {
    const ACTS: [Act; 4] = [Act::Grant, Act::Take, Act::Fail, Act::Never];
    let mut rounds = 0;
    for n in 1..=5usize {
        for code in 0..4usize.pow(n as u32) {
            // Distinct delays so the order of answers is unambiguous.
            let spec: Vec<(Act, u64)> = (0..n)
                .map(|i| {
                    (
                        ACTS[code / 4usize.pow(i as u32) % 4],
                        (i as u64 * 7) % 11 + 1,
                    )
                })
                .collect();
            let (ok, at, no_quorum) = expected(&spec);
            let nodes = cluster(&spec);
            let start = Instant::now();
            let result = acquire(&nodes, &request(), timing(), 1).await;
            assert_eq!(start.elapsed(), at, "{spec:?}");
            match result {
                Ok(_) => assert!(ok, "{spec:?} should have failed"),
                Err(e) => {
                    assert!(!ok, "{spec:?} should have succeeded: {e}");
                    assert_eq!(e.is_no_quorum(), no_quorum, "{spec:?}: {e}");
                    assert_eq!(e.is_contended(), !no_quorum, "{spec:?}: {e}");
                }
            }
            settle().await;
            let expected_releases = if ok { 0 } else { 1 };
            assert_eq!(releases(&nodes), vec![expected_releases; n], "{spec:?}");
            rounds += 1;
        }
    }
    assert_eq!(rounds, 4 + 16 + 64 + 256 + 1024);
}

#[tokio::test(start_paused = true)]
async fn six_and_seven_masters_need_four() {
    for n in [6usize, 7] {
        assert_eq!(LockKind::Mutex.quorum(n), 4);
        let mut spec = vec![(Act::Grant, 1); 3];
        spec.resize(n, (Act::Take, 2));
        let err = acquire(&cluster(&spec), &request(), timing(), 1).await;
        assert!(err.expect_err("three of six or seven").is_contended());
        let mut spec = vec![(Act::Grant, 1); 4];
        spec.resize(n, (Act::Never, 0));
        assert!(
            acquire(&cluster(&spec), &request(), timing(), 1)
                .await
                .is_ok()
        );
    }
}

#[tokio::test(start_paused = true)]
async fn release_returns_once_a_quorum_has_answered() {
    let nodes = cluster(&[
        (Act::Grant, 1),
        (Act::Take, 2),
        (Act::Never, 0),
        (Act::Grant, 5),
        (Act::Fail, 1),
    ]);
    let start = Instant::now();
    let results = release_quorum(&nodes, &request(), NODE_TIMEOUT).await;
    // Deleted on 0 and 3, nothing to delete on 1: a quorum answered at 5 ms.
    assert_eq!(start.elapsed(), Duration::from_millis(5));
    assert_eq!(results[0], Some(Ok(1)));
    assert_eq!(results[1], Some(Ok(0)));
    assert_eq!(results[2], None, "still pending");
    assert!(matches!(results[4], Some(Err(NodeFailure::Connection(_)))));
    assert_eq!(releases(&nodes), [1; 5], "every master was sent the delete");

    // Without a quorum of answers it waits for every master, bounded by the timeout.
    let nodes = cluster(&[(Act::Never, 0), (Act::Fail, 1), (Act::Grant, 1)]);
    let start = Instant::now();
    let results = release_quorum(&nodes, &request(), NODE_TIMEOUT).await;
    assert_eq!(start.elapsed(), NODE_TIMEOUT);
    assert_eq!(results[0], Some(Err(NodeFailure::Timeout(NODE_TIMEOUT))));
}

/// Simulated masters that share a collector, as a client's members do.
struct Collected {
    fake: Fake,
    collector: Arc<Collector>,
}

impl Voter for Collected {
    fn acquire(&self, req: &Request) -> impl Future<Output = Result<Acquired, NodeFailure>> + Send {
        self.fake.acquire(req)
    }

    fn fence(
        &self,
        req: &Request,
        t: u64,
    ) -> impl Future<Output = Result<bool, NodeFailure>> + Send {
        self.fake.fence(req, t)
    }

    fn extend(&self, req: &Request) -> impl Future<Output = Result<bool, NodeFailure>> + Send {
        self.fake.extend(req)
    }

    fn release(&self, req: &Request) -> impl Future<Output = Result<u64, NodeFailure>> + Send {
        self.fake.release(req)
    }

    fn extend_many(
        &self,
        reqs: &[Arc<Request>],
    ) -> impl Future<Output = Result<Vec<Result<bool, NodeFailure>>, NodeFailure>> + Send {
        self.fake.extend_many(reqs)
    }

    fn collector(&self) -> Option<&Collector> {
        Some(&self.collector)
    }
}

fn collected(spec: &[(Act, u64)]) -> (Arc<[Collected]>, Arc<Collector>) {
    let collector = Arc::new(Collector::default());
    let nodes = spec
        .iter()
        .map(|&(a, d)| Collected {
            fake: Fake::new(a, d),
            collector: collector.clone(),
        })
        .collect();
    (nodes, collector)
}

fn released(nodes: &[Collected]) -> Vec<usize> {
    nodes
        .iter()
        .map(|n| n.fake.releases.load(Ordering::SeqCst))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn the_collector_records_late_answers_and_timeouts_without_a_task_per_lock() {
    let (nodes, collector) = collected(&[
        (Act::Grant, 2),
        (Act::Grant, 1),
        (Act::Grant, 3),
        (Act::Grant, 30),
        (Act::Never, 0),
    ]);
    let grant = acquire(&nodes, &request(), timing(), 1)
        .await
        .expect("granted");
    assert!(
        grant.tail.is_none(),
        "nothing to stop: the collector has it"
    );
    assert_eq!(collector.len(), 1);
    let stats = grant.stats.lock().expect("not poisoned").clone();
    assert_eq!((stats.granted(), stats.pending_count()), (3, 2));
    settle().await;
    let stats = grant.stats.lock().expect("not poisoned").clone();
    assert_eq!(stats.votes()[3].vote, Vote::Granted);
    assert_eq!(stats.votes()[3].latency, Some(Duration::from_millis(30)));
    assert_eq!(
        stats.votes()[4].vote,
        Vote::Failed(NodeFailure::Timeout(NODE_TIMEOUT))
    );
    assert_eq!(
        stats.elapsed(),
        Duration::from_millis(3),
        "decision time is kept"
    );
    assert_eq!(collector.len(), 0, "seen through, and let go");
    assert_eq!(released(&nodes), [0; 5]);
}

#[tokio::test(start_paused = true)]
async fn one_collector_task_serves_every_lock() {
    let (nodes, collector) = collected(&[
        (Act::Grant, 1),
        (Act::Grant, 1),
        (Act::Grant, 1),
        (Act::Grant, 50),
        (Act::Grant, 60),
    ]);
    let tasks = || {
        tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks()
    };
    let before = tasks();
    let mut grants = Vec::new();
    for _ in 0..20 {
        grants.push(
            acquire(&nodes, &request(), timing(), 1)
                .await
                .expect("granted"),
        );
    }
    assert_eq!(collector.len(), 20, "every lock left two answers to come");
    assert_eq!(tasks(), before + 1, "one task for all of them");
    settle().await;
    assert_eq!(collector.len(), 0);
    for grant in grants {
        let stats = grant.stats.lock().expect("not poisoned").clone();
        assert_eq!((stats.granted(), stats.pending_count()), (5, 0));
    }
}

#[tokio::test(start_paused = true)]
async fn failed_and_abandoned_rounds_are_released_through_the_collector() {
    let (nodes, collector) = collected(&[
        (Act::Take, 1),
        (Act::Never, 0),
        (Act::Take, 2),
        (Act::Grant, 1),
        (Act::Take, 3),
    ]);
    let err = acquire(&nodes, &request(), timing(), 1)
        .await
        .expect_err("contended");
    assert!(err.is_contended(), "{err}");
    assert_eq!(
        released(&nodes),
        [1; 5],
        "sent before the error was returned"
    );
    settle().await;
    assert_eq!(collector.len(), 0);

    let (nodes, collector) = collected(&[(Act::Grant, 1), (Act::Never, 0), (Act::Never, 0)]);
    let req = request();
    let round = acquire(&nodes, &req, timing(), 1);
    tokio::select! {
        _ = round => panic!("cannot decide before the timeout"),
        () = tokio::time::sleep(Duration::from_millis(5)) => {}
    }
    assert_eq!(released(&nodes), [1; 3], "sent when the round was dropped");
    settle().await;
    assert_eq!(collector.len(), 0);
}

#[tokio::test(start_paused = true)]
async fn the_rest_of_a_release_is_seen_through_by_the_collector() {
    let (nodes, collector) = collected(&[
        (Act::Grant, 1),
        (Act::Grant, 2),
        (Act::Grant, 2),
        (Act::Grant, 40),
        (Act::Never, 0),
    ]);
    let start = Instant::now();
    let results = release_quorum(&nodes, &request(), NODE_TIMEOUT).await;
    assert_eq!(start.elapsed(), Duration::from_millis(2));
    assert_eq!(results.iter().filter(|r| r.is_none()).count(), 2);
    assert_eq!(collector.len(), 1);
    settle().await;
    assert_eq!(
        collector.len(),
        0,
        "done at the last answer or the deadline"
    );
    assert_eq!(released(&nodes), [1; 5]);
}

/// A master that must first "connect" (wait `delay`) and then passes the lock's gate
/// before it sends, as members do; counts what it actually sent.
struct Gated {
    delay: Duration,
    sent: AtomicUsize,
}

impl Voter for Gated {
    async fn acquire(&self, req: &Request) -> Result<Acquired, NodeFailure> {
        tokio::time::sleep(self.delay).await;
        let Some(_entry) = req.wire.enter() else {
            return Err(NodeFailure::connection("not sent"));
        };
        self.sent.fetch_add(1, Ordering::SeqCst);
        Ok(Acquired::Granted(0))
    }

    async fn fence(&self, _: &Request, _: u64) -> Result<bool, NodeFailure> {
        Ok(true)
    }

    async fn extend(&self, _: &Request) -> Result<bool, NodeFailure> {
        Ok(true)
    }

    async fn release(&self, _: &Request) -> Result<u64, NodeFailure> {
        Ok(1)
    }

    async fn extend_many(
        &self,
        reqs: &[Arc<Request>],
    ) -> Result<Vec<Result<bool, NodeFailure>>, NodeFailure> {
        Ok(vec![Ok(true); reqs.len()])
    }
}

fn gated(delays: [u64; 5]) -> Arc<[Gated]> {
    delays
        .map(|ms| Gated {
            delay: Duration::from_millis(ms),
            sent: AtomicUsize::new(0),
        })
        .into_iter()
        .collect()
}

fn sent(nodes: &[Gated]) -> Vec<usize> {
    nodes
        .iter()
        .map(|n| n.sent.load(Ordering::SeqCst))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn acquires_not_sent_by_the_decision_are_sent_while_the_lock_is_held() {
    let nodes = gated([1, 1, 1, 5, 5]);
    let req = request();
    let grant = acquire(&nodes, &req, timing(), 1).await.expect("granted");
    assert_eq!(sent(&nodes), [1, 1, 1, 0, 0]);
    settle().await;
    assert_eq!(
        sent(&nodes),
        [1; 5],
        "a master that could be reached holds the lock too"
    );
    let stats = grant.stats.lock().expect("not poisoned").clone();
    assert_eq!(stats.votes()[4].vote, Vote::Granted);
}

#[tokio::test(start_paused = true)]
async fn acquires_not_sent_by_the_release_are_never_sent() {
    let nodes = gated([1, 1, 1, 5, 5]);
    let req = request();
    let grant = acquire(&nodes, &req, timing(), 1).await.expect("granted");
    let results = release_quorum(&nodes, &req, NODE_TIMEOUT).await;
    assert!(req.wire.sealed());
    assert_eq!(results.iter().filter(|r| r.is_some()).count(), 5);
    settle().await;
    assert_eq!(
        sent(&nodes),
        [1, 1, 1, 0, 0],
        "nothing reaches a master after the release"
    );
    let stats = grant.stats.lock().expect("not poisoned").clone();
    assert!(matches!(
        stats.votes()[4].vote,
        Vote::Failed(NodeFailure::Connection(_))
    ));
}

#[tokio::test]
async fn a_release_waits_for_an_acquire_being_handed_over() {
    let req = request();
    let entry = req.wire.enter().expect("open");
    let release = {
        let req = req.clone();
        tokio::spawn(async move { req.wire.seal().await })
    };
    tokio::task::yield_now().await;
    assert!(!release.is_finished(), "waits for the open entry");
    assert!(req.wire.enter().is_none(), "no new acquire passes");
    drop(entry);
    release.await.expect("sealed");
    assert!(req.wire.sealed());
}

/// The memory master (what `benches/coordinator.rs` measures through `internals`) keeps a
/// real master's contract: a held key is refused to another value, and released only by its
/// own.
#[tokio::test(start_paused = true)]
async fn memory_masters_grant_refuse_and_release_like_masters() {
    let nodes: Arc<[Fake]> = (0..3).map(|_| Fake::memory()).collect();
    let first = request();
    acquire(&nodes, &first, timing(), 1)
        .await
        .expect("granted on empty masters");
    let second = request();
    assert!(
        acquire(&nodes, &second, timing(), 1).await.is_err(),
        "refused while the first holds the key"
    );
    release_all(&nodes, &second, NODE_TIMEOUT).await;
    assert!(
        acquire(&nodes, &request(), timing(), 1).await.is_err(),
        "another value's release deleted nothing"
    );
    release_all(&nodes, &first, NODE_TIMEOUT).await;
    acquire(&nodes, &request(), timing(), 1)
        .await
        .expect("granted once the holder released");
}
