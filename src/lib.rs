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
//! leaves      error   report (HealthReport, Problem, GuardStatus)   stats (votes)
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
//! Redlock is safe under these assumptions, which you must provide:
//! - **Clocks advance at about the same rate** on every master and on the client: a
//!   master's clock may run fast by at most the drift allowance over one ttl. Wall-clock
//!   *jumps* (a manual reset, a large NTP step) on a master break the lock.
//! - **A master that crashes comes back with its keys** (AOF with `appendfsync always`),
//!   **or stays down for at least one ttl** before rejoining. A master restarted empty at
//!   once can grant a lock that someone else still holds; the restart guard (below) enforces
//!   this for every client.
//! - **The holder stops using the lock at its deadline.** A process paused (GC, swap, a
//!   stopped VM) past its deadline may still believe it holds the lock. redquorum makes
//!   this easy to honour: [`Lock::deadline`] and [`Lock::remaining`] are computed on the
//!   monotonic clock, an expired lock refuses to extend, and `release` reports that the
//!   critical section overran.
//! - The masters are **independent**: no replication between them, no eviction policy
//!   that may drop lock keys.
//!
//! An even number of masters is allowed but buys nothing: four tolerate one failure, like
//! three.
//!
//! *What is model-checked.* The protocol is model-checked with
//! [stateright](https://crates.io/crates/stateright) (`model/`, `make model`): three masters
//! and two or three clients with different ttls (1 s and 2 s), every interleaving of their
//! requests — delayed, reordered across masters, lost and duplicated — with masters that
//! restart with or without persistence (keeping their epoch marker or not), are flushed
//! while up, or run fast, on a 500 ms time grid over horizons of 1 to 2 s (longer with
//! `MODEL_SIZE=large`). Checked: mutual exclusion, writers alone for read-write locks, at
//! most `k` holders for `k`-permit semaphores with the `⌊k·n/(k+1)⌋ + 1` quorum, strictly
//! increasing fencing tokens, and that no request ever changes an entry holding another
//! holder's value. The model calls this crate's [`rules`] for every quorum, validity and
//! quarantine computation. The assumptions: at most one master loses its data (restart
//! without `appendfsync always`, or `FLUSHALL`) within a lock's ttl; master clocks gain at
//! most the drift allowance; fencing counters survive restarts. Each mechanism has a
//! negative control that the checker must break: no guard, the old per-client guard,
//! renewal by `SET XX`, a majority quorum for a 2-permit semaphore, no drift allowance with
//! a fast clock, and counting a reconnected master before verifying it. It found two flaws
//! in the first design of the restart guard (a ttl record still in flight when a verifier
//! read the others; a restart's epoch anchored before the boot), both fixed.
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
//! *Why `k` permits need `⌊k·N/(k+1)⌋ + 1` masters, not a majority.* Each master admits at
//! most `k` holders. Suppose `k + 1` holders were granted at once, each on `Q` masters: they
//! hold `(k + 1)·Q` admissions among the `N` masters, which have `k·N` places. If
//! `(k + 1)·Q > k·N` that is impossible. The smallest such `Q` is `⌊k·N/(k+1)⌋ + 1`
//! ([`rules::permit_quorum`]): a majority for `k = 1`, 4 of 5 for `k = 2` or `3`, and all 5 for
//! `k ≥ 4` — then one master down blocks every permit ([`Redlock::permit_quorum`] tells;
//! the client logs a warning). With a majority instead, 4 holders can share 3 permits on 5
//! masters: `tests/kinds_negative.rs` builds it.
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
//! *Why tokens increase.* Let B acquire after A. B's granting quorum and A's write-back
//! quorum share some master `k`. A's write-back reached `k` while A's key was on `k` (it
//! checked the key), and B's `SET NX` on `k` succeeded only after A's key left `k`. So B's
//! increment on `k` returns more than `T_A`, and `T_B`, the largest of B's values, exceeds
//! `T_A`. The argument needs what Redlock needs — A's key lives on a quorum until A's
//! deadline (clock rates within the drift allowance) — plus **counters that survive
//! restarts: AOF with `appendfsync always`**. The restart guard is not enough for tokens:
//! it keeps a master that lost its data from granting a lock someone still holds, but the
//! counters it lost may have been one of only `Q` copies of `T_A`, and a later quorum that
//! avoids the others would then hand out a smaller token. Taking the maximum from the
//! acquire round alone is **not** monotonic either: A may take its maximum from a master
//! that B's quorum does not include (`tests/fencing.rs` shows a later holder getting a
//! smaller token that way).
//!
//! # Restart guard
//! Redlock needs a master that crashed to come back with its keys or stay out for a ttl; a
//! master restarted empty (or flushed) that rejoins at once can grant a lock another client
//! still holds on the others. The guard (on by default,
//! [`restart_guard`](RedlockBuilder::restart_guard)) enforces "stay out", for every client:
//!
//! - Each master carries an **epoch** marker (`{prefix}guard`), shared by all clients. The
//!   first client to see that a master may have lost keys — its marker is gone, or it
//!   restarted without persisting every write — begins a new epoch in one atomic script, with
//!   the master's own time; the others read it. A master's grants count only on a connection
//!   the client verified after it was made (a restart breaks every connection), and only while
//!   the epoch read back with the grant is the verified one.
//! - A master in a new epoch stays out until the epoch's start plus the **deployment's
//!   longest ttl**. No lock with a ttl `t` is taken (or extended to a longer `t`) before a
//!   quorum of masters holds an acknowledged ttl record of at least `t` sent less than `t/2`
//!   ago (`{prefix}ttls`: records stay for `2t`); a client that keeps locking refreshes them
//!   in passing, one that was idle for half a ttl sends a record round first. A verifying
//!   client reads the records of at least `N − Q + 1` other masters — some of them are in
//!   that quorum — and never uses less than its own longest ttl. If it cannot reach that
//!   many (a partition), the master stays out until it can, or for
//!   [`deployment_max_ttl`](RedlockBuilder::deployment_max_ttl) when one is declared.
//! - A master with `appendonly yes` and `appendfsync always` (read with `CONFIG GET`; unknown
//!   counts as no) whose marker survived a restart lost nothing: it keeps its epoch and counts
//!   at once. With `everysec` or RDB the marker survives but recent keys may not: it is
//!   treated as restarted empty.
//! - A master no client has seen before may be one whose data was just deleted, so it stays
//!   out for the longest ttl from first sight, unless an operator commissions it
//!   ([`Redlock::commission`], `redquorum guard commission`). After restoring a master from a
//!   backup, reset its epoch ([`Redlock::reset_epoch`]): the old marker would vouch for keys
//!   the backup lacks.
//!
//! Grants from a quarantined master do not count; it still receives releases and extensions.
//! [`Redlock::health`] shows each master's [`GuardStatus`]. The cost is nothing on the hot path
//! of a client that keeps locking (the epoch is read in the same pipeline as the `SET NX`,
//! and a ttl record rides along at most once per quarter ttl per master), one round trip
//! before the first lock after half a ttl idle, and a longest-ttl quarantine after each loss.
//!
//! *Why it is safe.* Let lock X, with ttl `t`, be held when master `m` loses X's key. Any
//! client that counts `m` afterwards verified it after the loss and so saw the new epoch,
//! whose start `D` is no earlier than the loss (after a restart, no earlier than the boot:
//! Redis's whole-second uptime is taken one second short). X's deadline is at most its last
//! write plus `t`, so at most `D + t`. Before X was taken, a quorum `C` held a fresh record
//! of at least `t` — one that lasts past X's deadline; the masters of `C` other than `m`, at
//! least `Q − 1` and assumed to keep their data while X is held, still hold it. Any `N − Q +
//! 1` masters other than `m` include one of them, so the reader's longest ttl is at least
//! `t` and `m` stays out past X's deadline. (Reading only the masters X was granted on
//! would not do: X's request, carrying its record, may reach one of them after the reader
//! looked — the model checker found that, see below.) If every master of `C` loses its data
//! while X is held, no record of `t` survives and the guard can only use the reading
//! client's own longest ttl (or `deployment_max_ttl`).
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
//! *Why `k` permits need `⌊k·N/(k+1)⌋ + 1` masters, not a majority.* Each master admits at
//! most `k` holders. Suppose `k + 1` holders were granted at once, each on `Q` masters: they
//! hold `(k + 1)·Q` admissions among the `N` masters, which have `k·N` places. If
//! `(k + 1)·Q > k·N` that is impossible. The smallest such `Q` is `⌊k·N/(k+1)⌋ + 1`
//! ([`rules::permit_quorum`]): a majority for `k = 1`, 4 of 5 for `k = 2` or `3`, and all 5 for
//! `k ≥ 4` — then one master down blocks every permit ([`Redlock::permit_quorum`] tells;
//! the client logs a warning). With a majority instead, 4 holders can share 3 permits on 5
//! masters: `tests/kinds_negative.rs` builds it.
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
//! *Why tokens increase.* Let B acquire after A. B's granting quorum and A's write-back
//! quorum share some master `k`. A's write-back reached `k` while A's key was on `k` (it
//! checked the key), and B's `SET NX` on `k` succeeded only after A's key left `k`. So B's
//! increment on `k` returns more than `T_A`, and `T_B`, the largest of B's values, exceeds
//! `T_A`. The argument needs what Redlock needs — A's key lives on a quorum until A's
//! deadline (clock rates within the drift allowance) — plus **counters that survive
//! restarts: AOF with `appendfsync always`**. The restart guard is not enough for tokens:
//! it keeps a master that lost its data from granting a lock someone still holds, but the
//! counters it lost may have been one of only `Q` copies of `T_A`, and a later quorum that
//! avoids the others would then hand out a smaller token. Taking the maximum from the
//! acquire round alone is **not** monotonic either: A may take its maximum from a master
//! that B's quorum does not include (`tests/fencing.rs` shows a later holder getting a
//! smaller token that way).
//!
//! # Restart guard
//! Redlock needs a master that crashed to come back with its keys or stay out for a ttl; a
//! master restarted empty (or flushed) that rejoins at once can grant a lock another client
//! still holds on the others. The guard (on by default,
//! [`restart_guard`](RedlockBuilder::restart_guard)) enforces "stay out", for every client:
//!
//! - Each master carries an **epoch** marker (`{prefix}guard`), shared by all clients. The
//!   first client to see that a master may have lost keys — its marker is gone, or it
//!   restarted without persisting every write — begins a new epoch in one atomic script, with
//!   the master's own time; the others read it. A master's grants count only on a connection
//!   the client verified after it was made (a restart breaks every connection), and only while
//!   the epoch read back with the grant is the verified one.
//! - A master in a new epoch stays out until the epoch's start plus the **deployment's
//!   longest ttl**. No lock with a ttl `t` is taken (or extended to a longer `t`) before a
//!   quorum of masters holds an acknowledged ttl record of at least `t` sent less than `t/2`
//!   ago (`{prefix}ttls`: records stay for `2t`); a client that keeps locking refreshes them
//!   in passing, one that was idle for half a ttl sends a record round first. A verifying
//!   client reads the records of at least `N − Q + 1` other masters — some of them are in
//!   that quorum — and never uses less than its own longest ttl. If it cannot reach that
//!   many (a partition), the master stays out until it can, or for
//!   [`deployment_max_ttl`](RedlockBuilder::deployment_max_ttl) when one is declared.
//! - A master with `appendonly yes` and `appendfsync always` (read with `CONFIG GET`; unknown
//!   counts as no) whose marker survived a restart lost nothing: it keeps its epoch and counts
//!   at once. With `everysec` or RDB the marker survives but recent keys may not: it is
//!   treated as restarted empty.
//! - A master no client has seen before may be one whose data was just deleted, so it stays
//!   out for the longest ttl from first sight, unless an operator commissions it
//!   ([`Redlock::commission`], `redquorum guard commission`). After restoring a master from a
//!   backup, reset its epoch ([`Redlock::reset_epoch`]): the old marker would vouch for keys
//!   the backup lacks.
//!
//! Grants from a quarantined master do not count; it still receives releases and extensions.
//! [`Redlock::health`] shows each master's [`GuardStatus`]. The cost is nothing on the hot path
//! of a client that keeps locking (the epoch is read in the same pipeline as the `SET NX`,
//! and a ttl record rides along at most once per quarter ttl per master), one round trip
//! before the first lock after half a ttl idle, and a longest-ttl quarantine after each loss.
//!
//! *Why it is safe.* Let lock X be held, with keys on a quorum `S`, when master `m` loses X's
//! key. Any client that counts `m` afterwards verified it after the loss and so saw the new
//! epoch, whose start `D` is no earlier than the loss. X's deadline is at most its last write
//! plus its ttl `t`, so at most `D + t`. The masters of `S` other than `m` — at least `Q − 1`,
//! which are assumed to keep their data while X is held — hold a record of at least `t` that
//! outlives X's key there; any `N − Q + 1` masters other than `m` include one of them. So the
//! reader either sees a record of at least `t` and keeps `m` out past X's deadline, or finds
//! it gone, which means X's key there is gone too and X's deadline has passed. If every master
//! holding a lock loses its data while the lock is held, no record of its ttl survives and the
//! guard can only use the reading client's own longest ttl (or `deployment_max_ttl`).
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
