//! `Outbound`: one direction's way out of the proxy — the socket it writes to, the chunks
//! queued on the timer for it, and what the socket could not take at once.
//!
//! Every write to the socket happens under `Outbound`'s lock, from one of three places: the
//! reader (a chunk with no delay and nothing queued before it), the timer thread (a chunk
//! whose due time came) or the direction's flush task (what a full socket left over). The
//! lock makes them one writer, and each of them appends to the leftovers instead of writing
//! while there are any, so bytes leave in the order they arrived.

use std::collections::VecDeque;
use std::io;
use std::net::Shutdown;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Instant;

use socket2::SockRef;
use tokio::net::TcpStream;
use tokio::sync::Notify;

use super::fault::TO_SERVER;
use super::link::Shared;
use super::timer::Job;

/// What a reader hands its direction: a chunk, or the peer's close.
pub(crate) enum Item {
    Chunk(Vec<u8>),
    Eof,
}

/// The writing end of one direction of one connection.
pub(crate) struct Outbound {
    to: Arc<TcpStream>,
    dir: usize,
    connection: u64,
    link: Arc<Shared>,
    state: Mutex<State>,
    /// Signalled when there are leftovers to write or the direction has ended.
    changed: Notify,
}

#[derive(Default)]
struct State {
    /// Items queued on the timer and not released yet: a new chunk must queue behind them
    /// even if it has no delay of its own.
    scheduled: usize,
    /// Released chunks the socket could not take yet, oldest first.
    leftovers: VecDeque<Leftover>,
    /// The close was released behind the leftovers.
    eof: bool,
    /// Nothing more is written: the close was forwarded, or a write failed.
    closed: bool,
    /// The failed write, for the flush task to report.
    error: Option<io::Error>,
}

struct Leftover {
    data: Vec<u8>,
    written: usize,
}

/// A timer job: release one item of one direction, unless its connection is gone.
pub(crate) struct Release {
    out: Weak<Outbound>,
    item: Item,
    /// The link's counters and the direction, to count the chunk out of those held.
    link: Arc<Shared>,
    dir: usize,
}

impl Job for Release {
    fn run(self) {
        if matches!(self.item, Item::Chunk(_)) {
            self.link.counters.held(self.dir, false);
        }
        if let Some(out) = self.out.upgrade() {
            let mut state = out.lock();
            state.scheduled -= 1;
            out.release(&mut state, self.item);
        }
    }
}

impl Outbound {
    pub(crate) fn new(to: Arc<TcpStream>, dir: usize, connection: u64, link: Arc<Shared>) -> Self {
        Self {
            to,
            dir,
            connection,
            link,
            state: Mutex::new(State::default()),
            changed: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Hands `item`, read at `now`, to the socket at `due`: at once if it is due and nothing
    /// is queued before it, else through the link's timer.
    pub(crate) fn send(self: &Arc<Self>, item: Item, due: Instant, now: Instant) {
        let mut state = self.lock();
        if due <= now && state.scheduled == 0 {
            self.release(&mut state, item);
            return;
        }
        // Counted before it is queued, so a chunk read meanwhile cannot overtake it.
        state.scheduled += 1;
        drop(state);
        if matches!(item, Item::Chunk(_)) {
            self.link.counters.held(self.dir, true);
        }
        self.link.timer.schedule(
            due,
            Release {
                out: Arc::downgrade(self),
                item,
                link: Arc::clone(&self.link),
                dir: self.dir,
            },
        );
    }

    /// Writes `item` now, or appends it to the leftovers; never blocks.
    fn release(&self, state: &mut State, item: Item) {
        if state.closed {
            return;
        }
        match item {
            Item::Chunk(data) => {
                // Tapped just before the first write, so that the event is visible once the
                // server can have seen the bytes, and the server cannot have received them
                // before the event's timestamp.
                if self.dir == TO_SERVER {
                    self.link.tap.record(self.connection, &data);
                }
                state.leftovers.push_back(Leftover { data, written: 0 });
                if state.leftovers.len() == 1 {
                    self.write_leftovers(state);
                }
            }
            Item::Eof => {
                state.eof = true;
                if state.leftovers.is_empty() {
                    self.close(state);
                }
            }
        }
        if state.closed || !state.leftovers.is_empty() {
            self.changed.notify_one();
        }
    }

    /// Writes leftovers until they are done or the socket is full; forwards a released
    /// close once they are done.
    fn write_leftovers(&self, state: &mut State) {
        while let Some(front) = state.leftovers.front_mut() {
            match self.to.try_write(&front.data[front.written..]) {
                Ok(n) => {
                    front.written += n;
                    if front.written == front.data.len() {
                        self.link.counters.forwarded(self.dir, front.data.len());
                        state.leftovers.pop_front();
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) => {
                    state.closed = true;
                    state.error = Some(e);
                    state.leftovers.clear();
                    return;
                }
            }
        }
        if state.eof {
            self.close(state);
        }
    }

    /// Forwards the close (FIN) to the socket.
    fn close(&self, state: &mut State) {
        state.closed = true;
        if let Err(e) = SockRef::from(&*self.to).shutdown(Shutdown::Write) {
            state.error = Some(e);
        }
    }

    /// Writes what the socket could not take at once, as it drains, until the close has
    /// been forwarded (`Ok`) or a write failed (`Err`).
    pub(crate) async fn flush(&self) -> io::Result<()> {
        loop {
            // Created before the state is read: a notification in between leaves a permit.
            let changed = self.changed.notified();
            let pending = {
                let mut state = self.lock();
                if state.closed {
                    return state.error.take().map_or(Ok(()), Err);
                }
                !state.leftovers.is_empty()
            };
            if pending {
                self.to.writable().await?;
                let mut state = self.lock();
                self.write_leftovers(&mut state);
            } else {
                changed.await;
            }
        }
    }
}
