//! How many renewals go in one batch: a bound by count and bytes, lowered while the answers
//! come too slowly.
//!
//! The bound ([`MAX_BATCH`] renewals, [`MAX_BATCH_BYTES`]) keeps a batch's work on a master
//! to a few milliseconds: a lock's own extension (`extend.lua`: other kinds, several keys,
//! fenced) costs an idle master 4 µs (11 µs with the restart guard's ttl record), so a full
//! batch of those is 4–12 ms of work, well within the default 50 ms node timeout, and the
//! master still serves its other connections every 16 KiB of it. Plain mutex locks go
//! 256 to one `extend_many.lua` call (see the member's renewal), at about 0.3–0.4 µs each: a
//! full batch of them is well under a millisecond.
//! Locks with many or long keys fill a batch by bytes sooner. Fast answers grow a batch
//! only to [`GROWN_BATCH`]: a batch keeps every master busy at once, and on a machine short
//! of CPU that delays acquisitions for as long, so larger batches go only when the demand
//! needs them (below).
//!
//! A master that is slower than that — loaded, far, or sharing its CPUs — shows in the
//! answer times, and the batch shrinks: when the quorum-th answer of a batch (the one that
//! decides it; a slow or stopped minority must not shrink everyone's batches) comes later
//! than half the node timeout, the next batches are cut in proportion; while answers come
//! within a quarter of it, they grow back by an eighth per batch. Answers that missed the
//! node timeout are still measured when they come.
//!
//! Never, though, below the size that keeps up with the renewals due if every batch took
//! the whole node timeout ([`Sizer::size_for`]): on a machine so busy that its masters answer
//! late whatever the size, smaller batches only fall behind.
//!
//! What was measured against this (`benches/renewal.rs` on a shared, busy 2-vCPU machine):
//! sizing each batch to a fifth of the node timeout from the answer time per renewal (the
//! round trip counted as work) shrank the batches to a few dozen, where every round trip
//! waits some milliseconds for a CPU, and the renewals fell behind; a least-squares split
//! of latency from work needs sizes that vary, and followed a slowdown only slowly; cutting
//! without the floor left 100,000 locks in batches of 64–256 and their renewals 1–3 s late;
//! growing to 1,024 on fast answers kept every master busy longer at once, and the acquire
//! p99 of the same client while 10,000 locks were held was about 10 ms, 4.5–7 ms with
//! batches grown to 256 only.

use std::time::Duration;

/// The first batch, before anything was measured.
pub(super) const FIRST_BATCH: usize = 64;
/// The smallest batch the answer times can ask for.
pub(super) const MIN_BATCH: usize = 16;
/// The largest batch the answer times can grow to: bigger ones go only when the demand
/// needs them. A batch keeps every master busy at once, which on a machine short of CPU
/// delays whatever else it serves (acquisitions) for as long: smaller batches, more of
/// them, spread that work.
pub(super) const GROWN_BATCH: usize = 256;
/// The largest batch.
pub(super) const MAX_BATCH: usize = 1024;
/// The most encoded bytes in one batch (keys, values and framing, estimated).
pub(super) const MAX_BATCH_BYTES: usize = 256 << 10;

/// Batch sizing from measured answer times.
#[derive(Debug)]
pub(super) struct Sizer {
    node_timeout: Duration,
    /// Answers later than this cut the batch size.
    slow: Duration,
    /// Answers within this let it grow.
    fast: Duration,
    size: usize,
}

impl Sizer {
    pub(super) fn new(node_timeout: Duration) -> Self {
        Self {
            node_timeout,
            slow: node_timeout / 2,
            fast: node_timeout / 4,
            size: FIRST_BATCH,
        }
    }

    /// The batch size the answer times allow.
    #[cfg(test)]
    pub(super) fn size(&self) -> usize {
        self.size
    }

    /// The number of renewals to put in the next batch when `demand` renewals a second are
    /// due and at most `in_flight` batches may be undecided at a time: the size the answer
    /// times allow, but never less than keeps up with the demand should every batch take
    /// the whole node timeout (with half as much again to spare). Below that, smaller
    /// batches would not make slow masters answer in time — a master that is slow because
    /// its machine is busy answers a small batch late too — they would only fall behind
    /// until locks are lost; at that size the renewals keep up, their late answers still
    /// count, and the overload shows in [`RenewalLoad`](crate::RenewalLoad).
    pub(super) fn size_for(&self, demand: f64, in_flight: usize) -> usize {
        let needed = demand * self.node_timeout.as_secs_f64() * 1.5 / in_flight.max(1) as f64;
        let needed = if needed >= MAX_BATCH as f64 {
            MAX_BATCH
        } else {
            needed.ceil() as usize
        };
        self.size.max(needed).min(MAX_BATCH)
    }

    /// A batch of `len` renewals had its quorum-th answer `elapsed` after it was sent (in
    /// time or late).
    pub(super) fn observe(&mut self, len: usize, elapsed: Duration) {
        if len == 0 {
            return;
        }
        if elapsed > self.slow {
            // Cut in proportion, from what this batch held: a slow batch of a few locks
            // cuts more than a slow full one.
            let fits = len as f64 * self.slow.as_secs_f64() / elapsed.as_secs_f64();
            self.size = self.size.min(fits as usize).max(MIN_BATCH);
        } else if elapsed <= self.fast && len * 2 >= self.size {
            // Grow only from a batch at least half full (a few locks due on their own say
            // little about a full batch), by an eighth, or doubling while small.
            let grown = if self.size < GROWN_BATCH / 2 {
                self.size * 2
            } else {
                self.size + self.size / 8
            };
            self.size = grown.min(GROWN_BATCH);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NT: Duration = Duration::from_millis(50);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn batches_grow_to_a_bound_while_answers_are_fast() {
        let mut sizer = Sizer::new(NT);
        assert_eq!(sizer.size(), FIRST_BATCH);
        let mut sizes = Vec::new();
        for _ in 0..6 {
            let len = sizer.size();
            sizer.observe(len, ms(5));
            sizes.push(sizer.size());
        }
        assert_eq!(sizes, [128, 144, 162, 182, 204, 229]);
        // Answers between a quarter and half of the node timeout: no change.
        sizer.observe(229, ms(20));
        assert_eq!(sizer.size(), 229);
        for _ in 0..4 {
            sizer.observe(sizer.size(), ms(1));
        }
        assert_eq!(sizer.size(), GROWN_BATCH);
    }

    #[test]
    fn a_slow_answer_cuts_the_batch_in_proportion_at_once() {
        let mut sizer = Sizer::new(NT);
        for _ in 0..12 {
            sizer.observe(sizer.size(), ms(1));
        }
        assert_eq!(sizer.size(), GROWN_BATCH);
        // Answered in 100 ms: 256 × 25 / 100.
        sizer.observe(256, ms(100));
        assert_eq!(sizer.size(), 64);
        // A small batch answered slowly cuts from its own size.
        sizer.observe(80, ms(50));
        assert_eq!(sizer.size(), 40);
        sizer.observe(100, Duration::from_secs(10));
        assert_eq!(sizer.size(), MIN_BATCH);
    }

    #[test]
    fn batches_never_shrink_below_what_keeps_up_with_the_renewals_due() {
        let mut sizer = Sizer::new(NT);
        sizer.observe(64, Duration::from_secs(1));
        assert_eq!(sizer.size(), MIN_BATCH);
        // 3,000 renewals a second (10,000 locks every 3.3 s), two batches at a time that
        // might each take the node timeout: 3,000 × 0.05 × 1.5 / 2 = 112.5.
        assert_eq!(sizer.size_for(3_000.0, 2), 113);
        // 30,000 a second: more than a batch may hold.
        assert_eq!(sizer.size_for(30_000.0, 2), MAX_BATCH);
        // Nothing due: the answer times alone.
        assert_eq!(sizer.size_for(0.0, 2), MIN_BATCH);
    }

    #[test]
    fn small_batches_answered_fast_do_not_grow_a_large_size() {
        let mut sizer = Sizer::new(NT);
        sizer.observe(64, ms(1));
        assert_eq!(sizer.size(), 128);
        sizer.observe(10, ms(1));
        assert_eq!(sizer.size(), 128);
        sizer.observe(0, ms(100));
        assert_eq!(sizer.size(), 128, "nothing measured");
    }
}
