//! The semaphore's negative control: with a majority quorum (3 of 5) instead of its real
//! quorum (4 of 5), 3 permits admit 4 holders at once. Built deterministically: four
//! clients, each reaching a different triple of masters (no master in more than three
//! triples, so every master admits each of its clients), all hold a permit at once. The same
//! clients with the real quorum get none (each reaches three masters, four are needed).
//! Needs `--cfg redquorum_unsafe` for the quorum override (`make test` runs it).

use std::time::Duration;

use crate::common::{builder, cluster};
use redquorum::{LockOptions, RetryPolicy};
use redquorum_testkit::{Direction, Fault, LinkSet};

/// Four triples of five masters, each master in at most three of them.
const TRIPLES: [[usize; 3]; 4] = [[0, 1, 2], [0, 1, 3], [0, 2, 4], [1, 3, 4]];
const K: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_majority_quorum_lets_four_holders_share_three_permits() {
    let masters = cluster(5);
    let links: Vec<LinkSet> = TRIPLES
        .iter()
        .map(|triple| {
            let links = masters.links().expect("proxies");
            for i in (0..5).filter(|i| !triple.contains(i)) {
                links.link(i).set(Direction::Both, Fault::Blackhole);
            }
            links
        })
        .collect();
    let clients: Vec<_> = links
        .iter()
        .map(|l| {
            builder(l.urls())
                .ttl(Duration::from_secs(10))
                .node_timeout(Duration::from_millis(100))
                .retry(RetryPolicy::once())
                .build()
                .expect("valid")
        })
        .collect();
    // The real quorum: nobody reaches the four masters a permit needs.
    for (c, client) in clients.iter().enumerate() {
        let err = client
            .lock_with(["pool"], LockOptions::new().permits(K))
            .await
            .expect_err("three masters are not a quorum for 3 permits on 5");
        assert!(
            err.is_no_quorum() || err.is_contended(),
            "client {c}: {err}"
        );
    }
    // A majority: all four are granted, and hold at once.
    let mut permits = Vec::new();
    for (c, client) in clients.iter().enumerate() {
        let permit = client
            .lock_with(["pool"], LockOptions::new().permits(K).quorum_override(3))
            .await
            .unwrap_or_else(|e| panic!("client {c} is granted on its triple: {e}"));
        permits.push(permit);
    }
    let live = permits.iter().filter(|p| !p.is_expired()).count();
    assert_eq!(live, 4, "four holders of three permits at once");
    println!(
        "[checker] negative: majority quorum for 3 permits on 5 masters: {live} holders at once (3 allowed)"
    );
    for permit in permits {
        let _ = permit.release().await;
    }
}
