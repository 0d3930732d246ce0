//! Automatic extension of held locks: one task per client renews every kept-alive lock, in
//! bounded batches spread over the renewal interval.
//!
//! Each renewal is an entry in a queue ordered by due time: a lock is due `every` (a third
//! of its ttl by default) after the start of its last successful extension. The task sleeps
//! until the earliest entry is due, then takes due entries — and those due within their
//! slack, a quarter of their interval, so that locks taken at different moments share a
//! round trip when there are few — up to the batch size, and sends the batch as one
//! pipeline to each master; with up to [`IN_FLIGHT`] batches out at once, while more are
//! due. Locks are renewed when they are due, not all at one tick: a hundred thousand locks
//! taken in a burst go out in batches one after the other, and stay spread from then on.
//!
//! The batch size (`sizer`) is bounded by count and bytes, and cut while the masters answer
//! slowly, so that a batch is answered well within the node timeout — but never below what
//! keeps up with the renewals due. Each lock's deadline
//! moves as soon as its quorum is in (`batch`); answers that come after the node timeout
//! still count, since an extension's deadline runs from its start. A lock whose renewal
//! failed is retried, while it is still valid, in a batch of failed renewals only (a
//! failure of one batch touches no other lock, and a retry never rides with a full batch
//! that could fail it again); a lock is marked lost when a quorum says its key is not ours
//! or its deadline passes. A master that has answered nothing for a while and has many
//! calls outstanding (a stopped one) is skipped until it answers, so that requests do not
//! pile up on it. `meter` tells whether the renewals keep up ([`RenewalLoad`]), and the task
//! logs a warning with the figures when they do not. The task exits when nothing is left to
//! renew.
//!
//! Batches go on a connection of their own to each master (`Node::renewal_connection` says
//! why, and why the order between a release and a late extension need not be kept). Every
//! lock's renewal gate is held from the moment its batch is taken until every master has
//! answered or timed out, so stopping a renewal (a release) waits for any extension of that
//! lock in flight, and no extension is sent once a stop has begun.
//!
//! The task runs on the runtime of the keep-alive that started it. If that runtime shuts
//! down first (a client used from several runtimes: see `connection`'s docs on runtimes),
//! the task's [`Exit`] puts the renewals it had taken for undecided batches back in the
//! queue and hands the queue to a new task on the runtime of a lock still in it — one not
//! tried yet in this chain of hand-overs, so that dead runtimes are not tried in a circle —
//! or, with none left, lets the next keep-alive start one.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::runtime::{Handle, Id};
use tokio::sync::{Notify, OwnedMutexGuard};
use tokio::time::Instant;

pub use stats::RenewalStats;

use self::batch::{Batch, Call, Tagged};
use self::meter::Meter;
use self::sizer::{MAX_BATCH_BYTES, Sizer};
use tracing::Instrument;

use crate::error::LossReason;
use crate::hold::held::Held;
use crate::metrics;
use crate::protocol::quorum::{Request, Voter};
use crate::report::RenewalLoad;

mod batch;
mod meter;
mod sizer;
mod stats;

/// Batches in flight (not yet decided) at once. Two keep every master busy — one batch is
/// run while the other's answers travel and are counted — and the batch size keeps up with
/// the renewals due at two even when every batch takes the node timeout (see `sizer`);
/// four measured no better on the shared machine.
const IN_FLIGHT: usize = 2;
/// Calls a master may have outstanding (sent, and neither answered nor given up on) before
/// new batches skip it (their votes there count as failed) — if it has not answered
/// anything for [`LATE_ANSWERS`] node timeouts either: a stopped master must not collect the
/// whole queue, but a master that answers, however late, is still asked (a lock held on
/// exactly a quorum of masters needs every one of them to renew).
const MAX_PENDING: usize = 8;
/// How long an answer that missed the node timeout is still waited for, in node timeouts,
/// at least (longer while it may still save a renewal from its retry).
const LATE_ANSWERS: u32 = 20;

/// When a lock is renewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Time from a successful extension to the next one.
    pub(crate) every: Duration,
    /// How much earlier than due a renewal may be sent to join a batch.
    pub(crate) slack: Duration,
    /// Stop renewing after this many extensions.
    pub(crate) max_extensions: Option<u32>,
    /// Stop renewing once this long has passed since the keep-alive began.
    pub(crate) max_hold: Option<Duration>,
}

/// One kept-alive lock in the queue.
pub(crate) struct Entry {
    id: u64,
    lock: Arc<Held>,
    plan: Plan,
    /// The lock's renewal generation this entry belongs to; a stop bumps it.
    generation: u64,
    started: Instant,
    extensions: AtomicU32,
}

impl Entry {
    /// The validity an extension gives, from its start.
    fn window(&self) -> Duration {
        self.lock.timing.ttl - self.lock.timing.drift
    }

    fn current(&self) -> bool {
        self.lock.control.generation.load(Ordering::SeqCst) == self.generation
    }

    /// Validity left at the due time of an on-time renewal.
    fn spare(&self) -> Duration {
        self.window().saturating_sub(self.plan.every)
    }

    /// Bytes of the extension on the wire, about (keys, value, script hash and framing).
    fn wire_size(&self) -> usize {
        let req = &self.lock.req;
        req.keys.iter().map(String::len).sum::<usize>() + req.value.as_str().len() + 128
    }
}

/// The queues of renewals, shared by the task and the handles that start renewals.
#[derive(Default)]
struct Registry {
    /// First attempts, by due time.
    queue: BTreeMap<(Instant, u64), Arc<Entry>>,
    /// Failed renewals, by retry time: they go out in batches of their own.
    retries: BTreeMap<(Instant, u64), Arc<Entry>>,
    /// Locks in batches not yet decided.
    in_flight: usize,
    /// Those locks' entries, by id: put back in the queue by the task's exit if the task
    /// dies with them (its runtime shut down).
    taken: BTreeMap<u64, Arc<Entry>>,
    /// Entries alive (queued or in flight; stopped ones until the task sees them).
    kept: usize,
    /// Their renewals per second: the sum of `1 / every`.
    demand: f64,
    next_id: u64,
    running: bool,
    max_slack: Duration,
}

impl Registry {
    /// Forgets `entry` for good (finished, lost, stopped).
    fn retire(&mut self, entry: &Entry) {
        self.kept = self.kept.saturating_sub(1);
        self.demand -= 1.0 / entry.plan.every.as_secs_f64();
        if self.kept == 0 || self.demand < 0.0 {
            self.demand = 0.0;
        }
    }

    /// The earliest due time.
    fn next_due(&self) -> Option<Instant> {
        let first = |q: &BTreeMap<(Instant, u64), Arc<Entry>>| q.first_key_value().map(|k| k.0.0);
        match (first(&self.queue), first(&self.retries)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Held locks and their renewal interval (harmonic mean).
    fn held(&self) -> (usize, Duration) {
        let interval = if self.kept == 0 || self.demand <= 0.0 {
            Duration::ZERO
        } else {
            Duration::try_from_secs_f64(self.kept as f64 / self.demand).unwrap_or(Duration::ZERO)
        };
        (self.kept, interval)
    }
}

/// The batch sizing and the back-pressure meter, kept across runs of the task.
struct Tuning {
    sizer: Sizer,
    meter: Meter,
}

/// The per-client renewal task and its queue.
pub(crate) struct Renewer<V: Voter> {
    inner: Arc<Inner<V>>,
}

struct Inner<V> {
    nodes: Arc<[V]>,
    node_timeout: Duration,
    registry: Mutex<Registry>,
    tuning: Mutex<Tuning>,
    wake: Notify,
    ticks: AtomicU64,
    retried: AtomicU64,
    round_trips: Vec<AtomicU64>,
    renewed: AtomicU64,
    failed: AtomicU64,
    lost: AtomicU64,
    /// Locks whose extension is in flight (gate held).
    extending: AtomicUsize,
    /// Batches sent and not yet decided.
    undecided: AtomicUsize,
    /// Failed renewals whose quorum late answers completed before their retry.
    rescued: AtomicU64,
    /// Calls outstanding per master (see [`Outstanding`]).
    pending: Arc<[AtomicUsize]>,
    /// When each master last answered a batch (anything, an error too).
    answered: Arc<Mutex<Vec<Option<Instant>>>>,
}

/// One call counted as outstanding on its master until it is dropped: answered, failed,
/// or given up on.
struct Outstanding(Arc<[AtomicUsize]>, usize);

impl Drop for Outstanding {
    fn drop(&mut self) {
        self.0[self.1].fetch_sub(1, Ordering::Relaxed);
    }
}

/// Entries taken for one batch, with their due times and gates.
type Taken = Vec<(Instant, Arc<Entry>, OwnedMutexGuard<()>)>;

type Pending<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<V: Voter> Renewer<V> {
    pub(crate) fn new(nodes: Arc<[V]>, node_timeout: Duration) -> Self {
        let round_trips = nodes.iter().map(|_| AtomicU64::new(0)).collect();
        let pending = nodes.iter().map(|_| AtomicUsize::new(0)).collect();
        let answered = Arc::new(Mutex::new(vec![None; nodes.len()]));
        let tuning = Tuning {
            sizer: Sizer::new(node_timeout),
            meter: Meter::new(Instant::now()),
        };
        Self {
            inner: Arc::new(Inner {
                nodes,
                node_timeout,
                registry: Mutex::new(Registry::default()),
                tuning: Mutex::new(tuning),
                wake: Notify::new(),
                ticks: AtomicU64::new(0),
                retried: AtomicU64::new(0),
                round_trips,
                renewed: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                lost: AtomicU64::new(0),
                extending: AtomicUsize::new(0),
                undecided: AtomicUsize::new(0),
                rescued: AtomicU64::new(0),
                answered,
                pending,
            }),
        }
    }

    /// Starts renewing `lock` under `plan`, superseding any earlier keep-alive of it.
    /// Spawns the renewal task if it is not running: on the caller's runtime, or without
    /// one on the lock's. Returns the renewal's generation.
    pub(crate) fn start(&self, lock: Arc<Held>, plan: Plan) -> u64 {
        let generation = lock.control.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let deadline = lock.status().deadline;
        let window = lock.timing.ttl - lock.timing.drift;
        // Renew when the validity left has fallen to what is left `every` after a renewal.
        let due = deadline
            .checked_sub(window.saturating_sub(plan.every))
            .unwrap_or_else(Instant::now);
        let handle = Handle::try_current().unwrap_or_else(|_| lock.handle.clone());
        let mut reg = self.inner.registry();
        let id = reg.next_id;
        reg.next_id += 1;
        reg.max_slack = reg.max_slack.max(plan.slack);
        reg.kept += 1;
        reg.demand += 1.0 / plan.every.as_secs_f64();
        let entry = Arc::new(Entry {
            id,
            lock,
            plan,
            generation,
            started: Instant::now(),
            extensions: AtomicU32::new(0),
        });
        let earliest = reg.next_due();
        reg.queue.insert((due, id), entry);
        if !reg.running {
            reg.running = true;
            drop(reg);
            spawn(&self.inner, &handle, vec![handle.id()]);
        } else if earliest.is_none_or(|e| due < e) {
            self.inner.wake.notify_one();
        }
        generation
    }

    pub(crate) fn stats(&self) -> RenewalStats {
        let inner = &self.inner;
        let (scheduled, task_running) = {
            let reg = inner.registry();
            let live = reg
                .queue
                .values()
                .chain(reg.retries.values())
                .filter(|e| e.current())
                .count();
            (live + reg.in_flight, reg.running)
        };
        let demand = inner.registry().demand;
        let batch_size = inner.tuning().sizer.size_for(demand, IN_FLIGHT);
        RenewalStats {
            scheduled,
            task_running,
            ticks: inner.ticks.load(Ordering::Relaxed),
            retried: inner.retried.load(Ordering::Relaxed),
            round_trips: inner
                .round_trips
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
            renewed: inner.renewed.load(Ordering::Relaxed),
            failed: inner.failed.load(Ordering::Relaxed),
            lost: inner.lost.load(Ordering::Relaxed),
            rescued: inner.rescued.load(Ordering::Relaxed),
            extending: inner.extending.load(Ordering::SeqCst),
            batch_size,
            load: self.load(),
        }
    }

    /// Whether the renewals keep up with the locks kept alive.
    pub(crate) fn load(&self) -> RenewalLoad {
        self.inner.load()
    }
}

impl<V: Voter> Inner<V> {
    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn tuning(&self) -> MutexGuard<'_, Tuning> {
        self.tuning.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn load(&self) -> RenewalLoad {
        let (held, interval) = self.registry().held();
        self.tuning().meter.load(held, interval)
    }

    /// The renewal task. `exit` is an argument, not a local: it is dropped with the task
    /// even if the task is never polled.
    async fn run(self: Arc<Self>, mut exit: Exit<V>) {
        tracing::debug!("renewal task started");
        // Every batch from its dispatch until its last answer (or until it gives up on it).
        let mut batches: FuturesUnordered<Pending<()>> = FuturesUnordered::new();
        loop {
            while self.undecided.load(Ordering::SeqCst) < IN_FLIGHT {
                let demand = self.registry().demand;
                let size = self.tuning().sizer.size_for(demand, IN_FLIGHT);
                let Some((taken, retry)) = self.take(Instant::now(), size) else {
                    break;
                };
                if let Some(batch) = self.dispatch(taken, retry) {
                    self.undecided.fetch_add(1, Ordering::SeqCst);
                    batches.push(Box::pin(self.clone().drive(batch)));
                }
            }
            let next = {
                let mut reg = self.registry();
                if reg.queue.is_empty() && reg.retries.is_empty() && batches.is_empty() {
                    reg.running = false;
                    exit.armed = false;
                    break;
                }
                if self.undecided.load(Ordering::SeqCst) < IN_FLIGHT {
                    reg.next_due()
                } else {
                    None
                }
            };
            let due = async {
                match next {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = due => {}
                () = self.wake.notified() => {}
                Some(()) = batches.next() => {}
            }
        }
        tracing::debug!("renewal task stopped: nothing left to renew");
    }

    /// One batch's life: decision, settling, lingering (see `batch`).
    async fn drive(self: Arc<Self>, mut batch: Batch) {
        // One span per batch (renewals are batched: a lock's renewal is one entry of it).
        let span = tracing::debug_span!(
            "redquorum.renew",
            "db.system.name" = "redis",
            "otel.kind" = "client",
            locks = batch.entries.len(),
            nodes = self.nodes.len(),
            renewed = tracing::field::Empty,
            elapsed_us = tracing::field::Empty,
        );
        batch.decide().instrument(span.clone()).await;
        if !span.is_disabled() {
            let n = self.nodes.len();
            let renewed = batch
                .tallies
                .iter()
                .zip(&batch.entries)
                .filter(|(t, e)| t.granted >= e.lock.req.quorum(n))
                .count();
            span.record("renewed", renewed as u64);
            span.record("elapsed_us", batch.start.elapsed().as_micros() as u64);
        }
        self.decided(&mut batch);
        let mut measured = self.measure(&batch);
        self.undecided.fetch_sub(1, Ordering::SeqCst);
        // The next batch may go now.
        self.wake.notify_one();
        // Answers that complete a quorum after the decision, while the gates are still
        // held (their deadlines already moved): the renewals are saved from their retries.
        for i in batch.settle().await {
            if let Some(key) = batch.retries[i].take() {
                self.rescue(key, batch.start);
            }
        }
        measured = measured || self.measure(&batch);
        self.extending
            .fetch_sub(batch.entries.len(), Ordering::SeqCst);
        // Late answers are waited for until the last retry they could save is due, and
        // at least a few dozen node timeouts, to measure them.
        let until = batch
            .retries
            .iter()
            .flatten()
            .map(|&(due, _)| due)
            .fold(batch.start + self.node_timeout * LATE_ANSWERS, Instant::max);
        while let Some(completed) = batch.linger(until).await {
            for i in completed {
                if let Some(key) = batch.retries[i].take()
                    && batch.extend_late(i)
                {
                    self.rescue(key, batch.start);
                }
            }
            measured = measured || self.measure(&batch);
        }
        batch.give_up();
        if !measured {
            self.done(batch.entries.len());
            tracing::debug!(
                renewals = batch.entries.len(),
                "no quorum of masters answered a renewal batch, even late"
            );
        }
    }

    /// Tells the batch sizing when the batch's quorum-th answer came (the one that decides
    /// it), and the back-pressure meter that the batch is done, once that answer has come;
    /// whether it has.
    fn measure(&self, batch: &Batch) -> bool {
        let quorum = self.nodes.len() / 2 + 1;
        let mut times: Vec<Duration> = batch.answered.iter().map(|&(_, took)| took).collect();
        if times.len() < quorum {
            return false;
        }
        times.sort_unstable();
        self.tuning()
            .sizer
            .observe(batch.entries.len(), times[quorum - 1]);
        self.done(batch.entries.len());
        true
    }

    /// Takes the next batch if one is due: failed renewals first (their locks have the least
    /// validity left), each batch either all retries or all first attempts. Returns `None`
    /// when nothing is due. Drops the entries of locks that were stopped, released or
    /// dropped; leaves for later a lock whose previous extension is still settling.
    fn take(&self, now: Instant, size: usize) -> Option<(Taken, bool)> {
        let mut reg = self.registry();
        let due = |q: &BTreeMap<(Instant, u64), Arc<Entry>>| {
            q.first_key_value().is_some_and(|((due, _), _)| *due <= now)
        };
        let retry = due(&reg.retries);
        if !retry && !due(&reg.queue) {
            return None;
        }
        let horizon = if retry { now } else { now + reg.max_slack };
        let queue = if retry { &reg.retries } else { &reg.queue };
        let mut keys = Vec::new();
        let mut bytes = 0;
        for (key, entry) in queue.range(..=(horizon, u64::MAX)) {
            if keys.len() >= size || bytes >= MAX_BATCH_BYTES {
                break;
            }
            let early_enough = retry
                || key
                    .0
                    .checked_sub(entry.plan.slack)
                    .is_none_or(|early| early <= now);
            if !entry.current() || early_enough {
                keys.push(*key);
                bytes += entry.wire_size();
            }
        }
        let mut taken = Vec::with_capacity(keys.len());
        let mut deferred = Vec::new();
        for key in keys {
            let queue = if retry {
                &mut reg.retries
            } else {
                &mut reg.queue
            };
            let Some(entry) = queue.remove(&key) else {
                continue;
            };
            // The gate is held while this lock's extension is in flight; stopping a renewal
            // bumps the generation first, then waits for the gate, so no extension can follow
            // a release.
            match entry.lock.control.gate.clone().try_lock_owned() {
                // Checked again with the gate held: a stop (a release) that came in between
                // bumped the generation, and no extension may follow it.
                Ok(guard) if entry.current() => taken.push((key.0, entry, guard)),
                // Still current, gate held: the lock's previous extension is settling (its
                // last masters have until the node timeout); try again a little later.
                Err(_) if entry.current() => deferred.push(entry),
                // Stopped: the stop removes it for good.
                _ => reg.retire(&entry),
            }
        }
        let later = now + self.node_timeout / 10;
        for entry in deferred {
            let queue = if retry {
                &mut reg.retries
            } else {
                &mut reg.queue
            };
            queue.insert((later, entry.id), entry);
        }
        reg.in_flight += taken.len();
        for (_, entry, _) in &taken {
            reg.taken.insert(entry.id, entry.clone());
        }
        Some((taken, retry))
    }

    /// Sends a batch to every master (but those with too many calls outstanding), after
    /// dropping the locks that were lost or ran out meanwhile.
    fn dispatch(&self, taken: Taken, retry: bool) -> Option<Batch> {
        let now = Instant::now();
        let mut live = Vec::with_capacity(taken.len());
        let mut lateness = Vec::new();
        let mut dropped = 0;
        let mut kept_ids = Vec::with_capacity(taken.len());
        let taken_ids: Vec<u64> = taken.iter().map(|(_, e, _)| e.id).collect();
        for (due, entry, guard) in taken {
            let status = entry.lock.status();
            if status.lost.is_some() {
                dropped += 1;
                self.finish(&entry, "the lock was lost");
            } else if now >= status.deadline {
                dropped += 1;
                self.lose(&entry, LossReason::Expired);
            } else {
                kept_ids.push(entry.id);
                if !retry {
                    let late = now.saturating_duration_since(due);
                    lateness.push((late, status.deadline - now, entry.spare()));
                }
                live.push((entry, guard));
            }
        }
        {
            let mut tuning = self.tuning();
            for (late, left, spare) in lateness {
                tuning.meter.renewal_sent(late, left, spare);
            }
            if !live.is_empty() {
                tuning.meter.batch_sent(now);
            }
        }
        if dropped > 0 {
            let mut reg = self.registry();
            reg.in_flight = reg.in_flight.saturating_sub(dropped);
            for id in taken_ids.iter().filter(|id| !kept_ids.contains(id)) {
                reg.taken.remove(id);
            }
        }
        if live.is_empty() {
            return None;
        }
        self.ticks.fetch_add(1, Ordering::Relaxed);
        if retry {
            // Renewals that failed, sent again.
            self.retried.fetch_add(1, Ordering::Relaxed);
            self.failed.fetch_add(live.len() as u64, Ordering::Relaxed);
        }
        self.extending.fetch_add(live.len(), Ordering::SeqCst);
        let reqs: Arc<[Arc<Request>]> = live.iter().map(|(e, _)| e.lock.req.clone()).collect();
        let calls = FuturesUnordered::new();
        let mut skipped = 0;
        let silent_since = now.checked_sub(self.node_timeout * LATE_ANSWERS);
        let answered = self
            .answered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        for (master, outstanding) in self.pending.iter().enumerate() {
            let silent =
                answered[master].is_none_or(|at| silent_since.is_some_and(|since| at < since));
            if silent && outstanding.load(Ordering::Relaxed) >= MAX_PENDING {
                skipped += 1;
                continue;
            }
            self.round_trips[master].fetch_add(1, Ordering::Relaxed);
            calls.push(Tagged {
                master,
                call: self.call(master, reqs.clone()),
            });
        }
        if skipped > 0 {
            tracing::debug!(
                skipped,
                "renewal batch skips masters with too many calls outstanding"
            );
        }
        Some(Batch::new(live, calls, skipped, self.node_timeout))
    }

    /// One master's round trip for `reqs`, timed from its first poll (which hands the
    /// pipeline over to the connection).
    fn call(&self, master: usize, reqs: Arc<[Arc<Request>]>) -> Call {
        let nodes = self.nodes.clone();
        self.pending[master].fetch_add(1, Ordering::Relaxed);
        let outstanding = Outstanding(self.pending.clone(), master);
        let answered = self.answered.clone();
        Box::pin(async move {
            let _outstanding = outstanding;
            let sent = Instant::now();
            let votes = nodes[master].extend_many(&reqs).await;
            let now = Instant::now();
            answered.lock().unwrap_or_else(PoisonError::into_inner)[master] = Some(now);
            (votes, now - sent)
        })
    }

    /// Applies a decided batch: moves each lock on (next renewal, retry, loss, end). A failed renewal that late answers may still complete
    /// waits for its retry with its key kept in the batch, to be rescued.
    fn decided(&self, batch: &mut Batch) {
        let now = Instant::now();
        let n = self.nodes.len();
        let mut updates = Vec::with_capacity(batch.entries.len());
        for (i, (t, entry)) in batch.tallies.iter().zip(&batch.entries).enumerate() {
            let q = entry.lock.req.quorum(n);
            if t.granted >= q {
                self.renewed.fetch_add(1, Ordering::Relaxed);
                metrics::renewed(metrics::Kept::Ok, 1);
                if let Some(due) = self.next_after(entry, batch.start, now) {
                    updates.push((None, due, entry.clone()));
                }
            } else if t.taken >= q {
                self.lose(entry, LossReason::NotOurs { masters: t.taken });
            } else {
                let deadline = entry.lock.status().deadline;
                match retry_at(now, deadline, self.node_timeout) {
                    Some(at) => {
                        metrics::renewed(metrics::Kept::Failed, 1);
                        tracing::debug!(
                            granted = t.granted,
                            failed = t.failed,
                            outstanding = batch.outstanding(),
                            "renewal failed; retrying"
                        );
                        updates.push((Some(i), at, entry.clone()));
                    }
                    None => self.lose(entry, LossReason::Expired),
                }
            }
        }
        {
            let mut reg = self.registry();
            reg.in_flight = reg.in_flight.saturating_sub(batch.entries.len());
            for entry in &batch.entries {
                reg.taken.remove(&entry.id);
            }
            for (failed, due, entry) in updates {
                let key = (due, entry.id);
                if !entry.current() {
                    reg.retire(&entry);
                } else if let Some(i) = failed {
                    if batch.may_still_extend(i) {
                        batch.retries[i] = Some(key);
                    }
                    reg.retries.insert(key, entry);
                } else {
                    reg.queue.insert(key, entry);
                }
            }
        }
    }

    /// A batch is done for the back-pressure meter: its quorum has answered (in time or
    /// late), or it was given up on. Closes the meter's window when it is over, and warns
    /// while the renewals do not keep up.
    fn done(&self, renewals: usize) {
        let now = Instant::now();
        let load = {
            let mut tuning = self.tuning();
            tuning.meter.batch_done(now, renewals);
            tuning.meter.tick(now).then(|| {
                let (held, interval) = self.registry().held();
                let load = tuning.meter.load(held, interval);
                (load, tuning.meter.should_warn(now, &load))
            })
        };
        if let Some((load, (warn, recovered))) = load {
            if warn {
                tracing::warn!(
                    held = load.held,
                    interval = ?load.interval,
                    renewal_time = ?load.renewal_time,
                    headroom = load.headroom(),
                    late = ?load.late,
                    least_left = ?load.least_left,
                    "renewal is overloaded: {load}; locks will be lost if it gets worse: keep fewer locks alive per client, or lengthen their ttl"
                );
            } else if recovered {
                tracing::info!(%load, "renewal keeps up again");
            }
        }
    }

    /// After a successful extension that started at `start`: when the next one is due, or
    /// `None` when a hold limit ends the renewals (the lock then runs out at its deadline).
    fn next_after(&self, entry: &Entry, start: Instant, now: Instant) -> Option<Instant> {
        let done = entry.extensions.fetch_add(1, Ordering::SeqCst) + 1;
        let over_count = entry.plan.max_extensions.is_some_and(|max| done >= max);
        let over_time = entry
            .plan
            .max_hold
            .is_some_and(|max| now - entry.started >= max);
        if over_count || over_time {
            self.finish(
                entry,
                "the hold limit was reached; the lock runs out at its deadline",
            );
            return None;
        }
        Some(start + entry.plan.every)
    }

    /// Late answers completed the quorum of a renewal that was waiting for its retry under
    /// `key`: the retry is cancelled and the next renewal scheduled. (A retry already taken
    /// goes anyway: it finds its lock extended, which is harmless.)
    fn rescue(&self, key: (Instant, u64), start: Instant) {
        let Some(entry) = self.registry().retries.remove(&key) else {
            return;
        };
        self.rescued.fetch_add(1, Ordering::Relaxed);
        self.renewed.fetch_add(1, Ordering::Relaxed);
        metrics::renewed(metrics::Kept::Ok, 1);
        if let Some(due) = self.next_after(&entry, start, Instant::now()) {
            self.registry().queue.insert((due, entry.id), entry);
        }
    }

    fn lose(&self, entry: &Entry, reason: LossReason) {
        self.lost.fetch_add(1, Ordering::Relaxed);
        metrics::renewed(metrics::Kept::Lost, 1);
        tracing::warn!(resources = ?entry.lock.resources, %reason, "lock lost");
        entry.lock.mark_lost(reason);
        self.finish(entry, "the lock was lost");
    }

    /// Forgets a lock for good (its batch, if any, counts it out of `in_flight`).
    fn finish(&self, entry: &Entry, why: &str) {
        let mut reg = self.registry();
        reg.retire(entry);
        drop(reg);
        tracing::debug!(resources = ?entry.lock.resources, why, "renewal stopped");
    }
}

/// Starts the renewal task on `handle`; `tried` are the runtimes of this chain of
/// hand-overs (see [`Exit`]), `handle`'s included. Called without the registry's lock: on
/// a runtime that is shutting down, `spawn` drops the task at once, and its exit takes it.
fn spawn<V: Voter>(inner: &Arc<Inner<V>>, handle: &Handle, tried: Vec<Id>) {
    let exit = Exit {
        inner: Arc::downgrade(inner),
        tried,
        armed: true,
    };
    drop(handle.spawn(inner.clone().run(exit)));
}

/// The renewal task's end. Disarmed when the task ends because nothing is left to renew;
/// dropped armed — its runtime shut down, before or during its first poll — it puts the
/// renewals of undecided batches back in the queue (due at once), forgets those batches,
/// and hands the queue to a new task on the runtime of a lock in it, skipping the runtimes
/// already `tried` in this chain (each of them has shut down). With no such lock the task
/// is marked stopped, and the next keep-alive starts one.
struct Exit<V: Voter> {
    inner: Weak<Inner<V>>,
    tried: Vec<Id>,
    armed: bool,
}

impl<V: Voter> Drop for Exit<V> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        // The batches died with the task: none is undecided, none extends any more.
        inner.undecided.store(0, Ordering::SeqCst);
        inner.extending.store(0, Ordering::SeqCst);
        let next = {
            let mut reg = inner.registry();
            let now = Instant::now();
            for (id, entry) in std::mem::take(&mut reg.taken) {
                if entry.current() {
                    reg.queue.insert((now, id), entry);
                } else {
                    reg.retire(&entry);
                }
            }
            reg.in_flight = 0;
            let next = reg
                .queue
                .values()
                .chain(reg.retries.values())
                .map(|e| &e.lock.handle)
                .find(|h| !self.tried.contains(&h.id()))
                .cloned();
            reg.running = next.is_some();
            next
        };
        match next {
            Some(handle) => {
                tracing::debug!("the renewal task's runtime shut down; renewing from another");
                let mut tried = std::mem::take(&mut self.tried);
                tried.push(handle.id());
                spawn(&inner, &handle, tried);
            }
            None => tracing::debug!("the renewal task's runtime shut down"),
        }
    }
}

/// When to retry a failed renewal: a quarter of the validity left from now, at least one
/// node timeout away, and early enough for the retry to finish before the deadline; `None`
/// once no retry can start before the deadline.
fn retry_at(now: Instant, deadline: Instant, node_timeout: Duration) -> Option<Instant> {
    let left = deadline
        .checked_duration_since(now)
        .filter(|l| !l.is_zero())?;
    let latest = left.saturating_sub(node_timeout);
    Some(now + (left / 4).max(node_timeout).min(latest))
}

#[cfg(test)]
mod tests;
