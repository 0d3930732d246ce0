//! The coordinator: concurrent fan-out to every master, vote counting with early exit,
//! validity arithmetic, and cleanup that survives cancellation.
//!
//! Everything here is logic over the crate-private [`Voter`] seam, so the unit tests in
//! `quorum/tests.rs` drive it with simulated masters under paused time.

use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::stream::FuturesUnordered;
use futures::{FutureExt, StreamExt};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::error::Error;
use crate::failure::NodeFailure;
use crate::kind::{Holder, Kind};
use crate::rules;
use crate::settings::Timing;
use crate::stats::{AttemptStats, Vote};
use crate::value::LockValue;
use crate::wire::Wire;

/// One master as the coordinator sees it. Implementations do not bound their own calls:
/// the coordinator wraps every call in `node_timeout`.
pub(crate) trait Voter: Send + Sync + 'static {
    /// Runs the acquire script of the request's kind: granted with the largest fence
    /// counter incremented (0 when not fenced), or taken, by whom.
    fn acquire(&self, req: &Request) -> impl Future<Output = Result<Acquired, NodeFailure>> + Send;
    /// Runs the fence write-back script: `Ok(true)` when our keys still hold our value and
    /// every fence counter is now at least `token`.
    fn fence(
        &self,
        req: &Request,
        token: u64,
    ) -> impl Future<Output = Result<bool, NodeFailure>> + Send;
    /// Runs the extend script: `Ok(true)` when extended, `Ok(false)` when not ours.
    fn extend(&self, req: &Request) -> impl Future<Output = Result<bool, NodeFailure>> + Send;
    /// Runs the release script: the number of keys deleted.
    fn release(&self, req: &Request) -> impl Future<Output = Result<u64, NodeFailure>> + Send;
    /// Runs the extend script for every request in **one round trip** (a pipeline): one
    /// result per request, in order, or the failure of the whole round trip.
    fn extend_many(
        &self,
        reqs: &[Arc<Request>],
    ) -> impl Future<Output = Result<Vec<Result<bool, NodeFailure>>, NodeFailure>> + Send;
}

/// A member's answer to an acquisition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Acquired {
    /// Granted; the token is the largest fence counter incremented (0 when not fenced).
    Granted(u64),
    /// Refused: held by someone.
    Taken(Holder),
}

/// What every master is asked about one lock.
#[derive(Debug)]
pub(crate) struct Request {
    /// The keys of the request's kind: the lock keys of a mutex; a read-write lock's
    /// readers, writer and pending-writer keys; a semaphore's holders.
    pub(crate) keys: Arc<[String]>,
    /// The fence counters of the same resources, when the lock is fenced.
    pub(crate) fences: Option<Arc<[String]>>,
    pub(crate) value: LockValue,
    pub(crate) ttl: Duration,
    pub(crate) kind: Kind,
    /// Testing only: a quorum other than the kind's.
    quorum_override: Option<usize>,
    /// The members' encoded commands, built once for all of them; opaque here.
    pub(crate) wire: Wire,
}

impl Request {
    pub(crate) fn new(
        keys: Arc<[String]>,
        fences: Option<Arc<[String]>>,
        value: LockValue,
        ttl: Duration,
    ) -> Self {
        Self {
            keys,
            fences,
            value,
            ttl,
            kind: Kind::Mutex,
            quorum_override: None,
            wire: Wire::default(),
        }
    }

    /// The same request for a lock of `kind`.
    pub(crate) fn of_kind(mut self, kind: Kind) -> Self {
        self.kind = kind;
        self
    }

    /// The same request needing `quorum` votes instead of its kind's (testing only).
    pub(crate) fn with_quorum(mut self, quorum: Option<usize>) -> Self {
        self.quorum_override = quorum;
        self
    }

    /// The same lock with another ttl.
    pub(crate) fn with_ttl(&self, ttl: Duration) -> Self {
        Self::new(
            self.keys.clone(),
            self.fences.clone(),
            self.value.clone(),
            ttl,
        )
        .of_kind(self.kind.clone())
        .with_quorum(self.quorum_override)
    }

    /// Votes needed among `n` members for this request's kind.
    pub(crate) fn quorum(&self, n: usize) -> usize {
        self.quorum_override
            .unwrap_or_else(|| self.kind.public().quorum(n))
    }

    pub(crate) fn ttl_millis(&self) -> u64 {
        u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)
    }
}

/// Votes needed among `n` masters (a majority).
pub(crate) use crate::rules::majority as quorum;

/// A successful acquire round.
#[derive(Debug)]
pub(crate) struct Grant {
    /// `start + ttl - drift`.
    pub(crate) deadline: Instant,
    /// The votes: a snapshot at the decision, then updated as late answers arrive.
    pub(crate) stats: Arc<Mutex<AttemptStats>>,
    /// The task recording late answers, if any were pending at the decision.
    pub(crate) tail: Option<AbortHandle>,
    /// The fencing token, when the lock is fenced.
    pub(crate) token: Option<u64>,
}

/// A decided extension round.
#[derive(Debug)]
pub(crate) struct Extension {
    /// Whether a quorum extended the keys.
    pub(crate) extended: bool,
    /// `start + ttl - drift` of this round; meaningful only when `extended`.
    pub(crate) deadline: Instant,
    /// The votes at the decision.
    pub(crate) stats: AttemptStats,
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Acquire,
    Extend,
    Fence(u64),
}

/// One master's answer: `Some(token)` for yes (the token is 0 except for fenced acquires),
/// `None` for no (with who holds, when the member said), or a failure; and its latency.
struct Answer {
    index: usize,
    result: Result<Option<u64>, NodeFailure>,
    held_by: Option<Holder>,
    latency: Duration,
}

/// One master's answer to `op`, bounded by `timeout`.
async fn ask<V: Voter>(
    nodes: Arc<[V]>,
    index: usize,
    req: Arc<Request>,
    op: Op,
    timeout: Duration,
) -> Answer {
    let sent = Instant::now();
    let node = &nodes[index];
    let call = async {
        match op {
            Op::Acquire => match node.acquire(&req).await? {
                Acquired::Granted(token) => Ok((Some(token), None)),
                Acquired::Taken(by) => Ok((None, Some(by))),
            },
            Op::Extend => Ok((node.extend(&req).await?.then_some(0), None)),
            Op::Fence(token) => Ok((node.fence(&req, token).await?.then_some(token), None)),
        }
    };
    let (result, held_by) = match tokio::time::timeout(timeout, call).await {
        Ok(Ok((yes, by))) => (Ok(yes), by),
        Ok(Err(failure)) => (Err(failure), None),
        Err(_) => (Err(NodeFailure::Timeout(timeout)), None),
    };
    Answer {
        index,
        result,
        held_by,
        latency: sent.elapsed(),
    }
}

/// Records one answer in `stats` and emits its trace event.
fn record(stats: &mut AttemptStats, answer: &Answer, op: Op) {
    let vote = match &answer.result {
        Ok(Some(_)) => Vote::Granted,
        Ok(None) => Vote::Taken,
        Err(failure) => Vote::Failed(failure.clone()),
    };
    tracing::debug!(node = answer.index, ?op, vote = ?vote, latency_us = answer.latency.as_micros() as u64, "vote");
    if let Some(slot) = stats.votes.get_mut(answer.index) {
        slot.vote = vote;
        slot.latency = Some(answer.latency);
        slot.held_by = answer.held_by;
    }
}

/// Asks every master `op` at once; each answer is bounded by `timeout`.
fn fan_out<V: Voter>(
    nodes: &Arc<[V]>,
    req: &Arc<Request>,
    op: Op,
    timeout: Duration,
) -> FuturesUnordered<impl Future<Output = Answer> + Send + 'static + use<V>> {
    (0..nodes.len())
        .map(|i| ask(nodes.clone(), i, req.clone(), op, timeout))
        .collect()
}

/// Records answers until the round is decided: `Q` yes, or more than `N - Q` no or failed
/// (a quorum has become impossible). Returns the largest token among the yes answers.
async fn decide<F: Future<Output = Answer>>(
    inflight: &mut FuturesUnordered<F>,
    stats: &mut AttemptStats,
    op: Op,
) -> u64 {
    let (n, q) = (stats.nodes(), stats.quorum());
    let mut token = 0;
    while let Some(answer) = inflight.next().await {
        record(stats, &answer, op);
        if let Ok(Some(t)) = answer.result {
            token = token.max(t);
        }
        if rules::decision(stats.granted(), stats.taken() + stats.failed(), n, q).is_some() {
            break;
        }
    }
    token
}

/// Requests in flight plus the cleanup owed if the round does not hand a lock to the
/// caller. Dropping it — at a failed decision or because the caller's future was dropped
/// mid-round — first drops the pending requests (so none of them can be re-sent after the
/// release, e.g. on a NOSCRIPT fallback), then spawns the value-checked release to every
/// master. A multiplexed connection delivers commands in order, so each release reaches
/// its master after any acquire we sent it.
struct Round<V: Voter, F> {
    inflight: FuturesUnordered<F>,
    cleanup: Option<(Arc<[V]>, Arc<Request>, Duration)>,
}

impl<V: Voter, F> Drop for Round<V, F> {
    fn drop(&mut self) {
        self.inflight.clear();
        if let Some((nodes, req, timeout)) = self.cleanup.take() {
            spawn_release(nodes, req, timeout);
        }
    }
}

/// One acquire attempt: `SET NX PX` (as a script) on every master at once, decided as soon
/// as `Q` grants are in or a quorum has become impossible.
pub(crate) async fn acquire<V: Voter>(
    nodes: &Arc<[V]>,
    req: &Arc<Request>,
    timing: Timing,
    attempt: u32,
) -> Result<Grant, Error> {
    let n = nodes.len();
    let q = req.quorum(n);
    let start = Instant::now();
    let mut stats = AttemptStats::pending(n, q, attempt);
    let mut round = Round {
        inflight: fan_out(nodes, req, Op::Acquire, timing.node_timeout),
        cleanup: Some((nodes.clone(), req.clone(), timing.node_timeout)),
    };
    let token = decide(&mut round.inflight, &mut stats, Op::Acquire).await;
    stats.elapsed = start.elapsed();
    if stats.granted() < q {
        let attempts = attempt;
        return Err(if stats.failed() > n - q {
            Error::NoQuorum {
                stats: Box::new(stats),
                attempts,
            }
        } else {
            Error::Contended {
                stats: Box::new(stats),
                attempts,
            }
        });
    }
    let token = match req.fences {
        Some(_) => Some(write_back(nodes, req, timing, attempt, token).await?),
        None => None,
    };
    // The keys were set no earlier than `start`, so on a master whose clock runs at most
    // `drift` fast over `ttl` they live at least until `start + ttl - drift`.
    let deadline = start + rules::validity_window(timing.ttl, timing.drift);
    let now = Instant::now();
    let validity = deadline.saturating_duration_since(now);
    if validity <= timing.min_validity {
        return Err(Error::ValidityExhausted {
            elapsed: now - start,
            validity,
            min_validity: timing.min_validity,
            stats: Box::new(stats),
        });
    }
    round.cleanup = None;
    // Answers that have already arrived need no task to collect them.
    while let Some(Some(answer)) = round.inflight.next().now_or_never() {
        record(&mut stats, &answer, Op::Acquire);
    }
    let stats = Arc::new(Mutex::new(stats));
    let inflight = std::mem::take(&mut round.inflight);
    let tail = (!inflight.is_empty()).then(|| {
        let stats = stats.clone();
        let mut inflight = inflight;
        tokio::spawn(async move {
            while let Some(answer) = inflight.next().await {
                let mut stats = stats.lock().unwrap_or_else(PoisonError::into_inner);
                record(&mut stats, &answer, Op::Acquire);
            }
        })
        .abort_handle()
    });
    Ok(Grant {
        deadline,
        stats,
        tail,
        token,
    })
}

/// The second round of a fenced acquisition: raise the fence counters of a quorum to the
/// token `t`, only where our keys still hold our value. A later holder's granting quorum
/// then meets one of these masters after our key left it, and its increment there exceeds
/// `t` (the argument is in the crate docs). On failure the caller's round guard releases
/// every master.
async fn write_back<V: Voter>(
    nodes: &Arc<[V]>,
    req: &Arc<Request>,
    timing: Timing,
    attempt: u32,
    t: u64,
) -> Result<u64, Error> {
    let n = nodes.len();
    let q = req.quorum(n);
    let start = Instant::now();
    let mut stats = AttemptStats::pending(n, q, attempt);
    let mut acks = fan_out(nodes, req, Op::Fence(t), timing.node_timeout);
    decide(&mut acks, &mut stats, Op::Fence(t)).await;
    stats.elapsed = start.elapsed();
    if stats.granted() >= q {
        Ok(t)
    } else {
        Err(Error::NoQuorum {
            stats: Box::new(stats),
            attempts: attempt,
        })
    }
}

/// One extension round: the value-checked `PEXPIRE` on every master at once, decided as
/// soon as the outcome is known. Requests still pending at the decision are dropped; the
/// masters that already received them apply them, which only ever lengthens our own keys.
pub(crate) async fn extend<V: Voter>(
    nodes: &Arc<[V]>,
    req: &Arc<Request>,
    timing: Timing,
) -> Extension {
    let n = nodes.len();
    let q = req.quorum(n);
    let start = Instant::now();
    let mut stats = AttemptStats::pending(n, q, 1);
    let mut inflight = fan_out(nodes, req, Op::Extend, timing.node_timeout);
    decide(&mut inflight, &mut stats, Op::Extend).await;
    stats.elapsed = start.elapsed();
    Extension {
        extended: stats.granted() >= q,
        deadline: start + rules::validity_window(timing.ttl, timing.drift),
        stats,
    }
}

/// One master's answer to the value-checked release, bounded by `timeout`.
async fn release_one<V: Voter>(
    nodes: Arc<[V]>,
    index: usize,
    req: Arc<Request>,
    timeout: Duration,
) -> (usize, Result<u64, NodeFailure>) {
    let result = tokio::time::timeout(timeout, nodes[index].release(&req))
        .await
        .unwrap_or(Err(NodeFailure::Timeout(timeout)));
    tracing::debug!(node = index, ?result, "release");
    (index, result)
}

/// The value-checked release on every master at once, waiting for all of them (each
/// bounded by `timeout`): the cleanup of detached tasks, where nobody waits on the answers.
pub(crate) async fn release_all<V: Voter>(nodes: &Arc<[V]>, req: &Arc<Request>, timeout: Duration) {
    let mut calls: FuturesUnordered<_> = (0..nodes.len())
        .map(|i| release_one(nodes.clone(), i, req.clone(), timeout))
        .collect();
    while calls.next().await.is_some() {}
}

/// The value-checked release on every master at once, returning as soon as a quorum has
/// answered it (deleted, or held nothing): from then on no quorum holds the lock, and a
/// contender need not wait for us. The other requests are already sent; a detached task
/// sees them through (each bounded by `timeout`), and they show as `None` here. Without a
/// quorum of answers, waits for all of them.
pub(crate) async fn release_quorum<V: Voter>(
    nodes: &Arc<[V]>,
    req: &Arc<Request>,
    timeout: Duration,
) -> Vec<Option<Result<u64, NodeFailure>>> {
    let n = nodes.len();
    let q = req.quorum(n);
    let mut inflight: FuturesUnordered<_> = (0..n)
        .map(|i| release_one(nodes.clone(), i, req.clone(), timeout))
        .collect();
    let mut results = vec![None; n];
    let mut answered = 0;
    while answered < q {
        let Some((index, result)) = inflight.next().await else {
            break;
        };
        answered += usize::from(result.is_ok());
        results[index] = Some(result);
    }
    while let Some(Some((index, result))) = inflight.next().now_or_never() {
        results[index] = Some(result);
    }
    if !inflight.is_empty() {
        tokio::spawn(async move { while inflight.next().await.is_some() {} });
    }
    results
}

/// Sends the release to every master from a detached task, so it happens even when the
/// caller goes away. Without a tokio runtime (a lock dropped after shutdown) nothing can be
/// sent; the keys then expire by their ttl.
pub(crate) fn spawn_release<V: Voter>(nodes: Arc<[V]>, req: Arc<Request>, timeout: Duration) {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            handle.spawn(async move {
                release_all(&nodes, &req, timeout).await;
            });
        }
        Err(_) => tracing::warn!(
            value = %req.value,
            "no tokio runtime to send the release from; the keys will expire by their ttl"
        ),
    }
}

#[cfg(test)]
mod tests;
