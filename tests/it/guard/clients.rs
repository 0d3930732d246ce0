//! The restart guard with several clients sharing the masters, on real servers: a loss
//! noticed by a third client first, clients with different ttls (and an extended lock), and
//! durable masters that restart. Every scenario waits for the events it needs (grants,
//! verifications), never for a time.

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use redquorum::{EpochCause, GuardStatus, Lock, NodeFailure, Redlock, RetryPolicy, Vote};
use redquorum_testkit::{Direction, Fault, LinkSet, LocalCluster, Persistence};

/// A guarded client over `urls` with `ttl`, one attempt per call.
fn guarded(urls: Vec<String>, ttl: Duration) -> Redlock {
    builder(urls)
        .ttl(ttl)
        .node_timeout(Duration::from_millis(200))
        .restart_guard(true)
        .retry(RetryPolicy::once())
        .build()
        .expect("valid")
}

/// Links to every master with the ones in `cut` blackholed: this client's locks then live
/// on the others only.
fn links_without(masters: &LocalCluster, cut: &[usize]) -> LinkSet {
    let links = masters.links().expect("proxies");
    for &i in cut {
        links.link(i).set(Direction::Both, Fault::Blackhole);
    }
    links
}

/// Locks and releases a resource of its own through `redlock` once every master voted, so
/// that the client has verified every master it reaches.
async fn know_every_master(redlock: &Redlock, name: &str) {
    let lock = eventually(Duration::from_secs(10), "a first lock", || async {
        redlock.try_lock(name).await.ok()
    })
    .await;
    all_votes(&lock).await;
    lock.release().await.expect("released");
}

async fn all_votes(lock: &Lock) {
    wait_until(Duration::from_secs(5), "every master's vote", || async {
        lock.stats().pending_count() == 0
    })
    .await;
}

fn quarantined(vote: &Vote) -> bool {
    matches!(vote, Vote::Failed(NodeFailure::Quarantined { .. }))
}

/// The epoch in master `i`'s marker.
async fn epoch_of(masters: &LocalCluster, i: usize) -> Option<String> {
    use redis::AsyncCommands;
    conn(&masters.url(i))
        .await
        .hget("redquorum:guard", "epoch")
        .await
        .expect("HGET")
}

/// X holds `r` on masters 0 and 1; master 0 loses its data while up (FLUSHALL); a third
/// client A notices first (it locks something else) and begins the new epoch. B, which
/// knew master 0 from before, must then not count master 0 for `r` while X holds it: the
/// epoch A wrote is new to B, so B keeps master 0 out for the deployment's longest ttl from
/// when A noticed. (The old guard's marker held one shared value that A wrote back as it
/// was, healing master 0 for everybody: B was granted `r`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_loss_noticed_first_by_a_third_client_keeps_the_master_out_for_everyone() {
    let masters = cluster(3);
    commission(&masters).await;
    let ttl = Duration::from_secs(2);
    let x_links = links_without(&masters, &[2]);
    let x = guarded(x_links.urls(), ttl);
    let a = guarded(masters.urls(), ttl);
    let b = guarded(masters.urls(), ttl);
    know_every_master(&a, "a-warm").await;
    know_every_master(&b, "b-warm").await;
    let lock_x = x.try_lock("r").await.expect("masters 0 and 1 grant");
    let before = epoch_of(&masters, 0).await.expect("commissioned");

    masters.cmd(0, &["FLUSHALL"]).expect("FLUSHALL");
    // A notices: its grant on master 0 comes back without the epoch it knew, and its
    // verification begins a new epoch on master 0.
    let noticed = a.try_lock("unrelated").await;
    if let Ok(lock) = noticed {
        all_votes(&lock).await;
        assert!(
            quarantined(&lock.stats().votes()[0].vote),
            "{:?}",
            lock.stats()
        );
        lock.release().await.expect("released");
    }
    let after = eventually(
        Duration::from_secs(5),
        "A's new epoch on master 0",
        || async { epoch_of(&masters, 0).await.filter(|e| *e != before) },
    )
    .await;
    assert_ne!(after, before);

    // B's attempt on `r`: master 1 is taken by X, master 0 does not count.
    let attempt = b.try_lock("r").await;
    assert!(
        lock_x.remaining() > Duration::ZERO,
        "X must still hold the lock for the attempt to mean anything"
    );
    let err = attempt.expect_err("B must not be granted r while X holds it");
    let stats = err.stats().expect("votes").clone();
    assert!(quarantined(&stats.votes()[0].vote), "{stats:?}");
    assert_eq!(stats.votes()[1].vote, Vote::Taken, "{stats:?}");
    // And B's guard, asked, says why and for how long.
    let report = b
        .health_with(Duration::from_millis(50))
        .await
        .expect("not strict");
    match &report.nodes[0].guard {
        GuardStatus::Quarantined { cause, remaining } => {
            assert_eq!(*cause, EpochCause::DataLost);
            assert!(*remaining > Duration::ZERO);
        }
        other => panic!("master 0 must be quarantined for B: {other}"),
    }
    lock_x.release().await.expect("released in time");
}

/// What every attempt of a short-ttl client sees while a long lock is held across a restart
/// of master 0 without persistence: no grant until the long lock's deadline has passed.
/// Returns once `clients` have each been granted `resource` (after that deadline), so the
/// scenario shows both the refusals and the grant it was waiting for.
async fn never_granted_while_held(clients: &[Redlock], resource: &str, held: &Lock) {
    for (c, client) in clients.iter().enumerate() {
        let lock = eventually(
            Duration::from_secs(30),
            "the short-ttl client to be granted once the long lock ran out",
            || async {
                let got = client.try_lock(resource).await.ok()?;
                assert!(
                    held.is_expired(),
                    "client {c} was granted `{resource}` while the long lock still had {:?}",
                    held.remaining()
                );
                Some(got)
            },
        )
        .await;
        lock.release().await.expect("released");
    }
}

/// A (ttl 4 s) holds `m` on masters 0 and 1; master 0 restarts without persistence. Clients
/// with a 1 s ttl — one that knew master 0 before the restart, one started after it — are
/// never granted `m` while A holds it: the quarantine is the deployment's longest ttl (A's
/// 4 s, read from A's ttl record on master 1), not each client's own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_with_a_short_ttl_wait_for_the_deployments_longest_lock() {
    let masters = Arc::new(cluster(3));
    commission(&masters).await;
    let a_links = links_without(&masters, &[2]);
    let a = guarded(a_links.urls(), Duration::from_secs(4));
    let knew = guarded(masters.urls(), Duration::from_secs(1));
    know_every_master(&knew, "knew-warm").await;
    let lock_a = a.try_lock("m").await.expect("masters 0 and 1 grant");

    restart_empty(&masters, 0).await;
    let fresh = guarded(masters.urls(), Duration::from_secs(1));
    never_granted_while_held(&[knew, fresh], "m", &lock_a).await;
}

/// The same with a 1 s lock extended to 4 s: `extend_with` records its ttl too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extended_lock_is_covered_by_its_new_ttl() {
    let masters = Arc::new(cluster(3));
    commission(&masters).await;
    let a_links = links_without(&masters, &[2]);
    let a = guarded(a_links.urls(), Duration::from_secs(1));
    let knew = guarded(masters.urls(), Duration::from_secs(1));
    know_every_master(&knew, "knew-warm").await;
    let lock_a = a.try_lock("m").await.expect("masters 0 and 1 grant");
    lock_a
        .extend_with(Duration::from_secs(4))
        .await
        .expect("extended on masters 0 and 1");

    restart_empty(&masters, 0).await;
    let fresh = guarded(masters.urls(), Duration::from_secs(1));
    never_granted_while_held(&[knew, fresh], "m", &lock_a).await;
}

async fn restart_empty(masters: &Arc<LocalCluster>, i: usize) {
    let m = masters.clone();
    tokio::task::spawn_blocking(move || {
        m.kill(i).expect("kill");
        m.restart(i).expect("restart, empty");
    })
    .await
    .expect("join");
}

/// Masters that persist every write (`appendfsync always`) lose nothing in a restart: two
/// clients that knew them both lock through the restarted masters as soon as they are
/// reachable again — no quarantine (with a 30 s ttl a quarantine would outlast the test's
/// bound), for either client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_masters_count_at_once_after_a_restart_for_every_client() {
    let masters = Arc::new(
        LocalCluster::builder()
            .nodes(3)
            .persistence(Persistence::AofAlways)
            .start()
            .expect("start"),
    );
    commission(&masters).await;
    let ttl = Duration::from_secs(30);
    let clients = [guarded(masters.urls(), ttl), guarded(masters.urls(), ttl)];
    for (c, client) in clients.iter().enumerate() {
        know_every_master(client, &format!("warm-{c}")).await;
    }
    for i in [0, 1] {
        let m = masters.clone();
        tokio::task::spawn_blocking(move || {
            m.kill(i).expect("kill");
            m.restart(i).expect("restart with the AOF");
        })
        .await
        .expect("join");
    }
    for (c, client) in clients.iter().enumerate() {
        let resource = format!("after-{c}");
        let lock = eventually(
            Duration::from_secs(10),
            "a lock counted by both restarted masters",
            || async {
                let lock = client.try_lock(&resource).await.ok()?;
                all_votes(&lock).await;
                let votes = lock.stats();
                for i in [0, 1] {
                    assert!(
                        !quarantined(&votes.votes()[i].vote),
                        "client {c}: a durable master was quarantined after its restart: {votes:?}"
                    );
                }
                if votes.votes()[..2].iter().all(|v| v.vote == Vote::Granted) {
                    Some(lock)
                } else {
                    // Still reconnecting: let this one go and try again.
                    let _ = lock.release().await;
                    None
                }
            },
        )
        .await;
        lock.release().await.expect("released");
        let report = client
            .health_with(Duration::from_millis(50))
            .await
            .expect("not strict");
        for i in [0, 1] {
            assert_eq!(
                report.nodes[i].guard,
                GuardStatus::Counted {
                    cause: EpochCause::Commissioned
                },
                "client {c}, master {i}: the epoch survives a durable restart"
            );
        }
    }
}
