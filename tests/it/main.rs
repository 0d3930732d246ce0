//! The integration tests, one binary: real `redis-server` processes on free ports (started by
//! the test kit), grouped by concern. Helpers shared by every module are in [`common`].
//!
//! - `basics` — the lock's contract on healthy masters: acquire, extend, release, fencing,
//!   cancellation, health checks, misconfigured servers.
//! - `held` — locks kept alive: `with_lock`, leases, batched renewal of many locks.
//! - `guard` — the restart guard: epochs, ttl records, commissioning, durability, data losses.
//! - `kinds` — read-write locks and semaphores.
//! - `members` — Sentinel groups as members, TLS.
//! - `faults` — the mutual-exclusion checker under network, node, client and clock faults.
//! - `negative` — negative controls: each mechanism switched off must produce the overlap,
//!   so that the checker is known to see it. Those that need an unsafe knob are built only
//!   with it (see the Makefile).
//! - `ops` — what operators see: metrics (built with `--features metrics`), a master that
//!   cannot run scripts.
//! - `source` — checks on the sources themselves: the module graph, the claims ledger.

mod basics;
mod common;
mod faults;
mod guard;
mod held;
mod kinds;
mod members;
mod negative;
mod ops;
mod source;
