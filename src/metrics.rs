//! Every metric redquorum records, by name, in one place: what the call sites say in one line
//! (`metrics::acquired(…)`), recorded through the [`metrics`](https://docs.rs/metrics) crate
//! facade with the `metrics` feature, and nothing at all without it (each function's body is
//! compiled out, so the calls inline to nothing).
//!
//! Labels take bounded values only — a master's index, a lock kind, an outcome, a cause —
//! never a resource name, a lock value or a URL: a dashboard's series stay few, and no secret
//! reaches a metrics backend. The table of names is in the crate docs (`# Metrics`).

// Without the feature, the names and labels are only there to be documented.
#![cfg_attr(not(feature = "metrics"), allow(dead_code))]

use std::time::Duration;

use crate::error::node_failure::NodeFailure;
use crate::kind::LockKind;
use crate::report::GuardStatus;

/// Acquire latency, from the call to its result, by `kind` and `outcome`.
pub(crate) const ACQUIRE_DURATION: &str = "redquorum_acquire_duration_seconds";
/// Acquisitions, by `kind` and `outcome`.
pub(crate) const ACQUISITIONS: &str = "redquorum_acquisitions_total";
/// Attempts per acquisition, by `kind` and `outcome`.
pub(crate) const ACQUIRE_ATTEMPTS: &str = "redquorum_acquire_attempts";
/// The votes a lock of `kind` needs.
pub(crate) const QUORUM_SIZE: &str = "redquorum_quorum_size";
/// Every master's answer in a round, by `master`, `op` and `vote`.
pub(crate) const VOTES: &str = "redquorum_votes_total";
/// Failed votes, by `master`, `op` and `cause`.
pub(crate) const VOTE_FAILURES: &str = "redquorum_vote_failures_total";
/// One master's answer time, by `master` and `op`.
pub(crate) const VOTE_DURATION: &str = "redquorum_vote_duration_seconds";
/// Requests of a round sent to a master and not answered yet, by `master`.
pub(crate) const IN_FLIGHT: &str = "redquorum_requests_in_flight";
/// Explicit extensions ([`Lock::extend`](crate::Lock::extend)), by `kind` and `outcome`.
pub(crate) const EXTENSIONS: &str = "redquorum_extensions_total";
/// Keep-alive renewals, by `outcome`.
pub(crate) const RENEWALS: &str = "redquorum_renewals_total";
/// Held locks lost, by `reason`.
pub(crate) const LOCKS_LOST: &str = "redquorum_locks_lost_total";
/// Releases that did not reach every master, by `kind`.
pub(crate) const RELEASES_INCOMPLETE: &str = "redquorum_releases_incomplete_total";
/// The restart guard's view of each master: 1 for its current `state`, 0 for the others.
pub(crate) const GUARD_STATE: &str = "redquorum_guard_state";
/// Why each master's current epoch began: 1 for its `cause`, 0 for the others.
pub(crate) const GUARD_EPOCH_CAUSE: &str = "redquorum_guard_epoch_cause";
/// How long each master stays quarantined (0 when its grants count).
pub(crate) const GUARD_QUARANTINE: &str = "redquorum_guard_quarantine_seconds";
/// Callers waiting for a busy lock between attempts, by `kind`.
pub(crate) const WAITERS: &str = "redquorum_waiters";
/// Time from a waiter's first refusal to its grant, by `kind` (the hand-over hook).
pub(crate) const HANDOVER_WAIT: &str = "redquorum_handover_wait_seconds";

/// How an acquisition ended: the `outcome` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Granted,
    Contended,
    NoQuorum,
    /// A quorum granted, but too little validity was left.
    TooLate,
    /// The retry policy's time ran out.
    Timeout,
    /// Anything else (a configuration error): no vote was asked for.
    Error,
}

impl Outcome {
    /// The outcome of an acquisition that ended with `error`.
    pub(crate) fn of(error: &crate::error::Error) -> Self {
        use crate::error::Error as E;
        match error {
            E::Contended { .. } => Self::Contended,
            E::NoQuorum { .. } => Self::NoQuorum,
            E::ValidityExhausted { .. } => Self::TooLate,
            E::Timeout { .. } => Self::Timeout,
            _ => Self::Error,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Granted => "granted",
            Self::Contended => "contended",
            Self::NoQuorum => "no_quorum",
            Self::TooLate => "too_late",
            Self::Timeout => "timeout",
            Self::Error => "error",
        }
    }
}

/// A round's operation: the `op` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Acquire,
    Extend,
    Fence,
}

impl Op {
    fn label(self) -> &'static str {
        match self {
            Self::Acquire => "acquire",
            Self::Extend => "extend",
            Self::Fence => "fence",
        }
    }
}

/// What one master said: the `vote` label, with the failure's `cause`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Said<'a> {
    Granted,
    Taken,
    Failed(&'a NodeFailure),
}

impl<'a> Said<'a> {
    /// The label of a recorded vote (a pending one never is).
    pub(crate) fn of(vote: &'a crate::stats::Vote) -> Self {
        match vote {
            crate::stats::Vote::Granted => Self::Granted,
            crate::stats::Vote::Failed(failure) => Self::Failed(failure),
            _ => Self::Taken,
        }
    }
}

/// How a renewal or an extension ended: the `outcome` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kept {
    Ok,
    Failed,
    Lost,
}

impl Kept {
    fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Failed => "failed",
            Self::Lost => "lost",
        }
    }
}

/// The `kind` label: `mutex`, `read`, `write`, `permits` (never the count: bounded).
pub(crate) fn kind_label(kind: LockKind) -> &'static str {
    match kind {
        LockKind::Read => "read",
        LockKind::Write => "write",
        LockKind::Permit { .. } => "permits",
        _ => "mutex",
    }
}

/// The `cause` label of a failed vote.
pub(crate) fn cause_label(failure: &NodeFailure) -> &'static str {
    match failure {
        NodeFailure::Timeout(_) => "timeout",
        NodeFailure::Connection(_) => "connection",
        NodeFailure::Auth(_) => "auth",
        NodeFailure::Server { .. } => "server",
        NodeFailure::UnexpectedReply(_) => "unexpected_reply",
        NodeFailure::ForeignKey { .. } => "foreign_key",
        NodeFailure::NotReplicated { .. } => "not_replicated",
        NodeFailure::Quarantined { .. } => "quarantined",
        NodeFailure::ScriptingUnavailable { .. } => "no_scripting",
    }
}

/// The `master` label: the master's index in the configured list.
#[cfg(feature = "metrics")]
fn master(index: usize) -> ::metrics::SharedString {
    const SMALL: [&str; 16] = [
        "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15",
    ];
    match SMALL.get(index) {
        Some(s) => ::metrics::SharedString::const_str(s),
        None => ::metrics::SharedString::from(index.to_string()),
    }
}

/// The guard states of the `state` label, in the order [`guard_status`] sets them.
#[cfg(feature = "metrics")]
const GUARD_STATES: [&str; 5] = ["off", "unverified", "counted", "quarantined", "unhealthy"];
/// The epoch causes of the `cause` label.
#[cfg(feature = "metrics")]
const EPOCH_CAUSES: [&str; 5] = [
    "first_seen",
    "data_lost",
    "restarted",
    "commissioned",
    "reset",
];

/// Registers every metric's unit and description with the installed recorder.
#[cfg(feature = "metrics")]
pub fn describe_metrics() {
    use ::metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_histogram!(
        ACQUIRE_DURATION,
        Unit::Seconds,
        "Acquire latency, from the call to its result"
    );
    describe_counter!(
        ACQUISITIONS,
        Unit::Count,
        "Acquisitions, by kind and outcome"
    );
    describe_histogram!(ACQUIRE_ATTEMPTS, Unit::Count, "Attempts per acquisition");
    describe_gauge!(QUORUM_SIZE, Unit::Count, "Votes a lock of the kind needs");
    describe_counter!(
        VOTES,
        Unit::Count,
        "Masters' answers, by master, operation and vote"
    );
    describe_counter!(
        VOTE_FAILURES,
        Unit::Count,
        "Failed votes, by master, operation and cause"
    );
    describe_histogram!(VOTE_DURATION, Unit::Seconds, "One master's answer time");
    describe_gauge!(
        IN_FLIGHT,
        Unit::Count,
        "Requests sent to a master and not answered yet"
    );
    describe_counter!(
        EXTENSIONS,
        Unit::Count,
        "Explicit extensions, by kind and outcome"
    );
    describe_counter!(RENEWALS, Unit::Count, "Keep-alive renewals, by outcome");
    describe_counter!(LOCKS_LOST, Unit::Count, "Held locks lost, by reason");
    describe_counter!(
        RELEASES_INCOMPLETE,
        Unit::Count,
        "Releases that did not reach every master"
    );
    describe_gauge!(
        GUARD_STATE,
        Unit::Count,
        "1 for the restart guard's state of the master"
    );
    describe_gauge!(
        GUARD_EPOCH_CAUSE,
        Unit::Count,
        "1 for why the master's epoch began"
    );
    describe_gauge!(
        GUARD_QUARANTINE,
        Unit::Seconds,
        "Time the master stays quarantined"
    );
    describe_gauge!(WAITERS, Unit::Count, "Callers waiting for a busy lock");
    describe_histogram!(
        HANDOVER_WAIT,
        Unit::Seconds,
        "Time from a waiter's first refusal to its grant"
    );
}

/// When an operation started, kept only with the `metrics` feature (a zero-sized value
/// without it: no clock is read).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timer {
    #[cfg(feature = "metrics")]
    start: tokio::time::Instant,
}

impl Timer {
    #[inline]
    pub(crate) fn start() -> Self {
        Self {
            #[cfg(feature = "metrics")]
            start: tokio::time::Instant::now(),
        }
    }
}

/// An acquisition of `kind` (needing `quorum` votes) started at `timer` has ended;
/// `outcome` says how and after how many attempts (called only with the feature on). A
/// granted acquisition that needed more than one attempt also records its wait
/// ([`handover_wait`]).
#[inline]
pub(crate) fn acquired(
    kind: LockKind,
    quorum: usize,
    timer: Timer,
    outcome: impl FnOnce() -> (Outcome, u32),
) {
    #[cfg(feature = "metrics")]
    {
        let elapsed = timer.start.elapsed();
        let (outcome, attempts) = outcome();
        let labels = [("kind", kind_label(kind)), ("outcome", outcome.label())];
        ::metrics::histogram!(ACQUIRE_DURATION, &labels).record(elapsed.as_secs_f64());
        ::metrics::counter!(ACQUISITIONS, &labels).increment(1);
        ::metrics::histogram!(ACQUIRE_ATTEMPTS, &labels).record(f64::from(attempts));
        ::metrics::gauge!(QUORUM_SIZE, "kind" => kind_label(kind)).set(quorum as f64);
        if outcome == Outcome::Granted && attempts > 1 {
            handover_wait(kind, elapsed);
        }
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, quorum, timer, outcome);
}

/// Master `index` answered `said` to `op` after `latency`.
#[inline]
pub(crate) fn vote(index: usize, op: Op, said: Said<'_>, latency: Duration) {
    #[cfg(feature = "metrics")]
    {
        let vote = match said {
            Said::Granted => "granted",
            Said::Taken => "taken",
            Said::Failed(_) => "failed",
        };
        ::metrics::counter!(VOTES, "master" => master(index), "op" => op.label(), "vote" => vote)
            .increment(1);
        if let Said::Failed(failure) = said {
            ::metrics::counter!(VOTE_FAILURES, "master" => master(index), "op" => op.label(), "cause" => cause_label(failure))
                .increment(1);
        }
        ::metrics::histogram!(VOTE_DURATION, "master" => master(index), "op" => op.label())
            .record(latency.as_secs_f64());
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (index, op, said, latency);
}

/// A request to master `index`, counted in flight until dropped (answered or abandoned).
#[derive(Debug)]
pub(crate) struct InFlight {
    #[cfg(feature = "metrics")]
    index: usize,
}

impl InFlight {
    #[inline]
    pub(crate) fn new(index: usize) -> Self {
        #[cfg(feature = "metrics")]
        {
            ::metrics::gauge!(IN_FLIGHT, "master" => master(index)).increment(1.0);
            Self { index }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = index;
            Self {}
        }
    }
}

#[cfg(feature = "metrics")]
impl Drop for InFlight {
    fn drop(&mut self) {
        ::metrics::gauge!(IN_FLIGHT, "master" => master(self.index)).decrement(1.0);
    }
}

/// An explicit extension of a lock of `kind` ended with `outcome`.
#[inline]
pub(crate) fn extended(kind: LockKind, outcome: Kept) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(EXTENSIONS, "kind" => kind_label(kind), "outcome" => outcome.label())
        .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, outcome);
}

/// `count` keep-alive renewals ended with `outcome`.
#[inline]
pub(crate) fn renewed(outcome: Kept, count: u64) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(RENEWALS, "outcome" => outcome.label()).increment(count);
    #[cfg(not(feature = "metrics"))]
    let _ = (outcome, count);
}

/// A held lock was lost; `expired`: no renewal reached a quorum in time (else: not ours).
#[inline]
pub(crate) fn lost(expired: bool) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(LOCKS_LOST, "reason" => if expired { "expired" } else { "not_ours" })
        .increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = expired;
}

/// A release of a lock of `kind` could not reach every master.
#[inline]
pub(crate) fn release_incomplete(kind: LockKind) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(RELEASES_INCOMPLETE, "kind" => kind_label(kind)).increment(1);
    #[cfg(not(feature = "metrics"))]
    let _ = kind;
}

/// The restart guard's view of master `index` is `status`.
#[inline]
pub(crate) fn guard_status(index: usize, status: &GuardStatus) {
    #[cfg(feature = "metrics")]
    {
        use crate::report::EpochCause;
        let (state, cause, remaining) = match status {
            GuardStatus::Unverified { .. } => (1, None, Duration::ZERO),
            GuardStatus::Counted { cause } => (2, Some(*cause), Duration::ZERO),
            GuardStatus::Quarantined { cause, remaining } => (3, Some(*cause), *remaining),
            GuardStatus::Unhealthy { .. } => (4, None, Duration::ZERO),
            _ => (0, None, Duration::ZERO),
        };
        for (i, name) in GUARD_STATES.iter().enumerate() {
            ::metrics::gauge!(GUARD_STATE, "master" => master(index), "state" => *name)
                .set(if i == state { 1.0 } else { 0.0 });
        }
        let cause = cause.map(|c| match c {
            EpochCause::FirstSeen => 0,
            EpochCause::DataLost => 1,
            EpochCause::Restarted => 2,
            EpochCause::Commissioned => 3,
            _ => 4,
        });
        for (i, name) in EPOCH_CAUSES.iter().enumerate() {
            ::metrics::gauge!(GUARD_EPOCH_CAUSE, "master" => master(index), "cause" => *name)
                .set(if Some(i) == cause { 1.0 } else { 0.0 });
        }
        ::metrics::gauge!(GUARD_QUARANTINE, "master" => master(index)).set(remaining.as_secs_f64());
    }
    #[cfg(not(feature = "metrics"))]
    let _ = (index, status);
}

/// A caller of `kind` waits for a busy lock until this is dropped.
#[derive(Debug)]
pub(crate) struct Waiting {
    #[cfg(feature = "metrics")]
    kind: &'static str,
}

impl Waiting {
    #[inline]
    pub(crate) fn new(kind: LockKind) -> Self {
        #[cfg(feature = "metrics")]
        {
            let kind = kind_label(kind);
            ::metrics::gauge!(WAITERS, "kind" => kind).increment(1.0);
            Self { kind }
        }
        #[cfg(not(feature = "metrics"))]
        {
            let _ = kind;
            Self {}
        }
    }
}

#[cfg(feature = "metrics")]
impl Drop for Waiting {
    fn drop(&mut self) {
        ::metrics::gauge!(WAITERS, "kind" => self.kind).decrement(1.0);
    }
}

/// The hand-over hook: a waiter of `kind` was granted the lock `waited` after its first
/// refusal. Called by the retry loop today; the hand-over notifications (issue: waiting)
/// call it where they wake a waiter.
#[inline]
pub(crate) fn handover_wait(kind: LockKind, waited: Duration) {
    #[cfg(feature = "metrics")]
    ::metrics::histogram!(HANDOVER_WAIT, "kind" => kind_label(kind)).record(waited.as_secs_f64());
    #[cfg(not(feature = "metrics"))]
    let _ = (kind, waited);
}
