//! The quorum, free of redis types: fan-out and decision over the
//! [`Voter`](quorum::Voter) seam, commands encoded once per request, and the Lua scripts with
//! their contracts. Uses only config and the leaves.

pub(crate) mod quorum;
pub(crate) mod scripts;
#[cfg(any(test, redquorum_unsafe))]
#[cfg_attr(not(test), allow(dead_code))] // the benches use the memory master only
pub(crate) mod testing;
pub(crate) mod wire;
