//! Failovers under load, checked: three members — two Sentinel groups and a single master —
//! and four clients locking two resources with short critical sections, while primaries are
//! failed over again and again, half the time after their replicas were cut off (so the
//! promoted replica misses recent keys). The run lasts until it has 200 hand-overs and
//! enough failovers of each kind; the checker then reports 0 overlaps and 0 lost updates.
//! The negative control (the failover rule off) is in `groups_negative.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::cluster;
use crate::common::hold::lease_without_renewal;
use crate::common::scenario::soak;
use rand::RngExt;
use redquorum::{Group, LockOptions, Redlock, RetryPolicy};
use redquorum_testkit::{Checker, Hold, SentinelGroup};

const TTL: Duration = Duration::from_secs(1);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failovers_with_and_without_lost_keys_never_hand_a_held_lock_over() {
    let groups: Vec<Arc<SentinelGroup>> = (0..2)
        .map(|_| {
            Arc::new(
                SentinelGroup::builder()
                    .replicas(1)
                    .start()
                    .expect("a sentinel group"),
            )
        })
        .collect();
    let single = cluster(1);
    let needed = 200 * soak() as usize;
    let checker = Arc::new(
        Checker::start("failovers of two sentinel groups and a single master")
            .expect("referee")
            .min_hand_overs(needed),
    );
    let client = || -> Redlock {
        let mut b = Redlock::builder();
        for g in &groups {
            b = b.member(Group::sentinel(g.sentinel_urls(), g.master_name()));
        }
        b.nodes(single.urls())
            .ttl(TTL)
            .node_timeout(Duration::from_millis(200))
            .connect_timeout(Duration::from_secs(2))
            .retry(
                RetryPolicy::new()
                    .unlimited_attempts()
                    .timeout(Duration::from_secs(2))
                    .delay(Duration::from_millis(10), Duration::from_millis(10)),
            )
            .build()
            .expect("valid")
    };
    let admin = client();
    for m in 0..3 {
        crate::common::eventually(Duration::from_secs(10), "commissioned", || async {
            admin.commission(m, false).await.ok()
        })
        .await;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let (lossy, clean) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let chaos = {
        let (groups, stop, lossy, clean) =
            (groups.clone(), stop.clone(), lossy.clone(), clean.clone());
        let mut rng = checker.rng(1);
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(rng.random_range(500..1500)));
                let g = &groups[rng.random_range(0..groups.len())];
                let Ok(primary) = g.primary() else { continue };
                let cut = rng.random_bool(0.5);
                if cut {
                    g.partition_replicas(primary).expect("cut the replicas off");
                    // Let the clients write a few keys the replica will miss.
                    std::thread::sleep(Duration::from_millis(rng.random_range(50..300)));
                }
                let done = g.failover();
                if cut {
                    g.heal_replicas(primary).expect("heal");
                }
                if done.is_ok() {
                    if cut {
                        lossy.fetch_add(1, Ordering::SeqCst);
                    } else {
                        clean.fetch_add(1, Ordering::SeqCst);
                    }
                }
                let _ = g.wait_ready(Duration::from_secs(60));
            }
        })
    };
    let workers: Vec<_> = (0..4)
        .map(|c| {
            let (client, checker, stop) = (client(), checker.clone(), stop.clone());
            tokio::spawn(async move {
                let mut rng = checker.rng(100 + c as u64);
                let mut session = checker.referee().session().await.expect("referee");
                while !stop.load(Ordering::SeqCst) {
                    let resource = format!("res-{}", rng.random_range(0..2));
                    // Polling (10 ms): attempts all along the failover, in both runs.
                    let options = LockOptions::new().poll(true);
                    let Ok(lock) = client.lock_with([&resource], options).await else {
                        continue;
                    };
                    let acquired = Instant::now();
                    let Some(lease) = lease_without_renewal(&lock, TTL / 5).await else {
                        let _ = lock.release().await;
                        continue;
                    };
                    let read = session.read(&resource).await.expect("referee read");
                    let pause = Duration::from_millis(rng.random_range(0..20));
                    if lease.run(tokio::time::sleep(pause)).await.is_ok() && lease.check().is_ok() {
                        session.write(&resource, read).await.expect("referee write");
                    }
                    let deadline = lease.deadline().into_std();
                    let released = Instant::now();
                    let _ = lock.release().await;
                    checker
                        .recorder()
                        .record(Hold::new(c, &resource, acquired, deadline, released));
                }
            })
        })
        .collect();
    let enough = || lossy.load(Ordering::SeqCst) >= 2 && clean.load(Ordering::SeqCst) >= 2;
    let started = Instant::now();
    while !(checker.recorder().hand_overs() >= needed && enough())
        && started.elapsed() < Duration::from_secs(150) * soak()
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    crate::common::chaos::wind_down(&stop, chaos, workers).await;
    let summary = format!(
        "lossy failovers={} clean failovers={}",
        lossy.load(Ordering::SeqCst),
        clean.load(Ordering::SeqCst)
    );
    assert!(enough(), "inconclusive: too few failovers ({summary})");
    let report = checker.report_with(summary).expect("referee");
    report.assert_safe();
}
