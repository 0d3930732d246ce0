//! How long a refused caller waits before its next attempt (DESIGN §2.9): until enough
//! masters announced a release that a quorum may now grant, or until the holder's keys can
//! have run out, whichever comes first — never past the caller's deadline, and never a
//! blind poll unless the masters refuse subscriptions.

use std::time::Duration;

use rand::RngExt;
use tokio::time::Instant;

use crate::kind::KindRequest;
use crate::member::announce::Waiter;
use crate::stats::{AttemptStats, Vote};

/// The channels a waiter for `kind` on `keys` listens to: each lock key of a mutex; the
/// holder set of a read-write lock or a semaphore (the first key of its release script,
/// which announces there).
pub(crate) fn channels(kind: &KindRequest, keys: &[String]) -> Vec<String> {
    match kind {
        KindRequest::Mutex => keys.to_vec(),
        KindRequest::Read { keys } | KindRequest::Write { keys, .. } => vec![keys.readers.clone()],
        KindRequest::Permit { holders, .. } => vec![holders.clone()],
    }
}

/// What a refused attempt waits for.
#[derive(Debug)]
pub(crate) struct Plan {
    /// The masters whose announcements count (they refused, and we hear them).
    pub(crate) from: Vec<usize>,
    /// How many of them must announce: the votes still missing for a quorum, not one. An
    /// announcement from one master cannot make a quorum free while the others still hold
    /// the keys, and a waiter woken by it asks every master in a round that may fail.
    /// Measured (`bench --workload handover`, loopback, five masters, 2 runs each, on a
    /// 2-vCPU VM at load 8–13, too noisy to rank the gaps): on any one, gap p50 142–235 µs
    /// and 2.14–2.33 acquire rounds per acquisition; on the quorum, 299–344 µs and
    /// 2.02–2.11 rounds (and 188–216 µs at load 14 in the three runs of the README). The
    /// extra rounds are certain, a load on every master from every client; the gap
    /// difference is within the noise — so the quorum.
    pub(crate) needed: usize,
    /// Wake at the latest then: the earliest moment a quorum can be free by expiry (plus a
    /// jitter of about a round trip), the polling delay when nothing better is known, or the
    /// caller's deadline.
    pub(crate) until: Instant,
    /// Whether `until` is the caller's deadline (then it gives up there).
    pub(crate) at_deadline: bool,
}

/// The plan after the refused attempt `stats`, decided now. `poll` is the
/// fallback delay (the retry policy's), `ttl` the safety net when masters are heard but did
/// not say when the holder's keys run out.
pub(crate) fn plan(
    stats: &AttemptStats,
    waiter: &Waiter,
    poll: Duration,
    ttl: Duration,
    deadline: Option<Instant>,
) -> Plan {
    let votes = stats.votes();
    // Masters that granted us were free a moment ago (our cleanup has released them).
    let free = votes.iter().filter(|v| v.vote == Vote::Granted).count();
    let needed = stats.quorum().saturating_sub(free).max(1);
    let refused: Vec<_> = votes.iter().filter(|v| v.vote == Vote::Taken).collect();
    let from: Vec<usize> = refused
        .iter()
        .map(|v| v.node)
        .filter(|&i| waiter.hears(i))
        .collect();
    let mut left: Vec<Duration> = refused.iter().filter_map(|v| v.expires_in).collect();
    left.sort_unstable();
    let rtt = stats.elapsed();
    let now = Instant::now();
    // Counted from now, not from the attempt's start: each master read its `PTTL` before its
    // answer reached us, so its keys are gone by now + pttl (+ 1 ms for the rounding of
    // `PTTL`); from the start we could wake before they are, and lose a round.
    let by_expiry = (left.len() >= needed)
        .then(|| now + left[needed - 1] + Duration::from_millis(1) + jitter(rtt));
    let heard = from.len() >= needed;
    let until = match (by_expiry, heard) {
        // Announcements can tell, and so can the expiry: whichever comes first.
        (Some(at), true) => at,
        // Announcements can tell, the expiry cannot: a safety net of one ttl.
        (None, true) => now + ttl,
        // Too few masters announce to us (they refused `SUBSCRIBE`): the polling fallback,
        // or the expiry if that comes sooner.
        (Some(at), false) => at.min(now + poll),
        (None, false) => now + poll,
    };
    let (until, at_deadline) = match deadline {
        Some(d) if d <= until => (d, true),
        _ => (until, false),
    };
    Plan {
        needed: needed.min(from.len().max(1)),
        from,
        until,
        at_deadline,
    }
}

/// Waits `delay`: on tokio's timer when it is long, by yielding to the runtime until it has
/// passed when it is under a millisecond — tokio's timer ticks in milliseconds, and a 100 µs
/// jitter slept on it costs a whole tick, several round trips on a LAN.
pub(crate) async fn pause(delay: Duration) {
    if delay >= Duration::from_millis(1) {
        return tokio::time::sleep(delay).await;
    }
    let until = Instant::now() + delay;
    while Instant::now() < until {
        tokio::task::yield_now().await;
    }
}

/// A random delay in `[0, rtt]`: woken together, waiters do not all ask at once (a split
/// vote costs every one of them a round).
pub(crate) fn jitter(rtt: Duration) -> Duration {
    let span = u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX);
    if span == 0 {
        return Duration::ZERO;
    }
    Duration::from_nanos(rand::rng().random_range(0..=span))
}
