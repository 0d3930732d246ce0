//! Lock kinds under faults, checked: jittery links, a master paused now and then, a master
//! crashing and coming back after a ttl. Each scenario runs until it has 200 hand-overs.
//!
//! - Read-write: no writer ever overlaps another holder (reader or writer), readers do
//!   overlap each other (the count is reported: the scenario must show sharing), and no
//!   writer's read-modify-write is lost.
//! - Semaphore, 3 permits on 5 masters: never more than 3 holders at once, by the holds'
//!   intervals and by a referee counter of holders inside.
//! - Reentrant owners: several tasks of one owner nest their holds; owners exclude each
//!   other.
//!
//! The semaphore's negative control (a majority quorum for 3 permits) is in
//! `kinds_negative.rs`.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::scenario::soak;
use crate::common::{builder, cluster};
use rand::RngExt;
use rand::rngs::StdRng;
use redis::AsyncCommands;
use redquorum::{LockOptions, Redlock, RetryPolicy};
use redquorum_testkit::{Checker, Direction, Fault, Hold, LinkSet, LocalCluster, find_overlaps};

const TTL: Duration = Duration::from_millis(1500);

/// Clients over their own jittery links.
fn clients(masters: &LocalCluster, checker: &Checker, n: usize) -> (Vec<LinkSet>, Vec<Redlock>) {
    let jitter = Fault::Delay {
        base: Duration::ZERO,
        jitter: Duration::from_millis(3),
    };
    let links: Vec<LinkSet> = (0..n)
        .map(|c| {
            let links = masters
                .links_seeded(redquorum_testkit::derive_seed(checker.seed(), c as u64))
                .expect("proxies");
            links.set_all(Direction::Both, jitter);
            links
        })
        .collect();
    let clients = links
        .iter()
        .map(|l| {
            builder(l.urls())
                .ttl(TTL)
                .node_timeout(Duration::from_millis(100))
                .retry(
                    RetryPolicy::new()
                        .unlimited_attempts()
                        .timeout(Duration::from_secs(2))
                        .delay(Duration::from_millis(5), Duration::from_millis(5)),
                )
                .build()
                .expect("valid")
        })
        .collect();
    (links, clients)
}

/// The faults: every few hundred ms, a master paused for a moment, or killed and started
/// again (empty) after a ttl — the Redlock model's crash. Stops when `stop` is set, leaving
/// every master running.
fn chaos(
    masters: Arc<LocalCluster>,
    mut rng: StdRng,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut faults = 0;
        while !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(rng.random_range(300..800)));
            let i = rng.random_range(0..masters.len());
            if rng.random_bool(0.6) {
                masters.pause(i).expect("SIGSTOP");
                std::thread::sleep(Duration::from_millis(rng.random_range(50..400)));
                masters.resume(i).expect("SIGCONT");
            } else {
                masters.kill(i).expect("kill");
                std::thread::sleep(TTL + Duration::from_millis(100));
                masters.restart(i).expect("restart");
            }
            faults += 1;
        }
        faults
    })
}

/// Runs until `done` holds or the budget ends; then stops the faults and the workers.
async fn run_until(
    stop: &Arc<AtomicBool>,
    chaos: std::thread::JoinHandle<usize>,
    workers: Vec<tokio::task::JoinHandle<()>>,
    done: impl Fn() -> bool,
) -> usize {
    let started = Instant::now();
    let budget = Duration::from_secs(90) * soak();
    while !done() && started.elapsed() < budget {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    crate::common::chaos::wind_down(stop, chaos, workers).await
}

/// Consecutive holds (by start) of different clients.
fn hand_overs(holds: &mut [Hold]) -> usize {
    holds.sort_by_key(|h| h.acquired);
    holds
        .windows(2)
        .filter(|w| w[0].client != w[1].client)
        .count()
}

/// The most holds active at one instant.
fn max_concurrent(holds: &[Hold]) -> usize {
    let mut events: Vec<(Instant, i32)> = holds
        .iter()
        .filter(|h| h.end() > h.acquired)
        .flat_map(|h| [(h.acquired, 1), (h.end(), -1)])
        .collect();
    // Ends before starts at the same instant: a hand-over is not an overlap.
    events.sort();
    let (mut now, mut max) = (0i32, 0i32);
    for (_, d) in events {
        now += d;
        max = max.max(now);
    }
    usize::try_from(max).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_share_and_writers_exclude_under_faults() {
    let masters = Arc::new(cluster(5));
    let needed = 200 * soak() as usize;
    let checker = Arc::new(Checker::start("read-write lock under faults").expect("referee"));
    let (_links, clients) = clients(&masters, &checker, 4);
    let readers: Arc<Mutex<Vec<Hold>>> = Arc::default();
    let writers_done = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let faults = chaos(masters.clone(), checker.rng(1), stop.clone());
    let workers = clients
        .into_iter()
        .enumerate()
        .map(|(c, client)| {
            let (checker, readers, stop, writers_done) = (
                checker.clone(),
                readers.clone(),
                stop.clone(),
                writers_done.clone(),
            );
            tokio::spawn(async move {
                let mut rng = checker.rng(100 + c as u64);
                let mut session = checker.referee().session().await.expect("referee");
                while !stop.load(Ordering::SeqCst) {
                    let writing = rng.random_bool(0.3);
                    let options = if writing {
                        LockOptions::new().write().prefer_writers(true)
                    } else {
                        LockOptions::new().read()
                    };
                    let Ok(lock) = client.lock_with(["doc"], options).await else {
                        continue;
                    };
                    let acquired = Instant::now();
                    let Some(lease) =
                        crate::common::hold::lease_without_renewal(&lock, TTL / 5).await
                    else {
                        let _ = lock.release().await;
                        continue;
                    };
                    let read = session.read("doc").await.expect("referee read");
                    let pause = Duration::from_millis(rng.random_range(0..20));
                    let worked = lease.run(tokio::time::sleep(pause)).await.is_ok();
                    if writing && worked && lease.check().is_ok() {
                        session.write("doc", read).await.expect("referee write");
                        writers_done.fetch_add(1, Ordering::SeqCst);
                    }
                    let deadline = lease.deadline().into_std();
                    let released = Instant::now();
                    let _ = lock.release().await;
                    let hold = Hold::new(c, "doc", acquired, deadline, released);
                    if writing {
                        checker.recorder().record(hold);
                    } else {
                        readers.lock().expect("not poisoned").push(hold);
                    }
                }
            })
        })
        .collect();
    let all = || {
        let mut all = checker.recorder().holds();
        all.extend(readers.lock().expect("not poisoned").iter().cloned());
        all
    };
    let faults = run_until(&stop, faults, workers, || {
        hand_overs(&mut all()) >= needed && writers_done.load(Ordering::SeqCst) >= 20
    })
    .await;
    let mut holds = all();
    let readers = readers.lock().expect("not poisoned").clone();
    let writers = checker.recorder().holds();
    // Writers against everyone: every writer overlapping any other hold is a failure.
    let writer_overlaps: usize = writers
        .iter()
        .map(|w| {
            let mut pair = vec![w.clone()];
            pair.extend(holds.iter().filter(|h| *h != w).cloned());
            find_overlaps(&pair)
                .iter()
                .filter(|o| o.first == *w || o.second == *w)
                .count()
        })
        .sum();
    let sharing = find_overlaps(&readers).len();
    let report = checker
        .report_with(format!(
            "readers={} writers={} faults={faults} writer-overlaps={writer_overlaps} reader-overlaps={sharing} hand-overs(all)={}",
            readers.len(),
            writers.len(),
            hand_overs(&mut holds)
        ))
        .expect("referee");
    assert_eq!(writer_overlaps, 0, "{report}");
    assert!(
        sharing > 0,
        "readers never held at once: the scenario shows no sharing. {report}"
    );
    assert!(hand_overs(&mut holds) >= needed, "inconclusive: {report}");
    assert_eq!(report.lost_updates(), 0, "{report}");
    assert_eq!(report.overlaps(), 0, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_semaphore_never_admits_more_than_its_permits_under_faults() {
    const K: usize = 3;
    let masters = Arc::new(cluster(5));
    let needed = 200 * soak() as usize;
    let checker =
        Arc::new(Checker::start("semaphore of 3 on 5 masters under faults").expect("referee"));
    let (_links, clients) = clients(&masters, &checker, 6);
    let referee = redis::Client::open(checker.referee().url())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("the referee");
    let inside_max = Arc::new(AtomicI64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let faults = chaos(masters.clone(), checker.rng(1), stop.clone());
    let workers = clients
        .into_iter()
        .enumerate()
        .map(|(c, client)| {
            let (checker, stop, inside_max, mut referee) = (
                checker.clone(),
                stop.clone(),
                inside_max.clone(),
                referee.clone(),
            );
            tokio::spawn(async move {
                let mut rng = checker.rng(100 + c as u64);
                while !stop.load(Ordering::SeqCst) {
                    let Ok(permit) = client
                        .lock_with(["pool"], LockOptions::new().permits(K))
                        .await
                    else {
                        continue;
                    };
                    let acquired = Instant::now();
                    let Some(lease) =
                        crate::common::hold::lease_without_renewal(&permit, TTL / 5).await
                    else {
                        let _ = permit.release().await;
                        continue;
                    };
                    // The referee counts the holders inside, in real time.
                    if lease.check().is_ok() {
                        let inside: i64 = referee.incr("inside", 1).await.expect("INCR");
                        inside_max.fetch_max(inside, Ordering::SeqCst);
                        let pause = Duration::from_millis(rng.random_range(0..20));
                        let _ = lease.run(tokio::time::sleep(pause)).await;
                        let _: i64 = referee.decr("inside", 1).await.expect("DECR");
                    }
                    let deadline = lease.deadline().into_std();
                    let released = Instant::now();
                    let _ = permit.release().await;
                    checker
                        .recorder()
                        .record(Hold::new(c, "pool", acquired, deadline, released));
                }
            })
        })
        .collect();
    let faults = run_until(&stop, faults, workers, || {
        hand_overs(&mut checker.recorder().holds()) >= needed
    })
    .await;
    let mut holds = checker.recorder().holds();
    let concurrent = max_concurrent(&holds);
    let inside = inside_max.load(Ordering::SeqCst);
    let summary = format!(
        "permits={} faults={faults} hand-overs={} max-concurrent={concurrent} referee-max-inside={inside}",
        holds.len(),
        hand_overs(&mut holds)
    );
    println!("[checker] semaphore: {summary}");
    assert!(concurrent <= K, "{summary}");
    assert!(inside <= K as i64, "{summary}");
    assert!(
        concurrent >= 2,
        "the scenario must show permits held at once: {summary}"
    );
    assert!(hand_overs(&mut holds) >= needed, "inconclusive: {summary}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reentrant_owners_nest_and_exclude_each_other_under_faults() {
    const OWNERS: usize = 3;
    const TASKS: usize = 2;
    let masters = Arc::new(cluster(5));
    let needed = 200 * soak() as usize;
    let checker = Arc::new(Checker::start("reentrant owners under faults").expect("referee"));
    let (_links, clients) = clients(&masters, &checker, OWNERS);
    let nested = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let faults = chaos(masters.clone(), checker.rng(1), stop.clone());
    let mut workers = Vec::new();
    for (o, client) in clients.iter().enumerate() {
        let owner = client.owner();
        // The owner's own view of its outermost hold, to record it in the checker.
        let active = Arc::new(Mutex::new((0usize, Instant::now())));
        for t in 0..TASKS {
            let (owner, checker, stop, active, nested) = (
                owner.clone(),
                checker.clone(),
                stop.clone(),
                active.clone(),
                nested.clone(),
            );
            workers.push(tokio::spawn(async move {
                let mut rng = checker.rng(100 + (o * TASKS + t) as u64);
                while !stop.load(Ordering::SeqCst) {
                    let Ok(hold) = owner.lock("shared").await else {
                        continue;
                    };
                    {
                        let mut a = active.lock().expect("not poisoned");
                        if a.0 == 0 {
                            a.1 = Instant::now();
                        }
                        a.0 += 1;
                    }
                    if hold.depth() > 1 {
                        nested.fetch_add(1, Ordering::SeqCst);
                    }
                    let pause = Duration::from_millis(rng.random_range(0..15));
                    let _ = hold.lease().run(tokio::time::sleep(pause)).await;
                    let deadline = hold.lease().deadline().into_std();
                    {
                        let mut a = active.lock().expect("not poisoned");
                        a.0 -= 1;
                        if a.0 == 0 {
                            let end = Instant::now();
                            checker
                                .recorder()
                                .record(Hold::new(o, "shared", a.1, deadline, end));
                        }
                    }
                    let _ = hold.release().await;
                    tokio::time::sleep(Duration::from_millis(rng.random_range(0..20))).await;
                }
            }));
        }
    }
    let faults = run_until(&stop, faults, workers, || {
        checker.recorder().hand_overs() >= needed && nested.load(Ordering::SeqCst) >= 20
    })
    .await;
    let report = checker
        .report_with(format!(
            "faults={faults} nested-holds={}",
            nested.load(Ordering::SeqCst)
        ))
        .expect("referee");
    assert!(
        nested.load(Ordering::SeqCst) >= 20,
        "the owners never nested: {report}"
    );
    assert!(
        checker.recorder().hand_overs() >= needed,
        "inconclusive: {report}"
    );
    assert_eq!(report.overlaps(), 0, "{report}");
}
