//! A model of redquorum's protocol in [`stateright`], checked on small deployments at the
//! size where each claim can fail: three or five members, clients with different ttls and
//! partitions of their own, messages delayed, reordered across members, duplicated and
//! lost, members restarted with and without persistence, flushed, replaced, commissioned,
//! running fast, switched to `appendfsync everysec` at run time, a Sentinel group that
//! fails over, and connections torn down with bytes still on the server. See
//! `model/README.md`.
//!
//! # Layout
//! - `config` — [`Config`]: one instance (deployment, protocol variant, bounds, search).
//! - `presets` — the instances `make model` checks, and the negative controls.
//! - `state` — [`state::State`]: servers, clients and their locks, connections.
//! - `master` — what each server does atomically (the Lua scripts).
//! - `client` — acquire, decide, extend (batched), release, cleanup, fencing write-back.
//! - `guard` — the restart guard's client side (v3, the v2 reader rule, the old guard).
//! - `group` — a Sentinel group member: replication, `WAIT`, failover.
//! - `cluster` — a Redis Cluster member: two slots on two shards, failovers, slot moves,
//!   `MOVED`, `WAIT` per shard.
//! - `generation` — connection generations: teardown, bytes the server still holds.
//! - `faults` — restarts, flushes, replacements, commissioning, `CONFIG SET`.
//! - `model` — [`Redlock`], the stateright [`Model`](stateright::Model): actions,
//!   properties.
//! - `run` — runs the checker, reports verdicts and readable counterexample traces.
//! - `trace` — one line per step.

mod client;
mod cluster;
mod config;
mod faults;
mod generation;
mod group;
mod guard;
mod log;
pub mod master;
mod model;
mod presets;
mod run;
mod shrink;
pub mod state;
mod symmetry;
mod trace;
mod walk;

pub use config::*;
pub use master::restart_anchor_ms;
pub use model::{Action, MUTEX, OVERWRITE, PERMITS, RELEASED, Redlock, TOKENS, WRITERS};
pub use presets::{GUARD, Size, V3, base, client, five, suite, two_losses};
pub use run::{MAX_STATES, Options, Outcome, Verdict, check, check_with};
