//! What the restart guard makes of a master, as health reports show it.

use std::fmt;
use std::time::Duration;

/// Why a master's current epoch began.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EpochCause {
    /// No client had seen the master before (no epoch marker): it is new, or its data was
    /// deleted before anyone noticed.
    FirstSeen,
    /// The marker vanished while a client knew the master: its data was lost (a flush, a
    /// restart without persistence).
    DataLost,
    /// The master restarted without persisting every write, so recent lock keys may be
    /// missing.
    Restarted,
    /// An operator commissioned the master as new: it counts at once.
    Commissioned,
    /// An operator reset the epoch (e.g. after restoring a backup).
    Reset,
}

impl EpochCause {
    pub(crate) fn parse(s: &str) -> Self {
        match s {
            "data-lost" => Self::DataLost,
            "restarted" => Self::Restarted,
            "commissioned" => Self::Commissioned,
            "reset" => Self::Reset,
            _ => Self::FirstSeen,
        }
    }

    /// Why a master of this epoch is kept out, in a sentence.
    pub(crate) fn quarantine_reason(self) -> &'static str {
        match self {
            Self::FirstSeen => {
                "no epoch marker: the master is new to every client, or its data was deleted; it counts once the deployment's longest ttl has passed since it was first seen (commission it if it is new: `redquorum guard commission`)"
            }
            Self::DataLost => {
                "its data was lost (the epoch marker vanished); it counts once the deployment's longest ttl has passed since that was noticed"
            }
            Self::Restarted => {
                "it restarted without persisting every write (appendfsync always), so lock keys may be missing; it counts once the deployment's longest ttl has passed since it came up"
            }
            Self::Reset => {
                "an operator reset its epoch; it counts once the deployment's longest ttl has passed since"
            }
            Self::Commissioned => "it was commissioned",
        }
    }
}

impl fmt::Display for EpochCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::FirstSeen => "first seen",
            Self::DataLost => "data lost",
            Self::Restarted => "restarted",
            Self::Commissioned => "commissioned",
            Self::Reset => "reset",
        })
    }
}

/// What the restart guard makes of one master, as [`Redlock::health`](crate::Redlock::health)
/// reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GuardStatus {
    /// The guard is off: every grant counts.
    Off,
    /// Not verified on the current connection yet, or the verification failed.
    Unverified {
        /// Why, when a verification failed.
        reason: Option<String>,
    },
    /// Its grants count.
    Counted {
        /// Why its current epoch began.
        cause: EpochCause,
    },
    /// Its grants do not count for `remaining` more.
    Quarantined {
        /// Why its current epoch began.
        cause: EpochCause,
        /// Until its grants count.
        remaining: Duration,
    },
    /// A strict health check holds it out.
    Unhealthy {
        /// What the check found.
        reason: String,
    },
}

impl GuardStatus {
    /// True when the master's grants count now.
    pub fn counts(&self) -> bool {
        matches!(self, Self::Off | Self::Counted { .. })
    }
}

impl fmt::Display for GuardStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Off => f.write_str("guard off"),
            Self::Unverified { reason: None } => f.write_str("not verified yet"),
            Self::Unverified {
                reason: Some(reason),
            } => write!(f, "not verified: {reason}"),
            Self::Counted { cause } => write!(f, "counted (epoch {cause})"),
            Self::Quarantined { cause, remaining } => {
                write!(f, "quarantined for {remaining:.1?} ({cause})")
            }
            Self::Unhealthy { reason } => write!(f, "held out: {reason}"),
        }
    }
}
