//! The protocol's arithmetic, as pure functions: quorum sizes, the decision rule, validity,
//! and the restart guard's quarantine. No I/O, no clocks: callers pass the times in.
//!
//! The coordinator, the renewal task and the restart guard use these, and so does the
//! model checker (`model/`, through the `internals` feature), so the model and the code
//! cannot disagree on them.

use std::time::Duration;

/// The fixed part of the drift allowance, covering Redis's 1 ms expiry resolution and the
/// rounding of a ttl to whole milliseconds.
pub const DRIFT_CONSTANT: Duration = Duration::from_millis(2);

/// Votes needed among `n` members for a mutex: a strict majority, `n / 2 + 1`.
pub const fn majority(n: usize) -> usize {
    n / 2 + 1
}

/// Votes needed among `n` members so that no `k + 1` holders can each be granted one of `k`
/// permits: `⌊k·n / (k + 1)⌋ + 1`. Each member admits at most `k` holders, so `k + 1`
/// holders granted on `q` members each need `(k + 1)·q` admissions from `k·n` slots; they
/// cannot all exist once `(k + 1)·q > k·n`. `k = 1` gives the majority. `k = 0` is treated as
/// `k = 1`.
pub const fn permit_quorum(n: usize, k: usize) -> usize {
    let k = if k == 0 { 1 } else { k };
    k.saturating_mul(n) / (k + 1) + 1
}

/// The drift allowance of a lock: `ttl · factor + 2 ms` (`factor` already validated to be
/// in `[0, 0.5)`).
pub fn drift_allowance(ttl: Duration, factor: f64) -> Duration {
    ttl.mul_f64(factor) + DRIFT_CONSTANT
}

/// How long after the start of a round its keys are known to live on every member that
/// set them, whatever the members' clocks do within the drift allowance: `ttl - drift`
/// (zero when the drift uses it all up).
pub fn validity_window(ttl: Duration, drift: Duration) -> Duration {
    ttl.saturating_sub(drift)
}

/// A round's outcome as the votes come in: `Some(true)` once `q` members said yes,
/// `Some(false)` once more than `n - q` said no or failed (a quorum has become impossible),
/// `None` while it is still open.
pub const fn decision(yes: usize, no: usize, n: usize, q: usize) -> Option<bool> {
    if yes >= q {
        Some(true)
    } else if no > n.saturating_sub(q) {
        Some(false)
    } else {
        None
    }
}

/// How many members other than the one being verified must report their ttl records
/// before the deployment's longest ttl may be trusted: `n - q + 1`. A lock held on a
/// quorum keeps a record on at least `q - 1` members besides the one that lost its data,
/// and any `n - q + 1` of the `n - 1` others include one of them.
pub const fn ttl_readers(n: usize, q: usize) -> usize {
    let needed = (n + 1).saturating_sub(q);
    let others = n.saturating_sub(1);
    if needed < others { needed } else { others }
}

/// Whether a reader's marker belongs to the server that answered: the same `run_id`, or a
/// restart in which nothing was lost (the marker says durable and so does the live server).
/// A new server behind a replicated member (a Sentinel failover, a cluster shard) is never
/// the same incarnation: pass `replicated = true` and a changed `run_id` is a new one.
pub const fn same_incarnation(
    run_id_equal: bool,
    marker_durable: bool,
    live_durable: bool,
    replicated: bool,
) -> bool {
    run_id_equal || (!replicated && marker_durable && live_durable)
}

/// How old an epoch must be before a reader in it is trusted: `2 · max_ttl`. Every record the master could have lost when the epoch began covered a
/// lock whose deadline is less than `1.5 · ttl` after the record was written, so by then
/// nothing it lost can matter.
pub const fn trust_age_ms(max_ttl_ms: u64) -> u64 {
    max_ttl_ms.saturating_mul(2)
}

/// Whether a reader's "longest ttl" may be believed when the deployment's longest ttl is
/// read for a master being verified (restart guard v3): its marker is present and belongs
/// to the live server ([`same_incarnation`]), and its epoch began at least
/// [`trust_age_ms`] ago — so it has lost no data since before any record that can still
/// matter was written. A commissioned master's epoch began at time 0. A reader that lost
/// its data recently would truthfully answer "none", and must not count.
pub const fn reader_trusted(
    marker_present: bool,
    same_incarnation: bool,
    epoch_age_ms: u64,
    max_ttl_ms: u64,
) -> bool {
    marker_present && same_incarnation && epoch_age_ms >= trust_age_ms(max_ttl_ms)
}

/// How many trusted readers a verification needs among `n` members with quorum `q`:
/// [`ttl_readers`], and at least one — a single master has no one to vouch for what it lost.
pub const fn trusted_readers_needed(n: usize, q: usize) -> usize {
    let r = ttl_readers(n, q);
    if r == 0 { 1 } else { r }
}

/// The rest of a master's quarantine, in its own clock's milliseconds: until `since` (the
/// start of its epoch) plus the deployment's longest ttl, as seen at master time `now`.
/// Zero once over.
pub const fn quarantine_left_ms(since_ms: u64, longest_ttl_ms: u64, now_ms: u64) -> u64 {
    since_ms
        .saturating_add(longest_ttl_ms)
        .saturating_sub(now_ms)
}

/// A master-clock duration as a local one that is at least as long, for clocks whose rates
/// differ by up to `drift_factor`: `left · (1 + factor) + 2 ms`; zero stays zero.
pub fn local_wait(left_ms: u64, drift_factor: f64) -> Duration {
    if left_ms == 0 {
        return Duration::ZERO;
    }
    Duration::from_millis(left_ms).mul_f64(1.0 + drift_factor) + DRIFT_CONSTANT
}

/// Whether a master's last acknowledged ttl record of at least `ttl`, *sent* `since_record`
/// ago (`None`: never), no longer covers a lock with `ttl` taken now. Records stay for twice
/// their ttl, so one sent less than half a ttl ago outlives any such lock's deadline. A lock
/// is taken only once a quorum of masters is covered (a record round first, if need be):
/// then any `n − q + 1` other masters include a covered one, whatever the lock's own votes
/// (a record sent with the lock's own `SET` could arrive after a reader looked).
pub fn record_due(since_record: Option<Duration>, ttl: Duration) -> bool {
    since_record.is_none_or(|d| d >= ttl / 2)
}

/// Whether a record is old enough to be refreshed in passing (in the pipeline of an
/// acquisition that is already covered): after a quarter of the ttl, so that a client that
/// keeps locking never needs a record round of its own.
pub fn record_refresh(since_record: Option<Duration>, ttl: Duration) -> bool {
    since_record.is_none_or(|d| d >= ttl / 4)
}

/// How far before "now" a restarted master's new epoch may begin, from its
/// `uptime_in_seconds`: `max(uptime − 1, 0)` seconds, in ms. Redis computes the uptime as
/// the difference of two whole-second clocks, so it may exceed the real uptime by almost a
/// second; one second less is never before the boot (and the boot is after the crash).
pub const fn restart_anchor_offset_ms(uptime_s: u64) -> u64 {
    uptime_s.saturating_sub(1).saturating_mul(1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorums() {
        assert_eq!([1, 2, 3, 4, 5, 6, 7].map(majority), [1, 2, 2, 3, 3, 4, 4]);
        for n in 1..=9 {
            assert_eq!(permit_quorum(n, 1), majority(n), "k = 1 is the majority");
        }
        assert_eq!(permit_quorum(5, 2), 4);
        assert_eq!(permit_quorum(5, 3), 4);
        assert_eq!(permit_quorum(5, 4), 5);
        assert_eq!(permit_quorum(3, 2), 3);
        for n in 1..=9usize {
            for k in 1..=6usize {
                let q = permit_quorum(n, k);
                assert!((k + 1) * q > k * n, "n={n} k={k} q={q} admits k+1 holders");
                assert!(
                    q == 1 || (k + 1) * (q - 1) <= k * n,
                    "n={n} k={k}: {q} is not the smallest safe quorum"
                );
            }
        }
    }

    #[test]
    fn decisions() {
        assert_eq!(decision(3, 0, 5, 3), Some(true));
        assert_eq!(decision(2, 2, 5, 3), None);
        assert_eq!(decision(2, 3, 5, 3), Some(false));
        assert_eq!(decision(0, 1, 1, 1), Some(false));
    }

    #[test]
    fn ttl_readers_meet_every_quorum() {
        for n in 1..=9usize {
            let q = majority(n);
            let r = ttl_readers(n, q);
            // Any r of the n - 1 others meet any q - 1 of them.
            assert!(n == 1 || r + (q - 1) > n - 1, "n={n}");
            assert!(r <= n.saturating_sub(1));
        }
        assert_eq!(ttl_readers(3, 2), 2);
        assert_eq!(ttl_readers(5, 3), 3);
    }

    #[test]
    fn readers_are_trusted_only_with_their_records() {
        let day = 86_400_000;
        assert!(!reader_trusted(false, true, u64::MAX, day), "no marker");
        assert!(
            !reader_trusted(true, false, u64::MAX, day),
            "another server"
        );
        assert!(
            !reader_trusted(true, true, 2 * day - 1, day),
            "a recent epoch"
        );
        assert!(reader_trusted(true, true, 2 * day, day), "old enough");
        assert_eq!(
            trusted_readers_needed(1, 1),
            1,
            "a single master is never enough"
        );
        assert_eq!(trusted_readers_needed(5, 3), 3);
        assert!(same_incarnation(true, false, false, true));
        assert!(
            same_incarnation(false, true, true, false),
            "a durable restart"
        );
        assert!(!same_incarnation(false, true, true, true), "a failover");
        assert!(!same_incarnation(false, true, false, false));
    }

    #[test]
    fn quarantine_arithmetic() {
        assert_eq!(quarantine_left_ms(1_000, 4_000, 2_000), 3_000);
        assert_eq!(quarantine_left_ms(1_000, 4_000, 9_000), 0);
        assert_eq!(quarantine_left_ms(0, 4_000, u64::MAX), 0);
        assert_eq!(local_wait(0, 0.01), Duration::ZERO);
        assert_eq!(local_wait(1_000, 0.01), Duration::from_millis(1_012));
        assert!(record_due(None, Duration::from_secs(2)));
        assert!(!record_due(
            Some(Duration::from_millis(999)),
            Duration::from_secs(2)
        ));
        assert!(record_due(
            Some(Duration::from_secs(1)),
            Duration::from_secs(2)
        ));
        assert_eq!(
            validity_window(Duration::from_millis(10), Duration::from_millis(12)),
            Duration::ZERO
        );
    }
}
