//! Coalescing: requests to one master that are ready at the same moment leave in one write.
//!
//! redis-rs's multiplexed connection writes whatever its driver task finds queued when it
//! runs. Woken by the first request of a burst, the driver usually runs before the others
//! are queued (tokio runs a task woken by the running one next), so under load a burst of
//! requests left in several writes per master, each waking the master, which then answered
//! in as many writes: most of the CPU a lock costs, on both sides, is those system calls.
//!
//! So once a few requests are in flight on a master, a new one waits in that master's
//! outbox, and a sender task per master — which first lets every task that is ready run,
//! so that they can add theirs — sends the whole outbox as one pipeline: one message to
//! the driver, one write, one read on the master, one reply to wake the sender, which
//! hands each request its answers. With fewer requests in flight a request is sent at once,
//! as before: batching it would only add a hop.
//!
//! **Order.** A request sent at once is handed to redis-rs in the poll that decided so,
//! and only when the outbox is empty; the sender hands a batch over before it counts the
//! batch's requests out of the outbox. So a request made after another one has been polled
//! once (a release after its acquire) always reaches the master after it, whichever way
//! each of them went. Every command on a lock's keys (acquire, extend, fence, release)
//! takes this way; only the restart guard's and the health checks' calls, on keys of their
//! own, go straight to the connection. (The connection's own request queue is made large
//! enough that handing a request over never waits for room.)
//!
//! **Cancellation.** A request in the outbox whose caller gave up before its batch left is
//! still sent (its answer is dropped), so it reaches the master before anything sent after
//! it, such as the release of a failed round. (A request handed to redis-rs at once may not
//! be, if its caller is gone before the driver takes it — then not at all, which is as
//! safe.)

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Poll, Waker};

use redis::aio::MultiplexedConnection;
use redis::{Cmd, Pipeline, RedisResult, Value};
use tokio::sync::oneshot;

use super::{Connection, Live};

/// Requests in flight on a master below which a new one is sent at once. At one lock at a
/// time a master sees the acquire and, at most, the late answers of the previous lock's
/// acquire and release still in flight: none of that waits.
pub(super) const DIRECT_BELOW: usize = 4;
/// Most commands in one batch.
const MAX_BATCH: usize = 512;
/// Batches in flight beyond which those nobody waits for are forgotten.
const FORGET_ABOVE: usize = 64;
/// Batches the sender hands over in one poll before it lets other tasks run.
const BATCHES_PER_POLL: usize = 32;
/// Emptied pipelines (and their lists of replies) kept for the next batches.
const SPARES: usize = 4;

/// The answer to one request: its command's reply, or for several commands an array of
/// their replies in order; or why the connection failed.
pub(super) type Answer = RedisResult<Value>;

/// Where one request's answer goes, and how many commands it has.
type Reply = (oneshot::Sender<Answer>, usize);

/// One master's outbox.
pub(super) struct Outbox {
    /// Requests in flight (sent at once, waiting in the outbox, or in a batch).
    busy: AtomicUsize,
    /// Requests in the outbox: zero means a request may be sent at once without passing
    /// one made before it.
    queued: AtomicUsize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The next batches, oldest first; a batch holds requests for one connection.
    queue: VecDeque<Batch>,
    sender: Sender,
    /// Emptied pipelines and reply lists, to be filled again (a batch's pipeline grows to
    /// the size of a burst: reused, it does not grow again).
    spare: Vec<(Pipeline, Vec<Reply>)>,
}

/// The sender task, as the outbox sees it.
#[derive(Default)]
enum Sender {
    /// Not running (never started, or its runtime went away).
    #[default]
    Absent,
    /// Waiting for requests; its waker.
    Idle(Waker),
    /// Woken, or working: it will look at the outbox again.
    Scheduled,
}

/// Requests bound for one connection, as one pipeline.
struct Batch {
    live: Live,
    pipe: Pipeline,
    replies: Vec<Reply>,
}

/// A request's place among the requests in flight; dropping it takes it out.
pub(super) struct Ticket<'a> {
    outbox: &'a Outbox,
    /// Whether the request goes out at once.
    pub(super) direct: bool,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.outbox.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Default for Outbox {
    fn default() -> Self {
        Self {
            busy: AtomicUsize::new(0),
            queued: AtomicUsize::new(0),
            state: Mutex::new(State::default()),
        }
    }
}

impl Outbox {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Requests waiting in the outbox.
    #[cfg(test)]
    pub(super) fn queued(&self) -> usize {
        self.queued.load(Ordering::SeqCst)
    }

    /// Counts a new request in and says whether it goes out at once: when fewer than
    /// [`DIRECT_BELOW`] others are in flight and none waits in the outbox. A direct request
    /// must be handed to the connection before the caller's poll returns.
    pub(super) fn enter(&self) -> Ticket<'_> {
        let before = self.busy.fetch_add(1, Ordering::Relaxed);
        // Acquire: a batch counted out of the outbox has been handed to the connection.
        let direct = before < DIRECT_BELOW && self.queued.load(Ordering::Acquire) == 0;
        Ticket {
            outbox: self,
            direct,
        }
    }

    /// Puts `cmds` (one request: their answers come back together) in the outbox for `live`,
    /// starting or waking the sender when needed. Without a tokio runtime to start the
    /// sender on, the request fails at once (its answer never comes).
    ///
    /// A sender that died with its runtime is never waited for: its [`Exit`] runs however
    /// the task ended — even dropped before its first poll — and fails what it left queued
    /// (none of it was sent), so the next request starts a new sender on its own runtime.
    /// A request queued in the moment between a runtime's shutdown and the drop of its
    /// tasks fails then, at once; none is left waiting for a sender that will never run.
    pub(super) fn push(
        &self,
        conn: &Arc<Connection>,
        live: &Live,
        cmds: impl Iterator<Item = Cmd>,
    ) -> oneshot::Receiver<Answer> {
        let (tx, rx) = oneshot::channel();
        let mut state = self.state();
        let fits = state.queue.back().is_some_and(|batch| {
            batch.live.generation == live.generation && batch.pipe.len() < MAX_BATCH
        });
        if !fits {
            let (pipe, replies) = state.spare.pop().unwrap_or_default();
            state.queue.push_back(Batch {
                live: live.clone(),
                pipe,
                replies,
            });
        }
        let last = state.queue.len() - 1;
        let batch = &mut state.queue[last];
        let before = batch.pipe.len();
        for cmd in cmds {
            batch.pipe.add_command(cmd);
        }
        let count = batch.pipe.len() - before;
        batch.replies.push((tx, count));
        self.queued.fetch_add(1, Ordering::Relaxed);
        let (wake, start) = match std::mem::replace(&mut state.sender, Sender::Scheduled) {
            Sender::Idle(waker) => (Some(waker), false),
            Sender::Scheduled => (None, false),
            Sender::Absent => (None, true),
        };
        drop(state);
        if let Some(waker) = wake {
            waker.wake();
        }
        if start {
            Self::start(conn);
        }
        rx
    }

    /// Starts the sender task on the caller's runtime (the outbox says `Scheduled` already).
    /// Called without the lock: on a runtime that is shutting down, `spawn` drops the task
    /// at once, and its [`Exit`] takes the lock. Without a runtime, the requests waiting
    /// fail at once.
    fn start(conn: &Arc<Connection>) {
        let exit = Exit(Arc::downgrade(conn));
        match tokio::runtime::Handle::try_current() {
            // Out of tokio's budget: a batch must be handed to the connection in the poll
            // that counts it out of the outbox (see the module docs), and with the budget
            // spent the driver's queue would refuse it. The task yields on its own once per
            // batch.
            Ok(handle) => drop(handle.spawn(tokio::task::coop::unconstrained(run(exit)))),
            Err(_) => drop(exit),
        }
    }

    /// Takes every request waiting in the outbox out of it (nobody is left to send them);
    /// dropping what this returns fails them.
    fn drop_queued(&self, state: &mut State) -> VecDeque<Batch> {
        let dropped = std::mem::take(&mut state.queue);
        let requests: usize = dropped.iter().map(|b| b.replies.len()).sum();
        self.queued.fetch_sub(requests, Ordering::Release);
        dropped
    }
}

/// A batch handed to the connection: its answers, and whom they go to.
struct InFlight<F> {
    generation: u64,
    exchange: Pin<Box<F>>,
    replies: Vec<Reply>,
}

/// Hands each request of a batch its answer; returns the emptied list.
fn deliver(
    conn: Option<&Arc<Connection>>,
    generation: u64,
    mut replies: Vec<Reply>,
    answers: RedisResult<Vec<Value>>,
) -> Vec<Reply> {
    match answers {
        Ok(values) => {
            let mut values = values.into_iter();
            for (tx, count) in replies.drain(..) {
                let answer = match count {
                    1 => values.next().unwrap_or(Value::Nil),
                    _ => Value::Array(values.by_ref().take(count).collect()),
                };
                let _ = tx.send(Ok(answer));
            }
        }
        Err(err) => {
            if let Some(conn) = conn {
                conn.saw_error(generation, &err);
            }
            for (tx, _) in replies.drain(..) {
                let _ = tx.send(Err(err.clone()));
            }
        }
    }
    replies
}

/// Sends `pipe` and waits for its replies; gives the pipeline back for reuse.
async fn exchange(
    mut conn: MultiplexedConnection,
    pipe: Pipeline,
) -> (RedisResult<Vec<Value>>, Pipeline) {
    let count = pipe.len();
    let answers = conn.send_packed_commands(&pipe, 0, count).await;
    (answers, pipe)
}

/// The sender task of one master: sends the outbox as batches and hands out the answers.
/// Ends when its connection is gone and nothing is in flight. `exit` is an argument, not a
/// local: it is dropped with the task even if the task is never polled.
async fn run(exit: Exit) {
    let conn = exit.0.clone();
    // In flight, oldest first; and finished exchanges, whose allocations the next reuse.
    let (mut inflight, mut done) = slots(exchange);
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        // The task runs outside tokio's budget (see `push`): it bounds its own polls.
        let mut batches = 0;
        loop {
            if batches == BATCHES_PER_POLL {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            // On one connection the answers come back in the order the batches were sent:
            // past the first batch still waiting, the others of its connection are waiting
            // too. (An older connection's batches may still be in flight behind a newer one.)
            let strong = conn.upgrade();
            let mut waiting: Option<u64> = None;
            let mut i = 0;
            while i < inflight.len() {
                if waiting == Some(inflight[i].generation) {
                    i += 1;
                    continue;
                }
                let Poll::Ready((answers, mut pipe)) = inflight[i].exchange.as_mut().poll(cx)
                else {
                    waiting = Some(inflight[i].generation);
                    i += 1;
                    continue;
                };
                let Some(InFlight {
                    generation,
                    exchange,
                    replies,
                }) = inflight.remove(i)
                else {
                    break;
                };
                let replies = deliver(strong.as_ref(), generation, replies, answers);
                done.push(exchange);
                pipe.clear();
                if let Some(strong) = &strong {
                    let mut state = strong.outbox.state();
                    if state.spare.len() < SPARES {
                        state.spare.push((pipe, replies));
                    }
                }
            }
            done.truncate(SPARES);
            let Some(strong) = strong else {
                return if inflight.is_empty() {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                };
            };
            let mut state = strong.outbox.state();
            let Some(next) = state.queue.front() else {
                state.sender = Sender::Idle(cx.waker().clone());
                yielded = false;
                return Poll::Pending;
            };
            if !yielded && next.pipe.len() < MAX_BATCH {
                // Let every task that is ready run first, and add its requests: a task that
                // wakes itself goes to the back of the run queue.
                yielded = true;
                drop(state);
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            let Some(Batch {
                live,
                pipe,
                replies,
            }) = state.queue.pop_front()
            else {
                continue;
            };
            let requests = replies.len();
            let generation = live.generation;
            let next = exchange(live.conn, pipe);
            let mut exchange = match done.pop() {
                Some(mut reused) => {
                    Pin::set(&mut reused.as_mut(), next);
                    reused
                }
                None => Box::pin(next),
            };
            // The first poll hands the pipeline to the connection; it must happen before the
            // batch is counted out of the outbox (see the module docs).
            let first = exchange.as_mut().poll(cx);
            strong.outbox.queued.fetch_sub(requests, Ordering::Release);
            drop(state);
            batches += 1;
            if let Poll::Ready((answers, _)) = first {
                deliver(Some(&strong), generation, replies, answers);
                continue;
            }
            if inflight.len() >= FORGET_ABOVE {
                // A master that stopped answering: batches whose callers all gave up are
                // forgotten rather than kept until it answers (handed over long ago, the
                // driver has written them).
                inflight.retain(|b| !b.replies.iter().all(|(tx, _)| tx.is_closed()));
            }
            inflight.push_back(InFlight {
                generation,
                exchange,
                replies,
            });
        }
    })
    .await;
}

/// Empty lists of exchanges made by `make` (so that their type can be named).
#[allow(clippy::type_complexity)]
fn slots<F>(
    _make: fn(MultiplexedConnection, Pipeline) -> F,
) -> (VecDeque<InFlight<F>>, Vec<Pin<Box<F>>>) {
    (VecDeque::new(), Vec::new())
}

/// Marks the sender gone when its task ends or is dropped (its runtime shut down, before
/// or after its first poll), so that the next request starts a new one; requests left in
/// the outbox fail.
struct Exit(Weak<Connection>);

impl Drop for Exit {
    fn drop(&mut self) {
        if let Some(conn) = self.0.upgrade() {
            let dropped = {
                let mut state = conn.outbox.state();
                state.sender = Sender::Absent;
                conn.outbox.drop_queued(&mut state)
            };
            // Their answer channels close outside the lock.
            drop(dropped);
        }
    }
}
