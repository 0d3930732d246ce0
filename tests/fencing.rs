//! Fencing tokens on real masters: strictly increasing across holders under faults,
//! Kleppmann's paused-holder scenario, and why the write-back round is needed.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::chaos::Stop;
use common::inspect::cmd;
use common::*;
use redis::AsyncCommands;
use redquorum::{LockOptions, Redlock, RetryPolicy, fenced_set};
use redquorum_testkit::{Direction, Fault, LocalCluster, Persistence, ReplyExt};
use tokio::time::Instant;

fn fenced(urls: Vec<String>, ttl: Duration) -> Redlock {
    builder(urls)
        .ttl(ttl)
        .node_timeout(Duration::from_millis(200))
        .fencing(true)
        .retry(
            RetryPolicy::new()
                .unlimited_attempts()
                .timeout(Duration::from_secs(20))
                .delay(Duration::from_millis(3), Duration::from_millis(3)),
        )
        .build()
        .expect("valid")
}

/// Four clients take the lock until there have been at least a thousand holders *and* the
/// faults have gone through their cycle three times (a crash and two pauses), however fast
/// or slow the machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_strictly_increase_over_a_thousand_holders_under_faults() {
    const FAULT_ROUNDS: u32 = 3;
    let holders: usize = if std::env::var_os("REDQUORUM_SOAK").is_some() {
        10_000
    } else {
        1_000
    };
    let masters = Arc::new(
        LocalCluster::builder()
            .nodes(5)
            .persistence(Persistence::AofAlways)
            .start()
            .expect("start masters"),
    );
    // Four clients, each with its own jittery links to every master.
    let mut clients = Vec::new();
    let mut links = Vec::new();
    for seed in 0..4u64 {
        let set = masters.links_seeded(seed).expect("proxies");
        set.set_all(
            Direction::Both,
            Fault::Delay {
                base: Duration::ZERO,
                jitter: Duration::from_millis(2),
            },
        );
        clients.push(fenced(set.urls(), Duration::from_secs(2)));
        links.push(set);
    }
    // Faults while they run, from a thread of their own (the test kit's calls block):
    // master 1 paused now and then, master 3 crashing and restarting with its AOF.
    let stop = Stop::default();
    let fault_rounds = Arc::new(AtomicU32::new(0));
    let chaos = {
        let (masters, stop, fault_rounds) = (masters.clone(), stop.clone(), fault_rounds.clone());
        std::thread::spawn(move || {
            let mut round = 0u32;
            while stop.sleep(Duration::from_millis(700)) {
                round += 1;
                if round.is_multiple_of(3) {
                    masters.kill(3).expect("kill");
                    masters.restart(3).expect("restart with AOF");
                } else {
                    masters.pause(1).expect("SIGSTOP");
                    stop.sleep(Duration::from_millis(250));
                    masters.resume(1).expect("SIGCONT");
                }
                fault_rounds.store(round, Ordering::SeqCst);
            }
        })
    };

    let record: Arc<Mutex<Vec<(Instant, u64)>>> = Arc::default();
    let started = Instant::now();
    // About 20 s on an idle 2-core machine, over a minute under `make test-stress`.
    let budget = Duration::from_secs(300);
    let workers: Vec<_> = clients
        .iter()
        .map(|client| {
            let (client, record) = (client.clone(), record.clone());
            let fault_rounds = fault_rounds.clone();
            tokio::spawn(async move {
                loop {
                    let enough = record.lock().expect("not poisoned").len() >= holders
                        && fault_rounds.load(Ordering::SeqCst) >= FAULT_ROUNDS;
                    if enough || started.elapsed() >= budget {
                        break;
                    }
                    let lock = client
                        .lock("fenced-resource")
                        .await
                        .expect("eventually acquired");
                    let token = lock.fencing_token().expect("fenced");
                    record
                        .lock()
                        .expect("not poisoned")
                        .push((Instant::now(), token));
                    lock.release().await.expect("released in time");
                }
            })
        })
        .collect();
    for w in workers {
        w.await.expect("worker");
    }
    stop.set();
    tokio::task::spawn_blocking(move || chaos.join())
        .await
        .expect("join")
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    let rounds = fault_rounds.load(Ordering::SeqCst);
    let record_len = record.lock().expect("not poisoned").len();
    assert!(
        rounds >= FAULT_ROUNDS && record_len >= holders,
        "within {budget:?}: {record_len} holders of {holders} and {rounds} fault rounds of \
         {FAULT_ROUNDS}"
    );

    // Holds never overlap, so ordering by acquisition time is the order of holders.
    let mut record = record.lock().expect("not poisoned").clone();
    record.sort_by_key(|(at, _)| *at);
    for pair in record.windows(2) {
        assert!(
            pair[1].1 > pair[0].1,
            "token went from {} to {}",
            pair[0].1,
            pair[1].1
        );
    }
    println!(
        "{} holders, tokens {}..={}, {rounds} fault rounds",
        record.len(),
        record[0].1,
        record[record.len() - 1].1
    );
}

#[tokio::test]
async fn a_paused_holder_that_wakes_too_late_is_refused_by_the_resource() {
    let masters = cluster(3);
    let store = LocalCluster::start(1).expect("the protected resource");
    let mut store_conn = conn(&store.url(0)).await;
    let ttl = Duration::from_secs(1);
    let a = fenced(masters.urls(), ttl);
    let b = fenced(masters.urls(), ttl);

    let lock_a = a.lock("account:7").await.expect("free");
    let token_a = lock_a.fencing_token().expect("fenced");
    // A pauses (a GC pause, a stopped VM) past its deadline without knowing it.
    tokio::time::sleep_until(lock_a.deadline() + Duration::from_millis(50)).await;

    let lock_b = b.lock("account:7").await.expect("A's lock ran out");
    let token_b = lock_b.fencing_token().expect("fenced");
    assert!(
        token_b > token_a,
        "B's token {token_b} must exceed A's {token_a}"
    );
    assert!(
        fenced_set(
            &mut store_conn,
            "balance:7",
            "balance:7:fence",
            "B",
            token_b
        )
        .await
        .expect("script")
    );

    // A wakes and writes with its old token: refused.
    let applied = fenced_set(
        &mut store_conn,
        "balance:7",
        "balance:7:fence",
        "A",
        token_a,
    )
    .await
    .expect("script");
    assert!(!applied, "A's late write must be rejected");
    let balance: String = store_conn.get("balance:7").await.expect("GET");
    assert_eq!(balance, "B");
    lock_b.release().await.expect("released");
    drop(lock_a);
}

/// What the single-round variant would do: run the acquire script on `masters` and take the
/// largest counter — no write-back.
async fn single_round(masters: &LocalCluster, nodes: &[usize], value: &str) -> u64 {
    let script = redis::Script::new(&format!(
        "{}\n{}",
        include_str!("../src/scripts/prelude.lua"),
        include_str!("../src/scripts/acquire.lua")
    ));
    let mut token = 0;
    for &i in nodes {
        let reply: Vec<redis::Value> = script
            .key("redquorum:lock:r")
            .key("redquorum:fence:r")
            .arg(value)
            .arg(10_000)
            .arg(1)
            .arg(1)
            .arg(0)
            .arg(0)
            .invoke_async(&mut conn(&masters.url(i)).await)
            .await
            .expect("script");
        match reply.as_slice() {
            [redis::Value::Int(1), redis::Value::Int(t), _] => token = token.max(*t as u64),
            other => panic!("not granted: {other:?}"),
        }
    }
    // Release at once: the next holder follows.
    for &i in nodes {
        let _: () = conn(&masters.url(i))
            .await
            .del("redquorum:lock:r")
            .await
            .expect("DEL");
    }
    token
}

/// Three masters. Master 2's counter is ahead (failed attempts that only master 2 granted
/// left their increments there). A reaches masters 1 and 2, B later reaches masters 0 and 1.
async fn history(masters: &LocalCluster) {
    let reply = cmd(
        masters,
        2,
        &[
            "HSET",
            "redquorum:fence:r",
            "redquorum",
            "fence",
            "token",
            "10",
        ],
    )
    .await;
    assert!(
        reply.as_error().is_none(),
        "counter left by earlier failed attempts: {reply:?}"
    );
}

#[tokio::test]
async fn without_the_write_back_a_later_holder_can_get_a_smaller_token() {
    let masters = cluster(3);
    history(&masters).await;
    let token_a = single_round(&masters, &[1, 2], "a").await;
    let token_b = single_round(&masters, &[0, 1], "b").await;
    assert_eq!((token_a, token_b), (11, 2));
    assert!(
        token_b < token_a,
        "the single-round variant is not monotonic"
    );
}

#[tokio::test]
async fn with_the_write_back_the_same_history_gives_increasing_tokens() {
    let masters = cluster(3);
    history(&masters).await;
    let ttl = Duration::from_secs(2);
    let links_a = masters.links().expect("proxies");
    let links_b = masters.links().expect("proxies");
    links_a.link(0).set(Direction::Both, Fault::Blackhole);
    links_b.link(2).set(Direction::Both, Fault::Blackhole);
    // One attempt each (a retry would add increments and change the tokens), so a long node
    // timeout: no call waits for the blackholed master, and a stalled machine cannot fail
    // the others.
    let single = |links: &redquorum_testkit::LinkSet| {
        builder(links.urls())
            .ttl(ttl)
            .node_timeout(Duration::from_millis(900))
            .fencing(true)
            .build()
            .expect("valid")
    };
    let (a, b) = (single(&links_a), single(&links_b));

    let lock_a = a
        .lock_with(["r"], LockOptions::new().retry(RetryPolicy::once()))
        .await
        .expect("masters 1 and 2 grant");
    let token_a = lock_a.fencing_token().expect("fenced");
    assert_eq!(token_a, 11);
    lock_a.release().await.expect("released");
    let lock_b = b
        .lock_with(["r"], LockOptions::new().retry(RetryPolicy::once()))
        .await
        .expect("masters 0 and 1 grant");
    let token_b = lock_b.fencing_token().expect("fenced");
    assert_eq!(token_b, 12, "master 1 learnt 11 from A's write-back");
    lock_b.release().await.expect("released");
}
