//! Members beyond a single master: Sentinel groups; TLS.

mod groups_chaos;
pub(crate) mod sentinel_failback;
mod sentinel_member;
pub(crate) mod sentinel_reader;
pub(crate) mod sentinel_split_brain;
#[cfg(feature = "tls-rustls")]
mod tls;
