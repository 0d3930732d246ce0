//! One critical section: what a holder does under a lock, recorded in the checker, with
//! the referee's read-modify-write guarded by the lock's lease.

use std::time::{Duration, Instant};

use rand::RngExt;
use rand::rngs::StdRng;
use redquorum::{Lease, Lock};
use redquorum_testkit::{Checker, Hold, LocalCluster, RefereeSession};

use super::scenario::ClientStats;

/// What a holder does with the lock.
#[derive(Debug, Clone, Copy)]
pub enum HoldStyle {
    /// A short critical section: read the referee, pause up to `max_pause`, write. No
    /// renewal.
    Short { max_pause: Duration },
    /// Hold until `margin` before the deadline (no renewal), then write and release: the
    /// holds that expose keys expiring earlier than the deadline promises.
    ToDeadline { margin: Duration },
    /// Hold for `hold` (longer than the ttl) with the keep-alive renewing the lock.
    Renewed { hold: Duration },
}

/// A uniform duration in `[0, max]` (zero for a zero `max`).
pub fn random_upto(rng: &mut StdRng, max: Duration) -> Duration {
    if max.is_zero() {
        return Duration::ZERO;
    }
    let nanos = u64::try_from(max.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(rng.random_range(0..=nanos))
}

/// A lease on `lock` without renewals: the keep-alive is started only to obtain the lease
/// and stopped at once (its first renewal is a third of the ttl away). `None` if the lock
/// was already expired when returned.
///
/// # Panics
/// If the client's timings leave no room for a keep-alive (three node timeouts and a
/// third of the ttl must fit in the validity).
pub async fn lease_without_renewal(lock: &Lock, margin: Duration) -> Option<Lease> {
    let keep = match lock.keep_alive() {
        Ok(keep) => keep,
        Err(e) if e.is_lost() => return None,
        Err(e) => panic!("no lease for this lock: {e}"),
    };
    let lease = keep.lease().with_margin(margin);
    keep.stop().await;
    Some(lease)
}

/// One critical section under `lock`, recorded in the checker.
#[allow(clippy::too_many_arguments)]
pub async fn hold(
    client: usize,
    resource: &str,
    lock: Lock,
    acquired: Instant,
    style: HoldStyle,
    pause: Duration,
    checker: &Checker,
    session: &mut RefereeSession,
    stats: &mut ClientStats,
) {
    let ttl = lock.ttl();
    let (keep, lease) = match style {
        HoldStyle::Renewed { .. } => match lock.keep_alive() {
            Ok(keep) => {
                let lease = keep.lease().with_margin(ttl / 5);
                (Some(keep), Some(lease))
            }
            Err(e) if e.is_lost() => (None, None),
            Err(e) => panic!("no keep-alive for this lock: {e}"),
        },
        HoldStyle::Short { .. } => (None, lease_without_renewal(&lock, ttl / 5).await),
        HoldStyle::ToDeadline { margin } => (None, lease_without_renewal(&lock, margin).await),
    };
    let Some(lease) = lease else {
        // Returned already expired: record the (empty) interval so the checker flags it.
        let deadline = lock.deadline().into_std();
        let released = Instant::now();
        let _ = lock.release().await;
        checker
            .recorder()
            .record(Hold::new(client, resource, acquired, deadline, released));
        stats.abandoned += 1;
        return;
    };
    let read = session.read(resource).await.expect("referee read");
    let work = match style {
        HoldStyle::Short { .. } => pause,
        HoldStyle::Renewed { hold } => hold,
        HoldStyle::ToDeadline { margin } => lease
            .deadline()
            .into_std()
            .checked_sub(margin * 2)
            .map_or(Duration::ZERO, |until| {
                until.saturating_duration_since(Instant::now())
            }),
    };
    let worked = lease.run(tokio::time::sleep(work)).await.is_ok();
    // The write is the side effect the lock protects: only with margin to spare, and
    // never cancelled once sent.
    if worked && lease.check().is_ok() {
        session.write(resource, read).await.expect("referee write");
    } else {
        stats.abandoned += 1;
    }
    let deadline = lease.deadline().into_std();
    let released = Instant::now();
    drop(keep);
    if let Err(e) = lock.release().await {
        assert!(e.is_lost(), "release failed unexpectedly: {e}");
        stats.late_releases += 1;
    }
    checker
        .recorder()
        .record(Hold::new(client, resource, acquired, deadline, released));
}

/// A short critical section under `lock` (acquired at `acquired`): the referee's
/// read-modify-write, guarded by the lease, then the release; recorded in the checker.
pub async fn short_hold(
    client: usize,
    resource: &str,
    lock: Lock,
    acquired: Instant,
    checker: &Checker,
    session: &mut RefereeSession,
) {
    let lease = lease_without_renewal(&lock, lock.ttl() / 10)
        .await
        .expect("fresh lock");
    let read = session.read(resource).await.expect("read");
    if lease.check().is_ok() {
        session.write(resource, read).await.expect("write");
    }
    let deadline = lease.deadline().into_std();
    let released = Instant::now();
    lock.release().await.expect("released in time");
    checker
        .recorder()
        .record(Hold::new(client, resource, acquired, deadline, released));
}

/// Makes every master cache every script the client sends as `EVALSHA`
/// ([`Redlock::load_scripts`](redquorum::Redlock::load_scripts), straight to the masters).
/// Useful before faults that delay or drop replies to extensions: an `EVALSHA` of a script
/// a master lacks fails with NOSCRIPT, and the client retries it only if that reply arrives
/// in time (releases are self-contained `EVAL`s and need no warm-up).
///
/// An extension through the client would not do: it returns once a quorum has answered and
/// drops the calls still pending, a master's NOSCRIPT fallback among them.
pub async fn load_scripts(masters: &LocalCluster) {
    let redlock = super::builder(masters.urls())
        .build()
        .expect("valid config");
    for (i, outcome) in redlock.load_scripts().await.into_iter().enumerate() {
        if let Err(failure) = outcome {
            panic!("SCRIPT LOAD on node {i}: {failure}");
        }
    }
}
