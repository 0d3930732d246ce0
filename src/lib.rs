//! redquorum: **Redlock**, a distributed lock held by a quorum of independent Redis
//! masters, for critical sections that span services and data centres.
//!
//! ```no_run
//! use std::time::Duration;
//! use redquorum::Redlock;
//!
//! # async fn run() -> Result<(), redquorum::Error> {
//! let redlock = Redlock::builder()
//!     .nodes([
//!         "redis://10.0.1.1:6379",
//!         "redis://10.0.2.1:6379",
//!         "redis://10.0.3.1:6379",
//!         "redis://10.0.4.1:6379",
//!         "redis://10.0.5.1:6379",
//!     ])
//!     .ttl(Duration::from_secs(10))
//!     .build()?;
//!
//! let lock = redlock.lock("stock:4711").await?;
//! // Work only until the deadline; extend (or use `with_lock`) for longer work.
//! println!("held for {:?}", lock.remaining());
//! lock.release().await?;
//! # Ok(()) }
//! ```
//!
//! A lock is granted only when a majority (`N/2 + 1`) of the masters stored our random
//! value, and it is valid for `ttl - elapsed - drift`, where `elapsed` is the time the
//! votes took and `drift = ttl * drift_factor + 2 ms`. Requests go to every master at once
//! and the answer is given as soon as it is known: a slow or dead master does not delay a
//! lock that a quorum already granted. Nothing redquorum sends — release, extension,
//! cleanup — touches a key that holds another client's value.
//!
//! # Layout
//! Modules by concern, each using only modules of its own row or the rows below it, with no
//! import cycles (`tests` in each module and `internals` aside):
//!
//! ```text
//! API         client (Redlock, LockOptions)   scope (with_lock)   health   owner (Owner)
//!             fencing (fenced_set)
//! holding     lock (Lock)   keepalive (KeepAlive)   lease (Lease)   renewal   held   core
//! members     member (+ member/kinds)   restart_guard   node   connection (+ outbox)
//!             topology
//! protocol    quorum (coordinator over the Voter seam: no redis types; + collector)
//!             wire   scripts
//! config      config (RedlockBuilder)   group (Group)   settings   retry   url   resources
//! leaves      error   report (HealthReport, Problem, GuardStatus)   stats (votes)   safety (docs)
//!             failure (NodeFailure)   kind (LockKind, Holder)   rules   value   slot
//! ```
//!
//! - `client` — [`Redlock`]: `try_lock` (one round), `lock` (with retries), `lock_with`
//!   (several resources, a kind, per-call [`LockOptions`]), the guard's operator actions.
//! - `scope` — [`Redlock::with_lock`], [`ScopeOptions`]; `owner` — reentrant [`Owner`]s;
//!   `health` — [`Redlock::health`].
//! - `lock` — [`Lock`]: deadline, `extend`, `release`, `keep_alive`, fencing token;
//!   `keepalive` — [`KeepAlive`]; `lease` — [`Lease`]; `renewal` — the batched renewal task;
//!   `held` — a held lock's shared state.
//! - `core` — what every handle of a client shares; `member` — a quorum member as the
//!   coordinator sees it (scripts, commands, the guard's verdict); `restart_guard` — epochs,
//!   ttl records, commissioning; `node` — one master's calls; `connection` — its
//!   reconnecting, numbered connection (to the primary a Sentinel group names, found
//!   again on every connection); `topology` — what sentinels and clusters report.
//! - `quorum` — the coordinator: fan-out, vote counting with early exit, validity
//!   arithmetic, cleanup that survives cancellation; `wire` — commands encoded once per
//!   request; `scripts` — the Lua scripts (`src/scripts/*.lua`), each with its contract.
//! - `config` — [`RedlockBuilder`]: every option, its default and range, validated at
//!   `build()` without I/O; `settings` — the validated values; `retry` — [`RetryPolicy`];
//!   `url` — URL parsing and redaction; `resources` — resource names to keys; `group` —
//!   [`Group`]: a Sentinel group as one member.
//! - `error` — [`Error`], [`ConfigError`]; `report` — what health checks report; `stats` —
//!   votes; `failure` — why one master's vote failed ([`NodeFailure`]); `kind` —
//!   [`LockKind`], [`Holder`]; `rules` — the protocol's arithmetic as pure functions; `value`
//!   — lock values; `slot` — Redis Cluster hash slots.
//!
//! # Correctness
//! Redlock is safe under assumptions you must provide — clocks that advance at about the
//! same rate, a crashed master that comes back with its keys or stays out a ttl (the
//! restart guard enforces it for every client), a holder that stops at its deadline, and
//! independent masters. [`safety`] states them, gives the argument for every guarantee
//! (mutual exclusion, the restart guard for any number of data losses, failovers and
//! `WAIT`, fencing, the lock kinds, cancellation), and holds the **claims ledger**: each
//! claim with its assumption, the test on real masters, the model instance (`make model`,
//! five masters where losses or partial views matter) and the negative control. An even
//! number of masters is allowed but buys nothing: four tolerate one failure, like three.
//!
//! # Held locks
//! [`Redlock::with_lock`] acquires, renews while the body runs, and releases on every path
//! (return, error, cancellation). [`Lock::keep_alive`] renews a lock outside a scope. All
//! kept-alive locks of one client are renewed by one task, each lock about a third of its
//! ttl after its last renewal, in pipelined batches: locks due close together share one
//! round trip per master, up to 1,024 of them and fewer when the masters answer slowly, so
//! that a batch is answered well within the node timeout; a batch that fails is retried on
//! its own; and batches go on a connection of their own, so acquisitions never wait behind
//! them. When a client keeps more locks alive than its masters can renew in time,
//! [`Redlock::health`] reports [`Problem::RenewalOverloaded`] and the task logs a warning,
//! with the figures ([`RenewalLoad`]), before any lock is lost. A [`Lease`] tells the body how
//! long it may still rely on the lock, signals loss ([`Lease::lost`]) — at once when a quorum
//! says the key is someone else's, and no later than the deadline when renewals fail — and
//! cuts work off before the deadline ([`Lease::run`], [`Lease::check`]).
//!
//! # Lock kinds
//! Beyond the mutex, every kind is held by a quorum of independent masters with the same
//! contract — value-checked extension and release, validity `ttl − elapsed − drift`, early
//! decision, cleanup on failure and cancellation, the restart guard, batched keep-alive — and
//! is chosen with [`LockOptions`]:
//!
//! | kind | call | quorum of `N` | guarantee |
//! |---|---|---|---|
//! | mutex | [`Redlock::lock`] | `N/2 + 1` | one holder |
//! | read | `LockOptions::new().read()` | `N/2 + 1` | any readers, never with a writer |
//! | write | `LockOptions::new().write()` | `N/2 + 1` | one writer, never with a reader |
//! | `k` permits | `LockOptions::new().permits(k)` | `⌊k·N/(k+1)⌋ + 1` | at most `k` holders |
//! | reentrant | [`Redlock::owner`], [`Owner::lock`] | as its kind | nested holds of one owner |
//!
//! A **read-write lock** keeps, on each master, the writer key and the readers (each with its
//! own value and expiry, in a sorted set scored by the master's clock): a read is granted
//! only with no writer, a write only with no live reader and no writer. A writer and a
//! reader granted at once would each hold a majority, and two majorities share a master
//! that granted both — which its script forbids. With
//! [`prefer_writers`](LockOptions::prefer_writers) a writer that finds readers leaves a
//! marker (expiring with its ttl) that keeps new readers out, so a stream of readers cannot
//! starve it. A **semaphore** keeps each permit's value and expiry the same way; a permit
//! whose holder crashed comes back after its ttl.
//!
//! `k` permits need `⌊k·N/(k+1)⌋ + 1` masters, not a majority ([`rules::permit_quorum`];
//! [`safety`] has the proof): 4 of 5 for `k = 2` or `3`, all 5 for `k ≥ 4` — then one master
//! down blocks every permit ([`Redlock::permit_quorum`] tells; the client logs a warning).
//!
//! A **reentrant** [`Owner`] (a value you clone into tasks, not a thread id) counts its
//! nested holds in the process: the quorum sees one holder, kept alive until the outermost
//! hold ends. Refusals say who holds ([`Error::held_by`]: a writer, readers, a waiting writer,
//! every permit). Fencing tokens cover writers and permits (readers do not write). A
//! read-write lock and a semaphore cover one resource; use each resource name with one kind.
//!
//! # Fencing tokens
//! With [`fencing`](RedlockBuilder::fencing) on, each acquisition gets a `u64`
//! ([`Lock::fencing_token`]) that strictly increases across successive holders of the same
//! resource, so the resource can refuse a write from a holder whose lock has expired
//! ([`fenced_set`], or `UPDATE … WHERE fence_token <= $token` in SQL). It costs one extra
//! round trip:
//!
//! 1. On each master the acquire script, when it sets the lock key, also increments a
//!    per-resource counter `{prefix}fence:{resource}` (no expiry) and returns it.
//! 2. The token `T` is the largest value returned by the granting masters.
//! 3. A write-back sets `counter = max(counter, T)` on the masters, only where our lock key
//!    still holds our value; the lock is handed out only if a quorum acknowledged, within
//!    its validity.
//!
//! Why they increase, and why they need fence counters that survive restarts
//! (`appendfsync always`): [`safety`].
//!
//! # Restart guard
//! A master that lost lock keys (a restart without persistence, a `FLUSHALL`, a failover)
//! and rejoins at once could grant a lock another client still holds. The guard (on by
//! default, [`restart_guard`](RedlockBuilder::restart_guard)) keeps it out of every quorum
//! for the deployment's longest ttl, for every client, for any number of masters losing
//! data: epochs shared by all clients, ttl records read only from masters that cannot have
//! lost them, durability believed only while every look says so. New masters are
//! commissioned ([`Redlock::commission`], `redquorum guard commission`) or wait a declared
//! [`deployment_max_ttl`](RedlockBuilder::deployment_max_ttl); restored ones are reset
//! ([`Redlock::reset_epoch`]). [`Redlock::health`] shows each master's [`GuardStatus`]. How
//! it works, why it is safe and what it costs: [`safety`].
//!
//! # Health
//! [`Redlock::health`] reports, per master: reachability and round trip, version, role (a
//! replica is a misconfiguration), persistence, eviction policy, `run_id` (two URLs reaching
//! one server are not independent), and the clock's rate and steps measured against our
//! monotonic clock; and an even master count. [`strict`](RedlockBuilder::strict) turns the
//! findings into an error and quarantines masters whose clocks misbehave.
//!
//! # Feature flags
//! - `tls-rustls` — `rediss://` URLs, through rustls with the webpki roots.
//!
//! # Logging
//! Public operations run in `tracing` spans (`redquorum.lock`, `redquorum.extend`,
//! `redquorum.release`) and every master's vote is a `debug` event with its latency. Lock
//! values appear only as fingerprints, URLs without passwords. The library installs no
//! subscriber.

mod client;
mod config;
mod connection;
mod core;
mod error;
mod failure;
mod fencing;
mod group;
mod health;
mod held;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod internals;
mod keepalive;
mod kind;
mod lease;
mod lock;
mod member;
mod node;
mod owner;
mod quorum;
mod renewal;
mod report;
mod resources;
mod restart_guard;
mod retry;
pub mod rules;
pub mod safety;
mod scope;
mod scripts;
mod settings;
#[allow(dead_code)] // used by cluster members (next)
mod slot;
mod stats;
#[cfg(test)]
mod testing;
#[allow(dead_code)] // used by cluster and sentinel members (next)
mod topology;
mod url;
mod value;
mod wire;

pub use client::{LockOptions, Redlock};
pub use config::RedlockBuilder;
pub use error::{ConfigError, Error, LossReason};
pub use failure::{Cause, NodeFailure};
pub use fencing::fenced_set;
pub use group::{Group, Replicas};
pub use health::DEFAULT_CLOCK_WINDOW;
pub use keepalive::{KeepAlive, KeepAliveOptions};
pub use kind::{Holder, LockKind};
pub use lease::Lease;
pub use lock::{Extended, Lock, ReleaseOutcome};
pub use owner::{OwnedLock, Owner};
/// The `redis` crate redquorum is built on, so that [`fenced_set`] can be called with a
/// connection of the same version.
pub use redis;
pub use renewal::RenewalStats;
pub use report::{
    EpochCause, GuardStatus, HealthReport, MIN_RENEWAL_HEADROOM, NodeHealth, Problem, RenewalLoad,
};
pub use retry::{DEFAULT_RETRY_ATTEMPTS, DEFAULT_RETRY_DELAY, DEFAULT_RETRY_JITTER, RetryPolicy};
pub use rules::DRIFT_CONSTANT;
pub use scope::{LossPolicy, ScopeOptions};
pub use settings::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_DRIFT_FACTOR, DEFAULT_KEY_PREFIX, DEFAULT_NODE_TIMEOUT,
    DEFAULT_TTL, MAX_TTL,
};
pub use stats::{AttemptStats, NodeVote, Vote};
pub use tokio::time::Instant;
pub use url::redact as redact_url;
