//! The Lua scripts. Each `.lua` file states its contract in its header comment; the tests
//! at the bottom pin those contracts against a real redis-server.

use std::sync::LazyLock;

use redis::Script;

static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("scripts/acquire.lua")));
/// Source of the extend script, for loading it into a pipeline after NOSCRIPT.
pub(crate) const EXTEND_SOURCE: &str = include_str!("scripts/extend.lua");

static EXTEND: LazyLock<Script> = LazyLock::new(|| Script::new(EXTEND_SOURCE));

static FENCE: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("scripts/fence.lua")));

/// Source of the fenced write script.
pub(crate) const FENCED_SET_SOURCE: &str = include_str!("scripts/fenced_set.lua");

static FENCED_SET: LazyLock<Script> = LazyLock::new(|| Script::new(FENCED_SET_SOURCE));

/// Raises the fence counters to the token where our keys hold our value: 1, else 0.
pub(crate) fn fence() -> &'static Script {
    &FENCE
}

/// Writes a value only if the writer's token is at least the recorded one: 1, else 0.
pub(crate) fn fenced_set() -> &'static Script {
    &FENCED_SET
}

/// Sets every lock key if none exists, counts fences, reads the guard marker.
pub(crate) fn acquire() -> &'static Script {
    &ACQUIRE
}

/// Raises every key's expiry to at least ttl if each holds the value: 1, else 0.
pub(crate) fn extend() -> &'static Script {
    &EXTEND
}

/// The release script (deletes every key that holds the value, returns how many) without
/// its header comment, for `EVAL`: fewer bytes to send and
/// for the master to hash on every call.
pub(crate) fn release_body() -> &'static str {
    static BODY: LazyLock<String> =
        LazyLock::new(|| strip_comments(include_str!("scripts/release.lua")));
    &BODY
}

fn strip_comments(source: &str) -> String {
    source
        .lines()
        .filter(|l| !l.trim_start().starts_with("--"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests;
