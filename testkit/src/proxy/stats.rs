//! Counters and the request tap of one link.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Instant;

use super::fault::{TO_CLIENT, TO_SERVER};

/// At most this many bytes of each chunk are kept in a [`TapEvent`].
pub const TAP_CAPTURE_BYTES: usize = 512;
/// The tap stops recording after this many events (until [`LinkProxy::clear_tap`]).
///
/// [`LinkProxy::clear_tap`]: crate::LinkProxy::clear_tap
pub const TAP_MAX_EVENTS: usize = 100_000;

/// Traffic in one direction of a link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DirectionStats {
    /// Bytes written to the other side.
    pub bytes: u64,
    /// Chunks (reads) written to the other side.
    pub chunks: u64,
    /// Chunks discarded by [`Fault::Blackhole`](crate::Fault::Blackhole) or
    /// [`Fault::Drop`](crate::Fault::Drop).
    pub dropped_chunks: u64,
    /// Bytes discarded.
    pub dropped_bytes: u64,
    /// Chunks read and held by a [`Fault::Delay`](crate::Fault::Delay), not written yet.
    pub held_chunks: u64,
}

/// A snapshot of a link's counters since it was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LinkStats {
    /// Requests: client to server.
    pub to_server: DirectionStats,
    /// Replies: server to client.
    pub to_client: DirectionStats,
    /// Connections accepted and forwarded.
    pub connections_accepted: u64,
    /// Connections closed at once because of [`LinkProxy::refuse_new`](crate::LinkProxy::refuse_new).
    pub connections_refused: u64,
    /// Connections currently open.
    pub connections_open: u64,
}

/// One client-to-server chunk, recorded at the moment it is written to the server socket.
///
/// The timestamp is taken immediately before the write, so the server cannot have received
/// the bytes earlier than [`at`](Self::at), and the event is visible in
/// [`LinkProxy::tap`](crate::LinkProxy::tap) before any reply to it can reach the client.
/// (If the connection dies during that write, the chunk is recorded but never arrives.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapEvent {
    /// When the chunk was written to the server.
    pub at: Instant,
    /// Which connection of the link (numbered from 0 in accept order).
    pub connection: u64,
    /// The chunk's full length.
    pub len: usize,
    /// Its first [`TAP_CAPTURE_BYTES`] bytes.
    pub data: Vec<u8>,
}

impl TapEvent {
    /// The captured bytes as text (lossy), handy to look for a command name.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.data).into_owned()
    }
}

#[derive(Debug, Default)]
struct DirectionCounters {
    bytes: AtomicU64,
    chunks: AtomicU64,
    dropped_chunks: AtomicU64,
    dropped_bytes: AtomicU64,
    held_chunks: AtomicU64,
}

/// The live counters behind [`LinkStats`]; relaxed atomics, as they are only reported.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    dirs: [DirectionCounters; 2],
    pub(crate) accepted: AtomicU64,
    pub(crate) refused: AtomicU64,
    pub(crate) open: AtomicU64,
}

impl Counters {
    pub(crate) fn forwarded(&self, dir: usize, len: usize) {
        let d = &self.dirs[dir];
        d.bytes.fetch_add(len as u64, Ordering::Relaxed);
        d.chunks.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn dropped(&self, dir: usize, len: usize) {
        let d = &self.dirs[dir];
        d.dropped_bytes.fetch_add(len as u64, Ordering::Relaxed);
        d.dropped_chunks.fetch_add(1, Ordering::Relaxed);
    }

    /// A chunk of `dir` is held for later (`true`), or no longer (`false`).
    pub(crate) fn held(&self, dir: usize, held: bool) {
        let d = &self.dirs[dir].held_chunks;
        if held {
            d.fetch_add(1, Ordering::Relaxed);
        } else {
            d.fetch_sub(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn snapshot(&self) -> LinkStats {
        let dir = |i: usize| {
            let d = &self.dirs[i];
            DirectionStats {
                bytes: d.bytes.load(Ordering::Relaxed),
                chunks: d.chunks.load(Ordering::Relaxed),
                dropped_chunks: d.dropped_chunks.load(Ordering::Relaxed),
                dropped_bytes: d.dropped_bytes.load(Ordering::Relaxed),
                held_chunks: d.held_chunks.load(Ordering::Relaxed),
            }
        };
        LinkStats {
            to_server: dir(TO_SERVER),
            to_client: dir(TO_CLIENT),
            connections_accepted: self.accepted.load(Ordering::Relaxed),
            connections_refused: self.refused.load(Ordering::Relaxed),
            connections_open: self.open.load(Ordering::Relaxed),
        }
    }
}

/// The request tap: off by default, so untapped links pay one atomic load per chunk.
#[derive(Debug, Default)]
pub(crate) struct Tap {
    on: AtomicBool,
    events: Mutex<Vec<TapEvent>>,
}

impl Tap {
    pub(crate) fn set(&self, on: bool) {
        self.on.store(on, Ordering::SeqCst);
    }

    pub(crate) fn record(&self, connection: u64, data: &[u8]) {
        if !self.on.load(Ordering::Relaxed) {
            return;
        }
        let at = Instant::now();
        let mut events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        if events.len() < TAP_MAX_EVENTS {
            events.push(TapEvent {
                at,
                connection,
                len: data.len(),
                data: data[..data.len().min(TAP_CAPTURE_BYTES)].to_vec(),
            });
        }
    }

    pub(crate) fn events(&self) -> Vec<TapEvent> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn clear(&self) {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}
