//! What can be wrong with a master, and what to change.

use std::fmt;
use std::time::Duration;

use crate::failure::NodeFailure;

/// One thing wrong with a master (or the set of masters), and what to change.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Problem {
    /// The master could not be reached or did not answer.
    Unreachable(NodeFailure),
    /// The master is a replica: it refuses writes, and replication makes masters
    /// dependent.
    Replica,
    /// An eviction policy that may delete lock keys under memory pressure.
    Evicting {
        /// The `maxmemory-policy`.
        policy: String,
    },
    /// Persistence that can lose recent lock keys in a crash while keeping older data, and
    /// the restart guard off.
    LossyPersistence {
        /// What is configured.
        detail: String,
    },
    /// No persistence and the restart guard off: a crashed master may rejoin empty.
    UnguardedRestarts,
    /// The master does not persist every write before answering, so after each restart
    /// the restart guard keeps it out for the deployment's longest ttl.
    RestartsQuarantine {
        /// What is configured.
        detail: String,
    },
    /// The restart guard keeps the master out of the quorum for now.
    Quarantined {
        /// Why its epoch began.
        cause: super::EpochCause,
        /// How long it stays out.
        remaining: Duration,
    },
    /// The restart guard could not verify the master.
    Unverified {
        /// Why.
        reason: String,
    },
    /// The same server is reachable through two entries of the list.
    Duplicate {
        /// The entry listed first.
        first: usize,
    },
    /// The master's clock runs at a rate that differs by more than the drift factor.
    ClockRate {
        /// Server seconds per local second.
        rate: f64,
        /// The configured drift factor.
        allowed: f64,
    },
    /// The master's clock jumped between two samples.
    ClockStep {
        /// The size of the jump.
        jump: Duration,
    },
    /// Fencing is on but the fence counters are not written with `appendfsync always`: a
    /// crash can lose them and a later holder get a smaller token.
    VolatileFenceCounters,
    /// An even number of masters: one more tolerates no more failures.
    EvenCount {
        /// The number of masters.
        nodes: usize,
    },
    /// This client keeps more locks alive than its masters can renew in time: renewing
    /// them all takes more than half of the renewal interval, or renewals go out late (see
    /// [`RenewalLoad::is_overloaded`](super::RenewalLoad::is_overloaded)). Locks will be
    /// lost (and signalled lost) if it gets worse.
    RenewalOverloaded(super::RenewalLoad),
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unreachable(e) => write!(f, "unreachable ({e}): check the address, the password and the network"),
            Self::Replica => f.write_str("it is a replica: list independent masters only (REPLICAOF NO ONE, and no replication between them)"),
            Self::Evicting { policy } => write!(f, "maxmemory-policy {policy} may evict lock keys: set maxmemory-policy noeviction"),
            Self::LossyPersistence { detail } => write!(f, "{detail} can lose recent lock keys in a crash and the restart guard is off: turn the guard on, or use appendonly yes with appendfsync always"),
            Self::RestartsQuarantine { detail } => write!(f, "it does not persist every write ({detail}): after a restart the restart guard keeps it out of the quorum for the deployment's longest ttl; use appendonly yes with appendfsync always to rejoin at once"),
            Self::Quarantined { cause: super::EpochCause::FirstSeen, remaining } => write!(f, "the restart guard keeps it out for {remaining:.1?} more: it has no epoch marker (new, or its data was deleted); if it is new, commission it (`redquorum guard commission`)"),
            Self::Quarantined { cause, remaining } => write!(f, "the restart guard keeps it out for {remaining:.1?} more (its epoch began: {cause})"),
            Self::Unverified { reason } => write!(f, "the restart guard could not verify it: {reason}"),
            Self::UnguardedRestarts => f.write_str("no persistence and the restart guard is off: a crashed master rejoining at once can grant a lock another client holds; turn the guard on or use appendfsync always"),
            Self::Duplicate { first } => write!(f, "the same server as node {first} (same run_id): the masters are not independent; list each server once"),
            Self::ClockRate { rate, allowed } => write!(f, "its clock runs at {:+.3}% of ours, beyond the drift factor of {:.3}%: fix its time synchronisation", (rate - 1.0) * 100.0, allowed * 100.0),
            Self::ClockStep { jump } => write!(f, "its clock jumped by {jump:?}: do not step the clock of a Redlock master (slew it)"),
            Self::VolatileFenceCounters => f.write_str("fencing is on but the fence counters are not persisted with appendfsync always: after a crash a later holder may get a smaller token; use appendonly yes with appendfsync always"),
            Self::EvenCount { nodes } => write!(f, "{nodes} masters tolerate no more failures than {}: use an odd number", nodes - 1),
            Self::RenewalOverloaded(load) => write!(f, "renewal is overloaded ({load}): keep fewer locks alive per client (spread them over more clients), lengthen the ttl (each lock is renewed less often), or give the masters more CPU"),
        }
    }
}
