//! The coordinator: concurrent fan-out to every master, vote counting with early exit,
//! validity arithmetic, and cleanup that survives cancellation.
//!
//! Everything here is logic over the crate-private [`Voter`] seam, so the unit tests in
//! `quorum/tests.rs` drive it with simulated masters under paused time.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::task::AbortHandle;
use tokio::time::{Instant, Sleep};

use crate::config::validated::Timing;
use crate::error::Error;
use crate::error::node_failure::NodeFailure;
use crate::kind::{Holder, KindRequest};
use crate::metrics;
use crate::protocol::wire::Wire;
use crate::rules;
use crate::stats::{AttemptStats, Vote};
use crate::value::LockValue;

pub(crate) use self::collector::Collector;

mod collector;

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
    /// Where the coordinator leaves what a round leaves behind (late answers, the rest of a
    /// release), shared by all the masters of a client; `None`: a task of its own each time.
    fn collector(&self) -> Option<&Collector> {
        None
    }
}

/// A member's answer to an acquisition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Acquired {
    /// Granted; the token is the largest fence counter incremented (0 when not fenced).
    Granted(u64),
    /// Refused: held by someone; with how long its keys have left on this master, when the
    /// request asked ([`Request::waiting`]) and the master said.
    Taken(Holder, Option<Duration>),
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
    pub(crate) kind: KindRequest,
    /// Testing only: a quorum other than the kind's.
    quorum_override: Option<usize>,
    /// Whether a caller waits on this attempt's refusal: then the members say how long the
    /// holder's keys have left ([`Acquired::Taken`]), in the same round trip (a `PTTL`
    /// pipelined behind `SET NX`; the scripts always say). Off for `try_lock` and for a
    /// waiting call's first attempt, so the uncontended path sends nothing more.
    pub(crate) waiting: bool,
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
            kind: KindRequest::Mutex,
            quorum_override: None,
            waiting: false,
            wire: Wire::default(),
        }
    }

    /// The same request for a lock of `kind`.
    pub(crate) fn of_kind(mut self, kind: KindRequest) -> Self {
        self.kind = kind;
        self
    }

    /// The same request, asking the members how long the holder has left on a refusal.
    pub(crate) fn waiting(mut self, waiting: bool) -> Self {
        self.waiting = waiting;
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

/// A successful acquire round.
#[derive(Debug)]
pub(crate) struct Grant {
    /// `start + ttl - drift`.
    pub(crate) deadline: Instant,
    /// The votes: a snapshot at the decision, then updated as late answers arrive.
    pub(crate) stats: Arc<Mutex<AttemptStats>>,
    /// The task recording late answers, if any were pending at the decision and the
    /// members have no collector (with one, the collector records them: nothing to stop).
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

impl Op {
    fn metric(self) -> metrics::Op {
        match self {
            Self::Acquire => metrics::Op::Acquire,
            Self::Extend => metrics::Op::Extend,
            Self::Fence(_) => metrics::Op::Fence,
        }
    }
}

/// One master's answer: `Some(token)` for yes (the token is 0 except for fenced acquires),
/// `None` for no (with who holds, when the member said), or a failure.
type Answer = (usize, Said);

/// What one master said: see [`Answer`].
struct Said {
    result: Result<Option<u64>, NodeFailure>,
    held_by: Option<(Holder, Option<Duration>)>,
}

impl Said {
    fn failed(failure: NodeFailure) -> Self {
        Self {
            result: Err(failure),
            held_by: None,
        }
    }
}

/// One master's answer to `op` (unbounded: its round's deadline bounds it). The calls off
/// the hot path are boxed, so that an acquire round's futures stay small (each is one
/// allocation in the round).
async fn ask<V: Voter>(nodes: Arc<[V]>, index: usize, req: Arc<Request>, op: Op) -> Answer {
    let node = &nodes[index];
    let _in_flight = metrics::InFlight::new(index);
    let said = match op {
        Op::Acquire => match node.acquire(&req).await {
            Ok(Acquired::Granted(token)) => Said {
                result: Ok(Some(token)),
                held_by: None,
            },
            Ok(Acquired::Taken(by, expires_in)) => Said {
                result: Ok(None),
                held_by: Some((by, expires_in)),
            },
            Err(failure) => Said::failed(failure),
        },
        Op::Extend => match Box::pin(node.extend(&req)).await {
            Ok(yes) => Said {
                result: Ok(yes.then_some(0)),
                held_by: None,
            },
            Err(failure) => Said::failed(failure),
        },
        Op::Fence(token) => match Box::pin(node.fence(&req, token)).await {
            Ok(yes) => Said {
                result: Ok(yes.then_some(token)),
                held_by: None,
            },
            Err(failure) => Said::failed(failure),
        },
    };
    (index, said)
}

/// The requests of one round, one per master, all sent when the round starts — so a single
/// deadline at `start + timeout` bounds each of them by `timeout`, with one timer for the
/// round instead of one per master. Requests still pending at the deadline are dropped.
struct Fan<F> {
    inflight: FuturesUnordered<F>,
    start: Instant,
    timeout: Duration,
    deadline: Pin<Box<Sleep>>,
}

/// What a [`Fan`] yields next.
enum Next<T> {
    /// Master `.0` answered `.1`, `.2` after the start.
    Answer(usize, T, Duration),
    /// Every master has answered.
    Done,
    /// The deadline passed; the masters that had not answered are to be counted as timed
    /// out (their requests have been dropped).
    Expired,
}

impl<T, F: Future<Output = (usize, T)>> Fan<F> {
    /// Starts a round now: the requests are sent when first polled.
    fn new(requests: impl Iterator<Item = F>, timeout: Duration) -> Self {
        let start = Instant::now();
        let deadline = match start.checked_add(timeout) {
            Some(at) => tokio::time::sleep_until(at),
            None => tokio::time::sleep(timeout),
        };
        Self {
            inflight: requests.collect(),
            start,
            timeout,
            deadline: Box::pin(deadline),
        }
    }

    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Next<T>> {
        match self.inflight.poll_next_unpin(cx) {
            Poll::Ready(Some((index, answer))) => {
                Poll::Ready(Next::Answer(index, answer, self.start.elapsed()))
            }
            Poll::Ready(None) => Poll::Ready(Next::Done),
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    self.inflight.clear();
                    Poll::Ready(Next::Expired)
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    async fn next(&mut self) -> Next<T> {
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }

    /// The next answer if it has already arrived, without waiting.
    fn ready(&mut self) -> Option<Next<T>> {
        match self.poll_next(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(next) => Some(next),
            Poll::Pending => None,
        }
    }

    fn is_empty(&self) -> bool {
        self.inflight.is_empty()
    }
}

/// Asks every master `op` at once, all bounded by one deadline `timeout` from now.
fn fan_out<V: Voter>(
    nodes: &Arc<[V]>,
    req: &Arc<Request>,
    op: Op,
    timeout: Duration,
) -> Fan<impl Future<Output = Answer> + Send + 'static + use<V>> {
    Fan::new(
        (0..nodes.len()).map(|i| ask(nodes.clone(), i, req.clone(), op)),
        timeout,
    )
}

/// Records one answer in `stats` and emits its trace event.
fn record(stats: &mut AttemptStats, index: usize, said: Said, latency: Duration, op: Op) {
    let vote = match said.result {
        Ok(Some(_)) => Vote::Granted,
        Ok(None) => Vote::Taken,
        Err(failure) => Vote::Failed(failure),
    };
    tracing::debug!(node = index, ?op, vote = ?vote, latency_us = latency.as_micros() as u64, "vote");
    metrics::vote(index, op.metric(), metrics::Said::of(&vote), latency);
    if let Some(slot) = stats.votes.get_mut(index) {
        slot.vote = vote;
        slot.latency = Some(latency);
        slot.held_by = said.held_by.map(|(by, _)| by);
        slot.expires_in = said.held_by.and_then(|(_, left)| left);
    }
}

/// Records every master still pending in `stats` as timed out after `timeout`.
fn record_timeouts(stats: &mut AttemptStats, timeout: Duration, op: Op) {
    for index in 0..stats.votes.len() {
        if stats.votes[index].vote == Vote::Pending {
            record(
                stats,
                index,
                Said::failed(NodeFailure::Timeout(timeout)),
                timeout,
                op,
            );
        }
    }
}

/// Records answers until the round is decided: `Q` yes, or more than `N - Q` no or failed
/// (a quorum has become impossible). Returns the largest token among the yes answers.
async fn decide<F: Future<Output = Answer>>(
    fan: &mut Fan<F>,
    stats: &mut AttemptStats,
    op: Op,
) -> u64 {
    let (n, q) = (stats.nodes(), stats.quorum());
    let mut token = 0;
    loop {
        match fan.next().await {
            Next::Answer(index, said, latency) => {
                if let Ok(Some(t)) = said.result {
                    token = token.max(t);
                }
                record(stats, index, said, latency, op);
                if rules::decision(stats.granted(), stats.taken() + stats.failed(), n, q).is_some()
                {
                    return token;
                }
            }
            Next::Done => return token,
            Next::Expired => {
                // Counted one at a time, in index order, up to the decision, as if each had
                // its own timer: the rest stay pending, as answers after a decision do.
                for index in 0..n {
                    if stats.votes[index].vote == Vote::Pending {
                        let timeout = fan.timeout;
                        record(
                            stats,
                            index,
                            Said::failed(NodeFailure::Timeout(timeout)),
                            timeout,
                            op,
                        );
                        if rules::decision(stats.granted(), stats.taken() + stats.failed(), n, q)
                            .is_some()
                        {
                            break;
                        }
                    }
                }
                return token;
            }
        }
    }
}

/// Requests in flight plus the cleanup owed if the round does not hand a lock to the
/// caller. Dropping it — at a failed decision or because the caller's future was dropped
/// mid-round — first drops the pending requests (so none of them can be re-sent after the
/// release, e.g. on a NOSCRIPT fallback), then spawns the value-checked release to every
/// master. A multiplexed connection delivers commands in order, so each release reaches
/// its master after any acquire we sent it.
struct Round<V: Voter, F> {
    /// `None` once handed to the task that records late answers.
    fan: Option<Fan<F>>,
    cleanup: Option<(Arc<[V]>, Arc<Request>, Duration)>,
}

impl<V: Voter, F> Drop for Round<V, F> {
    fn drop(&mut self) {
        drop(self.fan.take());
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
    let mut stats = AttemptStats::pending(n, q, attempt);
    let mut round = Round {
        fan: None,
        cleanup: Some((nodes.clone(), req.clone(), timing.node_timeout)),
    };
    let fan = round
        .fan
        .insert(fan_out(nodes, req, Op::Acquire, timing.node_timeout));
    let start = fan.start;
    let token = decide(fan, &mut stats, Op::Acquire).await;
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
    while let Some(next) = fan.ready() {
        if !record_acquire(&mut stats, next, timing.node_timeout) {
            break;
        }
    }
    let stats = Arc::new(Mutex::new(stats));
    // Requests still pending are seen through by the collector, which records their
    // answers; those not sent yet (a master still connecting) are sent while the lock is
    // held, and none once its release has begun (see `Wire::enter`): nothing is left that
    // a release would have to stop.
    let tail = match round.fan.take().filter(|fan| !fan.is_empty()) {
        Some(fan) => leave(nodes, record_late(fan, stats.clone())),
        None => None,
    };
    Ok(Grant {
        deadline,
        stats,
        tail,
        token,
    })
}

/// Records the answers of `fan` in `stats` as they arrive, up to its deadline.
async fn record_late<F: Future<Output = Answer>>(mut fan: Fan<F>, stats: Arc<Mutex<AttemptStats>>) {
    loop {
        let next = fan.next().await;
        let mut stats = stats.lock().unwrap_or_else(PoisonError::into_inner);
        if !record_acquire(&mut stats, next, fan.timeout) {
            return;
        }
    }
}

/// Records one outcome of an acquire's fan-out in `stats`; false once nothing more will
/// come (every master answered, or the node timeout passed for those that did not).
fn record_acquire(stats: &mut AttemptStats, next: Next<Said>, node_timeout: Duration) -> bool {
    match next {
        Next::Answer(index, said, latency) => {
            record(stats, index, said, latency, Op::Acquire);
            true
        }
        Next::Done => false,
        Next::Expired => {
            record_timeouts(stats, node_timeout, Op::Acquire);
            false
        }
    }
}

/// Leaves `leftover` to the client's collector (see `collector`), or, for members without
/// one, to a task of its own, whose handle is returned. Without a tokio runtime nothing can
/// run it: it is dropped.
fn leave<V: Voter>(
    nodes: &[V],
    leftover: impl Future<Output = ()> + Send + 'static,
) -> Option<AbortHandle> {
    match nodes.first().and_then(Voter::collector) {
        Some(collector) => {
            collector.hand_over(leftover);
            None
        }
        None => tokio::runtime::Handle::try_current()
            .ok()
            .map(|handle| handle.spawn(leftover).abort_handle()),
    }
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
    let mut stats = AttemptStats::pending(n, q, attempt);
    let mut acks = fan_out(nodes, req, Op::Fence(t), timing.node_timeout);
    decide(&mut acks, &mut stats, Op::Fence(t)).await;
    stats.elapsed = acks.start.elapsed();
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
    let mut stats = AttemptStats::pending(n, q, 1);
    let mut inflight = fan_out(nodes, req, Op::Extend, timing.node_timeout);
    let start = inflight.start;
    decide(&mut inflight, &mut stats, Op::Extend).await;
    stats.elapsed = start.elapsed();
    Extension {
        extended: stats.granted() >= q,
        deadline: start + rules::validity_window(timing.ttl, timing.drift),
        stats,
    }
}

/// One master's answer to the value-checked release (bounded by its round's deadline).
async fn release_one<V: Voter>(
    nodes: Arc<[V]>,
    index: usize,
    req: Arc<Request>,
) -> (usize, Result<u64, NodeFailure>) {
    (index, nodes[index].release(&req).await)
}

/// The value-checked release to every master at once, bounded by one deadline `timeout`
/// from now.
fn release_fan<V: Voter>(
    nodes: &Arc<[V]>,
    req: &Arc<Request>,
    timeout: Duration,
) -> Fan<impl Future<Output = (usize, Result<u64, NodeFailure>)> + Send + 'static + use<V>> {
    Fan::new(
        (0..nodes.len()).map(|i| release_one(nodes.clone(), i, req.clone())),
        timeout,
    )
}

/// Waits for the rest of a release round, to its deadline.
async fn see_through<F: Future<Output = (usize, Result<u64, NodeFailure>)>>(mut fan: Fan<F>) {
    while let Next::Answer(node, result, _) = fan.next().await {
        tracing::debug!(node, ?result, "release");
    }
}

/// The value-checked release on every master at once, waiting for all of them (each
/// bounded by `timeout`): the cleanup of detached tasks, where nobody waits on the answers.
/// Like [`release_quorum`], it first closes the lock's acquires ([`Wire::seal`]).
pub(crate) async fn release_all<V: Voter>(nodes: &Arc<[V]>, req: &Arc<Request>, timeout: Duration) {
    req.wire.seal().await;
    see_through(release_fan(nodes, req, timeout)).await;
}

/// The value-checked release on every master at once, returning as soon as a quorum has
/// answered it (deleted, or held nothing): from then on no quorum holds the lock, and a
/// contender need not wait for us. The other requests are already sent; the client's
/// collector sees them through (each bounded by `timeout`), and they show as `None` here.
/// Without a quorum of answers, waits for all of them.
///
/// Before anything is sent, the lock's acquires are closed ([`Wire::seal`]): an acquire
/// still waiting for its master's connection is never sent, and one being handed over is
/// handed over first, so that every release reaches its master after any acquire of ours.
pub(crate) async fn release_quorum<V: Voter>(
    nodes: &Arc<[V]>,
    req: &Arc<Request>,
    timeout: Duration,
) -> Vec<Option<Result<u64, NodeFailure>>> {
    let n = nodes.len();
    let q = req.quorum(n);
    req.wire.seal().await;
    let mut fan = release_fan(nodes, req, timeout);
    let mut results = vec![None; n];
    let mut answered = 0;
    let mut expired = false;
    while answered < q {
        match fan.next().await {
            Next::Answer(index, result, _) => {
                tracing::debug!(node = index, ?result, "release");
                answered += usize::from(result.is_ok());
                results[index] = Some(result);
            }
            Next::Done => break,
            Next::Expired => {
                expired = true;
                break;
            }
        }
    }
    while !expired && let Some(next) = fan.ready() {
        match next {
            Next::Answer(index, result, _) => {
                tracing::debug!(node = index, ?result, "release");
                results[index] = Some(result);
            }
            Next::Done => break,
            Next::Expired => expired = true,
        }
    }
    if expired {
        for result in results.iter_mut().filter(|r| r.is_none()) {
            *result = Some(Err(NodeFailure::Timeout(timeout)));
        }
    } else if !fan.is_empty() {
        leave(nodes, see_through(fan));
    }
    results
}

/// Sends the release to every master from the client's collector (or a detached task), so
/// it happens even when the caller goes away (through a collector, the requests leave
/// before this returns). Without a tokio runtime (a lock dropped after shutdown) nothing
/// can be sent; the keys then expire by their ttl.
pub(crate) fn spawn_release<V: Voter>(nodes: Arc<[V]>, req: Arc<Request>, timeout: Duration) {
    match tokio::runtime::Handle::try_current() {
        Ok(_) => {
            let owner = nodes.clone();
            leave(&owner, async move {
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
