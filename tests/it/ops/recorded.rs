//! Every metric family, recorded by `metrics-util`'s debugging recorder against real masters:
//! names, label values, units and values.
//!
//! Each test runs on a current-thread runtime inside `::metrics::with_local_recorder`, so the
//! recorder sees this test's client only (every task of the client is polled on this thread)
//! and the other tests of the binary, running in parallel, cannot add to its counts.

use std::future::Future;
use std::time::Duration;

use ::metrics::Unit;
use metrics_util::CompositeKey;
use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use redis::AsyncCommands;
use redquorum::{KeepAliveOptions, LockOptions, RetryPolicy};

use crate::common::*;

/// One recorded metric: its labels (sorted), unit and value.
#[derive(Debug)]
struct Seen {
    name: String,
    labels: Vec<(String, String)>,
    unit: Option<Unit>,
    value: DebugValue,
}

/// Runs `test` on a current-thread runtime with a debugging recorder of its own (the crate's
/// units and descriptions registered first), and returns what it recorded.
fn recorded<F: Future<Output = ()>>(test: impl FnOnce(Snapshotter) -> F) -> Vec<Seen> {
    let recorder = DebuggingRecorder::new();
    let snapshotter: Snapshotter = recorder.snapshotter();
    let during = recorder.snapshotter();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    ::metrics::with_local_recorder(&recorder, || {
        redquorum::describe_metrics();
        runtime.block_on(test(during));
    });
    parse(&snapshotter)
}

/// What `snapshotter`'s recorder holds now.
fn parse(snapshotter: &Snapshotter) -> Vec<Seen> {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, unit, _, value): (CompositeKey, _, _, _)| {
            let (_, key) = key.into_parts();
            let mut labels: Vec<_> = key
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            labels.sort();
            Seen {
                name: key.name().to_owned(),
                labels,
                unit,
                value,
            }
        })
        .collect()
}

/// The metrics called `name` whose labels include every one of `labels`.
fn find<'a>(seen: &'a [Seen], name: &str, labels: &[(&str, &str)]) -> Vec<&'a Seen> {
    seen.iter()
        .filter(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .collect()
}

fn counter(seen: &[Seen], name: &str, labels: &[(&str, &str)]) -> u64 {
    find(seen, name, labels)
        .iter()
        .map(|s| match s.value {
            DebugValue::Counter(n) => n,
            ref other => panic!("{name} is not a counter: {other:?}"),
        })
        .sum()
}

fn gauge(seen: &[Seen], name: &str, labels: &[(&str, &str)]) -> f64 {
    let found = find(seen, name, labels);
    assert_eq!(found.len(), 1, "one {name}{labels:?}: {found:?}");
    match found[0].value {
        DebugValue::Gauge(v) => v.into_inner(),
        ref other => panic!("{name} is not a gauge: {other:?}"),
    }
}

fn histogram(seen: &[Seen], name: &str, labels: &[(&str, &str)]) -> Vec<f64> {
    find(seen, name, labels)
        .iter()
        .flat_map(|s| match &s.value {
            DebugValue::Histogram(v) => v.iter().map(|x| x.into_inner()).collect::<Vec<_>>(),
            other => panic!("{name} is not a histogram: {other:?}"),
        })
        .collect()
}

fn unit(seen: &[Seen], name: &str) -> Option<Unit> {
    let found: Vec<_> = seen.iter().filter(|s| s.name == name).collect();
    assert!(!found.is_empty(), "{name} was never recorded");
    found[0].unit
}

/// Every label value of every metric is one of a bounded set: never a resource, a value or
/// a URL.
fn assert_bounded(seen: &[Seen]) {
    for s in seen {
        for (k, v) in &s.labels {
            let ok = match k.as_str() {
                "master" => v.parse::<usize>().is_ok(),
                "kind" => ["mutex", "read", "write", "permits"].contains(&v.as_str()),
                _ => v.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
            };
            assert!(ok, "{}: label {k}={v}", s.name);
        }
    }
}

#[test]
fn acquisitions_record_latency_outcome_attempts_and_quorum_by_kind() {
    let masters = cluster(5);
    let seen = recorded(|_| async {
        let a = client(&masters);
        let b = client(&masters);
        let lock = a.try_lock("metrics:acq").await.expect("free");
        b.try_lock("metrics:acq").await.expect_err("contended");
        // Three attempts, all refused: contended after 3 attempts.
        let policy = RetryPolicy::new()
            .attempts(3)
            .delay(Duration::from_millis(5), Duration::ZERO);
        // Polling: a waiting call would wait for A's release or expiry instead.
        b.lock_with(["metrics:acq"], LockOptions::new().retry(policy).poll(true))
            .await
            .expect_err("contended three times");
        lock.release().await.expect("released");
        let permit = a
            .lock_with(["metrics:sem"], LockOptions::new().permits(2))
            .await
            .expect("a permit");
        permit.release().await.expect("released");
        let read = a
            .lock_with(["metrics:rw"], LockOptions::new().read())
            .await
            .expect("a read hold");
        read.release().await.expect("released");
    });
    assert_bounded(&seen);
    let granted = [("kind", "mutex"), ("outcome", "granted")];
    let contended = [("kind", "mutex"), ("outcome", "contended")];
    assert_eq!(counter(&seen, "redquorum_acquisitions_total", &granted), 1);
    assert_eq!(
        counter(&seen, "redquorum_acquisitions_total", &contended),
        2
    );
    assert_eq!(
        counter(
            &seen,
            "redquorum_acquisitions_total",
            &[("kind", "permits"), ("outcome", "granted")]
        ),
        1
    );
    assert_eq!(
        counter(
            &seen,
            "redquorum_acquisitions_total",
            &[("kind", "read"), ("outcome", "granted")]
        ),
        1
    );
    let latencies = histogram(&seen, "redquorum_acquire_duration_seconds", &granted);
    assert_eq!(latencies.len(), 1);
    assert!(latencies[0] > 0.0 && latencies[0] < 20.0, "{latencies:?}");
    let mut attempts = histogram(&seen, "redquorum_acquire_attempts", &contended);
    attempts.sort_by(f64::total_cmp);
    assert_eq!(attempts, [1.0, 3.0]);
    assert_eq!(
        gauge(&seen, "redquorum_quorum_size", &[("kind", "mutex")]),
        3.0
    );
    assert_eq!(
        gauge(&seen, "redquorum_quorum_size", &[("kind", "permits")]),
        4.0
    );
    assert_eq!(
        unit(&seen, "redquorum_acquire_duration_seconds"),
        Some(Unit::Seconds)
    );
    assert_eq!(
        unit(&seen, "redquorum_acquisitions_total"),
        Some(Unit::Count)
    );
    assert_eq!(unit(&seen, "redquorum_acquire_attempts"), Some(Unit::Count));
    assert_eq!(unit(&seen, "redquorum_quorum_size"), Some(Unit::Count));
}

#[test]
fn no_quorum_is_an_outcome_and_each_masters_failure_is_counted_with_its_cause() {
    let masters = cluster(5);
    let seen = recorded(|_| async {
        let a = client(&masters);
        let lock = a.try_lock("metrics:votes").await.expect("free");
        lock.release().await.expect("released");
        for i in [2, 3, 4] {
            masters.kill(i).expect("kill");
        }
        let error = a.try_lock("metrics:votes").await.expect_err("3 of 5 down");
        assert!(error.to_string().contains("no quorum"), "{error}");
    });
    assert_bounded(&seen);
    assert_eq!(
        counter(
            &seen,
            "redquorum_acquisitions_total",
            &[("outcome", "no_quorum")]
        ),
        1
    );
    for m in ["0", "1"] {
        // At most once a round: an answer still pending at a decision is recorded when it
        // arrives, unless the release sealed the round first.
        let granted = [("master", m), ("op", "acquire"), ("vote", "granted")];
        let votes = counter(&seen, "redquorum_votes_total", &granted);
        assert!(votes <= 2, "master {m}: {votes}");
        let timed = histogram(
            &seen,
            "redquorum_vote_duration_seconds",
            &[("master", m), ("op", "acquire")],
        );
        let all = counter(
            &seen,
            "redquorum_votes_total",
            &[("master", m), ("op", "acquire")],
        );
        assert_eq!(timed.len() as u64, all, "master {m}");
    }
    // The first round was granted by a quorum.
    let granted = counter(&seen, "redquorum_votes_total", &[("vote", "granted")]);
    assert!(granted >= 3, "{granted}");
    for m in ["2", "3", "4"] {
        let failed = [("master", m), ("op", "acquire"), ("vote", "failed")];
        // Each dead master's vote in the second round failed, if the round waited for it
        // (it decides at the third failure).
        let failures = counter(&seen, "redquorum_vote_failures_total", &[("master", m)]);
        assert_eq!(counter(&seen, "redquorum_votes_total", &failed), failures);
        // A late answer after the decision is recorded too (a connection refused after
        // the round's timeout was counted): at most one of each per round.
        assert!(failures <= 2, "master {m}: {failures}");
        for s in find(&seen, "redquorum_vote_failures_total", &[("master", m)]) {
            let cause = &s
                .labels
                .iter()
                .find(|(k, _)| k == "cause")
                .expect("cause")
                .1;
            assert!(
                ["connection", "timeout"].contains(&cause.as_str()),
                "{cause}"
            );
        }
    }
    let failed = counter(&seen, "redquorum_vote_failures_total", &[("op", "acquire")]);
    assert!((3..=6).contains(&failed), "{failed}");
    // Every request counted in flight was counted out again.
    for m in ["0", "1", "2", "3", "4"] {
        assert_eq!(
            gauge(&seen, "redquorum_requests_in_flight", &[("master", m)]),
            0.0,
            "master {m}"
        );
    }
    assert_eq!(
        unit(&seen, "redquorum_vote_duration_seconds"),
        Some(Unit::Seconds)
    );
    assert_eq!(
        unit(&seen, "redquorum_requests_in_flight"),
        Some(Unit::Count)
    );
}

#[test]
fn extensions_are_counted_ok_failed_and_lost() {
    let masters = cluster(3);
    let seen = recorded(|_| async {
        let a = client(&masters);
        let lock = a.try_lock("metrics:ext").await.expect("free");
        lock.extend().await.expect("extended");
        // Someone else's value on every master: the extension finds the lock lost.
        for i in 0..3 {
            let mut c = conn(&masters.url(i)).await;
            let _: () = c
                .set("redquorum:lock:metrics:ext", "someone-else")
                .await
                .expect("SET");
        }
        lock.extend().await.expect_err("lost");
        let other = a.try_lock("metrics:ext2").await.expect("free");
        for i in [1, 2] {
            masters.kill(i).expect("kill");
        }
        other.extend().await.expect_err("2 of 3 down");
    });
    let ext = |outcome| {
        counter(
            &seen,
            "redquorum_extensions_total",
            &[("kind", "mutex"), ("outcome", outcome)],
        )
    };
    assert_eq!((ext("ok"), ext("lost"), ext("failed")), (1, 1, 1));
    assert_eq!(
        counter(
            &seen,
            "redquorum_locks_lost_total",
            &[("reason", "not_ours")]
        ),
        1
    );
    // The lost extension was decided at the second refusal; the third may come later.
    let taken = counter(
        &seen,
        "redquorum_votes_total",
        &[("op", "extend"), ("vote", "taken")],
    );
    assert!((2..=3).contains(&taken), "{taken}");
    assert_eq!(unit(&seen, "redquorum_extensions_total"), Some(Unit::Count));
    assert_eq!(unit(&seen, "redquorum_locks_lost_total"), Some(Unit::Count));
}

#[test]
fn renewals_are_counted_and_a_renewal_that_finds_the_lock_gone_counts_it_lost() {
    let masters = cluster(3);
    let seen = recorded(|_| async {
        let a = builder(masters.urls())
            .ttl(Duration::from_secs(3))
            .build()
            .expect("valid");
        let lock = a.try_lock("metrics:renew").await.expect("free");
        let kept = lock
            .keep_alive_with(KeepAliveOptions::new())
            .expect("keep alive");
        eventually(PATIENCE, "two renewals", || {
            let n = a.renewal_stats().renewed;
            async move { (n >= 2).then_some(()) }
        })
        .await;
        for i in 0..3 {
            let mut c = conn(&masters.url(i)).await;
            let _: () = c.del("redquorum:lock:metrics:renew").await.expect("DEL");
        }
        let lease = kept.lease();
        tokio::time::timeout(PATIENCE, lease.lost())
            .await
            .expect("the renewal finds the lock gone");
        drop(kept);
    });
    assert!(counter(&seen, "redquorum_renewals_total", &[("outcome", "ok")]) >= 2);
    assert_eq!(
        counter(&seen, "redquorum_renewals_total", &[("outcome", "lost")]),
        1
    );
    assert_eq!(
        counter(
            &seen,
            "redquorum_locks_lost_total",
            &[("reason", "not_ours")]
        ),
        1
    );
    assert_eq!(unit(&seen, "redquorum_renewals_total"), Some(Unit::Count));
}

#[test]
fn a_release_that_misses_a_master_is_counted_incomplete() {
    let masters = cluster(3);
    let seen = recorded(|_| async {
        let a = client(&masters);
        let lock = a
            .lock_with(["metrics:rel"], LockOptions::new().write())
            .await
            .expect("free");
        // Two of three down: the release cannot hear a quorum of deletes without hearing
        // at least one failure.
        masters.kill(1).expect("kill");
        masters.kill(2).expect("kill");
        let outcome = lock.release().await.expect("still valid");
        assert!(!outcome.failures().is_empty(), "{outcome:?}");
    });
    let incomplete = counter(
        &seen,
        "redquorum_releases_incomplete_total",
        &[("kind", "write")],
    );
    assert_eq!(incomplete, 1);
    assert_eq!(
        unit(&seen, "redquorum_releases_incomplete_total"),
        Some(Unit::Count)
    );
}

#[test]
fn the_guard_state_of_each_master_is_a_gauge_with_its_cause_and_quarantine() {
    let masters = cluster(3);
    let seen = recorded(|_| async {
        // Commissioned masters count at once.
        commission(&masters).await;
        let guarded = builder(masters.urls())
            .restart_guard(true)
            .build()
            .expect("valid");
        let lock = guarded
            .try_lock("metrics:guard")
            .await
            .expect("commissioned");
        lock.release().await.expect("released");
        // Master 0 loses its data: kept out for the deployment's longest ttl (5 s).
        masters.cmd(0, &["FLUSHALL"]).expect("FLUSHALL");
        eventually(PATIENCE, "master 0 quarantined", || {
            let guarded = guarded.clone();
            async move {
                // An acquisition shows the guard the lost marker (and is refused there).
                if let Ok(lock) = guarded.try_lock("metrics:guard").await {
                    lock.release().await.expect("released");
                }
                let report = guarded.health().await.expect("health");
                matches!(
                    report.nodes[0].guard,
                    redquorum::GuardStatus::Quarantined { .. }
                )
                .then_some(())
            }
        })
        .await;
    });
    let state = |m, s| {
        gauge(
            &seen,
            "redquorum_guard_state",
            &[("master", m), ("state", s)],
        )
    };
    let cause = |m, c| {
        gauge(
            &seen,
            "redquorum_guard_epoch_cause",
            &[("master", m), ("cause", c)],
        )
    };
    let left = |m| {
        gauge(
            &seen,
            "redquorum_guard_quarantine_seconds",
            &[("master", m)],
        )
    };
    assert_eq!(
        (state("0", "quarantined"), state("0", "counted")),
        (1.0, 0.0)
    );
    assert_eq!(
        (cause("0", "data_lost"), cause("0", "commissioned")),
        (1.0, 0.0)
    );
    assert!(left("0") > 0.0 && left("0") <= 5.0, "{}", left("0"));
    for m in ["1", "2"] {
        assert_eq!(
            (state(m, "counted"), state(m, "quarantined")),
            (1.0, 0.0),
            "master {m}"
        );
        assert_eq!(cause(m, "commissioned"), 1.0, "master {m}");
        assert_eq!(left(m), 0.0, "master {m}");
    }
    assert_eq!(
        unit(&seen, "redquorum_guard_quarantine_seconds"),
        Some(Unit::Seconds)
    );
}

#[test]
fn a_waiter_is_counted_while_it_waits_and_its_wait_is_recorded_when_granted() {
    let masters = cluster(3);
    let seen = recorded(|snapshotter| async move {
        let a = client(&masters);
        let b = client(&masters);
        let lock = a.try_lock("metrics:wait").await.expect("free");
        let policy = RetryPolicy::new()
            .attempts(100_000)
            .timeout(PATIENCE)
            .delay(Duration::from_millis(20), Duration::ZERO);
        let waiter = tokio::spawn(async move {
            b.lock_with(["metrics:wait"], LockOptions::new().retry(policy))
                .await
                .map(|l| l.stats().attempt())
        });
        // The waiter was refused and waits: the gauge says so.
        eventually(PATIENCE, "one waiter", || {
            let seen = parse(&snapshotter);
            async move {
                let waiting = find(&seen, "redquorum_waiters", &[("kind", "mutex")]);
                waiting
                    .iter()
                    .any(|s| matches!(s.value, DebugValue::Gauge(v) if v.into_inner() == 1.0))
                    .then_some(())
            }
        })
        .await;
        lock.release().await.expect("released");
        let attempts = waiter
            .await
            .expect("joined")
            .expect("granted after the release");
        assert!(attempts > 1, "{attempts}");
    });
    // The debugging recorder's snapshots drain what they read: the one taken while the
    // caller waited took the 1 out, so what is left is the decrement when it stopped waiting.
    assert_eq!(
        gauge(&seen, "redquorum_waiters", &[("kind", "mutex")]),
        -1.0
    );
    let waits = histogram(
        &seen,
        "redquorum_handover_wait_seconds",
        &[("kind", "mutex")],
    );
    assert_eq!(waits.len(), 1, "{waits:?}");
    assert!(waits[0] > 0.0);
    assert_eq!(unit(&seen, "redquorum_waiters"), Some(Unit::Count));
    assert_eq!(
        unit(&seen, "redquorum_handover_wait_seconds"),
        Some(Unit::Seconds)
    );
}
