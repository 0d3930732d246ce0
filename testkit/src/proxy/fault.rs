//! `Direction` and `Fault`: what a link does to the bytes that cross it.

use std::time::Duration;

/// Which way through a link a fault applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Client to server: requests.
    ToServer,
    /// Server to client: replies.
    ToClient,
    /// Both directions.
    Both,
}

impl Direction {
    /// The one or two concrete directions this stands for.
    pub(crate) fn indices(self) -> &'static [usize] {
        match self {
            Self::ToServer => &[TO_SERVER],
            Self::ToClient => &[TO_CLIENT],
            Self::Both => &[TO_SERVER, TO_CLIENT],
        }
    }
}

/// Index of the client-to-server direction in per-direction arrays.
pub(crate) const TO_SERVER: usize = 0;
/// Index of the server-to-client direction in per-direction arrays.
pub(crate) const TO_CLIENT: usize = 1;

/// What a link does to each chunk of bytes read in one direction.
///
/// The fault is sampled when a chunk *arrives* at the proxy, so changing it affects chunks
/// read from then on, on existing and new connections alike; chunks already queued keep
/// their release time. Connection set-up and close (FIN) are never blocked by a fault: the
/// close is forwarded after the last queued chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Fault {
    /// Forward immediately (after any chunk still queued before it).
    #[default]
    Pass,
    /// Hold each chunk for `base` plus a uniform random duration in `[0, jitter]`.
    ///
    /// Order within a connection and direction is preserved: a chunk is released at
    /// `max(arrival + sampled delay, release time of the previous chunk)`. The reader is
    /// never blocked: chunks wait in a queue, and the proxy's timer thread writes each one
    /// to its socket at its release time — never earlier, and on a machine with a core to
    /// spare within some tens of microseconds after (not on tokio's millisecond timer), so
    /// that sub-millisecond delays mean what they say.
    Delay {
        /// Minimum added latency.
        base: Duration,
        /// Maximum extra random latency on top of `base`.
        jitter: Duration,
    },
    /// Read and discard; nothing is forwarded and the connection stays open, so the peer
    /// waits until its own time-out (a silent network partition). With
    /// [`Direction::Both`] neither requests nor replies get through.
    ///
    /// A connection that had bytes discarded is reset (RST on both sides) when data would
    /// next get through after the fault is lifted: a real TCP stream cannot lose bytes in
    /// the middle and carry on, and a multiplexing client would otherwise pair replies with
    /// the wrong requests. New connections work normally.
    Blackhole,
    /// Discard the data in this direction. With [`Direction::ToClient`] this is "applied but
    /// unacknowledged": requests reach Redis and execute, replies are thrown away.
    ///
    /// On the wire this is the same as [`Fault::Blackhole`] for one direction (including
    /// the reset of the connection once data would get through again); the two names let a
    /// test say which failure it means.
    Drop,
}

impl Fault {
    /// A fixed delay without jitter.
    pub fn delay(base: Duration) -> Self {
        Self::Delay {
            base,
            jitter: Duration::ZERO,
        }
    }

    /// True if data in this direction is discarded.
    pub(crate) fn discards(self) -> bool {
        matches!(self, Self::Blackhole | Self::Drop)
    }
}
