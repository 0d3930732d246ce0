//! Mutual exclusion under node faults: a master paused again and again, a majority paused
//! (calls fail fast and locking recovers after the resume), and crash churn — restarts
//! delayed by more than the ttl without persistence, or immediate with AOF `always`. 0
//! overlaps, 0 lost updates and enough hand-overs each (see `common/scenario.rs`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::cluster;
use crate::common::hold::HoldStyle;
use crate::common::scenario::*;
use rand::RngExt;
use redquorum::{NodeFailure, Redlock, RetryPolicy};
use redquorum_testkit::{LocalCluster, Persistence};

const READY: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_five_masters_paused_for_1_5_s_every_2_s() {
    let masters = Arc::new(cluster(5));
    let run = Scenario {
        run_for: Duration::from_secs(5),
        ..Scenario::new("one master paused 1.5 s every 2 s")
    }
    .start(masters)
    .await;
    let out = run
        .run_with_chaos(|mut chaos, _| {
            let mut pauses = 0;
            loop {
                let node = chaos.rng.random_range(0..chaos.cluster.len());
                chaos.cluster.pause(node).expect("SIGSTOP");
                pauses += 1;
                let going = chaos.stop.sleep(Duration::from_millis(1500));
                chaos.cluster.resume(node).expect("SIGCONT");
                if !going || !chaos.stop.sleep(Duration::from_millis(500)) {
                    break;
                }
            }
            assert!(pauses >= 1);
        })
        .await;
    out.report.assert_safe();
}

/// What the probe's call during the majority's pause returned.
#[derive(Clone)]
struct Probe {
    took: Duration,
    what: String,
    no_quorum: bool,
    /// Paused masters whose vote ended at the node timeout.
    cut_off: usize,
}

impl Probe {
    fn new(took: Duration, what: &str, no_quorum: bool, cut_off: usize) -> Self {
        Self {
            took,
            what: what.to_owned(),
            no_quorum,
            cut_off,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_majority_fails_calls_fast_and_locking_recovers_after_the_resume() {
    let masters = Arc::new(cluster(5));
    let run = Scenario {
        run_for: Duration::from_secs(4),
        wait_for_mark: true,
        ..Scenario::new("majority paused")
    }
    .start(masters.clone())
    .await;
    let node_timeout = run.scenario.node_timeout;
    let probe_result: Arc<Mutex<Option<Probe>>> = Arc::default();
    let probed = probe_result.clone();
    let out = run
        .run_with_chaos(move |chaos, mark| {
            // A probe client of its own, connected before the pause.
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("probe runtime");
            let probe = rt.block_on(async {
                let probe: Redlock = crate::common::builder(chaos.cluster.urls())
                    .ttl(Duration::from_secs(2))
                    .node_timeout(node_timeout)
                    .retry(RetryPolicy::once())
                    .build()
                    .expect("valid");
                probe.connect().await;
                probe
            });
            if !chaos.stop.sleep(Duration::from_millis(500)) {
                return;
            }
            for i in 0..3 {
                chaos.cluster.pause(i).expect("SIGSTOP");
            }
            // While paused: a call fails with "no quorum", cut short by the node timeout of
            // each paused master (their votes say so), not by their resume, which only comes
            // after the call has returned. The bound only catches a hang.
            let result = rt.block_on(async {
                let sent = Instant::now();
                let r =
                    tokio::time::timeout(crate::common::PATIENCE, probe.try_lock("probe")).await;
                (sent.elapsed(), r)
            });
            let (took, r) = result;
            let summary = match &r {
                Ok(Ok(_)) => Probe::new(took, "granted", false, 0),
                Ok(Err(e)) => {
                    let cut_off = e
                        .node_failures()
                        .iter()
                        .filter(|(i, f)| {
                            *i < 3 && matches!(f, NodeFailure::Timeout(t) if *t == node_timeout)
                        })
                        .count();
                    Probe::new(took, &e.to_string(), e.is_no_quorum(), cut_off)
                }
                Err(_) => Probe::new(took, "hung", false, 0),
            };
            *probed.lock().expect("probe slot") = Some(summary);
            drop(r);
            chaos.stop.sleep(Duration::from_millis(1500));
            for i in 0..3 {
                chaos.cluster.resume(i).expect("SIGCONT");
            }
            mark.set_now();
            drop(rt);
        })
        .await;
    out.report.assert_safe();
    let Probe {
        took,
        what,
        no_quorum,
        cut_off,
    } = probe_result
        .lock()
        .expect("probe slot")
        .clone()
        .expect("the probe ran");
    assert!(
        no_quorum,
        "a paused majority must give no quorum, got {what} after {took:?}"
    );
    assert_eq!(
        cut_off, 3,
        "each paused master's vote must end at the node timeout ({node_timeout:?}): {what}"
    );
    // Every client felt the pause: a call in progress during it fails once its retries run
    // out (1 s), and the pause lasts longer. Whether that failure says "no quorum" or
    // "contended" depends on which votes came first (two live masters holding another
    // client's key outvote the first timeout), so either counts.
    assert!(
        out.stats.no_quorum + out.stats.contended > 0,
        "no call failed during the pause: {:?}",
        out.stats
    );
    for (c, stats) in out.per_client.iter().enumerate() {
        assert!(
            stats.acquired_after_mark > 0,
            "client {c} did not recover: {stats:?}"
        );
    }
}

/// Kills one master at a time and restarts it only after more than a ttl (no persistence):
/// the restarted master is empty, but every lock it granted has expired by then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_churn_with_restarts_delayed_past_the_ttl() {
    let masters = Arc::new(cluster(5));
    let ttl = Duration::from_secs(1);
    let run = Scenario {
        ttl,
        run_for: Duration::from_secs(5),
        ..Scenario::new("crash churn, restart after ttl")
    }
    .start(masters)
    .await;
    let out = run
        .run_with_chaos(move |mut chaos, _| {
            let mut crashes = 0;
            loop {
                let node = chaos.rng.random_range(0..chaos.cluster.len());
                chaos
                    .cluster
                    .restart_after(node, ttl + Duration::from_millis(200))
                    .expect("kill and schedule the restart");
                crashes += 1;
                chaos.cluster.wait_ready(node, READY).expect("restarted");
                if !chaos.stop.sleep(Duration::from_millis(300)) {
                    break;
                }
            }
            assert!(crashes >= 1);
        })
        .await;
    out.report.assert_safe();
}

/// Crash churn with AOF `appendfsync always` and immediate restarts: the keys survive the
/// crash. Holds last longer than the ttl, so renewals run through the crashes too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_churn_with_aof_always_and_immediate_restarts() {
    let masters = Arc::new(
        LocalCluster::builder()
            .nodes(5)
            .persistence(Persistence::AofAlways)
            .start()
            .expect("start masters with AOF"),
    );
    let ttl = Duration::from_secs(1);
    let run = Scenario {
        ttl,
        node_timeout: Duration::from_millis(150),
        hold: HoldStyle::Renewed {
            hold: Duration::from_millis(1300),
        },
        run_for: Duration::from_secs(5),
        min_hand_overs: 5,
        retry: RetryPolicy::new()
            .unlimited_attempts()
            .timeout(Duration::from_secs(2))
            .delay(Duration::from_millis(20), Duration::from_millis(10)),
        ..Scenario::new("crash churn, AOF always")
    }
    .start(masters)
    .await;
    let out = run
        .run_with_chaos(|mut chaos, _| {
            let mut crashes = 0;
            while chaos
                .stop
                .sleep(Duration::from_millis(chaos.rng.random_range(200..=600)))
            {
                let node = chaos.rng.random_range(0..chaos.cluster.len());
                chaos
                    .cluster
                    .restart(node)
                    .expect("kill and restart at once");
                crashes += 1;
            }
            assert!(crashes >= 1);
        })
        .await;
    out.report.assert_safe();
}
