//! Commands encoded once per request and shared by every member it goes to (building the
//! same command five times was a visible share of the client's CPU at high throughput).
//! The coordinator carries a [`Wire`] in each request without looking inside.
//!
//! Each builder sizes the command's buffers for what goes in, so a command costs two
//! allocations however long its arguments are (the release script's body made the argument
//! buffer grow four times).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

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
    /// Set when the acquire round has been decided: requests of it not sent yet are not
    /// sent any more (see [`Wire::seal`]).
    sealed: AtomicBool,
}

impl Wire {
    /// The round these commands belong to has been decided and its answers still to come
    /// are left to be collected: an acquire that has not reached its master yet (waiting
    /// for a connection or the restart guard) must not reach it later, when it could land
    /// after the lock's release. Members check [`sealed`](Wire::sealed) right before each
    /// send that follows a wait.
    pub(crate) fn seal(&self) {
        self.sealed.store(true, Ordering::Release);
    }

    /// Whether [`seal`](Wire::seal) was called.
    pub(crate) fn sealed(&self) -> bool {
        self.sealed.load(Ordering::Acquire)
    }
}

/// Room for a number's decimal digits.
const DIGITS: usize = 20;

/// `SET key value NX PX ttl_ms`.
pub(crate) fn set_nx(key: &str, value: &str, ttl_ms: u64) -> Cmd {
    let mut cmd = Cmd::with_capacity(6, 3 + key.len() + value.len() + 2 + 2 + DIGITS);
    cmd.arg("SET")
        .arg(key)
        .arg(value)
        .arg("NX")
        .arg("PX")
        .arg(ttl_ms);
    cmd
}

/// `HGET key field`.
pub(crate) fn hget(key: &str, field: &str) -> Cmd {
    let mut cmd = Cmd::with_capacity(3, 4 + key.len() + field.len());
    cmd.arg("HGET").arg(key).arg(field);
    cmd
}

/// `EVAL body numkeys keys… args…`: a script that needs no cache on the server.
pub(crate) fn eval<'a>(
    body: &str,
    keys: &[impl AsRef<str>],
    args: impl IntoIterator<Item = &'a str> + Clone,
) -> Cmd {
    script("EVAL", body, keys, args)
}

/// `EVALSHA sha numkeys keys… args…`: a script the server has cached.
pub(crate) fn evalsha<'a>(
    sha: &str,
    keys: &[impl AsRef<str>],
    args: impl IntoIterator<Item = &'a str> + Clone,
) -> Cmd {
    script("EVALSHA", sha, keys, args)
}

fn script<'a>(
    verb: &str,
    script: &str,
    keys: &[impl AsRef<str>],
    args: impl IntoIterator<Item = &'a str> + Clone,
) -> Cmd {
    let data = verb.len()
        + script.len()
        + DIGITS
        + keys.iter().map(|k| k.as_ref().len()).sum::<usize>()
        + args.clone().into_iter().map(str::len).sum::<usize>();
    let arity = 3 + keys.len() + args.clone().into_iter().count();
    let mut cmd = Cmd::with_capacity(arity, data);
    cmd.arg(verb).arg(script).arg(keys.len());
    for key in keys {
        cmd.arg(key.as_ref());
    }
    for arg in args {
        cmd.arg(arg);
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(cmd: &Cmd) -> String {
        String::from_utf8(cmd.get_packed_command()).expect("text")
    }

    #[test]
    fn commands_encode_as_redis_rs_builds_them() {
        let ours = set_nx("k", "v", 1500);
        let theirs = redis::cmd("SET")
            .arg("k")
            .arg("v")
            .arg("NX")
            .arg("PX")
            .arg(1500u64)
            .clone();
        assert_eq!(words(&ours), words(&theirs));
        assert_eq!(
            words(&hget("m", "epoch")),
            words(redis::cmd("HGET").arg("m").arg("epoch"))
        );
        let ours = eval("return 1", &["a", "b"], ["v"]);
        let theirs = redis::cmd("EVAL")
            .arg("return 1")
            .arg(2usize)
            .arg("a")
            .arg("b")
            .arg("v")
            .clone();
        assert_eq!(words(&ours), words(&theirs));
    }
}
