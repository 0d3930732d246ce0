//! Per-worker latency histograms and counters, merged at the end of a measurement.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use redquorum::{AttemptStats, Vote};
use serde::Serialize;

/// Lowest latency told apart, in ns: 64 ns steps keep three significant digits from
/// about 60 µs up (loopback round trips), where the headline ratios are read.
const LOWEST_NS: u64 = 100;
/// Highest latency recorded, in ns; longer ones are clamped (every call is bounded by the
/// node timeout, far below).
const HIGHEST_NS: u64 = 60_000_000_000;

/// A latency histogram in nanoseconds, allocated on first use (most workloads use only
/// some of the operations, and each histogram is ~150 KiB).
#[derive(Debug, Default, Clone)]
pub(crate) struct Latency(Option<Histogram<u64>>);

impl Latency {
    pub(crate) fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.hist().saturating_record(ns.max(1));
    }

    fn hist(&mut self) -> &mut Histogram<u64> {
        self.0.get_or_insert_with(|| {
            Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, 3).expect("constant bounds are valid")
        })
    }

    pub(crate) fn merge(&mut self, other: &Self) {
        if let Some(theirs) = &other.0 {
            // Same bounds on both sides, so `add` cannot fail.
            let _ = self.hist().add(theirs);
        }
    }

    pub(crate) fn histogram(&self) -> Option<&Histogram<u64>> {
        self.0.as_ref().filter(|h| !h.is_empty())
    }

    pub(crate) fn summary(&self) -> Option<Summary> {
        self.histogram().map(Summary::of)
    }
}

/// Mean, percentiles and maximum, in microseconds.
#[derive(Debug, Clone, Copy, Serialize)]
pub(crate) struct Summary {
    pub(crate) count: u64,
    pub(crate) mean_us: f64,
    pub(crate) p50_us: f64,
    pub(crate) p90_us: f64,
    pub(crate) p99_us: f64,
    pub(crate) p999_us: f64,
    pub(crate) max_us: f64,
}

impl Summary {
    fn of(h: &Histogram<u64>) -> Self {
        let us = |ns: u64| ns as f64 / 1e3;
        Self {
            count: h.len(),
            mean_us: h.mean() / 1e3,
            p50_us: us(h.value_at_quantile(0.50)),
            p90_us: us(h.value_at_quantile(0.90)),
            p99_us: us(h.value_at_quantile(0.99)),
            p999_us: us(h.value_at_quantile(0.999)),
            max_us: us(h.max()),
        }
    }

    /// The columns of the table, in order: mean, p50, p90, p99, p99.9, max.
    pub(crate) fn columns(&self) -> [f64; 6] {
        [
            self.mean_us,
            self.p50_us,
            self.p90_us,
            self.p99_us,
            self.p999_us,
            self.max_us,
        ]
    }
}

/// How one master voted over a measurement (redquorum only).
#[derive(Debug, Default, Clone)]
pub(crate) struct NodeVotes {
    /// Latency of the answers that had arrived when the vote was read.
    pub(crate) latency: Latency,
    pub(crate) answered: u64,
    pub(crate) failed: u64,
    /// Rounds decided without this master's answer.
    pub(crate) pending: u64,
}

/// What one worker (or, merged, all of them) measured for one system.
#[derive(Debug, Default, Clone)]
pub(crate) struct Recorder {
    pub(crate) acquire: Latency,
    pub(crate) extend: Latency,
    pub(crate) release: Latency,
    /// Hand-over: from a release's acknowledgement to the next grant.
    pub(crate) gap: Latency,
    /// Hand-over: grants that came before the previous holder saw its release acknowledged.
    pub(crate) early_grants: u64,
    /// Completed cycles: lock + release, or one extension.
    pub(crate) cycles: u64,
    /// Acquisition attempts (contention: including refusals).
    pub(crate) attempts: u64,
    /// Successful acquisitions.
    pub(crate) acquired: u64,
    pub(crate) failures: BTreeMap<&'static str, u64>,
    /// Votes per master in the headline operation's rounds (acquire, or extend).
    pub(crate) votes: Vec<NodeVotes>,
}

impl Recorder {
    pub(crate) fn fail(&mut self, kind: &'static str) {
        *self.failures.entry(kind).or_default() += 1;
    }

    /// Records every master's vote of a round.
    pub(crate) fn votes(&mut self, stats: &AttemptStats) {
        if self.votes.len() < stats.nodes() {
            self.votes.resize_with(stats.nodes(), NodeVotes::default);
        }
        for (slot, vote) in self.votes.iter_mut().zip(stats.votes()) {
            match (&vote.vote, vote.latency) {
                (Vote::Pending, _) | (_, None) => slot.pending += 1,
                (Vote::Failed(_), Some(_)) => slot.failed += 1,
                (_, Some(latency)) => {
                    slot.answered += 1;
                    slot.latency.record(latency);
                }
            }
        }
    }

    pub(crate) fn merge(&mut self, other: &Self) {
        self.acquire.merge(&other.acquire);
        self.extend.merge(&other.extend);
        self.release.merge(&other.release);
        self.gap.merge(&other.gap);
        self.early_grants += other.early_grants;
        self.cycles += other.cycles;
        self.attempts += other.attempts;
        self.acquired += other.acquired;
        for (kind, n) in &other.failures {
            *self.failures.entry(kind).or_default() += n;
        }
        if self.votes.len() < other.votes.len() {
            self.votes
                .resize_with(other.votes.len(), NodeVotes::default);
        }
        for (mine, theirs) in self.votes.iter_mut().zip(&other.votes) {
            mine.latency.merge(&theirs.latency);
            mine.answered += theirs.answered;
            mine.failed += theirs.failed;
            mine.pending += theirs.pending;
        }
    }
}

/// The failure kind of a redquorum error, as counted in the report.
pub(crate) fn kind(err: &redquorum::Error) -> &'static str {
    use redquorum::Error as E;
    match err {
        E::Contended { .. } => "contended",
        E::NoQuorum { .. } => "no-quorum",
        E::ValidityExhausted { .. } => "validity-exhausted",
        E::Timeout { .. } => "timeout",
        E::Expired { .. } => "expired",
        E::Lost { .. } => "lost",
        E::ExtendFailed { .. } => "extend-failed",
        E::Config(_) => "config",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_histograms_add_up() {
        let mut a = Recorder::default();
        let mut b = Recorder::default();
        a.acquire.record(Duration::from_micros(100));
        b.acquire.record(Duration::from_micros(300));
        b.fail("contended");
        a.merge(&b);
        let s = a.acquire.summary().expect("two samples");
        assert_eq!(s.count, 2);
        assert!((s.max_us - 300.0).abs() < 1.0, "{s:?}");
        assert!((s.mean_us - 200.0).abs() < 1.0, "{s:?}");
        assert_eq!(a.failures.get("contended"), Some(&1));
        assert!(a.release.summary().is_none());
    }
}
