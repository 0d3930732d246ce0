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
//! The folders of `src/` are the layers, top to bottom. A module uses only its own layer and
//! the layers below it, and no modules import each other, even through others
//! (`tests/it/source/module_graph.rs` checks both).
//!
//! | layer | holds |
//! |---|---|
//! | `api/` | what users call: `client` ([`Redlock`], [`LockOptions`], the guard's operator calls), `waiting` (how long a refused caller waits: announcements, the holder's expiry, jitter), `scope` ([`Redlock::with_lock`], [`ScopeOptions`]), `owner` (reentrant [`Owner`]s), `health` ([`Redlock::health`], with its `clock` sampling), `fencing` ([`fenced_set`]) |
//! | `hold/` | a lock once granted: `lock` ([`Lock`]), `keepalive` ([`KeepAlive`]), `lease` ([`Lease`]), `renewal` (the batched renewal task), `held` (a held lock's shared state), `client_core` (what every handle of one client shares: the validated config, masters, members, guard, renewal task) |
//! | `member/` | one quorum member: `voter` (the member as the coordinator sees it: scripts, commands, the guard's verdict on every grant), `kinds` (each lock kind's acquire, extend, fence and release requests), `restart_guard` (epochs, ttl records, commissioning), `node` (one master's calls), `connection` (its reconnecting, numbered connection, to the primary a Sentinel group names, with the outbox), `announce` (release announcements: one subscription connection per master per client, shared by its waiters), `topology` (what sentinels and clusters report) |
//! | `protocol/` | the quorum, free of redis types: `quorum` (fan-out and vote counting over the `Voter` seam, validity arithmetic, cleanup that survives cancellation; its collector), `wire` (commands encoded once per request), `scripts` (the Lua scripts, `src/protocol/scripts/*.lua`, each with its contract), `testing` (the simulated master of the unit tests) |
//! | `config/` | validated options, no I/O: `builder` ([`RedlockBuilder`]: every option, its default and range, validated at `build()`), `validated` (the values it produces), `group` ([`Group`]: a Sentinel group as one member), `retry` ([`RetryPolicy`]), `url` (parsing and redaction), `resources` (resource names to keys) |
//! | leaves | shared by all: `error` ([`Error`], [`ConfigError`], with [`NodeFailure`]: why one member's vote failed), `rules` (the protocol's arithmetic as pure functions, shared with the model), `value` (lock values), `kind` ([`LockKind`], [`Holder`]), `report` ([`HealthReport`], [`Problem`], [`GuardStatus`]), `stats` (votes), `slot` (Redis Cluster hash slots), `metrics` (every metric's name and its recording, compiled out without the feature), `safety` (the argument and the claims ledger; docs only) |
//!
//! `internals` stands aside: the coordinator over in-memory masters for
//! `benches/coordinator.rs`, built only with `--cfg redquorum_unsafe`.
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
//! # Waiting
//! A call that waits for a busy lock ([`Redlock::lock`], [`Redlock::lock_with`] with a
//! [`wait`](LockOptions::wait), [`Redlock::with_lock`], [`Owner`], `redquorum run --wait`)
//! is handed the lock about one round trip after it is released, not a polling delay later.
//! Every release — of every kind, also the cleanup of a failed attempt — `PUBLISH`es on a
//! channel named like each lock key it deleted (nothing when it deleted nothing). A refused
//! caller subscribes, through one subscription connection per master shared by all the
//! client's waiters, and only once the masters confirmed makes the attempt whose refusal
//! makes it wait, so a release in between is never missed. It then sleeps until enough of
//! the masters that refused announced a release for a quorum to be possible, or until the
//! holder's keys can have run out (their remaining ttl comes back with the refusal), never
//! past its own deadline, and starts within a random round trip so that waiters of several
//! clients do not split the votes; a client's own waiters of one lock take turns, first
//! come first served. The first attempt of an uncontended call is exactly
//! [`Redlock::try_lock`]'s. Where a master refuses `SUBSCRIBE` (a proxy, an ACL without
//! pub/sub), its waiters fall back to the retry policy's delay, and
//! [`Redlock::waiting_notes`] and [`HealthReport::polling`] say so; [`LockOptions::poll`]
//! asks for polling.
//!
//! ```no_run
//! # async fn run() -> Result<(), redquorum::Error> {
//! use std::time::Duration;
//! use redquorum::{LockOptions, Redlock};
//!
//! let redlock = Redlock::builder()
//!     .nodes(["redis://10.0.0.1", "redis://10.0.0.2", "redis://10.0.0.3"])
//!     .build()?;
//! // Woken by the holder's release (or at its expiry), for up to 30 s.
//! let lock = redlock
//!     .lock_with(["nightly-report"], LockOptions::new().wait(Duration::from_secs(30)))
//!     .await?;
//! lock.release().await?; // wakes the next waiter, on any client
//! for note in redlock.waiting_notes() {
//!     eprintln!("{note}"); // a master where waiters poll
//! }
//! # Ok(()) }
//! ```
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
//! down blocks every permit ([`Redlock::quorum`] tells; the client logs a warning).
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
//! # Metrics
//! With the `metrics` feature, redquorum records through the [`metrics`](https://docs.rs/metrics)
//! facade: nothing is recorded until the application installs a recorder (a Prometheus
//! exporter, say), and without the feature every recording call compiles to nothing. Call
//! `describe_metrics()` once after installing the recorder to register units and
//! descriptions. Labels take bounded values only: `master` (the index in the configured list),
//! `kind` (`mutex`, `read`, `write`, `permits`), `outcome`, `op`, `vote`, `cause`, `state`,
//! `reason` — never a resource, a lock value or a URL.
//!
//! | name | type | unit | labels | what |
//! |---|---|---|---|---|
//! | `redquorum_acquire_duration_seconds` | histogram | seconds | `kind`, `outcome` | acquire latency, call to result, every attempt included |
//! | `redquorum_acquisitions_total` | counter | | `kind`, `outcome` | acquisitions; `outcome`: `granted`, `contended`, `no_quorum`, `too_late` (validity exhausted), `timeout`, `error` |
//! | `redquorum_acquire_attempts` | histogram | count | `kind`, `outcome` | attempts per acquisition |
//! | `redquorum_quorum_size` | gauge | count | `kind` | votes a lock of the kind needs |
//! | `redquorum_votes_total` | counter | | `master`, `op`, `vote` | each master's answer; `op`: `acquire`, `extend`, `fence`; `vote`: `granted`, `taken`, `failed` |
//! | `redquorum_vote_failures_total` | counter | | `master`, `op`, `cause` | failed votes; `cause`: `timeout`, `connection`, `auth`, `server`, `unexpected_reply`, `foreign_key`, `not_replicated`, `quarantined`, `no_scripting` |
//! | `redquorum_vote_duration_seconds` | histogram | seconds | `master`, `op` | one master's answer time |
//! | `redquorum_requests_in_flight` | gauge | count | `master` | votes asked of the master and not answered yet |
//! | `redquorum_extensions_total` | counter | | `kind`, `outcome` | [`Lock::extend`] calls; `outcome`: `ok`, `failed`, `lost` |
//! | `redquorum_renewals_total` | counter | | `outcome` | keep-alive renewals; `ok`, `failed` (retried), `lost` |
//! | `redquorum_locks_lost_total` | counter | | `reason` | held locks lost; `not_ours`, `expired` |
//! | `redquorum_releases_incomplete_total` | counter | | `kind` | releases some master did not confirm (its keys expire by ttl) |
//! | `redquorum_guard_state` | gauge | | `master`, `state` | 1 for the restart guard's view of the master: `off`, `unverified`, `counted`, `quarantined`, `unhealthy`; 0 for the others |
//! | `redquorum_guard_epoch_cause` | gauge | | `master`, `cause` | 1 for why the master's epoch began: `first_seen`, `data_lost`, `restarted`, `commissioned`, `reset` |
//! | `redquorum_guard_quarantine_seconds` | gauge | seconds | `master` | time the master stays out of quorums (0 when counted) |
//! | `redquorum_waiters` | gauge | count | `kind` | callers waiting between attempts for a busy lock |
//! | `redquorum_handover_wait_seconds` | histogram | seconds | `kind` | wait of a caller granted after a refusal (the hand-over hook) |
//!
//! The guard's gauges change when a verification ends, when a quarantined master's grant is
//! refused, when its quarantine ends (at its first grant after) and on [`Redlock::health`].
//!
//! # Feature flags
//! - `tls-rustls` — `rediss://` URLs, through rustls with the webpki roots.
//! - `metrics` — metrics through the `metrics` facade (see [Metrics](#metrics)).
//!
//! # Logging
//! Public operations run in `tracing` spans (`redquorum.lock`, `redquorum.extend`,
//! `redquorum.release`; `redquorum.renew` at `debug`, one per renewal batch) that follow
//! OpenTelemetry's database-client conventions where they fit (`db.system.name = "redis"`,
//! `otel.kind = "client"`) and carry the resources, kind and quorum; the lock span records
//! its `votes`, `attempts`, `outcome` and `elapsed_us` when the call ends. Every master's
//! vote is a `debug` event with its latency. Lock
//! values appear only as fingerprints, URLs without passwords. The library installs no
//! subscriber.

mod api;
mod config;
mod error;
mod hold;
#[cfg(redquorum_unsafe)]
#[doc(hidden)]
pub mod internals;
mod kind;
mod member;
mod metrics;
mod protocol;
mod report;
pub mod rules;
pub mod safety;
#[allow(dead_code)] // used by cluster members (next)
mod slot;
mod stats;
mod value;

pub use api::client::{LockOptions, Redlock};
pub use api::fencing::fenced_set;
pub use api::health::DEFAULT_CLOCK_WINDOW;
pub use api::owner::{OwnedLock, Owner};
pub use api::scope::{LossPolicy, ScopeOptions};
pub use config::builder::RedlockBuilder;
pub use config::group::{Group, Replicas};
pub use config::retry::{
    DEFAULT_RETRY_ATTEMPTS, DEFAULT_RETRY_DELAY, DEFAULT_RETRY_JITTER, RetryPolicy,
};
pub use config::url::redact as redact_url;
pub use config::validated::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_DRIFT_FACTOR, DEFAULT_KEY_PREFIX, DEFAULT_NODE_TIMEOUT,
    DEFAULT_TTL, MAX_TTL,
};
pub use error::{Cause, ConfigError, Error, LossReason, NodeFailure};
pub use hold::keepalive::{KeepAlive, KeepAliveOptions};
pub use hold::lease::Lease;
pub use hold::lock::{Extended, Lock, ReleaseOutcome};
pub use hold::renewal::RenewalStats;
pub use kind::{Holder, LockKind};
#[cfg(feature = "metrics")]
pub use metrics::describe_metrics;
/// The `redis` crate redquorum is built on, so that [`fenced_set`] can be called with a
/// connection of the same version.
pub use redis;
pub use report::{
    EpochCause, GuardStatus, HealthReport, MIN_RENEWAL_HEADROOM, NodeHealth, PollingNote, Problem,
    RenewalLoad,
};
pub use rules::DRIFT_CONSTANT;
pub use stats::{AttemptStats, NodeVote, Vote};
pub use tokio::time::Instant;
