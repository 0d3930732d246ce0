//! Mutual exclusion under network faults: contention without faults, jitter, blackholed
//! links, dropped replies and requests delivered after the ttl, and TCP resets. Every
//! scenario runs several clients through their own fault proxies and must show 0 overlaps,
//! 0 lost updates and enough hand-overs (see `common/scenario.rs`; `REDQUORUM_SOAK=1`
//! runs the soak tier, `REDQUORUM_SEED` replays a seed).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::common::hold::load_scripts;
use crate::common::inspect::*;
use crate::common::scenario::*;
use crate::common::{PATIENCE, builder, cluster, wait_until};
use rand::RngExt;
use redquorum::RetryPolicy;
use redquorum_testkit::{Direction, Fault};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn baseline_contention() {
    let masters = Arc::new(cluster(5));
    let run = Scenario {
        min_hand_overs: 20,
        ..Scenario::new("baseline contention")
    }
    .start(masters)
    .await;
    let out = run.run().await;
    out.report.assert_safe();
    assert_eq!(out.stats.other_failures, 0, "{:?}", out.stats.first_other);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jitter_of_up_to_20_ms_on_every_link() {
    let masters = Arc::new(cluster(5));
    let run = Scenario {
        node_timeout: Duration::from_millis(200),
        ..Scenario::new("jitter 0-20 ms on every link")
    }
    .start(masters)
    .await;
    let jitter = Fault::Delay {
        base: Duration::ZERO,
        jitter: Duration::from_millis(20),
    };
    for links in &run.links {
        links.set_all(Direction::Both, jitter);
    }
    let out = run.run().await;
    out.report.assert_safe();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blackholed_links_come_and_go() {
    let masters = Arc::new(cluster(5));
    let run = Scenario {
        run_for: Duration::from_secs(4),
        ..Scenario::new("blackholed links")
    }
    .start(masters)
    .await;
    let out = run
        .run_with_chaos(|mut chaos, _| {
            // Each client has at most two silent links at a time, so a quorum stays
            // reachable; which ones changes every 100-300 ms.
            let mut dark: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); chaos.links.len()];
            let mut flips = 0;
            while chaos
                .stop
                .sleep(Duration::from_millis(chaos.rng.random_range(100..=300)))
            {
                let c = chaos.rng.random_range(0..chaos.links.len());
                let node = chaos.rng.random_range(0..chaos.cluster.len());
                if dark[c].remove(&node) {
                    chaos.links[c].link(node).set(Direction::Both, Fault::Pass);
                } else {
                    if dark[c].len() == 2 {
                        let lit = *dark[c].iter().next().expect("two dark links");
                        dark[c].remove(&lit);
                        chaos.links[c].link(lit).set(Direction::Both, Fault::Pass);
                    }
                    dark[c].insert(node);
                    chaos.links[c]
                        .link(node)
                        .set(Direction::Both, Fault::Blackhole);
                    flips += 1;
                }
            }
            for links in &chaos.links {
                links.set_all(Direction::Both, Fault::Pass);
            }
            assert!(flips > 0, "no link was ever blackholed");
        })
        .await;
    out.report.assert_safe();
}

/// Replies dropped on one link of each client (the request is applied, the client never
/// hears) and requests delayed past the ttl on another. Every failed attempt must release
/// every master — the ones that never answered included — so no key may ever be left to
/// expire by its ttl: `expired_keys` stays 0 on every master.
///
/// A late `SET` creates its key a ttl before it runs out, and the release follows it on the
/// same connection, delayed alike: only a client frozen for about a ttl between sending the
/// two lets the key run out (rightly so). The ttl is two seconds, beyond the stalls seen
/// under `make test-stress` (with one second, a run there once let two keys run out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_replies_and_requests_delivered_after_the_ttl_leave_no_key_behind() {
    let masters = Arc::new(cluster(5));
    let ttl = Duration::from_secs(2);
    let late = ttl + Duration::from_millis(300);
    let run = Scenario {
        ttl,
        run_for: Duration::from_secs(4),
        min_hand_overs: 8,
        ..Scenario::new("dropped replies, requests after the ttl")
    }
    .start(masters.clone())
    .await;

    for (c, links) in run.links.iter().enumerate() {
        links.link(c % 5).set(Direction::ToClient, Fault::Drop);
        links
            .link((c + 2) % 5)
            .set(Direction::ToServer, Fault::delay(late));
    }
    let links = run.links.clone();
    let out = run.run().await;
    out.report.assert_safe();
    assert!(
        out.stats.acquired > 0 && out.stats.contended + out.stats.no_quorum > 0,
        "the faults were not exercised: {:?}",
        out.stats
    );
    // Every delayed request (and the release queued behind it on its connection) must reach
    // its master before we count what expired. The proxy keeps the order of a connection's
    // chunks, so with the faults lifted each client pings every master over its own
    // connections, and we wait until each ping has been written: everything the client
    // sent before it has been too. The clients stay connected meanwhile (a closed client
    // connection makes the proxy drop what it still holds).
    for set in &links {
        set.set_all(Direction::Both, Fault::Pass);
    }
    for (client, set) in out.clients.iter().zip(&links) {
        let written = start_tap(set);
        // The answers do not matter (the link that dropped replies resets its connection
        // at the first one that gets through); the requests do.
        let _ = client.connect().await;
        wait_tapped(
            &masters,
            set,
            &written,
            "every request of every client to reach its master",
            |link| count_tapped(link, "PING") >= 1,
        )
        .await;
    }
    wait_until(PATIENCE, "no lock key left", || async {
        for i in 0..5 {
            if !lock_keys(&masters, i).await.is_empty() {
                return false;
            }
        }
        true
    })
    .await;
    let expired = expired_everywhere(&masters).await;
    // A hold that overran its deadline (a stalled machine) may legitimately leave its keys
    // to expire; nothing else may.
    assert!(
        expired <= 5 * out.stats.late_releases,
        "{expired} lock keys expired by their ttl instead of being released ({} late releases)",
        out.stats.late_releases
    );
    drop(out.clients);
    let dropped: u64 = links
        .iter()
        .map(|l| {
            l.links()
                .iter()
                .map(|p| p.stats().to_client.dropped_chunks)
                .sum::<u64>()
        })
        .sum();
    assert!(dropped > 0, "no reply was dropped");
}

/// The release of a lock whose reply from one master is dropped: the release is sent to
/// that master too, and must delete the key there long before its ttl.
async fn release_with_dropped_replies(script_cached: bool) {
    let masters = cluster(5);
    let links = masters.links().expect("links");
    // Master 0's vote always times out (its replies are dropped), but no call waits for it:
    // a long node timeout costs nothing and keeps a stalled machine from failing the others.
    let redlock = builder(links.urls())
        .ttl(Duration::from_secs(5))
        .node_timeout(Duration::from_secs(1))
        .retry(RetryPolicy::new().attempts(10))
        .build()
        .expect("valid");
    redlock.connect().await;
    if script_cached {
        load_scripts(&masters).await;
    }
    links.link(0).set(Direction::ToClient, Fault::Drop);
    let key = lock_key("unacknowledged");
    let lock = redlock
        .lock("unacknowledged")
        .await
        .expect("four masters answer");
    let value = lock.value().to_owned();
    wait_until(PATIENCE, "master 0 to apply the SET", || async {
        value_of(&masters, 0, &key).await.as_deref() == Some(value.as_str())
    })
    .await;
    lock.release().await.expect("released in time");
    wait_until(
        PATIENCE,
        "the key to be gone on master 0, whose replies are dropped",
        || async { value_of(&masters, 0, &key).await.is_none() },
    )
    .await;
    // Released, not expired by its ttl.
    assert_eq!(
        expired_keys(&masters, 0).await,
        0,
        "the key on master 0 ran out instead of being released"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_whose_reply_is_dropped_deletes_the_key_once_the_script_is_cached() {
    release_with_dropped_replies(true).await;
}

/// Found by this test: the release used to be an `EVALSHA`; on a master that had not cached
/// the script (fresh, or restarted) it failed with `NOSCRIPT`, and the fallback (load the
/// script, retry) needed that reply — which was dropped, so the key stayed for its whole
/// ttl. Releases are now self-contained `EVAL`s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]

async fn a_release_whose_reply_is_dropped_deletes_the_key_on_a_fresh_master() {
    release_with_dropped_replies(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_resets_do_not_panic_and_clients_reconnect() {
    let masters = Arc::new(cluster(5));
    let run = Scenario {
        run_for: Duration::from_secs(4),
        wait_for_mark: true,
        ..Scenario::new("tcp resets")
    }
    .start(masters)
    .await;
    let calm_after = Duration::from_millis(2500);
    let out = run
        .run_with_chaos(move |mut chaos, mark| {
            let mut resets = 0;
            while chaos.started.elapsed() < calm_after
                && chaos
                    .stop
                    .sleep(Duration::from_millis(chaos.rng.random_range(50..=200)))
            {
                let c = chaos.rng.random_range(0..chaos.links.len());
                if chaos.rng.random_bool(0.3) {
                    chaos.links[c].reset_all();
                } else {
                    let node = chaos.rng.random_range(0..chaos.cluster.len());
                    chaos.links[c].link(node).reset_connections();
                }
                resets += 1;
            }
            mark.set_now();
            assert!(resets > 0, "no connection was reset");
        })
        .await;
    out.report.assert_safe();
    for (c, stats) in out.per_client.iter().enumerate() {
        assert!(
            stats.acquired_after_mark > 0,
            "client {c} never locked again after the resets: {stats:?}"
        );
    }
}
