//! One quorum member: a single master or the primary a Sentinel group names, its reconnecting
//! connection (generations, outbox), the restart guard's verdict, what sentinels and
//! clusters report, and the [`Voter`](crate::protocol::quorum::Voter) the coordinator
//! talks to. Uses the protocol, config and leaves below it.

pub(crate) mod announce;
pub(crate) mod connection;
pub(crate) mod kinds;
pub(crate) mod node;
pub(crate) mod restart_guard;
#[allow(dead_code)] // used by cluster and sentinel members (next)
pub(crate) mod topology;
pub(crate) mod voter;
