//! The fault proxy: per-(client, node) userspace TCP links on loopback that delay, drop,
//! blackhole or reset traffic at run time, on the test kit's own tokio runtime, with
//! delays kept by a timer thread of its own (`timer`) to within microseconds.

mod conn;
mod fault;
mod link;
mod outbound;
mod runtime;
mod set;
mod stats;
mod timer;

pub use fault::{Direction, Fault};
pub use link::LinkProxy;
pub(crate) use link::Shared;
pub use set::LinkSet;
pub use stats::{DirectionStats, LinkStats, TAP_CAPTURE_BYTES, TAP_MAX_EVENTS, TapEvent};
