//! `LinkProxy`: one faulty link between one client and one node, and its accept loop.

use std::fmt;
use std::net::{Ipv4Addr, TcpListener as StdListener};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::watch;

use super::conn::serve;
use super::fault::{Direction, Fault, TO_CLIENT, TO_SERVER};
use super::outbound::Release;
use super::runtime;
use super::stats::{Counters, LinkStats, Tap, TapEvent};
use super::timer::Timer;
use crate::{TestkitError, url};

/// Pause after a failed `accept` (e.g. out of file descriptors) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// State shared by a link's handles, its accept loop and its connections.
pub(crate) struct Shared {
    pub(crate) node: usize,
    pub(crate) listen_port: u16,
    pub(crate) target_port: u16,
    pub(crate) seed: u64,
    /// The proxy runtime's clock, which releases delayed chunks.
    pub(crate) timer: &'static Timer<Release>,
    password: Option<String>,
    faults: Mutex<[Fault; 2]>,
    refuse: AtomicBool,
    next_connection: AtomicU64,
    pub(crate) counters: Counters,
    pub(crate) tap: Tap,
    /// Bumped by `reset_connections`; every connection watches it.
    pub(crate) reset: watch::Sender<u64>,
    /// Bumped by `close_to_client`; every connection watches it.
    pub(crate) close_to_client: watch::Sender<u64>,
    /// Set once when the link stops; the accept loop and every connection watch it.
    pub(crate) shutdown: watch::Sender<bool>,
}

impl Shared {
    /// The fault currently set for one concrete direction.
    pub(crate) fn fault(&self, dir: usize) -> Fault {
        self.faults.lock().unwrap_or_else(PoisonError::into_inner)[dir]
    }

    /// Stops the accept loop and closes every connection (asynchronously, on the runtime).
    pub(crate) fn stop(&self) {
        self.shutdown.send_replace(true);
    }
}

/// A userspace TCP proxy on `127.0.0.1` in front of one node, with run-time faults.
///
/// Obtain one through [`LocalCluster::links`](crate::LocalCluster::links) and
/// [`LinkSet::link`](crate::LinkSet::link). Each accepted connection is forwarded to the
/// node's port at the time it is accepted, so the link keeps working across a restart of
/// the node. Every method is synchronous and non-blocking; it can be called from any thread
/// or async task. Clones are handles to the same link; the link stops when its
/// [`LinkSet`](crate::LinkSet) is dropped (or its cluster is), and clones then do nothing.
#[derive(Clone)]
pub struct LinkProxy {
    shared: Arc<Shared>,
}

impl fmt::Debug for LinkProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LinkProxy")
            .field("node", &self.shared.node)
            .field("port", &self.shared.listen_port)
            .field("target_port", &self.shared.target_port)
            .field(
                "faults",
                &*self
                    .shared
                    .faults
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            )
            .finish_non_exhaustive()
    }
}

impl LinkProxy {
    /// Binds a listener on a free loopback port and starts accepting on the proxy runtime.
    pub(crate) fn start(
        node: usize,
        target_port: u16,
        password: Option<String>,
        seed: u64,
    ) -> Result<Self, TestkitError> {
        let handle = runtime::handle()?;
        let timer = runtime::timer()?;
        let listener = StdListener::bind((Ipv4Addr::LOCALHOST, 0))
            .and_then(|l| l.set_nonblocking(true).map(|()| l))
            .map_err(|e| TestkitError::os("binding a proxy listener on 127.0.0.1", e))?;
        let listen_port = listener
            .local_addr()
            .map_err(|e| TestkitError::os("reading a proxy listener's address", e))?
            .port();
        let shared = Arc::new(Shared {
            node,
            listen_port,
            target_port,
            seed,
            timer,
            password,
            faults: Mutex::new([Fault::Pass; 2]),
            refuse: AtomicBool::new(false),
            next_connection: AtomicU64::new(0),
            counters: Counters::default(),
            tap: Tap::default(),
            reset: watch::Sender::new(0),
            close_to_client: watch::Sender::new(0),
            shutdown: watch::Sender::new(false),
        });
        handle.spawn(accept_loop(listener, Arc::clone(&shared)));
        Ok(Self { shared })
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// `redis://[:password@]127.0.0.1:PORT` of this proxy, for one client.
    pub fn url(&self) -> String {
        url::redis_url(self.shared.listen_port, self.shared.password.as_deref())
    }

    /// The proxy's own port.
    pub fn port(&self) -> u16 {
        self.shared.listen_port
    }

    /// The node's port, which each new connection is forwarded to.
    pub fn target_port(&self) -> u16 {
        self.shared.target_port
    }

    /// The index of the node behind this link.
    pub fn node(&self) -> usize {
        self.shared.node
    }

    /// Sets the fault for `dir`; it applies to every chunk read from now on, on existing
    /// and new connections.
    pub fn set(&self, dir: Direction, fault: Fault) {
        let mut faults = self
            .shared
            .faults
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for &i in dir.indices() {
            faults[i] = fault;
        }
    }

    /// The fault currently set for `dir` (for [`Direction::Both`], the one towards the
    /// server).
    pub fn fault(&self, dir: Direction) -> Fault {
        self.shared.fault(match dir {
            Direction::ToClient => TO_CLIENT,
            Direction::ToServer | Direction::Both => TO_SERVER,
        })
    }

    /// Closes every connection currently open on this link with a TCP reset (RST) towards
    /// the client; the server side is reset too. New connections are unaffected. The
    /// resets happen on the proxy runtime within a few milliseconds of this call.
    pub fn reset_connections(&self) {
        self.shared.reset.send_modify(|generation| *generation += 1);
    }

    /// Closes every connection currently open on this link towards the client only, as a
    /// middlebox that gives up on a connection does: the client reads the close (FIN) at
    /// once, while what it sent that the link still holds (under a [`Fault::Delay`]) goes on
    /// to the server at its time, in order, followed by the close. So the server runs
    /// requests of a connection its client has already replaced. New connections are
    /// unaffected.
    pub fn close_to_client(&self) {
        self.shared
            .close_to_client
            .send_modify(|generation| *generation += 1);
    }

    /// While `true`, new connections are accepted and immediately reset (the client sees
    /// "connection reset"); existing connections are unaffected.
    pub fn refuse_new(&self, refuse: bool) {
        self.shared.refuse.store(refuse, Ordering::SeqCst);
    }

    /// A snapshot of the link's counters.
    pub fn stats(&self) -> LinkStats {
        self.shared.counters.snapshot()
    }

    /// Starts (`true`) or stops recording client-to-server chunks; see [`LinkProxy::tap`].
    pub fn set_tap(&self, on: bool) {
        self.shared.tap.set(on);
    }

    /// Every chunk recorded while the tap was on, in the order they were written to the
    /// server, each with the [`Instant`](std::time::Instant) it was written (see [`TapEvent`]).
    pub fn tap(&self) -> Vec<TapEvent> {
        self.shared.tap.events()
    }

    /// Forgets the recorded tap events.
    pub fn clear_tap(&self) {
        self.shared.tap.clear();
    }
}

/// Resolves once the link is stopped. (A `watch::Ref` is not `Send`, so it must not be held
/// across the `select!` in a spawned task; this drops it inside.)
pub(crate) async fn stopped(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

async fn accept_loop(listener: StdListener, shared: Arc<Shared>) {
    let listener = match TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(node = shared.node, error = %e, "proxy listener failed");
            return;
        }
    };
    let mut shutdown = shared.shutdown.subscribe();
    loop {
        tokio::select! {
            _ = stopped(&mut shutdown) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    if shared.refuse.load(Ordering::SeqCst) {
                        shared.counters.refused.fetch_add(1, Ordering::Relaxed);
                        let _ = stream.set_zero_linger();
                        drop(stream);
                        continue;
                    }
                    shared.counters.accepted.fetch_add(1, Ordering::Relaxed);
                    let id = shared.next_connection.fetch_add(1, Ordering::Relaxed);
                    // Subscribe before spawning, so a reset right after accept is seen.
                    let reset = shared.reset.subscribe();
                    let close = shared.close_to_client.subscribe();
                    tokio::spawn(serve(stream, Arc::clone(&shared), id, reset, close));
                }
                Err(e) => {
                    tracing::warn!(node = shared.node, error = %e, "proxy accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
        }
    }
}
