//! Commands encoded once per request and shared by every member it goes to (building the
//! same command five times was a visible share of the client's CPU at high throughput).
//! The coordinator carries a [`Wire`] in each request without looking inside.
//!
//! Each builder sizes the command's buffers for what goes in, so a command costs two
//! allocations however long its arguments are (the release script's body made the argument
//! buffer grow four times).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use redis::{Cmd, Pipeline};

/// The encoded commands of one request, built on first use.
#[derive(Debug, Default)]
pub(crate) struct Wire {
    /// `SET key value NX PX ttl`.
    pub(crate) set_nx: OnceLock<Cmd>,
    /// `SET key value NX PX ttl`, then `PTTL key`: a waiting caller's attempt.
    pub(crate) set_nx_ttl: OnceLock<Pipeline>,
    /// `SET … NX PX`, then `HGET marker epoch` (then `PTTL key` when waiting).
    pub(crate) guarded: OnceLock<Pipeline>,
    /// The ttl record, then `SET … NX PX`, then `HGET marker epoch` (then `PTTL key` when
    /// waiting).
    pub(crate) guarded_recorded: OnceLock<Pipeline>,
    /// The release as a self-contained `EVAL`.
    pub(crate) release: OnceLock<Cmd>,
    /// The lock's acquires and its release (see [`Wire::enter`]): [`SEALED`] once the
    /// release has begun, plus the acquires between their check and their hand-over.
    gate: AtomicUsize,
    /// Per member, the connection generations that carried an acquire of this request whose
    /// answer has not come back, or 0: the first send, and its resend on a new connection
    /// after the first was found broken. What the release must not be overtaken by (see
    /// `Member::release`). Made by the first acquire, sized for every member.
    unanswered: OnceLock<Box<[[AtomicU64; 2]]>>,
}

/// Which send of an acquire to one member: the first, or its resend on a new connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Send {
    First = 0,
    Resend = 1,
}

/// The gate's bit saying that the lock's release has begun.
const SEALED: usize = 1 << (usize::BITS - 1);

/// An acquire between its check of the gate and the hand-over of its command to the
/// connection; dropping it closes the entry.
#[derive(Debug)]
pub(crate) struct Entry<'a>(&'a AtomicUsize);

impl Drop for Entry<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Wire {
    /// For an acquire about to hand its command to the connection: `None` once the lock's
    /// release has begun ([`Wire::seal`]), and then it must not be sent — it could reach its
    /// master after the release and leave our key there for a whole ttl. A late acquire
    /// (one still waiting for a connection or the restart guard at the decision) is sent
    /// while the lock is held, as before: a lock is then held on every master that could be
    /// reached, not only the first quorum. Hold the entry only over the poll that hands the
    /// command over (never across an await that suspends): the release waits for it.
    pub(crate) fn enter(&self) -> Option<Entry<'_>> {
        let before = self.gate.fetch_add(1, Ordering::SeqCst);
        let entry = Entry(&self.gate);
        (before & SEALED == 0).then_some(entry)
    }

    /// The lock's release begins: no acquire passes [`enter`](Wire::enter) from now on, and
    /// this returns once every acquire that passed it before has handed its command over, so
    /// that the release, sent after this, reaches every master after any acquire of ours.
    pub(crate) async fn seal(&self) {
        // SeqCst with `enter`'s increment: either that acquire sees the bit, or this sees
        // its entry open and waits for it (a poll of the acquire, a few microseconds).
        let mut open = self.gate.fetch_or(SEALED, Ordering::SeqCst) & !SEALED;
        while open != 0 {
            tokio::task::yield_now().await;
            open = self.gate.load(Ordering::SeqCst) & !SEALED;
        }
    }

    /// Member `index` of `members` is handed an acquire's `send` (the first, or its resend
    /// after the first was found broken) on the connection of `generation` (between
    /// [`enter`](Wire::enter) and the hand-over, so that a release sees it).
    pub(crate) fn sent(&self, members: usize, index: usize, send: Send, generation: u64) {
        let slots = self.unanswered.get_or_init(|| {
            (0..members)
                .map(|_| [AtomicU64::new(0), AtomicU64::new(0)])
                .collect()
        });
        if let Some(slot) = slots.get(index) {
            slot[send as usize].store(generation, Ordering::SeqCst);
        }
    }

    /// Member `index` answered its acquire's `send`: the server has run it.
    pub(crate) fn answered(&self, index: usize, send: Send) {
        if let Some(slot) = self.unanswered.get().and_then(|s| s.get(index)) {
            slot[send as usize].store(0, Ordering::SeqCst);
        }
    }

    /// The generations of the connections that carried an acquire (or its resend) to member
    /// `index` that has not been answered (the server may not have run it yet).
    pub(crate) fn unanswered(&self, index: usize) -> Vec<u64> {
        let Some(slot) = self.unanswered.get().and_then(|s| s.get(index)) else {
            return Vec::new();
        };
        slot.iter()
            .map(|g| g.load(Ordering::SeqCst))
            .filter(|&g| g != 0)
            .collect()
    }

    /// Whether the lock's release has begun.
    #[cfg(test)]
    pub(crate) fn sealed(&self) -> bool {
        self.gate.load(Ordering::SeqCst) & SEALED != 0
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

/// `PTTL key`: how long a holder's key has left (a waiting caller's attempts).
pub(crate) fn pttl(key: &str) -> Cmd {
    let mut cmd = Cmd::with_capacity(2, 4 + key.len());
    cmd.arg("PTTL").arg(key);
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
