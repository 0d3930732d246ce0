//! What users call: the [`Redlock`](crate::Redlock) client and its options, scopes
//! (`with_lock`), reentrant owners, health checks, the fencing helper. The top layer: it may
//! use every layer below it, and nothing uses it but the crate root's re-exports.

pub(crate) mod client;
pub(crate) mod fencing;
pub(crate) mod health;
pub(crate) mod owner;
pub(crate) mod scope;
pub(crate) mod waiting;
