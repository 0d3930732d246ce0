//! One batch of renewals: one pipelined round trip to each master, its votes counted per
//! lock, in three phases.
//!
//! **Decided** as soon as every lock's outcome is known (a quorum extended it, a quorum
//! said the keys are not ours, or neither can happen any more) or the node timeout has
//! passed: the renewal task then reschedules the locks and may send the next batch. A dead
//! or slow master therefore does not hold the renewal of the others back.
//!
//! **Settled** once every master has answered or the node timeout has passed: only then
//! are the locks' renewal gates let go, so a release (which waits for the gate) still waits
//! for every extension of its lock that could be in flight, as before batches were split.
//!
//! **Lingering** after that, while calls are still unanswered (until the retries they could
//! save are due, and a few dozen node timeouts at least): their answers are still counted. An extension's new deadline runs from the
//! batch's start, whenever its answer arrives, so a quorum completed by late answers is as
//! good as one in time: such a lock is *rescued* (the renewal task cancels its retry) —
//! which a machine short of CPU, where a master now and then answers past the node timeout,
//! needs in order not to retry, and fail, ever more. The late answers also tell the batch
//! sizing how slow that master has become.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
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
    /// Masters that answered the whole batch, and how long each took.
    pub(super) answered: Vec<(usize, Duration)>,
    /// Per lock, the key of its retry while its renewal failed but late answers may still
    /// complete its quorum.
    pub(super) retries: Vec<Option<(Instant, u64)>>,
    /// The node timeout: the end of the decision and of the settling.
    deadline: Instant,
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
        let retries = vec![None; entries.len()];
        Self {
            start,
            masters: calls.len() + skipped,
            entries,
            guards,
            tallies,
            calls,
            answered: Vec::new(),
            retries,
            deadline: start + node_timeout,
        }
    }

    /// Masters still to answer.
    pub(super) fn outstanding(&self) -> usize {
        self.calls.len()
    }

    /// Runs until every lock's outcome is known or the node timeout has passed.
    pub(super) async fn decide(&mut self) {
        let timeout = tokio::time::sleep_until(self.deadline);
        tokio::pin!(timeout);
        while !self.decided() {
            tokio::select! {
                biased;
                next = self.calls.next() => match next {
                    Some(answer) => {
                        self.count(answer);
                    }
                    None => break,
                },
                () = &mut timeout => {
                    // Counted before the decision: no rescue to do.
                    let _ = self.grace().await;
                    break;
                }
            }
        }
    }

    /// Runs until every master has answered or the node timeout has passed, then lets go of
    /// the gates. Returns the locks whose quorum answers completed meanwhile (extended,
    /// after the decision).
    pub(super) async fn settle(&mut self) -> Vec<usize> {
        let timeout = tokio::time::sleep_until(self.deadline);
        tokio::pin!(timeout);
        let mut completed = Vec::new();
        loop {
            tokio::select! {
                biased;
                next = self.calls.next() => match next {
                    Some(answer) => completed.extend(self.count(answer)),
                    None => break,
                },
                () = &mut timeout => {
                    completed.extend(self.grace().await);
                    break;
                }
            }
        }
        drop(std::mem::take(&mut self.guards));
        completed
    }

    /// The answers still out, as they arrive until `until`: each time, the locks whose
    /// quorum they complete (not extended yet: the caller rescues them).
    pub(super) async fn linger(&mut self, until: Instant) -> Option<Vec<usize>> {
        if self.calls.is_empty() {
            return None;
        }
        let answer = tokio::time::timeout_at(until, self.calls.next())
            .await
            .ok()
            .flatten()?;
        Some(self.count(answer))
    }

    /// Lets go of the calls still unanswered (they count as outstanding until then).
    pub(super) fn give_up(&mut self) {
        self.calls.clear();
    }

    /// A timer that fires when the client itself was held up (a loaded machine that did
    /// not run it for a while) may fire before the answers that arrived meanwhile have been
    /// read: let the connections' tasks run once, and count what is ready.
    async fn grace(&mut self) -> Vec<usize> {
        tokio::task::yield_now().await;
        let mut completed = Vec::new();
        while let Some(Some(answer)) = self.calls.next().now_or_never() {
            completed.extend(self.count(answer));
        }
        completed
    }

    /// Counts one master's answer; returns the locks whose quorum it completes. While the
    /// gates are held (decision, settling), their deadlines move at once; after that, the
    /// caller moves them ([`extend_late`](Self::extend_late)).
    fn count(&mut self, (master, votes, took): (usize, Votes, Duration)) -> Vec<usize> {
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
        let gated = !self.guards.is_empty();
        let mut completed = Vec::new();
        for (i, (t, entry)) in self.tallies.iter_mut().zip(&self.entries).enumerate() {
            if t.extended || t.granted < entry.lock.req.quorum(self.masters) {
                continue;
            }
            t.extended = true;
            if gated {
                entry.lock.push_deadline(self.start + entry.window());
            }
            completed.push(i);
        }
        completed
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

    /// Whether lock `i` can still reach its quorum with the answers still out.
    pub(super) fn may_still_extend(&self, i: usize) -> bool {
        let q = self.entries[i].lock.req.quorum(self.masters);
        self.tallies[i].granted + self.calls.len() >= q
    }

    /// Pushes the deadline of lock `i`, extended by late answers after the gates were let
    /// go, if it is still renewed by this keep-alive: with its gate held, so that a stop (a
    /// release) either came before (and nothing moves) or waits for this.
    pub(super) fn extend_late(&self, i: usize) -> bool {
        let entry = &self.entries[i];
        let Ok(_gate) = entry.lock.control.gate.clone().try_lock_owned() else {
            return false;
        };
        if !entry.current() {
            return false;
        }
        entry.lock.push_deadline(self.start + entry.window());
        true
    }
}
