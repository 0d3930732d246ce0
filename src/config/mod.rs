//! Validated options, no I/O: the [`RedlockBuilder`](crate::RedlockBuilder), the validated
//! configuration it produces, Sentinel groups as members, retry policy, URLs and resource
//! keys. Uses only the leaves.

pub(crate) mod builder;
pub(crate) mod group;
pub(crate) mod resources;
pub(crate) mod retry;
pub(crate) mod url;
pub(crate) mod validated;
