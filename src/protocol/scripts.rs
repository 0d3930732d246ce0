//! The Lua scripts. Each `.lua` file states its contract in its header comment; the tests
//! in `scripts/tests.rs` pin those contracts against a real redis-server.
//!
//! The scripts that keep redquorum's own keys (epoch marker, ttl records, fencing counters)
//! share the helpers of `prelude.lua`, prepended when the script is built.

use std::sync::LazyLock;

use redis::Script;

const PRELUDE: &str = include_str!("scripts/prelude.lua");

/// A script made of the prelude and `body`, without comment lines: fewer bytes to send and
/// for the master to hash.
fn with_prelude(body: &str) -> String {
    strip_comments(&format!("{PRELUDE}\n{body}"))
}

macro_rules! script {
    ($(#[$doc:meta])* $name:ident, $source:ident, $file:literal) => {
        $(#[$doc])*
        pub(crate) fn $name() -> &'static Script {
            static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new($source()));
            &SCRIPT
        }

        source!($source, $file);
    };
}

macro_rules! source {
    ($source:ident, $file:literal) => {
        /// The script's source with the prelude, for `EVAL` or `SCRIPT LOAD`.
        pub(crate) fn $source() -> &'static str {
            static SOURCE: LazyLock<String> =
                LazyLock::new(|| with_prelude(include_str!(concat!("scripts/", $file))));
            &SOURCE
        }
    };
}

script!(
    /// Sets every lock key if none exists, records the ttl, counts fences, reads the epoch.
    acquire,
    acquire_source,
    "acquire.lua"
);
script!(
    /// Raises every key's expiry to at least ttl if each holds the value (and records the
    /// ttl): 1, else 0.
    extend,
    extend_source,
    "extend.lua"
);
script!(
    /// A renewal batch of plain mutex locks, one key each and the same ttl: raises each key's
    /// expiry where it holds its lock's value (and records the ttl once): 1 or 0 per key.
    extend_many,
    extend_many_source,
    "extend_many.lua"
);
script!(
    /// Raises the fence counters to the token where our keys hold our value: 1, else 0.
    fence,
    fence_source,
    "fence.lua"
);
// Records a ttl in the restart guard's ttl records; only ever sent as `EVAL` (in the
// acquire pipeline, where a NOSCRIPT must not let the `SET` run without its record).
source!(record_source, "record.lua");
// The longest ttl a master's records hold. Off the hot path, sent as `EVAL` with the body.
source!(ttl_read_source, "ttl_read.lua");
script!(
    /// Confirms a master's epoch or begins a new one.
    guard,
    guard_source,
    "guard.lua"
);
script!(
    /// Commissions a master or resets its epoch.
    commission,
    commission_source,
    "commission.lua"
);
// Withdraws an epoch's durability after a run-time persistence change. Off the hot path, sent as `EVAL` with the body.
source!(withdraw_source, "withdraw.lua");
// Remembers, or recalls, the servers in service. Off the hot path, sent as `EVAL` with the body.
source!(members_source, "members.lua");

script!(
    /// Takes a read or a write hold of a read-write lock.
    rw_acquire,
    rw_acquire_source,
    "rw_acquire.lua"
);
script!(
    /// Takes a permit of a counting semaphore.
    sem_acquire,
    sem_acquire_source,
    "sem_acquire.lua"
);
script!(
    /// Extends a reader's or a permit's hold, only if it is ours and live.
    holder_extend,
    holder_extend_source,
    "holder_extend.lua"
);
script!(
    /// The fencing write-back of a permit.
    holder_fence,
    holder_fence_source,
    "holder_fence.lua"
);

/// Every script sent as `EVALSHA`, for [`Redlock::load_scripts`](crate::Redlock::load_scripts)
/// (the releases and the ttl record are self-contained `EVAL`s and need no cache).
pub(crate) fn cached_sources() -> [&'static str; 11] {
    [
        acquire_source(),
        extend_source(),
        extend_many_source(),
        fence_source(),
        guard_source(),
        commission_source(),
        rw_acquire_source(),
        sem_acquire_source(),
        holder_extend_source(),
        holder_fence_source(),
        FENCED_SET_SOURCE,
    ]
}

/// The release of a read-write hold or a permit (self-contained, for `EVAL`).
pub(crate) fn holder_release_body() -> &'static str {
    static BODY: LazyLock<String> =
        LazyLock::new(|| strip_comments(include_str!("scripts/holder_release.lua")));
    &BODY
}

/// Writes a value only if the writer's token is at least the recorded one: 1, else 0.
pub(crate) fn fenced_set() -> &'static Script {
    static SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(FENCED_SET_SOURCE));
    &SCRIPT
}

/// Source of the fenced write script.
pub(crate) const FENCED_SET_SOURCE: &str = include_str!("scripts/fenced_set.lua");

/// The release script (deletes every key that holds the value, returns how many) without
/// its header comment, for `EVAL`.
pub(crate) fn release_body() -> &'static str {
    static BODY: LazyLock<String> =
        LazyLock::new(|| strip_comments(include_str!("scripts/release.lua")));
    &BODY
}

/// `set_or_mine.lua` (SET NX PX, or already ours), without its header comment, for `EVAL`:
/// an acquire sent again on a new connection (see `Member::acquire_one`).
pub(crate) fn set_or_mine_body() -> &'static str {
    static BODY: LazyLock<String> =
        LazyLock::new(|| strip_comments(include_str!("scripts/set_or_mine.lua")));
    &BODY
}

fn strip_comments(source: &str) -> String {
    source
        .lines()
        .filter(|l| {
            let l = l.trim_start();
            !l.is_empty() && !l.starts_with("--")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod kind_tests;
#[cfg(test)]
mod tests;
