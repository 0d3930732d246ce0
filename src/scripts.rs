//! The Lua scripts. Each `.lua` file states its contract in its header comment; the tests
//! at the bottom pin those contracts against a real redis-server.

use std::sync::LazyLock;

use redis::Script;

static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/acquire.lua")));
static EXTEND: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/extend.lua")));
static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/release.lua")));

/// Sets every key to the value with PX ttl if none exists: 1, else 0.
pub(crate) fn acquire() -> &'static Script {
    &ACQUIRE
}

/// Raises every key's expiry to at least ttl if each holds the value: 1, else 0.
pub(crate) fn extend() -> &'static Script {
    &EXTEND
}

/// Deletes every key that holds the value: the number deleted.
pub(crate) fn release() -> &'static Script {
    &RELEASE
}

#[cfg(all(test, any()))]
mod tests;
