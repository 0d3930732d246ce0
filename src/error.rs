//! The library's errors, grouped by what the caller can do about them.

use std::time::Duration;

use crate::report::HealthReport;
use crate::stats::AttemptStats;

pub(crate) mod node_failure;

pub use node_failure::{Cause, NodeFailure};

/// Every way a redquorum operation can fail.
///
/// The variants are grouped by what the caller can do: retry later ([`Contended`],
/// [`NoQuorum`], [`ValidityExhausted`], [`Timeout`]), stop using the lock ([`Expired`],
/// [`Lost`]), or fix the configuration ([`Config`]). The predicates
/// ([`is_contended`](Error::is_contended), [`is_retryable`](Error::is_retryable), …) are the
/// stable way to branch on them; new variants may be added.
///
/// Lock values and passwords never appear in these messages.
///
/// [`Contended`]: Error::Contended
/// [`NoQuorum`]: Error::NoQuorum
/// [`ValidityExhausted`]: Error::ValidityExhausted
/// [`Timeout`]: Error::Timeout
/// [`Expired`]: Error::Expired
/// [`Lost`]: Error::Lost
/// [`Config`]: Error::Config
/// [`TooLate`]: Error::TooLate
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Another client holds the lock: too many masters answered that the key is taken for
    /// a quorum to be possible. Retry later.
    #[error(
        "the lock is held by {}: {} of {} masters granted it and {} are needed; retry later",
        .stats.held_by().map_or_else(|| "another client".to_owned(), |h| h.to_string()),
        .stats.granted(), .stats.nodes(), .stats.quorum()
    )]
    Contended {
        /// The votes of the attempt that decided the outcome.
        stats: Box<AttemptStats>,
        /// How many attempts were made.
        attempts: u32,
    },

    /// Too many masters failed (timed out, unreachable, refused authentication, answered
    /// with an error) for a quorum to be possible. Each failure is in `stats`.
    #[error(
        "no quorum: {} of {} masters failed and only {} granted ({} needed); first failure: {}",
        .stats.failed(), .stats.nodes(), .stats.granted(), .stats.quorum(),
        .stats.first_failure().map_or_else(|| "none".to_owned(), |(node, f)| format!("node {node}: {f}"))
    )]
    NoQuorum {
        /// The votes of the attempt that decided the outcome, with each node's failure.
        stats: Box<AttemptStats>,
        /// How many attempts were made.
        attempts: u32,
    },

    /// A quorum granted the lock, but collecting the votes took so long that less than
    /// `min_validity` was left; the lock was released at once. Raise the ttl or lower the
    /// node timeout if this happens often.
    #[error(
        "a quorum granted the lock but only {validity:?} of validity was left after {elapsed:?} (the minimum is {min_validity:?}); the keys were released"
    )]
    ValidityExhausted {
        /// The time the attempt took.
        elapsed: Duration,
        /// The validity that was left (zero when none).
        validity: Duration,
        /// The configured minimum.
        min_validity: Duration,
        /// The votes of the attempt.
        stats: Box<AttemptStats>,
    },

    /// The retry policy's overall timeout passed before the lock could be taken.
    #[error("gave up after {attempts} attempts in {elapsed:?}: {last}")]
    Timeout {
        /// Time spent acquiring.
        elapsed: Duration,
        /// How many attempts were made.
        attempts: u32,
        /// Why the last attempt failed.
        #[source]
        last: Box<Error>,
    },

    /// The lock's deadline has passed: it may already belong to someone else. It was not
    /// extended; any cleanup that could be sent was sent.
    #[error("the lock expired {overdue:?} ago; it may now be held by another client")]
    Expired {
        /// How long ago the deadline passed.
        overdue: Duration,
    },

    /// The lock is no longer held by us on a quorum of masters (its keys are gone or hold
    /// another value), or a renewal did not reach a quorum before the deadline. Stop using
    /// it.
    #[error("the lock was lost: {reason}")]
    Lost {
        /// What showed the loss.
        reason: LossReason,
    },

    /// Less than the lease's safety margin of validity is left: the lock is still held, but
    /// too briefly to start an external side effect.
    #[error(
        "only {remaining:?} of validity left, less than the safety margin of {margin:?}: do not start a side effect now"
    )]
    TooLate {
        /// Validity left.
        remaining: Duration,
        /// The lease's safety margin.
        margin: Duration,
    },

    /// An extension reached too few masters. The lock was **not** shortened: it remains
    /// valid until its previous deadline, and may be extended again before then.
    #[error(
        "the extension reached {} of {} masters and {} are needed; the lock stays valid until its previous deadline",
        .stats.granted(), .stats.nodes(), .stats.quorum()
    )]
    ExtendFailed {
        /// The votes of the extension.
        stats: Box<AttemptStats>,
    },

    /// The restart guard refused an operator's action on one master (e.g. commissioning a
    /// master that holds lock keys).
    #[error("the restart guard refused to act on node {node}: {reason}")]
    GuardRefused {
        /// The master's position in the configured list.
        node: usize,
        /// Why, and what to do instead.
        reason: String,
    },

    /// An operation on one master failed (it could not be reached, or refused).
    #[error("node {node} failed: {failure}")]
    Node {
        /// The master's position in the configured list.
        node: usize,
        /// What went wrong.
        #[source]
        failure: NodeFailure,
    },

    /// A strict health check found problems (each says what to change).
    #[error("the masters are not safe for Redlock: {0}")]
    Unhealthy(Box<HealthReport>),

    /// Invalid configuration or arguments.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// What showed that a lock was lost.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LossReason {
    /// A quorum of masters answered that the keys are missing or hold another value.
    NotOurs {
        /// How many masters said so.
        masters: usize,
    },
    /// No renewal reached a quorum before the deadline passed.
    Expired,
}

impl std::fmt::Display for LossReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotOurs { masters } => write!(
                f,
                "{masters} masters answered that the key is gone or holds another client's value"
            ),
            Self::Expired => f.write_str("no renewal reached a quorum before the deadline"),
        }
    }
}

impl Error {
    /// The error itself, or for [`Error::Timeout`] the last attempt's: every predicate looks
    /// through a timeout, so that "gave up while contended" is still contended.
    fn cause(&self) -> &Error {
        match self {
            Self::Timeout { last, .. } => last.cause(),
            other => other,
        }
    }

    /// True when another client holds the lock.
    pub fn is_contended(&self) -> bool {
        matches!(self.cause(), Self::Contended { .. })
    }

    /// True when masters failed so that no quorum was possible.
    pub fn is_no_quorum(&self) -> bool {
        matches!(self.cause(), Self::NoQuorum { .. })
    }

    /// True when the retry policy's timeout ended the attempts (the other predicates then
    /// describe the last attempt).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Timeout { .. })
    }

    /// True when trying again later may succeed: contention, a missing quorum, exhausted
    /// validity, a failed extension (the lock is still valid), a master that could not be
    /// reached — or a timeout of any of these.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.cause(),
            Self::Contended { .. }
                | Self::NoQuorum { .. }
                | Self::ValidityExhausted { .. }
                | Self::ExtendFailed { .. }
                | Self::Node { .. }
        )
    }

    /// True when the lock can no longer be relied on: expired or lost. (Not
    /// [`Error::TooLate`]: that lock is still held, just too briefly to start a side effect;
    /// see [`is_too_late`](Error::is_too_late).)
    pub fn is_lost(&self) -> bool {
        matches!(self.cause(), Self::Expired { .. } | Self::Lost { .. })
    }

    /// True when the lock is still held but with less validity than the lease's safety
    /// margin: do not start a side effect now.
    pub fn is_too_late(&self) -> bool {
        matches!(self.cause(), Self::TooLate { .. })
    }

    /// True for configuration and argument errors.
    pub fn is_config(&self) -> bool {
        matches!(self.cause(), Self::Config(_))
    }

    /// Who holds the lock, when another client does: a writer, readers, every permit, …
    pub fn held_by(&self) -> Option<crate::Holder> {
        match self.cause() {
            Self::Contended { stats, .. } => stats.held_by(),
            _ => None,
        }
    }

    /// The per-node votes of the attempt behind this error, when there was one.
    pub fn stats(&self) -> Option<&AttemptStats> {
        match self.cause() {
            Self::Contended { stats, .. }
            | Self::NoQuorum { stats, .. }
            | Self::ValidityExhausted { stats, .. }
            | Self::ExtendFailed { stats } => Some(stats),
            _ => None,
        }
    }

    /// The per-node failures of the attempt behind this error: `(node index, failure)`.
    pub fn node_failures(&self) -> Vec<(usize, &NodeFailure)> {
        match self.cause() {
            Self::Node { node, failure } => vec![(*node, failure)],
            other => other.stats().map_or_else(Vec::new, AttemptStats::failures),
        }
    }
}

/// An invalid option or argument, naming the option and what to change.
///
/// Returned by [`RedlockBuilder::build`](crate::RedlockBuilder::build) and, wrapped in
/// [`Error::Config`], by lock calls given bad arguments. Passwords in URLs are redacted.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// No master was configured.
    #[error(
        "no Redis masters were given: add at least one with `node(url)` (three or five independent masters are usual)"
    )]
    NoNodes,

    /// A node URL could not be parsed.
    #[error("node {index} has an invalid URL `{url}`: {reason}")]
    InvalidUrl {
        /// Position of the node in the list.
        index: usize,
        /// The URL with any password replaced by `***`.
        url: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A `rediss://` URL was given but the `tls-rustls` feature is off.
    #[error(
        "node {index} uses TLS (`{url}`) but redquorum was built without TLS: enable the `tls-rustls` feature"
    )]
    TlsNotEnabled {
        /// Position of the node in the list.
        index: usize,
        /// The URL with any password replaced by `***`.
        url: String,
    },

    /// Two entries reach the same server, so they are not independent masters.
    #[error(
        "nodes {first} and {second} are the same server (`{url}`): every master must be listed once"
    )]
    DuplicateNode {
        /// Position of the first occurrence.
        first: usize,
        /// Position of the duplicate.
        second: usize,
        /// The URL with any password replaced by `***`.
        url: String,
    },

    /// The ttl is zero or below one millisecond.
    #[error("ttl must be at least 1 ms (Redis expires keys in whole milliseconds); got {0:?}")]
    TtlTooSmall(Duration),

    /// The ttl is larger than redquorum accepts.
    #[error("ttl must be at most {max:?}; got {ttl:?}")]
    TtlTooLarge {
        /// The ttl given.
        ttl: Duration,
        /// The largest ttl accepted.
        max: Duration,
    },

    /// The ttl is above the deployment's declared longest ttl
    /// ([`deployment_max_ttl`](crate::RedlockBuilder::deployment_max_ttl)).
    #[error(
        "ttl {ttl:?} is above the deployment's longest ttl of {max:?} (deployment_max_ttl): every client's restart guard counts on no lock living longer; raise deployment_max_ttl on every client first"
    )]
    TtlAboveDeploymentMax {
        /// The ttl asked for.
        ttl: Duration,
        /// The declared bound.
        max: Duration,
    },

    /// The ttl leaves no validity once the drift allowance, one node timeout and the
    /// minimum validity are taken out.
    #[error(
        "ttl {ttl:?} leaves no validity: drift allowance {drift:?} + node_timeout {node_timeout:?} + min_validity {min_validity:?} already use it up; raise the ttl or lower the others"
    )]
    TtlLeavesNoValidity {
        /// The ttl.
        ttl: Duration,
        /// `ttl * drift_factor + 2 ms`.
        drift: Duration,
        /// The node timeout.
        node_timeout: Duration,
        /// The minimum validity.
        min_validity: Duration,
    },

    /// The node timeout is zero.
    #[error("node_timeout must be greater than zero")]
    ZeroNodeTimeout,

    /// The node timeout is not below the ttl.
    #[error(
        "node_timeout ({node_timeout:?}) must be well below the ttl ({ttl:?}): a vote that takes as long as the lock lives is worthless"
    )]
    NodeTimeoutTooLong {
        /// The node timeout.
        node_timeout: Duration,
        /// The ttl.
        ttl: Duration,
    },

    /// The drift factor is outside `[0, 0.5)` or not a number.
    #[error("drift_factor must be in [0, 0.5); got {0}")]
    DriftFactorOutOfRange(f64),

    /// The retry policy allows zero attempts.
    #[error("the retry policy must allow at least one attempt")]
    ZeroAttempts,

    /// The retry policy has neither an attempt limit nor a timeout, so it could retry
    /// forever.
    #[error("the retry policy needs an attempt limit, a timeout, or both")]
    UnboundedRetry,

    /// The key prefix holds a brace, and a member is a Redis Cluster: the cluster would
    /// hash the lock keys by the prefix's `{…}` instead of by their resource's slot tag.
    #[error(
        "the key prefix `{prefix}` holds a brace; with a Redis Cluster member every key carries its resource's slot tag, so choose a key_prefix without `{{` or `}}`"
    )]
    BraceInKeyPrefix {
        /// The prefix given.
        prefix: String,
    },

    /// No resource was named.
    #[error("at least one resource must be named")]
    NoResources,

    /// A resource name is empty.
    #[error("resource {index} is an empty name: every resource needs a non-empty name")]
    EmptyResource {
        /// Position of the resource in the list.
        index: usize,
    },

    /// A read-write lock or a semaphore was asked for several resources (or none).
    #[error(
        "a {kind} lock covers exactly one resource, {resources} were given: lock them one by one (in a fixed order)"
    )]
    OneResourceOnly {
        /// The kind asked for.
        kind: crate::LockKind,
        /// How many resources were named.
        resources: usize,
    },

    /// A semaphore with zero permits.
    #[error("a semaphore needs at least one permit: permits(k) with k >= 1")]
    ZeroPermits,

    /// A master index beyond the configured list.
    #[error("there is no node {index}: {nodes} masters are configured (indices 0 to {})", .nodes.saturating_sub(1))]
    NoSuchNode {
        /// The index given.
        index: usize,
        /// How many masters there are.
        nodes: usize,
    },

    /// An option of the held-lock machinery (renewal point, margins) is out of range.
    #[error("{option} is out of range: {reason}")]
    OutOfRange {
        /// The option's name.
        option: &'static str,
        /// What is allowed.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats() -> Box<AttemptStats> {
        Box::new(AttemptStats::pending(3, 2, 1))
    }

    /// Every variant, bare and behind a timeout: (error, contended, no quorum, retryable,
    /// lost, too late, config, has stats).
    #[test]
    fn predicates_agree_for_every_variant_bare_and_behind_a_timeout() {
        use crate::HealthReport;
        let d = Duration::from_millis(1);
        let table: Vec<(Error, [bool; 7])> = vec![
            (
                Error::Contended {
                    stats: stats(),
                    attempts: 1,
                },
                [true, false, true, false, false, false, true],
            ),
            (
                Error::NoQuorum {
                    stats: stats(),
                    attempts: 1,
                },
                [false, true, true, false, false, false, true],
            ),
            (
                Error::ValidityExhausted {
                    elapsed: d,
                    validity: d,
                    min_validity: d,
                    stats: stats(),
                },
                [false, false, true, false, false, false, true],
            ),
            (
                Error::Expired { overdue: d },
                [false, false, false, true, false, false, false],
            ),
            (
                Error::Lost {
                    reason: LossReason::Expired,
                },
                [false, false, false, true, false, false, false],
            ),
            (
                Error::TooLate {
                    remaining: d,
                    margin: d,
                },
                [false, false, false, false, true, false, false],
            ),
            (
                Error::ExtendFailed { stats: stats() },
                [false, false, true, false, false, false, true],
            ),
            (
                Error::GuardRefused {
                    node: 0,
                    reason: "r".into(),
                },
                [false, false, false, false, false, false, false],
            ),
            (
                Error::Node {
                    node: 1,
                    failure: NodeFailure::Timeout(d),
                },
                [false, false, true, false, false, false, false],
            ),
            (
                Error::Unhealthy(Box::new(HealthReport {
                    nodes: Vec::new(),
                    problems: Vec::new(),
                    renewal: crate::report::RenewalLoad::default(),
                    polling: Vec::new(),
                })),
                [false, false, false, false, false, false, false],
            ),
            (
                Error::Config(ConfigError::NoResources),
                [false, false, false, false, false, true, false],
            ),
        ];
        for (error, expected) in table {
            let timeout = Error::Timeout {
                elapsed: d,
                attempts: 2,
                last: Box::new(Error::Timeout {
                    elapsed: d,
                    attempts: 1,
                    last: Box::new(error),
                }),
            };
            let Error::Timeout { last, .. } = &timeout else {
                unreachable!()
            };
            let Error::Timeout { last: bare, .. } = &**last else {
                unreachable!()
            };
            for e in [&**bare, &timeout] {
                let got = [
                    e.is_contended(),
                    e.is_no_quorum(),
                    e.is_retryable(),
                    e.is_lost(),
                    e.is_too_late(),
                    e.is_config(),
                    e.stats().is_some(),
                ];
                assert_eq!(got, expected, "{e:?}");
            }
            assert!(timeout.is_timeout() && !bare.is_timeout());
            use std::error::Error as _;
            assert!(
                timeout.source().is_some(),
                "a timeout's source is its last error"
            );
        }
    }

    #[test]
    fn node_errors_chain_to_the_redis_error() {
        use std::error::Error as _;
        let failure = crate::error::node_failure::classify(redis::RedisError::from(
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused"),
        ));
        let error = Error::Node { node: 2, failure };
        assert_eq!(error.node_failures().len(), 1);
        let mut depth = 0;
        let mut source = error.source();
        while let Some(s) = source {
            depth += 1;
            source = s.source();
        }
        assert!(
            depth >= 3,
            "Error -> NodeFailure -> Cause -> RedisError ({depth})"
        );
    }

    #[test]
    fn config_messages_name_the_option() {
        let e = ConfigError::NodeTimeoutTooLong {
            node_timeout: Duration::from_secs(2),
            ttl: Duration::from_secs(1),
        };
        assert!(e.to_string().contains("node_timeout"));
        assert!(
            ConfigError::DriftFactorOutOfRange(0.7)
                .to_string()
                .contains("drift_factor")
        );
    }
}
