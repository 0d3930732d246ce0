//! The `Redlock` client: acquisition with retries, over the configured masters.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::Instrument;

use crate::api::waiting;
use crate::config::builder::RedlockBuilder;
use crate::config::resources::Keys;
use crate::config::retry::RetryPolicy;
use crate::config::validated::Timing;
use crate::error::node_failure::NodeFailure;
use crate::error::{ConfigError, Error};
use crate::hold::client_core::Core;
use crate::hold::lock::Lock;
use crate::hold::renewal::RenewalStats;
use crate::kind::{KindRequest, LockKind};
use crate::member::announce::{Turn, Waiter};
use crate::member::restart_guard::Commission;
use crate::metrics;
use crate::protocol::quorum::{self, Request};
use crate::stats::AttemptStats;
use crate::value::LockValue;

/// A Redlock client over a fixed set of independent Redis masters.
///
/// Cheap to clone (an `Arc` inside): clone it into every task that locks, there is no need
/// to wrap it in another `Arc`. It keeps one multiplexed connection per master, made on
/// first use, and must be used from a tokio runtime. It may outlive that runtime and go on
/// from another (a static client shared by several `#[tokio::test]`s): what the first
/// runtime took with it — connections, background tasks — is made again on the next. A
/// call made while a multi-threaded runtime is shutting down may fail once.
///
/// ```no_run
/// # async fn run() -> Result<(), redquorum::Error> {
/// use redquorum::Redlock;
///
/// let redlock = Redlock::builder()
///     .nodes(["redis://10.0.0.1", "redis://10.0.0.2", "redis://10.0.0.3"])
///     .build()?;
/// let lock = redlock.lock("stock:4711").await?;
/// // … the critical section, finished before `lock.deadline()` …
/// lock.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Redlock {
    core: Arc<Core>,
}

impl fmt::Debug for Redlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.core.fmt(f)
    }
}

/// Per-call options for [`Redlock::lock_with`]: how long to wait for the lock, the lease
/// (ttl), retries, fencing.
///
/// `wait` plus `ttl` is Redisson's `tryLock(waitTime, leaseTime)`: try for up to `wait`
/// while another client holds the lock, and hold it for `ttl` (renew it with
/// [`Lock::keep_alive`] or use [`Redlock::with_lock`] to hold longer).
///
/// ```
/// use std::time::Duration;
/// use redquorum::LockOptions;
///
/// // tryLock(3 s, 10 s)
/// let options = LockOptions::new()
///     .wait(Duration::from_secs(3))
///     .ttl(Duration::from_secs(10));
/// # let _ = options;
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LockOptions {
    ttl: Option<Duration>,
    wait: Option<Duration>,
    retry: Option<RetryPolicy>,
    fencing: Option<bool>,
    kind: LockKind,
    prefer_writers: bool,
    /// Testing only (`--cfg redquorum_unsafe`): a quorum other than the kind's.
    quorum_override: Option<usize>,
    /// Poll (sleep the retry policy's delay) instead of waking on releases.
    poll: bool,
}

impl LockOptions {
    /// The client's defaults.
    pub const fn new() -> Self {
        Self {
            ttl: None,
            wait: None,
            retry: None,
            fencing: None,
            kind: LockKind::Mutex,
            prefer_writers: false,
            quorum_override: None,
            poll: false,
        }
    }

    /// Wait by polling — sleep the retry policy's delay between attempts, as before 0.x —
    /// instead of being woken by the release (default: off). A waiting call normally
    /// subscribes to the lock's release announcements before the attempt whose refusal makes
    /// it wait, and tries again as soon as enough masters announced a release that a quorum
    /// may grant, or when the holder's keys run out; it falls back to polling by itself on
    /// masters that refuse `SUBSCRIBE`. For comparisons (`redquorum bench --workload handover
    /// --poll`).
    ///
    /// ```
    /// use redquorum::LockOptions;
    /// let polling = LockOptions::new().poll(true);
    /// # let _ = polling;
    /// ```
    pub const fn poll(mut self, on: bool) -> Self {
        self.poll = on;
        self
    }

    /// **Testing only, and unsafe**: take the lock with `q` votes instead of the kind's
    /// quorum — e.g. a majority for a semaphore, to show the overlap its real quorum
    /// prevents. Only with `--cfg redquorum_unsafe`.
    #[cfg(redquorum_unsafe)]
    #[doc(hidden)]
    pub const fn quorum_override(mut self, q: usize) -> Self {
        self.quorum_override = Some(q);
        self
    }

    /// The kind of lock: a mutex (the default), a read or write hold of a read-write lock,
    /// or a semaphore permit. See [`read`](Self::read), [`write`](Self::write),
    /// [`permits`](Self::permits).
    pub const fn kind(mut self, kind: LockKind) -> Self {
        self.kind = kind;
        self
    }

    /// A read hold of the resource's read-write lock: shared with other readers, never with
    /// a writer. Never fenced (readers do not write).
    pub const fn read(self) -> Self {
        self.kind(LockKind::Read)
    }

    /// A write hold of the resource's read-write lock: exclusive of readers and writers.
    pub const fn write(self) -> Self {
        self.kind(LockKind::Write)
    }

    /// One of `k` permits of the resource's counting semaphore (every client of the
    /// resource must use the same `k`). Needs `⌊k·N/(k+1)⌋ + 1` of the `N` masters, not a
    /// majority: see [`Redlock::quorum`].
    pub const fn permits(self, k: usize) -> Self {
        self.kind(LockKind::Permit { k })
    }

    /// For a write hold: while readers hold the lock, leave a marker that keeps new readers
    /// out (for one ttl, renewed by each attempt), so that a stream of readers cannot starve
    /// the writer. Default: off.
    pub const fn prefer_writers(mut self, on: bool) -> Self {
        self.prefer_writers = on;
        self
    }

    /// Whether this lock gets a fencing token (overrides the client's
    /// [`fencing`](crate::RedlockBuilder::fencing)).
    pub const fn fencing(mut self, on: bool) -> Self {
        self.fencing = Some(on);
        self
    }

    /// This lock's ttl, the lease time (validated like the client's).
    pub const fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Keep trying for at most this long while the lock is held elsewhere (attempts as many
    /// as fit, spaced by the retry policy's delay); [`Duration::ZERO`] makes one attempt,
    /// like [`Redlock::try_lock`]. Overrides the attempt limit and timeout of the retry
    /// policy, keeps its delays.
    pub const fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// This call's retry policy (see also [`wait`](Self::wait)).
    pub const fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = Some(retry);
        self
    }

    pub(crate) fn kind_of(&self) -> LockKind {
        self.kind
    }

    pub(crate) fn ttl_or(&self, default: Duration) -> Duration {
        self.ttl.unwrap_or(default)
    }

    /// The retry policy this call runs with, starting from the client's `default`.
    fn policy(&self, default: RetryPolicy) -> RetryPolicy {
        let retry = self.retry.unwrap_or(default);
        match self.wait {
            None => retry,
            Some(wait) if wait.is_zero() => RetryPolicy::once(),
            Some(wait) => retry.unlimited_attempts().timeout(wait),
        }
    }
}

// `build` lives here, next to the type it builds, so that the builder's module stays below
// the client's (the only split `impl` of `RedlockBuilder`).
impl RedlockBuilder {
    /// Validates every option and builds the client. No connection is made here.
    pub fn build(self) -> Result<Redlock, ConfigError> {
        let validated = self.validate()?;
        Ok(Redlock {
            core: Arc::new(Core::new(validated)),
        })
    }
}

// Locking, the guard's operator actions and connecting; `with_lock` is in `scope.rs` and
// `health` in `health.rs`, each next to its own types.
impl Redlock {
    /// A builder with every option at its default; add masters with
    /// [`node`](RedlockBuilder::node).
    pub fn builder() -> RedlockBuilder {
        RedlockBuilder::default()
    }

    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.core
    }

    /// Counters of the batched renewal of kept-alive locks: how many are scheduled, whether
    /// the renewal task runs, batches and round trips per master, failures, and whether the
    /// renewals keep up ([`RenewalStats::load`]).
    pub fn renewal_stats(&self) -> RenewalStats {
        self.core.renewer.stats()
    }

    /// Number of masters.
    pub fn nodes(&self) -> usize {
        self.core.nodes.len()
    }

    /// Votes needed among this client's masters for a lock of `kind`: a majority
    /// (`nodes / 2 + 1`) for a mutex and both holds of a read-write lock, `⌊k·N/(k+1)⌋ + 1` for
    /// one of `k` permits of a semaphore. When it is `N` — `k ≥ 4` on five masters — a
    /// single master down blocks every permit.
    ///
    /// ```
    /// # use redquorum::{LockKind, Redlock};
    /// # let redlock = Redlock::builder()
    /// #     .nodes(["redis://a:1", "redis://b:1", "redis://c:1", "redis://d:1", "redis://e:1"])
    /// #     .build()?;
    /// assert_eq!(redlock.quorum(LockKind::Mutex), 3);
    /// assert_eq!(redlock.quorum(LockKind::Permit { k: 2 }), 4);
    /// # Ok::<(), redquorum::ConfigError>(())
    /// ```
    pub fn quorum(&self, kind: LockKind) -> usize {
        kind.quorum(self.nodes())
    }

    /// The default lock ttl.
    pub fn ttl(&self) -> Duration {
        self.core.config.ttl
    }

    /// One attempt to lock `resource` with the client's ttl: succeeds if a quorum grants
    /// it, otherwise fails at once (typically [`Error::Contended`]) and releases whatever
    /// was granted.
    pub async fn try_lock(&self, resource: &str) -> Result<Lock, Error> {
        self.lock_with([resource], LockOptions::new().retry(RetryPolicy::once()))
            .await
    }

    /// Locks `resource` with the client's ttl, retrying per the client's retry policy.
    pub async fn lock(&self, resource: &str) -> Result<Lock, Error> {
        self.lock_with([resource], LockOptions::new()).await
    }

    /// Locks every resource in `resources` at once (all or none, on each master), with
    /// per-call options. Resource names must be non-empty; duplicates are ignored.
    pub async fn lock_with<I, S>(&self, resources: I, options: LockOptions) -> Result<Lock, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let config = &self.core.config;
        let ns = &config.keys;
        let keys = Keys::of_kind(ns, resources, options.kind)?;
        let timing = config.timing(options.ttl.unwrap_or(config.ttl))?;
        let retry = options.policy(config.retry);
        retry.validate()?;
        let fences = (options.fencing.unwrap_or(config.fencing) && options.kind != LockKind::Read)
            .then(|| keys.fences(ns));
        // A kind other than the mutex covers exactly one resource (`Keys::of_kind` checked).
        let resource = keys
            .resources
            .first()
            .map(String::as_str)
            .unwrap_or_default();
        let kind = match options.kind {
            LockKind::Read => KindRequest::Read {
                keys: ns.rw(resource),
            },
            LockKind::Write => KindRequest::Write {
                keys: ns.rw(resource),
                intent: LockValue::random(),
                prefer_writers: options.prefer_writers,
            },
            LockKind::Permit { k } => {
                if self.quorum(options.kind) == self.nodes() && self.nodes() > 1 {
                    self.core.warn_full_quorum(k);
                }
                KindRequest::Permit {
                    holders: ns.holders(resource),
                    k,
                }
            }
            _ => KindRequest::Mutex,
        };
        self.core.guard.raise_ttl(timing.ttl);
        // OpenTelemetry's database-client conventions where they fit: the system, the
        // client kind; votes, outcome and elapsed are recorded when the call ends.
        let span = tracing::info_span!(
            "redquorum.lock",
            "db.system.name" = "redis",
            "otel.kind" = "client",
            resources = ?keys.resources,
            kind = %options.kind,
            nodes = self.nodes(),
            quorum = self.quorum(options.kind),
            ttl_ms = timing.ttl.as_millis() as u64,
            votes = tracing::field::Empty,
            attempts = tracing::field::Empty,
            outcome = tracing::field::Empty,
            elapsed_us = tracing::field::Empty,
        );
        let timer = metrics::Timer::start();
        let started = Instant::now();
        let result = self
            .acquire(
                keys,
                fences,
                kind,
                options.quorum_override,
                timing,
                retry,
                options.poll,
            )
            .instrument(span.clone())
            .await;
        if !span.is_disabled() {
            record_span(&span, &result, started);
        }
        metrics::acquired(options.kind, self.quorum(options.kind), timer, || {
            metrics_outcome(&result)
        });
        result
    }

    #[allow(clippy::too_many_arguments)]
    async fn acquire(
        &self,
        keys: Keys,
        fences: Option<Arc<[String]>>,
        kind: KindRequest,
        quorum_override: Option<usize>,
        timing: Timing,
        retry: RetryPolicy,
        poll: bool,
    ) -> Result<Lock, Error> {
        let started = Instant::now();
        let deadline = retry.max_duration().and_then(|d| started.checked_add(d));
        // Announcements are for calls that may wait at all; their channel names are built
        // only when some waiter of this client is subscribed, or at the first refusal.
        let may_wait = !poll && retry.max_attempts() != Some(1);
        let announcements = &self.core.announcements;
        let mut channels: Option<Vec<String>> =
            (may_wait && announcements.any()).then(|| waiting::channels(&kind, &keys.keys));
        // Others of this client already wait on the lock, subscribed: join them before the
        // first attempt (no I/O). Otherwise the first attempt goes out plain, as `try_lock`'s
        // — an uncontended `lock()` costs no subscription — and a refusal subscribes first.
        let mut waiter: Option<Waiter> = match &channels {
            Some(names) if announcements.active(names) => Some(announcements.join(names)),
            _ => None,
        };
        // This waiter's turn among the client's waiters of the lock (see `Waiter::turn`),
        // taken before its first waiting attempt and kept until the call returns.
        let mut turn: Option<Turn> = None;
        let mut attempt = 0u32;
        loop {
            attempt = attempt.saturating_add(1);
            if let (Some(waiter), None) = (&waiter, &turn) {
                let wait = waiter.turn();
                turn = Some(match deadline {
                    Some(at) => match tokio::time::timeout_at(at, wait).await {
                        Ok(turn) => turn,
                        Err(_) => {
                            return Err(Error::Timeout {
                                elapsed: started.elapsed(),
                                attempts: attempt - 1,
                                last: Box::new(Error::Contended {
                                    stats: Box::new(AttemptStats::pending(
                                        self.nodes(),
                                        self.quorum(kind.public()),
                                        attempt - 1,
                                    )),
                                    attempts: attempt - 1,
                                }),
                            });
                        }
                    },
                    None => wait.await,
                });
            }
            // Before the attempt: any release announced after this point counts, and the
            // subscriptions were confirmed by the masters before the attempt went out.
            let heard = waiter.as_ref().map(Waiter::heard);
            // A fresh value per attempt: a late answer to an earlier attempt can never be
            // mistaken for this one.
            let req = Arc::new(
                Request::new(
                    keys.keys.clone(),
                    fences.clone(),
                    LockValue::random(),
                    timing.ttl,
                )
                .of_kind(kind.clone())
                .with_quorum(quorum_override)
                .waiting(waiter.is_some()),
            );
            let span = tracing::debug_span!("attempt", attempt, value = %req.value);
            let quorum = req.quorum(self.nodes());
            let covered = self
                .core
                .guard
                .ensure_records(timing.ttl, quorum, timing.node_timeout, attempt)
                .await;
            let error = match covered {
                Err(stats) => Error::NoQuorum {
                    stats: Box::new(stats),
                    attempts: attempt,
                },
                Ok(()) => match quorum::acquire(&self.core.members, &req, timing, attempt)
                    .instrument(span)
                    .await
                {
                    Ok(grant) => {
                        return Ok(Lock::new(self.core.clone(), keys, req, timing, grant));
                    }
                    Err(e) => e,
                },
            };
            tracing::debug!(attempt, error = %error, "attempt failed");
            if !error.is_retryable() || retry.max_attempts().is_some_and(|max| attempt >= max) {
                return Err(error);
            }
            if let (true, Error::Contended { stats, .. }) = (may_wait, &error) {
                let names = channels.get_or_insert_with(|| waiting::channels(&kind, &keys.keys));
                let Some(waiter) = &waiter else {
                    // Subscribe, confirmed by every master that takes subscriptions, and only
                    // then make the attempt whose refusal makes us wait: a release between
                    // that refusal and our sleep is then heard (the classic missed wake-up).
                    let joined = announcements.join(names);
                    within(deadline, joined.subscribe()).await;
                    waiter = Some(joined);
                    continue;
                };
                let Some(heard) = heard else { continue };
                let plan = waiting::plan(stats, waiter, retry.sample_delay(), timing.ttl, deadline);
                let announced = waiter.announced(&heard, &plan.from, plan.needed);
                let woken = {
                    let _waiting = metrics::Waiting::new(kind.public());
                    tokio::select! {
                        () = announced => true,
                        () = tokio::time::sleep_until(plan.until) => false,
                    }
                };
                if !woken && plan.at_deadline {
                    return Err(Error::Timeout {
                        elapsed: started.elapsed(),
                        attempts: attempt,
                        last: Box::new(error),
                    });
                }
                if woken {
                    // Woken with every other waiter of the lock: start within a round trip,
                    // at random, so that they do not split the votes round after round.
                    waiting::pause(waiting::jitter(stats.elapsed())).await;
                }
                // Subscriptions lost meanwhile (a broken connection) are made again; a
                // no-op when all stand.
                within(deadline, waiter.subscribe()).await;
                continue;
            }
            let delay = retry.sample_delay();
            if let Some(limit) = retry.max_duration()
                && started.elapsed().saturating_add(delay) >= limit
            {
                return Err(Error::Timeout {
                    elapsed: started.elapsed(),
                    attempts: attempt,
                    last: Box::new(error),
                });
            }
            let _waiting = metrics::Waiting::new(kind.public());
            tokio::time::sleep(delay).await;
        }
    }

    /// Commissions master `node` (its index in the configured list) as **new** for the
    /// restart guard: it counts toward quorums at once, for every client, instead of being
    /// kept out for the deployment's longest ttl after it is first seen.
    ///
    /// Commission only a master that no lock anyone relies on can have used: a new server,
    /// or one that has been out of service for longer than the longest ttl. It is refused
    /// ([`Error::GuardRefused`]) when the master holds any lock key, and when it is already in
    /// service (its epoch began for another reason than a client's first sight of it) unless
    /// `force` is set. The `redquorum guard commission` command does the same.
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) -> Result<(), redquorum::Error> {
    /// for node in 0..redlock.nodes() {
    ///     redlock.commission(node, false).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn commission(&self, node: usize, force: bool) -> Result<(), Error> {
        self.guard_action(node, Commission::New { force }).await
    }

    /// Resets master `node`'s epoch: every client keeps it out of quorums for the
    /// deployment's longest ttl from now, as after a restart without persistence. Use it
    /// after restoring a master from a backup (its old epoch marker would otherwise vouch
    /// for lock keys the backup lacks) or whenever its data may have been lost unseen.
    pub async fn reset_epoch(&self, node: usize) -> Result<(), Error> {
        self.guard_action(node, Commission::Reset).await
    }

    async fn guard_action(&self, node: usize, action: Commission) -> Result<(), Error> {
        let nodes = self.nodes();
        if node >= nodes {
            return Err(ConfigError::NoSuchNode { index: node, nodes }.into());
        }
        let timeout = self
            .core
            .config
            .connect_timeout
            .max(Duration::from_secs(10));
        let outcome = tokio::time::timeout(timeout, self.core.guard.commission(node, action))
            .await
            .unwrap_or(Err(NodeFailure::Timeout(timeout)))
            .map_err(|failure| Error::Node { node, failure })?;
        outcome.map_err(|reason| Error::GuardRefused { node, reason })
    }

    /// Caches every script redquorum sends as `EVALSHA` on every master (`SCRIPT LOAD`),
    /// concurrently, and returns each master's outcome, indexed by node.
    ///
    /// Locking works without it: a master that lacks a script answers `NOSCRIPT` and the
    /// call is sent again with the script's body. Call it at start-up (or after a master
    /// restarted, which empties its cache) when a call must not depend on that second
    /// request: under a network delay, the fallback of a renewal may arrive too late to
    /// count.
    ///
    /// ```no_run
    /// # async fn run(redlock: redquorum::Redlock) {
    /// for (node, outcome) in redlock.load_scripts().await.into_iter().enumerate() {
    ///     if let Err(failure) = outcome {
    ///         eprintln!("master {node}: scripts not cached: {failure}");
    ///     }
    /// }
    /// # }
    /// ```
    pub async fn load_scripts(&self) -> Vec<Result<(), NodeFailure>> {
        let timeout = self.core.config.connect_timeout.max(Duration::from_secs(1));
        let loads = self.core.nodes.iter().map(|node| async move {
            for source in crate::protocol::scripts::cached_sources() {
                let mut load = redis::cmd("SCRIPT");
                load.arg("LOAD").arg(source);
                node.query(&load, timeout).await?;
            }
            Ok(())
        });
        futures::future::join_all(loads).await
    }

    /// Connects to every master now (instead of on first use) and pings it, concurrently.
    /// Returns each master's round-trip time or failure, indexed by node; useful at start-up
    /// to report unreachable masters. Locking works without calling this.
    pub async fn connect(&self) -> Vec<Result<Duration, NodeFailure>> {
        let timeout = self.core.config.connect_timeout;
        let pings = self.core.nodes.iter().map(|node| async move {
            let sent = Instant::now();
            node.query(&redis::cmd("PING"), timeout).await?;
            Ok(sent.elapsed())
        });
        futures::future::join_all(pings).await
    }
}

/// How an acquisition ended and after how many attempts, for its metrics.
/// Runs `work` (making subscriptions) until it is done or the caller's `deadline` passes,
/// whichever comes first: a master that cannot be reached must not hold a waiting call past
/// its deadline for a whole connect timeout (found by review). Subscriptions not made by
/// then count as masters that will not announce (their refusals are waited out by time).
async fn within(deadline: Option<Instant>, work: impl Future<Output = ()>) {
    match deadline {
        Some(deadline) => {
            let _ = tokio::time::timeout_at(deadline, work).await;
        }
        None => work.await,
    }
}

fn metrics_outcome(result: &Result<Lock, Error>) -> (metrics::Outcome, u32) {
    match result {
        Ok(lock) => (metrics::Outcome::Granted, lock.stats().attempt()),
        Err(
            e @ (Error::Contended { attempts, .. }
            | Error::NoQuorum { attempts, .. }
            | Error::Timeout { attempts, .. }),
        ) => (metrics::Outcome::of(e), *attempts),
        Err(e) => (
            metrics::Outcome::of(e),
            e.stats().map_or(1, AttemptStats::attempt),
        ),
    }
}

/// Records how an acquisition ended on its span: votes granted, attempts, outcome, elapsed.
/// (Each attempt's span carries its value's fingerprint.)
fn record_span(span: &tracing::Span, result: &Result<Lock, Error>, started: Instant) {
    span.record("elapsed_us", started.elapsed().as_micros() as u64);
    let (outcome, attempts) = metrics_outcome(result);
    span.record("outcome", format!("{outcome:?}").to_lowercase());
    span.record("attempts", attempts);
    let stats = match result {
        Ok(lock) => Some(lock.stats()),
        Err(e) => e.stats().cloned(),
    };
    if let Some(stats) = stats {
        span.record("votes", stats.granted() as u64);
    }
}
