//! The proxy's clock: one thread that holds every queued chunk until its due time and
//! releases it then, within microseconds, in the order the chunks were queued.
//!
//! tokio's timer is a wheel with 1 ms slots: `sleep_until` fires on the first tick at or
//! after the deadline, so a 1 ms delay became 1–2 ms, and a round trip through two delayed
//! hops cost about 2 ms more than the profile said. Here a thread sleeps on a condvar
//! until a short *spin window* before the earliest due time (its timer slack set to 1 µs,
//! so the kernel does not batch its wake-up with others), then polls the monotonic clock
//! for the rest, and runs the job on the spot: the job writes the chunk to its socket from
//! this thread, so the bytes leave at the due time without waiting for a tokio worker to
//! wake up. The spin window adapts to how late the sleeps have been waking up, between
//! [`MIN_SPIN`] and [`MAX_SPIN`]: on a quiet machine the thread spins a few tens of
//! microseconds per deadline, and it never spins while nothing is queued.
//!
//! Jobs due at the same instant run in the order they were scheduled (each gets a sequence
//! number), and a job never runs before its due time.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The shortest spin window.
pub(crate) const MIN_SPIN: Duration = Duration::from_micros(20);
/// The longest spin window: a wake-up later than this makes a release late rather than
/// the thread spin longer (spinning holds a core; the machine may have only two).
pub(crate) const MAX_SPIN: Duration = Duration::from_micros(200);
/// The window the thread starts with, before it has seen how late its sleeps wake up.
const INITIAL_SPIN: Duration = Duration::from_micros(100);
/// Spin this much longer than the latest late wake-up asked for.
const SPIN_MARGIN: Duration = Duration::from_micros(10);
/// Timer slack of the timer thread, in nanoseconds (Linux defaults to 50 µs).
const TIMER_SLACK_NS: std::ffi::c_ulong = 1_000;

/// What the timer runs at a due time. Jobs run on the timer thread, one at a time, so they
/// must be short and must not block: the proxy's job is one non-blocking write.
pub(crate) trait Job: Send + 'static {
    fn run(self);
}

/// A handle to a timer thread; the thread stops (dropping the jobs still queued, unrun)
/// when the handle is dropped.
pub(crate) struct Timer<J> {
    inner: Arc<Inner<J>>,
}

impl<J> fmt::Debug for Timer<J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Timer")
            .field("queued", &self.inner.lock().heap.len())
            .finish_non_exhaustive()
    }
}

struct Inner<J> {
    queue: Mutex<Queue<J>>,
    wake: Condvar,
    /// Bumped whenever a job becomes the earliest: the thread's sleep or spin is then for
    /// the wrong deadline and must start over.
    earliest: AtomicU64,
}

impl<J> Inner<J> {
    fn lock(&self) -> MutexGuard<'_, Queue<J>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

struct Queue<J> {
    heap: BinaryHeap<Entry<J>>,
    next_seq: u64,
    stopped: bool,
}

struct Entry<J> {
    due: Instant,
    seq: u64,
    job: J,
}

// Ordered by (due, seq), reversed: `BinaryHeap` is a max-heap and the earliest must be on top.
impl<J> Ord for Entry<J> {
    fn cmp(&self, other: &Self) -> Ordering {
        (other.due, other.seq).cmp(&(self.due, self.seq))
    }
}

impl<J> PartialOrd for Entry<J> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<J> PartialEq for Entry<J> {
    fn eq(&self, other: &Self) -> bool {
        self.seq == other.seq
    }
}

impl<J> Eq for Entry<J> {}

impl<J: Job> Timer<J> {
    /// Starts a timer thread called `name`.
    pub(crate) fn start(name: &str) -> io::Result<Self> {
        let inner = Arc::new(Inner {
            queue: Mutex::new(Queue {
                heap: BinaryHeap::new(),
                next_seq: 0,
                stopped: false,
            }),
            wake: Condvar::new(),
            earliest: AtomicU64::new(0),
        });
        let thread = Arc::clone(&inner);
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || run(&thread))?;
        Ok(Self { inner })
    }

    /// Runs `job` on the timer thread at `due` (at once if `due` has passed), after every
    /// job scheduled earlier for the same or an earlier instant.
    pub(crate) fn schedule(&self, due: Instant, job: J) {
        let mut queue = self.inner.lock();
        let seq = queue.next_seq;
        queue.next_seq += 1;
        let earliest = queue.heap.peek().is_none_or(|top| due < top.due);
        queue.heap.push(Entry { due, seq, job });
        drop(queue);
        if earliest {
            self.inner.earliest.fetch_add(1, AtomicOrdering::Release);
            self.inner.wake.notify_one();
        }
    }
}

impl<J> Drop for Timer<J> {
    fn drop(&mut self) {
        self.inner.lock().stopped = true;
        self.inner.earliest.fetch_add(1, AtomicOrdering::Release);
        self.inner.wake.notify_one();
    }
}

/// The timer thread.
fn run<J: Job>(inner: &Inner<J>) {
    // Best effort: with the default 50 µs slack the spin window would have to cover it.
    let _ = nix::sys::prctl::set_timerslack(TIMER_SLACK_NS);
    let mut spin = SpinWindow::default();
    let mut due_now = Vec::new();
    let mut queue = inner.lock();
    loop {
        if queue.stopped {
            return;
        }
        let Some(due) = queue.heap.peek().map(|top| top.due) else {
            queue = inner
                .wake
                .wait(queue)
                .unwrap_or_else(PoisonError::into_inner);
            continue;
        };
        let now = Instant::now();
        if due <= now {
            // Everything due by now, earliest first; run without the lock so that readers
            // can queue chunks meanwhile.
            while let Some(top) = queue.heap.peek()
                && top.due <= now
            {
                due_now.extend(queue.heap.pop());
            }
            drop(queue);
            for entry in due_now.drain(..) {
                entry.job.run();
            }
            queue = inner.lock();
            continue;
        }
        let left = due - now;
        let window = spin.window();
        if left > window {
            let wake_at = due - window;
            let (q, waited) = inner
                .wake
                .wait_timeout(queue, left - window)
                .unwrap_or_else(PoisonError::into_inner);
            queue = q;
            if waited.timed_out() {
                spin.woke(Instant::now().saturating_duration_since(wake_at));
            }
            continue;
        }
        // The last stretch: poll the clock, without the lock, until the deadline or until an
        // earlier job arrives.
        let seen = inner.earliest.load(AtomicOrdering::Acquire);
        drop(queue);
        while Instant::now() < due && inner.earliest.load(AtomicOrdering::Acquire) == seen {
            std::hint::spin_loop();
        }
        queue = inner.lock();
    }
}

/// How long before a deadline the timer thread stops sleeping and starts polling the clock.
///
/// It grows at once to cover a late wake-up (plus a margin), and shrinks slowly back
/// towards what wake-ups need lately: one late release costs more than a few microseconds
/// of spinning, but a machine that was busy a second ago need not keep a core spinning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SpinWindow {
    window: Duration,
}

impl Default for SpinWindow {
    fn default() -> Self {
        Self {
            window: INITIAL_SPIN,
        }
    }
}

impl SpinWindow {
    pub(crate) fn window(self) -> Duration {
        self.window
    }

    /// Takes note that a sleep woke up `late` after the time it asked for.
    pub(crate) fn woke(&mut self, late: Duration) {
        let want = (late + SPIN_MARGIN).clamp(MIN_SPIN, MAX_SPIN);
        if want >= self.window {
            self.window = want;
        } else {
            self.window -= (self.window - want) / 32;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    struct Record {
        id: usize,
        due: Instant,
        out: mpsc::Sender<(usize, Instant, Instant)>,
    }

    impl Job for Record {
        fn run(self) {
            let _ = self.out.send((self.id, self.due, Instant::now()));
        }
    }

    #[test]
    fn jobs_run_in_due_order_never_early_and_ties_in_schedule_order() {
        let timer = Timer::start("timer-test").expect("thread");
        let (tx, rx) = mpsc::channel();
        let base = Instant::now() + Duration::from_millis(5);
        // Scheduled out of due order; 2 and 3 share a due time and must keep their order.
        let dues = [4_000, 1_000, 2_500, 2_500, 0, 300];
        for (id, us) in dues.iter().enumerate() {
            let due = base + Duration::from_micros(*us);
            timer.schedule(
                due,
                Record {
                    id,
                    due,
                    out: tx.clone(),
                },
            );
        }
        let ran: Vec<_> = (0..dues.len())
            .map(|_| rx.recv_timeout(Duration::from_secs(5)).expect("job ran"))
            .collect();
        let order: Vec<usize> = ran.iter().map(|r| r.0).collect();
        assert_eq!(order, [4, 5, 1, 2, 3, 0]);
        for (id, due, at) in ran {
            assert!(at >= due, "job {id} ran {:?} early", due - at);
        }
    }

    #[test]
    fn a_past_due_job_runs_at_once_and_dropping_the_timer_drops_the_rest() {
        let timer = Timer::start("timer-test").expect("thread");
        let (tx, rx) = mpsc::channel();
        let now = Instant::now();
        timer.schedule(
            now,
            Record {
                id: 0,
                due: now,
                out: tx.clone(),
            },
        );
        let later = now + Duration::from_secs(3600);
        timer.schedule(
            later,
            Record {
                id: 1,
                due: later,
                out: tx,
            },
        );
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)).expect("ran").0, 0);
        drop(timer);
        // The thread drops the queued job (and its sender) without running it.
        assert!(rx.recv_timeout(Duration::from_secs(5)).is_err());
    }

    #[test]
    fn the_spin_window_grows_at_once_and_shrinks_slowly_within_bounds() {
        let mut spin = SpinWindow::default();
        spin.woke(Duration::from_micros(150));
        assert_eq!(spin.window(), Duration::from_micros(160));
        spin.woke(Duration::from_secs(1));
        assert_eq!(spin.window(), MAX_SPIN);
        spin.woke(Duration::ZERO);
        assert!(spin.window() < MAX_SPIN && spin.window() > MAX_SPIN / 2);
        for _ in 0..10_000 {
            spin.woke(Duration::ZERO);
        }
        assert!(spin.window() >= MIN_SPIN && spin.window() < MIN_SPIN * 2);
    }
}
