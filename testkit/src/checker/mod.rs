//! The mutual-exclusion checker: records every critical section of every client, sweeps
//! the intervals for overlaps, and counts lost updates on an independent referee.
//!
//! Ours for a reason: it is the judge of the library's one promise (mutual exclusion), so
//! it must not share code with what it judges, and no crate checks Redlock's holds against
//! monotonic time with a second, clock-free witness (the referee).
//!
//! - `holds`: [`Hold`] (one critical section on the monotonic clock) and [`Recorder`].
//! - `sweep`: [`analyse`], [`find_overlaps`], [`hand_overs`]: the sort-and-sweep.
//! - `referee`: [`Referee`], a separate fault-free `redis-server` with a read-modify-write
//!   counter per resource; lost increments betray concurrent critical sections.
//! - `seed`: the printed seed every random choice derives from, and the soak factor.
//! - `report`: [`Checker`], which ties them together, and [`Report`] with its [`Verdict`]
//!   and one-line summary. Too few hand-overs is *inconclusive*, which tests treat as a
//!   failure.

mod holds;
mod referee;
mod report;
mod seed;
pub(crate) mod sweep;

pub use holds::{Hold, Recorder};
pub use referee::{Referee, RefereeSession, RefereeTally};
pub use report::{Checker, DEFAULT_MIN_HAND_OVERS, Report, Verdict};
pub use seed::{
    DEFAULT_SOAK_FACTOR, SEED_ENV, SOAK_ENV, SUMMARY_FILE_ENV, derive_seed, rng_for, seed_from_env,
    soak_factor,
};
pub use sweep::{Analysis, Overlap, analyse, find_overlaps, hand_overs};
