//! Automatic extension of held locks, batched: one task per client renews every kept-alive
//! lock, and renewals due in the same tick travel in one pipelined round trip per master.
//!
//! Each renewal is an entry in a queue ordered by due time. The task sleeps until the
//! earliest entry is due, then takes every entry that is due or nearly due (within its
//! slack, a quarter of its interval: renewing a little early is harmless and lets locks
//! taken at different moments fall into the same batch, where they then stay, since a
//! batch reschedules its locks together). It sends one pipeline per master, pushes each
//! lock's deadline back as soon as a quorum has extended it, retries failed renewals while
//! the lock is still valid, and marks a lock lost when a quorum says the key is not ours
//! or its deadline passes. The task exits when the queue is empty.
//!
//! The task runs on the runtime of the keep-alive that started it. If that runtime shuts
//! down first (a client used from several runtimes: see `connection`'s docs on runtimes),
//! the task's [`Exit`] puts the renewals it had in flight back in the queue and hands the
//! queue to a new task on the runtime of a lock still in it — one not tried yet in this
//! chain of hand-overs, so that dead runtimes are not tried in a circle — or, with none
//! left, lets the next keep-alive start one.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::runtime::{Handle, Id};
use tokio::sync::{Notify, OwnedMutexGuard};
use tokio::time::Instant;

pub use stats::RenewalStats;

use crate::error::LossReason;
use crate::failure::NodeFailure;
use crate::held::Held;
use crate::quorum::Voter;

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
    fn current(&self) -> bool {
        self.lock.control.generation.load(Ordering::SeqCst) == self.generation
    }
}

#[derive(Default)]
struct Registry {
    queue: BTreeMap<(Instant, u64), Arc<Entry>>,
    /// The entries of the batch being renewed, by id: taken out of the queue, and put back
    /// by the task's exit if the task dies with them.
    taken: BTreeMap<u64, Arc<Entry>>,
    in_flight: usize,
    next_id: u64,
    running: bool,
    max_slack: Duration,
}

/// The per-client renewal task and its queue.
pub(crate) struct Renewer<V: Voter> {
    inner: Arc<Inner<V>>,
}

struct Inner<V> {
    nodes: Arc<[V]>,
    node_timeout: Duration,
    registry: Mutex<Registry>,
    wake: Notify,
    ticks: AtomicU64,
    round_trips: Vec<AtomicU64>,
    renewed: AtomicU64,
    failed: AtomicU64,
    lost: AtomicU64,
}

impl<V: Voter> Renewer<V> {
    pub(crate) fn new(nodes: Arc<[V]>, node_timeout: Duration) -> Self {
        let round_trips = nodes.iter().map(|_| AtomicU64::new(0)).collect();
        Self {
            inner: Arc::new(Inner {
                nodes,
                node_timeout,
                registry: Mutex::new(Registry::default()),
                wake: Notify::new(),
                ticks: AtomicU64::new(0),
                round_trips,
                renewed: AtomicU64::new(0),
                failed: AtomicU64::new(0),
                lost: AtomicU64::new(0),
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
        let entry = Arc::new(Entry {
            id,
            lock,
            plan,
            generation,
            started: Instant::now(),
            extensions: AtomicU32::new(0),
        });
        let earliest = reg.queue.first_key_value().map(|((due, _), _)| *due);
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
            let live = reg.queue.values().filter(|e| e.current()).count();
            (live + reg.in_flight, reg.running)
        };
        RenewalStats {
            scheduled,
            task_running,
            ticks: inner.ticks.load(Ordering::Relaxed),
            round_trips: inner
                .round_trips
                .iter()
                .map(|c| c.load(Ordering::Relaxed))
                .collect(),
            renewed: inner.renewed.load(Ordering::Relaxed),
            failed: inner.failed.load(Ordering::Relaxed),
            lost: inner.lost.load(Ordering::Relaxed),
        }
    }
}

/// Per-lock vote counts within one tick.
#[derive(Default, Clone, Copy)]
struct Tally {
    granted: usize,
    taken: usize,
    failed: usize,
    decided: bool,
}

impl<V: Voter> Inner<V> {
    fn registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The renewal task. `exit` is an argument, not a local: it is dropped with the task
    /// even if the task is never polled.
    async fn run(self: Arc<Self>, mut exit: Exit<V>) {
        tracing::debug!("renewal task started");
        loop {
            let next = {
                let mut reg = self.registry();
                match reg.queue.first_key_value() {
                    Some(((due, _), _)) => *due,
                    None => {
                        reg.running = false;
                        exit.armed = false;
                        break;
                    }
                }
            };
            tokio::select! {
                () = tokio::time::sleep_until(next) => {}
                () = self.wake.notified() => continue,
            }
            let batch = self.take_due(Instant::now());
            if !batch.is_empty() {
                self.renew(batch).await;
            }
        }
        tracing::debug!("renewal task stopped: nothing left to renew");
    }

    /// Removes and returns every current entry that is due within its slack; drops the
    /// entries of locks that were stopped, released or dropped.
    fn take_due(&self, now: Instant) -> Vec<(Arc<Entry>, OwnedMutexGuard<()>)> {
        let mut reg = self.registry();
        let horizon = now + reg.max_slack;
        let keys: Vec<(Instant, u64)> = reg
            .queue
            .range(..=(horizon, u64::MAX))
            .filter(|((due, _), e)| {
                !e.current()
                    || due
                        .checked_sub(e.plan.slack)
                        .is_none_or(|early| early <= now)
            })
            .map(|(k, _)| *k)
            .collect();
        let mut batch = Vec::with_capacity(keys.len());
        for key in keys {
            let Some(entry) = reg.queue.remove(&key) else {
                continue;
            };
            if !entry.current() {
                continue;
            }
            // The gate is held while this lock's extension is in flight; stopping a renewal
            // waits for it, so no extension can follow a release.
            match entry.lock.control.gate.clone().try_lock_owned() {
                // Checked again with the gate held: a stop (a release) that came in between
                // bumped the generation, and no extension may follow it.
                Ok(guard) if entry.current() => batch.push((entry, guard)),
                _ => {
                    // Being stopped right now, or just stopped: the stop removes it for good.
                }
            }
        }
        reg.in_flight += batch.len();
        for (entry, _) in &batch {
            reg.taken.insert(entry.id, entry.clone());
        }
        batch
    }

    /// Renews `batch`; its entries leave `taken` once each is back in the queue or done.
    async fn renew(&self, batch: Vec<(Arc<Entry>, OwnedMutexGuard<()>)>) {
        let ids: Vec<u64> = batch.iter().map(|(e, _)| e.id).collect();
        self.renew_batch(batch).await;
        let mut reg = self.registry();
        for id in ids {
            reg.taken.remove(&id);
        }
    }

    async fn renew_batch(&self, batch: Vec<(Arc<Entry>, OwnedMutexGuard<()>)>) {
        let start = Instant::now();
        let mut live = Vec::with_capacity(batch.len());
        for (entry, guard) in batch {
            let status = entry.lock.status();
            if status.lost.is_some() {
                self.finish(&entry, "the lock was lost");
            } else if start >= status.deadline {
                self.lose(&entry, LossReason::Expired);
            } else {
                live.push((entry, guard));
            }
        }
        if live.is_empty() {
            return;
        }
        self.ticks.fetch_add(1, Ordering::Relaxed);
        let n = self.nodes.len();
        let reqs: Arc<[_]> = live.iter().map(|(e, _)| e.lock.req.clone()).collect();
        let mut calls: FuturesUnordered<_> = (0..n)
            .map(|i| {
                let reqs = reqs.clone();
                self.round_trips[i].fetch_add(1, Ordering::Relaxed);
                async move {
                    let call = self.nodes[i].extend_many(&reqs);
                    let result = tokio::time::timeout(self.node_timeout, call)
                        .await
                        .unwrap_or(Err(NodeFailure::Timeout(self.node_timeout)));
                    (i, result)
                }
            })
            .collect();
        let mut tallies = vec![Tally::default(); live.len()];
        while let Some((node, result)) = calls.next().await {
            match result {
                Ok(votes) if votes.len() == live.len() => {
                    for (t, v) in tallies.iter_mut().zip(votes) {
                        match v {
                            Ok(true) => t.granted += 1,
                            Ok(false) => t.taken += 1,
                            Err(_) => t.failed += 1,
                        }
                    }
                }
                other => {
                    if let Err(failure) = &other {
                        tracing::debug!(node, %failure, "renewal round trip failed");
                    }
                    tallies.iter_mut().for_each(|t| t.failed += 1);
                }
            }
            // A lock's deadline moves as soon as its quorum is in.
            for (t, (entry, _)) in tallies.iter_mut().zip(&live) {
                if !t.decided && t.granted >= entry.lock.req.quorum(n) {
                    t.decided = true;
                    let timing = entry.lock.timing;
                    entry
                        .lock
                        .push_deadline(start + (timing.ttl - timing.drift));
                }
            }
        }
        let now = Instant::now();
        let mut reg_updates = Vec::new();
        for (t, (entry, guard)) in tallies.into_iter().zip(live) {
            let q = entry.lock.req.quorum(n);
            if t.granted >= q {
                self.renewed.fetch_add(1, Ordering::Relaxed);
                let done = entry.extensions.fetch_add(1, Ordering::SeqCst) + 1;
                let over_count = entry.plan.max_extensions.is_some_and(|max| done >= max);
                let over_time = entry
                    .plan
                    .max_hold
                    .is_some_and(|max| now - entry.started >= max);
                if over_count || over_time {
                    self.finish(
                        &entry,
                        "the hold limit was reached; the lock runs out at its deadline",
                    );
                } else {
                    reg_updates.push((start + entry.plan.every, entry));
                }
            } else if t.taken >= q {
                self.lose(&entry, LossReason::NotOurs { masters: t.taken });
            } else {
                self.failed.fetch_add(1, Ordering::Relaxed);
                let deadline = entry.lock.status().deadline;
                match retry_at(now, deadline, self.node_timeout) {
                    Some(at) => {
                        tracing::debug!(
                            granted = t.granted,
                            failed = t.failed,
                            "renewal failed; retrying"
                        );
                        reg_updates.push((at, entry));
                    }
                    None => self.lose(&entry, LossReason::Expired),
                }
            }
            drop(guard);
        }
        let mut reg = self.registry();
        reg.in_flight = reg.in_flight.saturating_sub(reg_updates.len());
        for (due, entry) in reg_updates {
            if entry.current() {
                reg.queue.insert((due, entry.id), entry);
            }
        }
    }

    fn lose(&self, entry: &Entry, reason: LossReason) {
        self.lost.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(resources = ?entry.lock.resources, %reason, "lock lost");
        entry.lock.mark_lost(reason);
        self.finish(entry, "the lock was lost");
    }

    fn finish(&self, entry: &Entry, why: &str) {
        let mut reg = self.registry();
        reg.in_flight = reg.in_flight.saturating_sub(1);
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
/// renewals that were in flight back in the queue (due at once) and hands the queue to a
/// new task on the runtime of a lock in it, skipping the runtimes already `tried` in this
/// chain (each of them has shut down). With no such lock the task is marked stopped, and
/// the next keep-alive starts one.
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
        let next = {
            let mut reg = inner.registry();
            let now = Instant::now();
            for (id, entry) in std::mem::take(&mut reg.taken) {
                if entry.current() {
                    reg.queue.insert((now, id), entry);
                }
            }
            reg.in_flight = 0;
            let next = reg
                .queue
                .values()
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

mod stats;
#[cfg(test)]
mod tests;
