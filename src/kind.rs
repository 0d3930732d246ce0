//! Lock kinds: the plain mutex, read and write holds of a read-write lock, and permits of a
//! counting semaphore — what each asks of a member, and what can block it.

use std::fmt;

use crate::rules;
use crate::value::LockValue;

/// What a lock is: see the crate docs, "Lock kinds", for each kind's quorum and guarantees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum LockKind {
    /// One holder at a time (the default).
    #[default]
    Mutex,
    /// A read hold of a read-write lock: any number of readers at once, never with a
    /// writer.
    Read,
    /// A write hold of a read-write lock: one writer, never with a reader.
    Write,
    /// One of `k` permits of a counting semaphore: at most `k` holders at once.
    Permit {
        /// The number of permits (the same for every client of a resource).
        k: usize,
    },
}

impl LockKind {
    /// Votes needed among `n` members: a majority, except for `k` permits, which need
    /// `⌊k·n/(k+1)⌋ + 1` (see [`rules::permit_quorum`]). The one place a quorum is chosen:
    /// requests, the client ([`Redlock::quorum`](crate::Redlock::quorum)) and stats ask here.
    pub(crate) fn quorum(self, n: usize) -> usize {
        match self {
            Self::Permit { k } => rules::permit_quorum(n, k),
            _ => rules::majority(n),
        }
    }
}

impl fmt::Display for LockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Mutex => f.write_str("mutex"),
            Self::Read => f.write_str("read"),
            Self::Write => f.write_str("write"),
            Self::Permit { k } => write!(f, "permit of {k}"),
        }
    }
}

/// Who keeps a member from granting: what a refusal says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Holder {
    /// Another holder of the lock (a mutex, or a lock of another kind on the same keys).
    Lock,
    /// A writer holds the read-write lock.
    Writer,
    /// Readers hold the read-write lock (a writer waits for them).
    Readers,
    /// A writer is waiting (writer preference): new readers wait for it.
    PendingWriter,
    /// Every permit of the semaphore is held.
    PermitsFull,
    /// The semaphore's permits were taken with another permit count: every client of a
    /// resource must use the same `k`.
    OtherPermitCount {
        /// The count the holders use.
        k: usize,
    },
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Lock => f.write_str("another client"),
            Self::Writer => f.write_str("a writer"),
            Self::Readers => f.write_str("readers"),
            Self::PendingWriter => f.write_str("a waiting writer (writer preference)"),
            Self::PermitsFull => f.write_str("holders of every permit"),
            Self::OtherPermitCount { k } => write!(
                f,
                "holders using {k} permits (every client of a semaphore must use the same count)"
            ),
        }
    }
}

impl Holder {
    /// The blocker a kind script names (`writer`, `readers`, …).
    pub(crate) fn parse(s: &str, k: Option<usize>) -> Self {
        match s {
            "writer" => Self::Writer,
            "readers" => Self::Readers,
            "pending-writer" => Self::PendingWriter,
            "full" => Self::PermitsFull,
            "count-mismatch" => Self::OtherPermitCount { k: k.unwrap_or(0) },
            _ => Self::Lock,
        }
    }
}

/// A read-write lock's keys on each master, by role (named by
/// [`Namespace::rw`](crate::config::resources::Namespace::rw)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RwKeys {
    /// The readers: a holder set, each reader's value scored by its expiry.
    pub(crate) readers: String,
    /// The writer: a string, the writer's value, with its expiry.
    pub(crate) writer: String,
    /// The pending writer (writer preference): a waiting writer's intent, with its expiry.
    pub(crate) pending: String,
}

impl RwKeys {
    /// Every key, as a request lists them: readers, writer, pending writer.
    pub(crate) fn all(&self) -> [String; 3] {
        [
            self.readers.clone(),
            self.writer.clone(),
            self.pending.clone(),
        ]
    }
}

/// A request's kind, with its keys by role and what its scripts need beyond the public
/// [`LockKind`]. A mutex's keys are the request's own (one per resource).
#[derive(Debug, Clone)]
pub(crate) enum KindRequest {
    Mutex,
    Read {
        keys: RwKeys,
    },
    Write {
        keys: RwKeys,
        /// Stays the same for every attempt of one lock call, so that a waiting writer's
        /// marker survives its retries.
        intent: LockValue,
        prefer_writers: bool,
    },
    Permit {
        holders: String,
        k: usize,
    },
}

impl KindRequest {
    pub(crate) fn public(&self) -> LockKind {
        match self {
            Self::Mutex => LockKind::Mutex,
            Self::Read { .. } => LockKind::Read,
            Self::Write { .. } => LockKind::Write,
            Self::Permit { k, .. } => LockKind::Permit { k: *k },
        }
    }
}
