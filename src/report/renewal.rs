//! Whether a client's renewals keep up with the locks it keeps alive.

use std::fmt;
use std::time::Duration;

/// Headroom below which renewal is reported as overloaded: renewing every kept-alive lock
/// once takes more than half of the renewal interval.
pub const MIN_RENEWAL_HEADROOM: f64 = 2.0;

/// How much of its renewal interval a client needs to renew every lock it keeps alive, as
/// measured by its renewal task. In [`RenewalStats`](crate::RenewalStats) and in
/// [`HealthReport::renewal`](crate::HealthReport::renewal); when it
/// [is overloaded](RenewalLoad::is_overloaded), `health()` reports
/// [`Problem::RenewalOverloaded`](crate::Problem::RenewalOverloaded) and the renewal task
/// logs a warning, both with these figures.
///
/// A lock is lost when no renewal reaches a quorum before its deadline; with the default
/// renewal at a third of the ttl, a renewal that goes out up to about two thirds of the ttl
/// late still keeps it. Overload shows here — the time needed per interval grows past half
/// of it, or renewals go out late by half of that spare validity — well before that.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RenewalLoad {
    /// Locks kept alive (queued for renewal or being renewed).
    pub held: usize,
    /// The renewal interval of those locks: a third of the ttl by default; with several
    /// intervals, the one that gives the same number of renewals per second for all of them
    /// (their harmonic mean). Zero when nothing is held.
    pub interval: Duration,
    /// The time the renewal task needs to renew every held lock once, at the throughput it
    /// measured while busy (batches in flight) over the last measurement window. `None`
    /// until measured.
    pub renewal_time: Option<Duration>,
    /// The most a renewal went out after its due time in the last measurement window.
    pub late: Duration,
    /// The least validity a lock had left when its renewal went out, in the last window
    /// (`None`: no renewal went out).
    pub least_left: Option<Duration>,
    /// Whether some renewal in the last window went out with less than half of the spare
    /// validity it should have had (the validity left at its due time), i.e. renewals are
    /// falling behind.
    pub falling_behind: bool,
}

impl RenewalLoad {
    /// How many times over the renewal task could renew every held lock in each interval:
    /// [`interval`](Self::interval) / [`renewal_time`](Self::renewal_time). Below 1 the
    /// renewals cannot keep up and locks will be lost; `None` while nothing is held or
    /// nothing was measured.
    pub fn headroom(&self) -> Option<f64> {
        let time = self.renewal_time?.as_secs_f64();
        if self.held == 0 || time <= 0.0 {
            return None;
        }
        Some(self.interval.as_secs_f64() / time)
    }

    /// Whether renewal is short of headroom: less than [`MIN_RENEWAL_HEADROOM`], or
    /// [falling behind](Self::falling_behind).
    pub fn is_overloaded(&self) -> bool {
        self.falling_behind || self.headroom().is_some_and(|h| h < MIN_RENEWAL_HEADROOM)
    }
}

impl fmt::Display for RenewalLoad {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} kept-alive locks", self.held)?;
        if self.held == 0 {
            return Ok(());
        }
        match (self.renewal_time, self.headroom()) {
            (Some(time), Some(headroom)) => write!(
                f,
                "; renewing them all takes {time:.2?} of each {:.2?} renewal interval (headroom {headroom:.1}x)",
                self.interval
            )?,
            _ => write!(f, "; renewal interval {:.2?}", self.interval)?,
        }
        if let Some(left) = self.least_left {
            write!(
                f,
                "; renewals went out up to {:.2?} late, the closest with {left:.2?} of validity left",
                self.late
            )?;
        }
        Ok(())
    }
}
