//! Commands encoded once per request and shared by every member it goes to (building the
//! same command five times was a visible share of the client's CPU at high throughput).
//! The coordinator carries a [`Wire`] in each request without looking inside.

use std::sync::OnceLock;

use redis::{Cmd, Pipeline};

/// The encoded commands of one request, built on first use.
#[derive(Debug, Default)]
pub(crate) struct Wire {
    /// `SET key value NX PX ttl`.
    pub(crate) set_nx: OnceLock<Cmd>,
    /// `SET … NX PX`, then `HGET marker epoch`.
    pub(crate) guarded: OnceLock<Pipeline>,
    /// The ttl record, then `SET … NX PX`, then `HGET marker epoch`.
    pub(crate) guarded_recorded: OnceLock<Pipeline>,
    /// The release as a self-contained `EVAL`.
    pub(crate) release: OnceLock<Cmd>,
}
