//! Per-node clock skew: an `LD_PRELOAD` shim overriding `gettimeofday` in `redis-server`,
//! built at run time from `shim.c`, and [`ClockControl`], which drives it through a file.
//!
//! Ours for a reason: libfaketime, the usual tool, hangs Debian's jemalloc-linked
//! `redis-server` (its constructor allocates and takes locks that jemalloc's own
//! initialisation re-enters); the shim never allocates and takes no lock (see `shim.c`).

mod compile;
mod control;

pub(crate) use compile::shim_library;
pub use control::{APPLY_LATENCY, CLOCK_FILE_ENV, ClockControl};
