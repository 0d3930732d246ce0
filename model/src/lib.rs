//! A model of redquorum's protocol in [`stateright`], checked exhaustively on small
//! deployments: three masters, two or three clients with different ttls, messages delayed,
//! reordered across masters, duplicated and lost, masters restarted with and without
//! persistence, flushed, and running fast. See `model/README.md`.
//!
//! # Layout
//! - `config` — [`Config`]: one instance (deployment, protocol variant, bounds).
//! - `presets` — the instances `make model` checks, and the negative controls.
//! - `state` — [`state::State`]: masters, clients, connections.
//! - `master` — what each master does atomically (the Lua scripts).
//! - `client` — acquire, decide, extend, release, cleanup, fencing write-back.
//! - `guard` — the restart guard's client side (v2, and the old one for control (b)).
//! - `model` — [`Redlock`], the stateright [`Model`](stateright::Model): actions,
//!   properties.
//! - `run` — runs the checker, reports verdicts and readable counterexample traces.
//! - `trace` — one line per step.

mod client;
mod config;
mod guard;
mod log;
pub mod master;
mod model;
mod presets;
mod run;
pub mod state;
mod trace;

pub use config::*;
pub use master::restart_anchor_ms;
pub use model::{Action, MUTEX, OVERWRITE, PERMITS, Redlock, TOKENS, WRITERS};
pub use presets::{GUARD, Size, base, client, suite};
pub use run::{MAX_STATES, Outcome, Verdict, check, check_with};
