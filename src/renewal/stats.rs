//! What the renewal machinery has done.

use crate::report::RenewalLoad;

/// Counters of the renewal machinery, for tests, benchmarks and monitoring.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RenewalStats {
    /// Locks whose renewal is scheduled or in flight.
    pub scheduled: usize,
    /// Whether the renewal task is running (it exits when nothing is scheduled).
    pub task_running: bool,
    /// Batches sent. Each is one pipelined round trip to every master (but a master
    /// skipped for having too many calls outstanding); a batch holds at most
    /// [`batch_size`](Self::batch_size) renewals, so keeping `n` locks alive takes about
    /// `n / batch_size` batches per renewal interval, fewer when locks due close together
    /// share one.
    pub ticks: u64,
    /// Of those, batches of retries (renewals that failed, sent again on their own).
    pub retried: u64,
    /// Round trips sent to each master (one per batch, unless skipped).
    pub round_trips: Vec<u64>,
    /// Extensions that reached a quorum.
    pub renewed: u64,
    /// Renewals that failed — no quorum by the node timeout, nor from late answers before
    /// the retry was due — and were sent again (retried while the lock was valid).
    pub failed: u64,
    /// Renewals that had no quorum by the node timeout, but whose late answers completed it
    /// before the retry was due (the extension's deadline runs from its start, so a late
    /// quorum is as good): not retried.
    pub rescued: u64,
    /// Locks found lost by the renewal task.
    pub lost: u64,
    /// Locks whose extension is in flight: sent, and not yet answered by every master nor
    /// timed out. Releasing one of them waits for it.
    pub extending: usize,
    /// The current batch size: as many renewals as a quorum of masters answered within a
    /// fifth of the node timeout, by the latest batches' answer times.
    pub batch_size: usize,
    /// Whether the renewals keep up with the locks kept alive.
    pub load: RenewalLoad,
}
