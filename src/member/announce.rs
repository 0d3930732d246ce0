//! Release announcements (DESIGN §2.9): every release script `PUBLISH`es on a channel named
//! like each lock key it deleted, and a waiting caller is woken by them instead of polling.
//!
//! One subscription connection per master per client, shared by all its waiters: a
//! [`Waiter`] joins the channels of its lock (a reference count per channel), `SUBSCRIBE`s
//! on the masters where they are not subscribed yet — and waits for the server's
//! confirmation, so that anything published after its next attempt is heard — and leaves
//! them when dropped; the last waiter of a channel `UNSUBSCRIBE`s it. Memory is one entry per
//! channel with waiters, whatever their number: each channel counts the announcements heard
//! per master, and a waiter compares them with its own snapshot taken before its attempt.
//!
//! A master that refuses `SUBSCRIBE` (a proxy that does not pass it, an ACL without pub/sub
//! permission) is left to the polling fallback for [`REFUSED_PAUSE`] and named in
//! [`Announcements::refused`] (health and `probe` show it). A subscription connection that
//! breaks counts as an announcement on every channel (the waiters try again, which costs a
//! round trip, rather than sleep through a release they could no longer hear) and is made
//! again by the next waiter.
//!
//! On a Redis Cluster member the same channel names work with `SSUBSCRIBE` / `SPUBLISH`
//! (a channel named like the key hashes to the key's slot), so the announcement stays on the
//! shard that holds the key instead of being broadcast to the whole cluster.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use futures::StreamExt;
use redis::aio::PubSubSink;
use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::error::node_failure::{NodeFailure, classify};
use crate::member::connection::Connection;

/// How long a master that refused `SUBSCRIBE` is left to polling before it is asked again.
pub(crate) const REFUSED_PAUSE: Duration = Duration::from_secs(30);

/// A client's subscriptions, one connection per master.
#[derive(Debug)]
pub(crate) struct Announcements {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// The channels some waiter is in, by name.
    channels: Mutex<HashMap<Arc<str>, Entry>>,
    /// How many channels `channels` holds, written under its lock: read without it on
    /// every `lock()` (see [`Announcements::active`]), so that a client nobody waits on
    /// takes no lock and builds no channel name before its first attempt.
    in_use: AtomicUsize,
    masters: Box<[Subscriber]>,
    timeout: Duration,
}

#[derive(Debug)]
struct Entry {
    channel: Arc<Channel>,
    waiters: usize,
}

/// Whose turn it is among this client's waiters for a lock (see [`Waiter::turn`]).
pub(crate) type Turn = tokio::sync::OwnedSemaphorePermit;

/// One channel: what each master announced on it, and who to wake.
#[derive(Debug)]
struct Channel {
    /// Announcements heard, per master.
    heard: Box<[AtomicU64]>,
    /// Whether the master confirmed the subscription (and has not lost it since).
    subscribed: Box<[AtomicBool]>,
    notify: Notify,
    /// One permit: the waiter of this client whose turn it is to ask the masters.
    turn: Arc<tokio::sync::Semaphore>,
}

/// One master's subscription connection.
#[derive(Debug)]
struct Subscriber {
    conn: Arc<Connection>,
    /// The connection's sink and the generation of its reading task; the async lock orders
    /// every `SUBSCRIBE` and `UNSUBSCRIBE` on it against the channel table.
    sink: tokio::sync::Mutex<Option<(PubSubSink, u64)>>,
    generation: AtomicU64,
    task: Mutex<Option<AbortHandle>>,
    refused: Mutex<Option<(Instant, NodeFailure)>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Announcements {
    pub(crate) fn new(conns: impl IntoIterator<Item = Arc<Connection>>, timeout: Duration) -> Self {
        let masters = conns
            .into_iter()
            .map(|conn| Subscriber {
                conn,
                sink: tokio::sync::Mutex::new(None),
                generation: AtomicU64::new(0),
                task: Mutex::new(None),
                refused: Mutex::new(None),
            })
            .collect();
        Self {
            shared: Arc::new(Shared {
                channels: Mutex::new(HashMap::new()),
                in_use: AtomicUsize::new(0),
                masters,
                timeout,
            }),
        }
    }

    /// Masters that refused `SUBSCRIBE` within the last [`REFUSED_PAUSE`], with why: their
    /// waiters poll.
    pub(crate) fn refused(&self) -> Vec<(usize, NodeFailure)> {
        self.shared
            .masters
            .iter()
            .enumerate()
            .filter_map(|(i, m)| {
                lock(&m.refused)
                    .as_ref()
                    .filter(|(at, _)| at.elapsed() < REFUSED_PAUSE)
                    .map(|(_, why)| (i, why.clone()))
            })
            .collect()
    }

    /// Whether any waiter of this client is subscribed anywhere: when not (the common,
    /// uncontended case) a call's first attempt goes out plain without looking further.
    /// Read without the table's lock, so it may be stale by a join or a leave: a stale
    /// `false` costs the caller a subscription round trip after a refusal, a stale `true`
    /// a look at the table — never a missed announcement (a waiter always subscribes,
    /// confirmed, before the attempt whose refusal makes it wait).
    pub(crate) fn any(&self) -> bool {
        self.shared.in_use.load(Ordering::Acquire) > 0
    }

    /// Whether every one of `names` has waiters already and is subscribed on every master
    /// that did not refuse: then a new waiter joins without a round trip.
    pub(crate) fn active(&self, names: &[String]) -> bool {
        if !self.any() {
            return false;
        }
        let channels = lock(&self.shared.channels);
        names.iter().all(|name| {
            channels.get(name.as_str()).is_some_and(|e| {
                e.channel
                    .subscribed
                    .iter()
                    .enumerate()
                    .all(|(i, s)| s.load(Ordering::Acquire) || self.shared.is_refused(i))
            })
        })
    }

    /// Joins the channels `names` (no I/O: see [`Waiter::subscribe`]).
    pub(crate) fn join(&self, names: &[String]) -> Waiter {
        let n = self.shared.masters.len();
        let mut table = lock(&self.shared.channels);
        let channels = names
            .iter()
            .map(|name| {
                let entry = table
                    .entry(Arc::from(name.as_str()))
                    .or_insert_with(|| Entry {
                        channel: Arc::new(Channel {
                            heard: (0..n).map(|_| AtomicU64::new(0)).collect(),
                            subscribed: (0..n).map(|_| AtomicBool::new(false)).collect(),
                            notify: Notify::new(),
                            turn: Arc::new(tokio::sync::Semaphore::new(1)),
                        }),
                        waiters: 0,
                    });
                entry.waiters += 1;
                (Arc::from(name.as_str()), entry.channel.clone())
            })
            .collect();
        self.shared.in_use.store(table.len(), Ordering::Release);
        Waiter {
            shared: self.shared.clone(),
            channels,
        }
    }
}

impl Drop for Announcements {
    fn drop(&mut self) {
        for m in &self.shared.masters {
            if let Some(task) = lock(&m.task).take() {
                task.abort();
            }
        }
    }
}

impl Shared {
    fn is_refused(&self, i: usize) -> bool {
        lock(&self.masters[i].refused)
            .as_ref()
            .is_some_and(|(at, _)| at.elapsed() < REFUSED_PAUSE)
    }

    /// Subscribes master `i` to `names` (those of them still in the table), connecting
    /// first if needed; returns once the server confirmed, or failed.
    async fn subscribe(self: &Arc<Self>, i: usize, names: Vec<Arc<str>>) {
        let master = &self.masters[i];
        if self.is_refused(i) {
            return;
        }
        let mut sink = master.sink.lock().await;
        if sink.is_none() {
            match master.conn.pubsub().await {
                Ok(pubsub) => {
                    let (new, mut stream) = pubsub.split();
                    let generation = master.generation.fetch_add(1, Ordering::SeqCst) + 1;
                    let weak: Weak<Self> = Arc::downgrade(self);
                    let task = tokio::spawn(async move {
                        while let Some(msg) = stream.next().await {
                            let Some(shared) = weak.upgrade() else { return };
                            let table = lock(&shared.channels);
                            if let Some(entry) = table.get(msg.get_channel_name()) {
                                entry.channel.heard[i].fetch_add(1, Ordering::AcqRel);
                                entry.channel.notify.notify_waiters();
                            }
                        }
                        if let Some(shared) = weak.upgrade() {
                            shared.lost(i, generation).await;
                        }
                    });
                    if let Some(old) = lock(&master.task).replace(task.abort_handle()) {
                        old.abort();
                    }
                    *sink = Some((new, generation));
                }
                Err(failure) => {
                    tracing::debug!(node = i, %failure, "no subscription connection");
                    return;
                }
            }
        }
        let Some((sink_ref, _)) = sink.as_mut() else {
            return;
        };
        // Only the names still wanted: a waiter may have left while we connected.
        let wanted: Vec<(Arc<str>, Arc<Channel>)> = {
            let table = lock(&self.channels);
            names
                .iter()
                .filter_map(|name| table.get(name).map(|e| (name.clone(), e.channel.clone())))
                .collect()
        };
        if wanted.is_empty() {
            return;
        }
        let list: Vec<&str> = wanted.iter().map(|(name, _)| &**name).collect();
        match tokio::time::timeout(self.timeout, sink_ref.subscribe(&list)).await {
            Ok(Ok(())) => {
                for (_, channel) in &wanted {
                    channel.subscribed[i].store(true, Ordering::Release);
                }
            }
            Ok(Err(err)) => {
                let failure = classify(err);
                tracing::info!(node = i, %failure, "SUBSCRIBE refused: waiters poll this master");
                *lock(&master.refused) = Some((Instant::now(), failure));
                *sink = None;
            }
            Err(_) => {
                *sink = None;
            }
        }
    }

    /// The subscription connection of master `i` (of `generation`) broke: every channel it
    /// carried is unsubscribed there, and counts it as an announcement, so that waiters try
    /// again instead of sleeping through a release nobody could hear.
    async fn lost(&self, i: usize, generation: u64) {
        let mut sink = self.masters[i].sink.lock().await;
        if sink.as_ref().is_some_and(|(_, g)| *g == generation) {
            *sink = None;
        }
        drop(sink);
        for entry in lock(&self.channels).values() {
            entry.channel.subscribed[i].store(false, Ordering::Release);
            entry.channel.heard[i].fetch_add(1, Ordering::AcqRel);
            entry.channel.notify.notify_waiters();
        }
    }

    /// `UNSUBSCRIBE` of `name` on every master whose connection carries it, unless a waiter
    /// joined it again meanwhile (checked under each master's sink lock, which a new
    /// subscription takes too, so the two cannot cross).
    async fn unsubscribe(self: Arc<Self>, name: Arc<str>) {
        for master in &self.masters {
            let mut sink = master.sink.lock().await;
            if lock(&self.channels).contains_key(&name) {
                return;
            }
            if let Some((sink_ref, _)) = sink.as_mut() {
                let _ = tokio::time::timeout(self.timeout, sink_ref.unsubscribe(&*name)).await;
            }
        }
    }
}

/// A caller waiting for a lock: a member of its channels until dropped.
#[derive(Debug)]
pub(crate) struct Waiter {
    shared: Arc<Shared>,
    channels: Vec<(Arc<str>, Arc<Channel>)>,
}

impl Waiter {
    /// Subscribes every channel on every master where it is not subscribed yet (and that
    /// did not refuse recently), concurrently, each within the timeout; returns once each
    /// master confirmed or failed. Nothing to do — no I/O — when all are subscribed.
    pub(crate) async fn subscribe(&self) {
        let jobs = (0..self.shared.masters.len()).filter_map(|i| {
            let missing: Vec<Arc<str>> = self
                .channels
                .iter()
                .filter(|(_, c)| !c.subscribed[i].load(Ordering::Acquire))
                .map(|(name, _)| name.clone())
                .collect();
            (!missing.is_empty() && !self.shared.is_refused(i))
                .then(|| self.shared.subscribe(i, missing))
        });
        futures::future::join_all(jobs).await;
    }

    /// Waits for this waiter's turn among the client's waiters for the same lock, first
    /// come first served (tokio's semaphore is fair): only the holder of the turn asks the
    /// masters, so the client's own waiters never split a quorum's votes between them, and
    /// none is starved by the others. Waiters of other clients are kept apart by the
    /// jitter only.
    pub(crate) async fn turn(&self) -> Turn {
        let (_, first) = &self.channels[0];
        first
            .turn
            .clone()
            .acquire_owned()
            .await
            .expect("the turn semaphore is never closed")
    }

    /// Whether master `i` will announce a release of this lock to us.
    pub(crate) fn hears(&self, i: usize) -> bool {
        self.channels
            .iter()
            .all(|(_, c)| c.subscribed[i].load(Ordering::Acquire))
    }

    /// The announcements heard so far, per master (summed over the lock's channels): taken
    /// before an attempt, compared after it by [`announced`](Self::announced).
    pub(crate) fn heard(&self) -> Vec<u64> {
        (0..self.shared.masters.len())
            .map(|i| {
                self.channels
                    .iter()
                    .map(|(_, c)| c.heard[i].load(Ordering::Acquire))
                    .sum()
            })
            .collect()
    }

    /// Returns once at least `needed` of the masters in `from` announced a release since
    /// `since` (a [`heard`](Self::heard) snapshot). Cancel-safe; never returns when `needed`
    /// can not be met (the caller bounds it with the holder's expiry and its deadline).
    pub(crate) async fn announced(&self, since: &[u64], from: &[usize], needed: usize) {
        loop {
            // Registered before looking, so an announcement in between still wakes us.
            let mut waits: Vec<_> = self
                .channels
                .iter()
                .map(|(_, c)| Box::pin(c.notify.notified()))
                .collect();
            for w in &mut waits {
                w.as_mut().enable();
            }
            let now = self.heard();
            let count = from.iter().filter(|&&i| now[i] > since[i]).count();
            if count >= needed {
                return;
            }
            futures::future::select_all(waits).await;
        }
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let mut gone = Vec::new();
        {
            let mut table = lock(&self.shared.channels);
            for (name, _) in &self.channels {
                if let Some(entry) = table.get_mut(name) {
                    entry.waiters -= 1;
                    if entry.waiters == 0 {
                        table.remove(name);
                        gone.push(name.clone());
                    }
                }
            }
            self.shared.in_use.store(table.len(), Ordering::Release);
        }
        if gone.is_empty() {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let shared = self.shared.clone();
        drop(handle.spawn(async move {
            for name in gone {
                shared.clone().unsubscribe(name).await;
            }
        }));
    }
}
