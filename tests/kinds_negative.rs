//! Negative controls of the lock kinds' quorum rules, built deterministically with per-client
//! partitions through the fault proxy.
//!
//! The semaphore: with a majority quorum (3 of 5) instead of its real
//! quorum (4 of 5), 3 permits admit 4 holders at once. Built deterministically: four
//! clients, each reaching a different triple of masters (no master in more than three
//! triples, so every master admits each of its clients), all hold a permit at once. The same
//! clients with the real quorum get none (each reaches three masters, four are needed).
//! The read-write lock: a writer alone needs a majority as much as a reader does — with 2 of 5
//! a writer on masters 3 and 4 is granted while a reader holds masters 0–2; with the real
//! quorum it is refused.
//! Needs the `internals` feature for the quorum override (`make test` runs it).

#![cfg(feature = "internals")]

mod common;

use std::time::Duration;

use common::{builder, cluster};
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

/// Links to every master with all but `reach` blackholed.
fn reaching(masters: &redquorum_testkit::LocalCluster, reach: &[usize]) -> LinkSet {
    let links = masters.links().expect("proxies");
    for i in (0..5).filter(|i| !reach.contains(i)) {
        links.link(i).set(Direction::Both, Fault::Blackhole);
    }
    links
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_a_minority_quorum_lets_a_writer_in_beside_a_reader() {
    let masters = cluster(5);
    let client = |links: &LinkSet| {
        builder(links.urls())
            .ttl(Duration::from_secs(10))
            .node_timeout(Duration::from_millis(100))
            .retry(RetryPolicy::once())
            .build()
            .expect("valid")
    };
    let (reader_links, writer_links) =
        (reaching(&masters, &[0, 1, 2]), reaching(&masters, &[3, 4]));
    let (reader, writer) = (client(&reader_links), client(&writer_links));
    let read = reader
        .lock_with(["doc"], LockOptions::new().read())
        .await
        .expect("a reader on masters 0-2");
    // The real quorum: two masters are no majority.
    let err = writer
        .lock_with(["doc"], LockOptions::new().write())
        .await
        .expect_err("two masters are not a quorum");
    assert!(err.is_no_quorum() || err.is_contended(), "{err}");
    // With 2 of 5 the writer holds the lock the reader holds.
    let write = writer
        .lock_with(["doc"], LockOptions::new().write().quorum_override(2))
        .await
        .expect("granted on masters 3 and 4");
    assert!(
        !read.is_expired() && !write.is_expired(),
        "a writer beside a reader"
    );
    println!("[checker] negative: minority quorum for a writer: a writer and a reader at once");
    let _ = write.release().await;
    let _ = read.release().await;
}
