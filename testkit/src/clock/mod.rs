//! Per-node clock skew: an `LD_PRELOAD` shim overriding `gettimeofday` in `redis-server`,
//! built at run time from `shim.c`, and [`ClockControl`], which drives it through a file.

mod compile;
mod control;

pub(crate) use compile::shim_library;
pub use control::{APPLY_LATENCY, CLOCK_FILE_ENV, ClockControl};
