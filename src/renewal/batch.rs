//! One batch of renewals: one pipelined round trip to each master, its votes counted per
//! lock, in two phases.
//!
//! **Decided** as soon as every lock's outcome is known (a quorum extended it, a quorum
//! said the keys are not ours, or neither can happen any more) or the node timeout has
//! passed: the renewal task then reschedules the locks and may send the next batch. A dead
//! or slow master therefore does not hold the renewal of the others back.
//!
//! **Settled** once every master has answered or the node timeout has passed: only then
//! are the locks' renewal gates let go, so a release (which waits for the gate) still waits
//! for every extension of its lock that could be in flight, as before batches were split.
//! Calls still unanswered then are handed back as *late*: their votes no longer count, but
//! the time their answer takes still tells the batch sizing how slow that master is.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::sync::OwnedMutexGuard;
use tokio::time::Instant;

use super::Entry;
use crate::failure::NodeFailure;

/// One master's answer to a batch: a vote per lock, or the failure of the round trip.
pub(super) type Votes = Result<Vec<Result<bool, NodeFailure>>, NodeFailure>;

/// One master's round trip, and how long it took from its first poll.
pub(super) type Call = Pin<Box<dyn Future<Output = (Votes, Duration)> + Send>>;

/// A call and the master it goes to.
pub(super) struct Tagged {
    pub(super) master: usize,
    pub(super) call: Call,
}

impl Future for Tagged {
    type Output = (usize, Votes, Duration);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let master = self.master;
        self.call
            .as_mut()
            .poll(cx)
            .map(|(votes, took)| (master, votes, took))
    }
}

/// Per-lock vote counts within one batch.
#[derive(Default, Clone, Copy, Debug)]
pub(super) struct Tally {
    pub(super) granted: usize,
    pub(super) taken: usize,
    pub(super) failed: usize,
    /// The deadline was pushed back (a quorum extended it).
    pub(super) extended: bool,
}

/// A batch in flight.
pub(super) struct Batch {
    pub(super) start: Instant,
    /// Masters in the quorum count (those skipped included).
    masters: usize,
    pub(super) entries: Vec<Arc<Entry>>,
    /// The locks' renewal gates, held until the batch settles.
    guards: Vec<OwnedMutexGuard<()>>,
    pub(super) tallies: Vec<Tally>,
    calls: FuturesUnordered<Tagged>,
    /// Masters that answered the whole batch, and how long each took (not yet measured).
    pub(super) answered: Vec<(usize, Duration)>,
    deadline: Instant,
}

/// What a batch left once settled: the calls still unanswered.
pub(super) struct Settled {
    pub(super) locks: usize,
    pub(super) answered: Vec<(usize, Duration)>,
    pub(super) late: Vec<Tagged>,
}

impl Batch {
    /// A batch of `entries` (gates held) sent as `calls`; `skipped` masters were not asked
    /// (too many calls outstanding there) and count as failed votes.
    pub(super) fn new(
        entries: Vec<(Arc<Entry>, OwnedMutexGuard<()>)>,
        calls: FuturesUnordered<Tagged>,
        skipped: usize,
        node_timeout: Duration,
    ) -> Self {
        let start = Instant::now();
        let (entries, guards): (Vec<_>, Vec<_>) = entries.into_iter().unzip();
        let tallies = vec![
            Tally {
                failed: skipped,
                ..Tally::default()
            };
            entries.len()
        ];
        Self {
            start,
            masters: calls.len() + skipped,
            entries,
            guards,
            tallies,
            calls,
            answered: Vec::new(),
            deadline: start + node_timeout,
        }
    }

    /// Runs until every lock's outcome is known or the node timeout has passed.
    pub(super) async fn decide(mut self) -> Self {
        let timeout = tokio::time::sleep_until(self.deadline);
        tokio::pin!(timeout);
        while !self.decided() {
            tokio::select! {
                biased;
                next = self.calls.next() => match next {
                    Some(answer) => self.count(answer),
                    None => break,
                },
                () = &mut timeout => break,
            }
        }
        self
    }

    /// Runs until every master has answered or the node timeout has passed, then lets go of
    /// the gates.
    pub(super) async fn settle(mut self) -> Settled {
        let timeout = tokio::time::sleep_until(self.deadline);
        tokio::pin!(timeout);
        loop {
            tokio::select! {
                biased;
                next = self.calls.next() => match next {
                    Some(answer) => self.count(answer),
                    None => break,
                },
                () = &mut timeout => break,
            }
        }
        drop(std::mem::take(&mut self.guards));
        Settled {
            locks: self.entries.len(),
            answered: self.answered,
            late: self.calls.into_iter().collect(),
        }
    }

    fn count(&mut self, (master, votes, took): (usize, Votes, Duration)) {
        match votes {
            Ok(votes) if votes.len() == self.entries.len() => {
                self.answered.push((master, took));
                for (t, v) in self.tallies.iter_mut().zip(votes) {
                    match v {
                        Ok(true) => t.granted += 1,
                        Ok(false) => t.taken += 1,
                        Err(_) => t.failed += 1,
                    }
                }
            }
            other => {
                match other {
                    Err(failure) => {
                        tracing::debug!(node = master, %failure, "renewal round trip failed");
                    }
                    Ok(votes) => tracing::debug!(
                        node = master,
                        answers = votes.len(),
                        renewals = self.entries.len(),
                        "renewal round trip answered the wrong number of renewals"
                    ),
                }
                self.tallies.iter_mut().for_each(|t| t.failed += 1);
            }
        }
        // A lock's deadline moves as soon as its quorum is in.
        for (t, entry) in self.tallies.iter_mut().zip(&self.entries) {
            if !t.extended && t.granted >= entry.lock.req.quorum(self.masters) {
                t.extended = true;
                let timing = entry.lock.timing;
                entry
                    .lock
                    .push_deadline(self.start + (timing.ttl - timing.drift));
            }
        }
    }

    /// Whether every lock's outcome is known: extended, or a quorum said not ours, or
    /// neither can happen with the answers still out.
    fn decided(&self) -> bool {
        let out = self.calls.len();
        self.tallies.iter().zip(&self.entries).all(|(t, entry)| {
            let q = entry.lock.req.quorum(self.masters);
            t.granted >= q || t.taken >= q || (t.granted + out < q && t.taken + out < q)
        })
    }
}
