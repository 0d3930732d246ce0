//! Health checks on real masters: each misconfiguration is reported with what to change,
//! and strict mode quarantines a master whose clock runs fast.

mod common;

use std::time::Duration;

use common::*;
use redquorum::{Error, NodeFailure, Problem, Redlock, Vote};
use redquorum_testkit::{LocalCluster, Persistence};

fn problems(report: &redquorum::HealthReport, node: usize) -> Vec<Problem> {
    report.nodes[node].problems.clone()
}

#[tokio::test]
async fn a_sound_set_of_masters_is_healthy() {
    let masters = LocalCluster::builder()
        .nodes(3)
        .persistence(Persistence::AofAlways)
        .start()
        .expect("start");
    let report = client(&masters).health().await.expect("not strict");
    assert!(report.is_healthy(), "{report}");
    for node in &report.nodes {
        assert_eq!(node.role.as_deref(), Some("master"));
        assert!(node.rtt.is_some() && node.version.is_some() && node.run_id.is_some());
        // Within the drift factor (sampling on a loaded machine is noisy; the report
        // already said healthy, so the rate passed the same bound plus its uncertainty).
        let rate = node.clock_rate.expect("sampled");
        assert!((rate - 1.0).abs() < 0.02, "{rate}");
    }
}

#[tokio::test]
async fn replicas_eviction_duplicates_lossy_persistence_and_even_counts_are_reported() {
    let masters = cluster(4);
    masters
        .cmd(1, &["REPLICAOF", "127.0.0.1", &masters.port(0).to_string()])
        .expect("REPLICAOF");
    masters
        .cmd(2, &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"])
        .expect("CONFIG SET");
    masters
        .cmd(3, &["CONFIG", "SET", "appendonly", "yes"])
        .expect("CONFIG SET");
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
    let report = relaxed.health().await.expect("not strict");
    let rate = report.nodes[4].clock_rate.expect("sampled");
    assert!((rate - 1.05).abs() < 0.01, "measured {rate}");
    assert!(
        problems(&report, 4)
            .iter()
            .any(|p| matches!(p, Problem::ClockRate { .. })),
        "{report}"
    );
    assert!((0..4).all(|i| problems(&report, i).is_empty()), "{report}");

    let strict: Redlock = builder(masters.urls()).strict(true).build().expect("valid");
    match strict.health().await {
        Err(Error::Unhealthy(report)) => assert!(report.nodes[4].quarantined.is_some()),
        other => panic!("strict mode must fail: {other:?}"),
    }
    let lock = strict.try_lock("strict").await.expect("four sane masters");
    wait_until(Duration::from_secs(2), "all votes", || async {
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
