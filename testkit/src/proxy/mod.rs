//! The fault proxy: per-(client, node) userspace TCP links on loopback that delay, drop,
//! blackhole or reset traffic at run time, on the test kit's own tokio runtime, with
//! delays kept by a timer thread of its own (`timer`) to within microseconds.
//!
//! Ours for a reason: the tools that exist (toxiproxy, `tc netem`) run as another process
//! or need root and a network namespace, and none of them has what the tests here ask for:
//! a fault per direction (a request applied but its reply lost), changed at run time
//! between two statements of a test, one link per client so that clients see different
//! networks, and a tap that records the requests a client wrote, for assertions.

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
