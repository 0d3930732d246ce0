//! How many renewals go in one batch: as many as a quorum of masters answers within a fifth
//! of the node timeout, by the time the last batches took.
//!
//! Why measure rather than fix a count: what one extension costs a master varies threefold
//! with the restart guard (its ttl record), more with multi-key locks and lock kinds, and
//! more again when the masters share their CPUs; a fixed count safe for the worst case is
//! wasteful for the rest. A batch's answer time over its size (the round trip included,
//! so small batches overstate the cost, which errs on the safe side) gives the cost per
//! renewal on each master; a batch of `budget / cost` then takes about the budget.
//!
//! The cost rises at once with a slower answer and falls a tenth of the way toward a faster
//! one, and a batch may at most double past the largest one measured: a master that slows
//! down shrinks the next batches straight away, one that speeds up grows them step by step.
//! Late answers (after the node timeout) are measured too, so an overloaded master shrinks
//! the batches instead of timing out on them forever. The size follows the quorum-th
//! cheapest master: a batch is decided once a quorum has answered, and one slow master (a
//! far one, a stopped one) must not shrink the batches of the others to nothing.

use std::time::Duration;

/// The first batch, before anything was measured.
pub(super) const FIRST_BATCH: usize = 64;
/// The smallest batch the measurements can ask for.
pub(super) const MIN_BATCH: usize = 16;
/// The largest batch, however cheap renewals are: it bounds the memory a batch holds on
/// both sides and the work one master runs for one client without a break.
pub(super) const MAX_BATCH: usize = 8192;
/// The most encoded bytes in one batch (keys, values and framing, estimated): locks with
/// many or long keys fill a batch sooner.
pub(super) const MAX_BATCH_BYTES: usize = 1 << 20;
/// A batch is sized to take this fraction of the node timeout.
const BUDGET_PARTS: u32 = 5;

/// Batch sizing from measured answer times.
#[derive(Debug)]
pub(super) struct Sizer {
    /// The time a batch should take.
    budget: Duration,
    /// Answers needed for a batch to be decided (a majority of the masters).
    quorum: usize,
    /// Per master: the time one renewal takes there, as measured (none yet: `None`).
    cost: Vec<Option<Duration>>,
    size: usize,
}

impl Sizer {
    pub(super) fn new(masters: usize, node_timeout: Duration) -> Self {
        Self {
            budget: node_timeout / BUDGET_PARTS,
            quorum: masters / 2 + 1,
            cost: vec![None; masters],
            size: FIRST_BATCH,
        }
    }

    /// The number of renewals to put in the next batch.
    pub(super) fn size(&self) -> usize {
        self.size
    }

    /// The per-renewal cost measured on each master so far.
    #[cfg(test)]
    pub(super) fn cost(&self, master: usize) -> Option<Duration> {
        self.cost.get(master).copied().flatten()
    }

    /// `master` answered a batch of `len` renewals `elapsed` after it was sent (in time or
    /// late).
    pub(super) fn observe(&mut self, master: usize, len: usize, elapsed: Duration) {
        let Some(slot) = self.cost.get_mut(master) else {
            return;
        };
        let Some(sample) = u32::try_from(len)
            .ok()
            .filter(|&n| n > 0)
            .map(|n| elapsed / n)
        else {
            return;
        };
        *slot = Some(match *slot {
            Some(cost) if sample < cost => cost - (cost - sample) / 10,
            _ => sample,
        });
        self.resize(len);
    }

    fn resize(&mut self, measured: usize) {
        let mut known: Vec<Duration> = self.cost.iter().flatten().copied().collect();
        if known.is_empty() {
            return;
        }
        known.sort_unstable();
        let cost = known[self.quorum.min(known.len()) - 1];
        let fits = self.budget.as_nanos() / cost.as_nanos().max(1);
        let fits = usize::try_from(fits).unwrap_or(usize::MAX);
        // Grow only from a batch at least half the current size (a batch of a few locks due
        // on their own says little about a big one), and at most to twice it.
        let ceiling = self.size.max(measured.saturating_mul(2));
        self.size = fits.min(ceiling).clamp(MIN_BATCH, MAX_BATCH);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NT: Duration = Duration::from_millis(50);

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn batches_grow_step_by_step_to_what_fits_a_fifth_of_the_node_timeout() {
        let mut sizer = Sizer::new(5, NT);
        assert_eq!(sizer.size(), FIRST_BATCH);
        // 5 µs per renewal everywhere: 10 ms / 5 µs = 2000 fit.
        let mut sizes = Vec::new();
        for _ in 0..8 {
            let len = sizer.size();
            for m in 0..5 {
                sizer.observe(m, len, us(5) * len as u32);
            }
            sizes.push(sizer.size());
        }
        assert_eq!(sizes, [128, 256, 512, 1024, 2000, 2000, 2000, 2000]);
    }

    #[test]
    fn a_slower_answer_shrinks_the_next_batch_at_once_and_it_recovers_slowly() {
        let mut sizer = Sizer::new(3, NT);
        for m in 0..3 {
            sizer.observe(m, 1000, us(5_000)); // 5 µs each
        }
        // Grown from 64 to at most twice the batch measured.
        assert_eq!(sizer.size(), 2000);
        // Two masters (a quorum) now need 20 µs per renewal.
        sizer.observe(0, 2000, us(40_000));
        assert_eq!(sizer.size(), 2000, "one slow master alone changes nothing");
        sizer.observe(1, 2000, us(40_000));
        assert_eq!(sizer.size(), 500);
        // Back to 5 µs: the cost falls a tenth of the way each time.
        sizer.observe(0, 500, us(2_500));
        sizer.observe(1, 500, us(2_500));
        assert_eq!(sizer.cost(1), Some(Duration::from_nanos(18_500)));
        assert_eq!(sizer.size(), 540);
    }

    #[test]
    fn a_slow_or_silent_minority_does_not_shrink_the_batches() {
        let mut sizer = Sizer::new(5, NT);
        for _ in 0..10 {
            let len = sizer.size();
            for m in 0..3 {
                sizer.observe(m, len, us(4) * len as u32);
            }
            // A far master: 30 ms more per batch. Another never answers.
            sizer.observe(3, len, us(30_000) + us(4) * len as u32);
        }
        assert_eq!(sizer.size(), 2500);
    }

    #[test]
    fn sizes_stay_within_their_bounds() {
        let mut sizer = Sizer::new(1, NT);
        sizer.observe(0, 64, Duration::from_secs(1));
        assert_eq!(sizer.size(), MIN_BATCH);
        let mut sizer = Sizer::new(1, NT);
        for _ in 0..20 {
            let len = sizer.size();
            sizer.observe(0, len, Duration::from_nanos(len as u64));
        }
        assert_eq!(sizer.size(), MAX_BATCH);
        sizer.observe(0, 0, Duration::ZERO);
        sizer.observe(7, 10, Duration::ZERO);
        assert_eq!(sizer.size(), MAX_BATCH, "nonsense is ignored");
    }
}
