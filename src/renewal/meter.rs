//! Back-pressure: whether the renewals keep up with the locks kept alive, measured as they go.
//!
//! The renewal task is *busy* while a batch is out and a quorum of masters has not answered
//! it yet (in time or late: a master that falls behind makes the task busy longer, even
//! though the batch was decided at the node timeout). Over a window of about a second,
//! the busy time divided by the renewals sent is what one renewal costs when the task works
//! flat out — the masters' time, the round trips and the client's own work together — so
//! renewing every held lock once takes `held ×` that. Its ratio to the renewal interval is
//! the headroom. A window that was mostly idle and sent few renewals (small batches of
//! locks due on their own, dominated by the round trip) is not taken as a measurement.
//!
//! Lateness is the direct sign: how long after its due time each renewal went out, and
//! how much validity its lock had left then. Only first attempts count (a retry is late
//! because a master failed, which is not back-pressure).

use std::time::Duration;

use tokio::time::Instant;

use crate::report::RenewalLoad;

/// The measurement window.
pub(super) const WINDOW: Duration = Duration::from_secs(1);
/// Renewals a mostly idle window needs for its throughput to count.
const MIN_SAMPLE: u64 = 256;
/// How often the overload warning repeats while the overload lasts.
pub(super) const WARN_EVERY: Duration = Duration::from_secs(30);

/// What one window saw of lateness.
#[derive(Debug, Clone, Copy, Default)]
struct Lateness {
    late: Duration,
    least_left: Option<Duration>,
    falling_behind: bool,
}

/// The renewal task's back-pressure meter.
#[derive(Debug)]
pub(super) struct Meter {
    window_start: Instant,
    /// Busy time in the window, up to `busy_since`.
    busy: Duration,
    /// Since when a batch has been in flight, if one is.
    busy_since: Option<Instant>,
    batches: usize,
    /// Renewals in the batches done in this window.
    renewals: u64,
    lateness: Lateness,
    /// The last window's.
    last: Lateness,
    /// Busy time per renewal, from the last windows that measured it.
    per_renewal: Option<Duration>,
    /// When the overload warning was last logged, while overloaded.
    warned: Option<Instant>,
}

impl Meter {
    pub(super) fn new(now: Instant) -> Self {
        Self {
            window_start: now,
            busy: Duration::ZERO,
            busy_since: None,
            batches: 0,
            renewals: 0,
            lateness: Lateness::default(),
            last: Lateness::default(),
            per_renewal: None,
            warned: None,
        }
    }

    pub(super) fn batch_sent(&mut self, now: Instant) {
        if self.batches == 0 {
            self.busy_since = Some(now);
        }
        self.batches += 1;
    }

    pub(super) fn batch_done(&mut self, now: Instant, renewals: usize) {
        self.batches = self.batches.saturating_sub(1);
        self.renewals += renewals as u64;
        if self.batches == 0
            && let Some(since) = self.busy_since.take()
        {
            self.busy += now.saturating_duration_since(since);
        }
    }

    /// A first renewal went out `late` after its due time, with `left` of validity, where
    /// an on-time one has `spare`.
    pub(super) fn renewal_sent(&mut self, late: Duration, left: Duration, spare: Duration) {
        let l = &mut self.lateness;
        l.late = l.late.max(late);
        l.least_left = Some(l.least_left.map_or(left, |least| least.min(left)));
        l.falling_behind |= left < spare / 2;
    }

    /// Closes the window once it is over; true when it did.
    pub(super) fn tick(&mut self, now: Instant) -> bool {
        let span = now.saturating_duration_since(self.window_start);
        if span < WINDOW {
            return false;
        }
        let mut busy = self.busy;
        if let Some(since) = self.busy_since.as_mut() {
            busy += now.saturating_duration_since(*since);
            *since = now;
        }
        let mostly_busy = busy * 2 >= span;
        if self.renewals > 0 && (self.renewals >= MIN_SAMPLE || mostly_busy) {
            let sample = u32::try_from(self.renewals).ok().map(|n| busy / n);
            // Averaged over a few windows (the last weighs half): one window that a busy
            // machine stalled must not by itself report an overload.
            self.per_renewal = match (self.per_renewal, sample) {
                (Some(old), Some(new)) => Some((old + new) / 2),
                (old, new) => new.or(old),
            };
        }
        self.last = std::mem::take(&mut self.lateness);
        self.busy = Duration::ZERO;
        self.renewals = 0;
        self.window_start = now;
        true
    }

    /// The figures, for `held` locks renewed every `interval`.
    pub(super) fn load(&self, held: usize, interval: Duration) -> RenewalLoad {
        let renewal_time = self.per_renewal.and_then(|p| {
            u32::try_from(held)
                .ok()
                .and_then(|h| p.checked_mul(h))
                .or_else(|| Duration::try_from_secs_f64(p.as_secs_f64() * held as f64).ok())
        });
        RenewalLoad {
            held,
            interval,
            renewal_time,
            late: self.last.late,
            least_left: self.last.least_left,
            falling_behind: self.last.falling_behind,
        }
    }

    /// Whether to log the overload warning now (at most every [`WARN_EVERY`] while it
    /// lasts), and whether it has just ended: `(warn, recovered)`.
    pub(super) fn should_warn(&mut self, now: Instant, load: &RenewalLoad) -> (bool, bool) {
        if load.is_overloaded() {
            let due = self
                .warned
                .is_none_or(|at| now.saturating_duration_since(at) >= WARN_EVERY);
            if due {
                self.warned = Some(now);
            }
            (due, false)
        } else {
            (false, self.warned.take().is_some())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn busy_time_per_renewal_gives_the_time_to_renew_every_lock() {
        let t0 = Instant::now();
        let mut meter = Meter::new(t0);
        // Two overlapping batches of 1000, busy from 0 to 15 ms; then idle.
        meter.batch_sent(t0);
        meter.batch_sent(t0 + ms(5));
        meter.batch_done(t0 + ms(10), 1000);
        meter.batch_done(t0 + ms(15), 1000);
        assert!(!meter.tick(t0 + ms(500)), "the window is not over");
        assert!(meter.tick(t0 + ms(1000)));
        // 15 ms for 2000 renewals: 100,000 locks take 750 ms.
        let load = meter.load(100_000, ms(3000));
        assert_eq!(load.renewal_time, Some(ms(750)));
        assert_eq!(load.headroom(), Some(4.0));
        assert!(!load.is_overloaded());
        // Three times as many locks: a headroom of 4/3.
        assert!(meter.load(300_000, ms(3000)).is_overloaded());
        // A window three times slower moves the figure halfway.
        meter.batch_sent(t0 + ms(1000));
        meter.batch_done(t0 + ms(1045), 2000);
        assert!(meter.tick(t0 + ms(2000)));
        assert_eq!(meter.load(100_000, ms(3000)).renewal_time, Some(ms(1500)));
    }

    #[test]
    fn an_idle_window_with_few_renewals_measures_nothing() {
        let t0 = Instant::now();
        let mut meter = Meter::new(t0);
        meter.batch_sent(t0);
        meter.batch_done(t0 + ms(1), 10);
        assert!(meter.tick(t0 + ms(1000)));
        assert_eq!(meter.load(10, ms(3000)).renewal_time, None);
        // A batch still in flight at the window's end counts up to it; a window busy most of
        // the time counts however few renewals it saw.
        meter.batch_sent(t0 + ms(1000));
        meter.batch_done(t0 + ms(1700), 10);
        meter.batch_sent(t0 + ms(1700));
        assert!(meter.tick(t0 + ms(2000)));
        assert_eq!(meter.load(10, ms(3000)).renewal_time, Some(ms(1000)));
    }

    #[test]
    fn late_renewals_with_half_their_spare_validity_gone_are_falling_behind() {
        let t0 = Instant::now();
        let mut meter = Meter::new(t0);
        meter.renewal_sent(ms(100), ms(6400), ms(6500));
        meter.tick(t0 + WINDOW);
        let load = meter.load(1, ms(3000));
        assert_eq!((load.late, load.least_left), (ms(100), Some(ms(6400))));
        assert!(!load.is_overloaded());
        meter.renewal_sent(ms(3300), ms(3200), ms(6500));
        meter.renewal_sent(ms(10), ms(6490), ms(6500));
        meter.tick(t0 + WINDOW * 2);
        let load = meter.load(1, ms(3000));
        assert!(load.falling_behind && load.is_overloaded());
        assert_eq!((load.late, load.least_left), (ms(3300), Some(ms(3200))));
        // A window without renewals forgets it.
        meter.tick(t0 + WINDOW * 3);
        assert!(!meter.load(1, ms(3000)).is_overloaded());
    }

    #[test]
    fn the_warning_repeats_while_overloaded_and_says_when_it_ends() {
        let t0 = Instant::now();
        let mut meter = Meter::new(t0);
        let over = RenewalLoad {
            held: 10,
            interval: ms(3000),
            renewal_time: Some(ms(2000)),
            ..RenewalLoad::default()
        };
        let fine = RenewalLoad {
            renewal_time: Some(ms(100)),
            ..over
        };
        assert_eq!(meter.should_warn(t0, &over), (true, false));
        assert_eq!(meter.should_warn(t0 + ms(1000), &over), (false, false));
        assert_eq!(meter.should_warn(t0 + WARN_EVERY, &over), (true, false));
        assert_eq!(meter.should_warn(t0 + WARN_EVERY, &fine), (false, true));
        assert_eq!(meter.should_warn(t0 + WARN_EVERY, &fine), (false, false));
    }
}
