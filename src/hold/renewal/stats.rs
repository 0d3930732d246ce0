//! What the renewal machinery has done.

/// Counters of the renewal machinery, for tests, benchmarks and monitoring.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RenewalStats {
    /// Locks whose renewal is scheduled or in flight.
    pub scheduled: usize,
    /// Whether the renewal task is running (it exits when nothing is scheduled).
    pub task_running: bool,
    /// Batches sent (renewal ticks).
    pub ticks: u64,
    /// Round trips sent to each master (one per tick, whatever the batch size).
    pub round_trips: Vec<u64>,
    /// Extensions that reached a quorum.
    pub renewed: u64,
    /// Renewals that failed (and were retried while the lock was valid).
    pub failed: u64,
    /// Locks found lost by the renewal task.
    pub lost: u64,
}
