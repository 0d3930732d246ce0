//! Health checks on real masters: each misconfiguration is reported with what to change,
//! and strict mode quarantines a master whose clock runs fast.

use std::time::Duration;

use crate::common::inspect::cmd;
use crate::common::*;
use redquorum::{Error, NodeFailure, Problem, Redlock, Vote};
use redquorum_testkit::{LocalCluster, Persistence, ReplyExt};

fn problems(report: &redquorum::HealthReport, node: usize) -> Vec<Problem> {
    report.nodes[node].problems.clone()
}

/// How many health checks a test may take to get one clean measurement of the clocks.
///
/// A clock rate is measured from the round trips of a few `TIME` calls, so a loaded machine
/// makes single measurements noisy (the report widens its bound by that noise, so it does
/// not raise false alarms, but it may then fail to see a real fault). A test that needs a
/// precise figure takes checks until one is precise: every check must still be right in
/// what it reports, and a wrong rate never becomes precise by repetition.
const CLOCK_CHECKS: usize = 20;

#[tokio::test]
async fn a_sound_set_of_masters_is_healthy() {
    let masters = LocalCluster::builder()
        .nodes(3)
        .persistence(Persistence::AofAlways)
        .start()
        .expect("start");
    let redlock = client(&masters);
    let mut rates = Vec::new();
    for _ in 0..CLOCK_CHECKS {
        let report = redlock.health().await.expect("not strict");
        assert!(report.is_healthy(), "{report}");
        for node in &report.nodes {
            assert_eq!(node.role.as_deref(), Some("master"));
            assert!(node.rtt.is_some() && node.version.is_some() && node.run_id.is_some());
        }
        let sampled: Vec<f64> = report
            .nodes
            .iter()
            .map(|n| n.clock_rate.expect("sampled"))
            .collect();
        // Within the drift factor.
        if sampled.iter().all(|rate| (rate - 1.0).abs() < 0.02) {
            return;
        }
        rates.push(sampled);
    }
    panic!("no check measured every clock within 2 % of ours: {rates:?}");
}

#[tokio::test]
async fn replicas_eviction_duplicates_lossy_persistence_and_even_counts_are_reported() {
    let masters = cluster(4);
    for (i, args) in [
        (
            1,
            vec!["REPLICAOF", "127.0.0.1", &masters.port(0).to_string()],
        ),
        (2, vec!["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]),
        (3, vec!["CONFIG", "SET", "appendonly", "yes"]),
    ] {
        let reply = cmd(&masters, i, &args).await;
        assert!(reply.as_error().is_none(), "{}: {reply:?}", args.join(" "));
    }
    let mut urls = masters.urls();
    // The same server as master 0 under another name.
    urls.push(format!("redis://localhost:{}", masters.port(0)));
    let redlock = builder(urls).restart_guard(true).build().expect("valid");
    // New masters: commissioned, the guard counts them (the replica refuses the marker).
    for i in [0, 2, 3] {
        redlock.commission(i, false).await.expect("commission");
    }
    let report = redlock
        .health_with(Duration::from_millis(200))
        .await
        .expect("not strict");
    assert!(!report.is_healthy());
    assert!(problems(&report, 1).contains(&Problem::Replica), "{report}");
    assert!(
        problems(&report, 2).contains(&Problem::Evicting {
            policy: "allkeys-lru".into()
        }),
        "{report}"
    );
    assert!(
        problems(&report, 3)
            .iter()
            .any(|p| matches!(p, Problem::RestartsQuarantine { .. })),
        "{report}"
    );
    // The guard says what it will do: the replica cannot be verified (it refuses writes).
    assert!(
        problems(&report, 1)
            .iter()
            .any(|p| matches!(p, Problem::Unverified { .. })),
        "{report}"
    );
    assert!(
        problems(&report, 4).contains(&Problem::Duplicate { first: 0 }),
        "{report}"
    );
    // No persistence with the guard on: each restart will cost a quarantine.
    assert!(
        matches!(
            problems(&report, 0).as_slice(),
            [Problem::RestartsQuarantine { .. }]
        ),
        "{report}"
    );
    assert!(report.nodes[0].guard.counts(), "{report}");
    // Five entries: no even-count warning; the text says what to change.
    assert!(report.problems.is_empty());
    let text = report.to_string();
    assert!(
        text.contains("noeviction") && text.contains("list each server once"),
        "{text}"
    );

    let four = builder(masters.urls()).build().expect("valid");
    let report = four
        .health_with(Duration::from_millis(200))
        .await
        .expect("not strict");
    assert_eq!(report.problems, [Problem::EvenCount { nodes: 4 }]);
    // No persistence with the guard off is reported too.
    assert!(
        problems(&report, 0).contains(&Problem::UnguardedRestarts),
        "{report}"
    );
}

#[tokio::test]
async fn a_fast_clock_is_reported_and_quarantined_in_strict_mode() {
    let masters = LocalCluster::builder()
        .nodes(5)
        .persistence(Persistence::AofAlways)
        .clock_shim(true)
        .start()
        .expect("start with the clock shim");
    masters
        .clock(4)
        .expect("shimmed")
        .set_rate(1.05)
        .expect("5% fast");
    let relaxed = client(&masters);
    let mut seen = Vec::new();
    let measured = loop {
        assert!(
            seen.len() < CLOCK_CHECKS,
            "no check measured master 4 within 1 % of 1.05 and reported it: {seen:?}"
        );
        let report = relaxed.health().await.expect("not strict");
        // The sane masters are never blamed, however noisy the measurement.
        assert!((0..4).all(|i| problems(&report, i).is_empty()), "{report}");
        let rate = report.nodes[4].clock_rate.expect("sampled");
        let reported = problems(&report, 4)
            .iter()
            .any(|p| matches!(p, Problem::ClockRate { .. }));
        if (rate - 1.05).abs() < 0.01 && reported {
            break rate;
        }
        seen.push((rate, reported));
    };
    println!(
        "master 4 measured at {measured} after {} noisy checks",
        seen.len()
    );

    // A node timeout no loaded machine reaches: the four sane masters' votes are grants.
    let strict: Redlock = builder(masters.urls())
        .strict(true)
        .node_timeout(Duration::from_secs(2))
        .build()
        .expect("valid");
    // Strict mode quarantines master 4 once a check sees its clock (a check too noisy to
    // see it reports the set healthy; a check that blames anything else fails the test).
    let mut noisy = 0;
    loop {
        match strict.health().await {
            Err(Error::Unhealthy(report)) => {
                assert!((0..4).all(|i| problems(&report, i).is_empty()), "{report}");
                assert!(report.nodes[4].quarantined.is_some(), "{report}");
                break;
            }
            Ok(report) if noisy + 1 < CLOCK_CHECKS => {
                assert!(report.is_healthy(), "{report}");
                noisy += 1;
            }
            other => panic!("strict mode must fail: {other:?}"),
        }
    }
    let lock = strict.try_lock("strict").await.expect("four sane masters");
    wait_until(PATIENCE, "all votes", || async {
        lock.stats().pending_count() == 0
    })
    .await;
    let stats = lock.stats();
    assert!(
        matches!(
            stats.votes()[4].vote,
            Vote::Failed(NodeFailure::Quarantined { .. })
        ),
        "{stats:?}"
    );
    assert_eq!(stats.granted(), 4);
    lock.release().await.expect("released");
}
