//! A lock once granted: the [`Lock`](crate::Lock) handle, keep-alive, the lease, the batched
//! renewal task, the held state, and the core every handle of one client shares. Uses the
//! layers below (members, protocol, config, leaves), never the API above.

pub(crate) mod client_core;
pub(crate) mod held;
pub(crate) mod keepalive;
pub(crate) mod lease;
pub(crate) mod lock;
pub(crate) mod renewal;
