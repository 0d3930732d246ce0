//! Negative controls: faults outside the Redlock model, which the checker must catch (≥ 1
//! overlap), each next to its safe twin (0 overlaps), so that a green fault suite means
//! something.
//!
//! - A master restarted without persistence that rejoins at once, with the clients' links
//!   steered so that the first holder's quorum and the second's share only that master:
//!   with the restart guard off the second client gets the lock while the first holds it;
//!   with the guard on, the restarted master's grant does not count for a ttl.
//! - Master clocks on a quorum running 5 % fast (drift factor 0.01): keys expire before
//!   the holder's deadline (the 0.3 % twin is in `faults_clocks.rs`).
//!
//! The seed bug — a naive renewal delayed onto a rival's lock — is in
//! `negative_renewal.rs`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::hold::lease_without_renewal;
use crate::common::inspect::*;
use crate::common::scenario::*;
use crate::common::{builder, cluster};
use redquorum::{Redlock, RetryPolicy};
use redquorum_testkit::{Checker, Direction, Fault, Hold, LinkSet, LocalCluster, Report};

// ---------------------------------------------------------------------------------------
// A master restarted empty that rejoins at once.

const RESTART_TTL: Duration = Duration::from_secs(2);

/// Client A reaches masters {0, 1, 2}, client B {2, 3, 4}. A takes the lock and holds it to
/// its deadline; master 2 is restarted empty; B then tries to lock the same resource.
///
/// With the guard off, B must lock while A still holds the lock for the round to show the
/// overlap; a round in which B (on a loaded machine) only locked after A's release shows
/// nothing, and is repeated on a fresh resource, up to five times. With the guard on, one
/// round: B cannot lock before A's deadline, whatever the machine.
async fn restart_without_persistence(name: &'static str, guard: bool) -> Report {
    let masters = Arc::new(cluster(5));
    if guard {
        // New masters: commissioned, they count at once (uncommissioned, the guard would
        // keep them out for a ttl after first sight).
        crate::common::commission(&masters).await;
    }
    let checker = Checker::start(name).expect("referee").min_hand_overs(1);
    let a_links = masters.links_seeded(checker.seed()).expect("links");
    let b_links = masters.links_seeded(checker.seed() ^ 1).expect("links");
    for i in [3, 4] {
        a_links.link(i).set(Direction::Both, Fault::Blackhole);
    }
    for i in [0, 1] {
        b_links.link(i).set(Direction::Both, Fault::Blackhole);
    }
    let client = |links: &LinkSet| -> Redlock {
        builder(links.urls())
            .ttl(RESTART_TTL)
            .node_timeout(Duration::from_millis(200))
            .restart_guard(guard)
            // B cannot reach the masters that hold A's ttl records (that is the scenario):
            // the declared bound tells its guard how long A's lock may run.
            .deployment_max_ttl(RESTART_TTL)
            .retry(
                RetryPolicy::new()
                    .unlimited_attempts()
                    .timeout(RESTART_TTL * 3)
                    .delay(Duration::from_millis(50), Duration::from_millis(25)),
            )
            .build()
            .expect("valid")
    };
    let (a, b) = (client(&a_links), client(&b_links));
    // Both clients see (and, with the guard, verify) every reachable master first.
    a.connect().await;
    b.connect().await;
    let rounds = if guard { 1 } else { 5 };
    for round in 0..rounds {
        let resource = format!("shared-{round}");
        let b_during_a = restart_round(&masters, &checker, &a, &b, &resource).await;
        if guard || b_during_a {
            break;
        }
        println!("round {round}: B locked only after A released; repeating");
    }
    checker
        .report_with(format!(
            "restart guard {}",
            if guard { "on" } else { "off" }
        ))
        .expect("referee")
}

/// One round on `resource`; true if B acquired while A still held the lock.
async fn restart_round(
    masters: &Arc<LocalCluster>,
    checker: &Checker,
    a: &Redlock,
    b: &Redlock,
    resource: &str,
) -> bool {
    let lock_a = a
        .lock(resource)
        .await
        .expect("A locks through masters 0, 1, 2");
    let acquired_a = Instant::now();
    let mut granted = Vec::new();
    for i in 0..5 {
        if value_of(masters, i, &lock_key(resource)).await.as_deref() == Some(lock_a.value()) {
            granted.push(i);
        }
    }
    assert_eq!(granted, [0, 1, 2], "A's links steer its lock");
    let margin = Duration::from_millis(50);
    let lease_a = lease_without_renewal(&lock_a, margin)
        .await
        .expect("fresh lock");
    let mut session_a = checker.referee().session().await.expect("referee");
    let read_a = session_a.read(resource).await.expect("read");

    // Master 2 loses A's key: killed and started again at once, empty.
    let restarted = masters.clone();
    tokio::task::spawn_blocking(move || restarted.restart(2))
        .await
        .expect("join")
        .expect("restart master 2");

    let b_side = async {
        let mut session_b = checker.referee().session().await.expect("referee");
        match b.lock(resource).await {
            Ok(lock_b) => {
                let acquired_b = Instant::now();
                let lease_b = lease_without_renewal(&lock_b, margin)
                    .await
                    .expect("fresh lock");
                let read_b = session_b.read(resource).await.expect("read");
                tokio::time::sleep(Duration::from_millis(20)).await;
                if lease_b.check().is_ok() {
                    session_b.write(resource, read_b).await.expect("write");
                }
                let deadline = lease_b.deadline().into_std();
                let released = Instant::now();
                let _ = lock_b.release().await;
                checker
                    .recorder()
                    .record(Hold::new(1, resource, acquired_b, deadline, released));
                Some(acquired_b)
            }
            Err(e) => {
                assert!(e.is_retryable(), "{e}");
                None
            }
        }
    };
    let a_side = async {
        let until = lease_a.deadline().into_std() - margin * 2;
        let worked = lease_a
            .run(tokio::time::sleep(
                until.saturating_duration_since(Instant::now()),
            ))
            .await
            .is_ok();
        if worked && lease_a.check().is_ok() {
            session_a.write(resource, read_a).await.expect("write");
        }
        let deadline = lease_a.deadline().into_std();
        let released = Instant::now();
        let _ = lock_a.release().await;
        checker
            .recorder()
            .record(Hold::new(0, resource, acquired_a, deadline, released));
        released
    };
    let (b_acquired, released_a) = tokio::join!(b_side, a_side);
    let acquired_b = b_acquired.expect("B eventually locks (after A's deadline at the latest)");
    acquired_b < released_a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_without_persistence_and_immediate_rejoin_guard_off_is_caught() {
    let report =
        restart_without_persistence("negative: restart empty, rejoin at once, guard off", false)
            .await;
    report.assert_overlap_found();
    assert!(report.lost_updates() >= 1, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_without_persistence_and_immediate_rejoin_guard_on_is_safe() {
    let report = restart_without_persistence("restart empty, rejoin at once, guard on", true).await;
    report.assert_safe();
}

// ---------------------------------------------------------------------------------------
// Clocks on a quorum running 5 % fast.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_clocks_on_a_quorum_5_percent_fast_are_caught() {
    let masters = clock_cluster(&[1.05, 1.05, 1.05, 1.0, 1.0]);
    let run = Scenario {
        stop_on_overlap: true,
        // It ends at the first overlap; the bound is only for a broken checker.
        max_run: Duration::from_secs(60),
        ..Scenario::holding_to_the_deadline(
            "negative: quorum clocks 5 % fast, drift factor 0.01",
            Duration::from_secs(2),
        )
    }
    .start(masters)
    .await;
    let out = run.run().await;
    out.report.assert_overlap_found();
}
