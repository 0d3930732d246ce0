//! `--clients K`: the lock clients a benchmark measures — one, or a fleet of K against the
//! same masters.
//!
//! Each client of a fleet is what one process of a service would have: its own `Redlock`
//! (its own connections, renewal task and collectors) and its own floor, built and driven on
//! a tokio runtime of its own, with its own worker threads, so no client's work waits in
//! another's queue. They are K runtimes in one process rather than K processes: the
//! benchmark alternates redquorum and the floor in time slices across the whole fleet and
//! merges histograms at the end, which in one process is a barrier and a sum, and what the
//! kernel schedules is the same — threads. What K processes would not share is the
//! allocator (glibc gives threads arenas of their own, so it is rarely contended) and the
//! address space. A single client runs on the command's own runtime, as before.

use std::sync::Arc;
use std::time::Duration;

use redquorum::{DEFAULT_CONNECT_TIMEOUT, LockKind, Redlock, RedlockBuilder};
use redquorum_floor::{ConnectError, Floor};
use tokio::runtime::{Builder, Handle, Runtime};

use super::workload::Ctx;
use crate::args;
use crate::exit::Failure;

/// Time given to each client runtime's tasks (releases of dropped locks) when it stops.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(200);

/// One client: what its workers share, and the runtime they run on.
pub(crate) struct Member {
    pub(crate) ctx: Arc<Ctx>,
    pub(crate) handle: Handle,
}

/// The clients of one profile run, and the runtimes of their own (none for one client).
pub(crate) struct Fleet {
    members: Vec<Member>,
    runtimes: Vec<Runtime>,
}

/// How to make one client.
#[derive(Clone)]
pub(crate) struct Setup {
    pub(crate) builder: RedlockBuilder,
    pub(crate) urls: Vec<String>,
    pub(crate) node_timeout: Duration,
    pub(crate) ttl_ms: u64,
    /// Shared by the whole fleet, so that contention keys are the same for every client.
    pub(crate) tag: String,
    pub(crate) keys: usize,
    /// The hand-over workload: how long each grant is held, and whether waiters poll.
    pub(crate) hold: Duration,
    pub(crate) poll: bool,
}

impl Fleet {
    /// Builds `clients` clients, each connected to a quorum of masters and with its floor
    /// connected; every client's connections are made on its own runtime.
    pub(crate) async fn start(clients: usize, setup: &Setup) -> Result<Self, Failure> {
        let mut fleet = Self {
            members: Vec::with_capacity(clients),
            runtimes: Vec::new(),
        };
        for i in 0..clients {
            let handle = if clients == 1 {
                Handle::current()
            } else {
                let built = Builder::new_multi_thread()
                    .enable_all()
                    .thread_name(format!("bench-client-{i}"))
                    .build();
                let runtime = match built {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        fleet.stop().await;
                        return Err(Failure::os(format!(
                            "could not start the runtime of client {i}: {e}."
                        )));
                    }
                };
                let handle = runtime.handle().clone();
                fleet.runtimes.push(runtime);
                handle
            };
            let built = handle.spawn(member(setup.clone())).await;
            let ctx = match built {
                Ok(Ok(ctx)) => ctx,
                Ok(Err(failure)) if clients > 1 => {
                    fleet.stop().await;
                    return Err(failure.context(&format!("client {i}")));
                }
                Ok(Err(failure)) => return Err(failure),
                Err(e) => {
                    fleet.stop().await;
                    return Err(Failure::os(format!("setting up client {i} failed: {e}.")));
                }
            };
            fleet.members.push(Member { ctx, handle });
        }
        Ok(fleet)
    }

    pub(crate) fn members(&self) -> &[Member] {
        &self.members
    }

    /// The first client (there is always one once started).
    pub(crate) fn first(&self) -> &Redlock {
        &self.members[0].ctx.client
    }

    /// Drops the clients, then stops their runtimes off the async threads (a runtime
    /// cannot be dropped inside one).
    pub(crate) async fn stop(mut self) {
        self.members.clear();
        let runtimes = std::mem::take(&mut self.runtimes);
        if runtimes.is_empty() {
            return;
        }
        let _ = tokio::task::spawn_blocking(move || {
            for runtime in runtimes {
                runtime.shutdown_timeout(SHUTDOWN_GRACE);
            }
        })
        .await;
    }
}

impl Drop for Fleet {
    /// A fleet not stopped (an early return, a panic) must not drop its runtimes on an
    /// async thread, where that panics: they are let go in the background instead.
    fn drop(&mut self) {
        self.members.clear();
        for runtime in self.runtimes.drain(..) {
            runtime.shutdown_background();
        }
    }
}

/// One client and its floor, on the runtime this runs on.
async fn member(setup: Setup) -> Result<Arc<Ctx>, Failure> {
    let client = args::build(setup.builder)?;
    check_reachable(&client).await?;
    let floor = Floor::connect(&setup.urls, setup.node_timeout, DEFAULT_CONNECT_TIMEOUT)
        .await
        .map_err(|e| match e {
            ConnectError::InvalidUrl { .. } => Failure::usage(e.to_string()),
            _ => Failure::unavailable(e.to_string()),
        })?;
    Ok(Arc::new(Ctx {
        client,
        floor: Arc::new(floor),
        ttl_ms: setup.ttl_ms,
        tag: setup.tag,
        keys: setup.keys,
        hold: setup.hold,
        poll: setup.poll,
        last_release: std::sync::Mutex::new(None),
    }))
}

/// Fails unless a quorum of masters answers `PING`.
async fn check_reachable(client: &Redlock) -> Result<(), Failure> {
    let pings = client.connect().await;
    let up = pings.iter().filter(|p| p.is_ok()).count();
    if up >= client.quorum(LockKind::Mutex) {
        return Ok(());
    }
    let first = pings
        .iter()
        .enumerate()
        .find_map(|(i, p)| p.as_ref().err().map(|e| format!("node {i}: {e}")))
        .unwrap_or_default();
    Err(Failure::unavailable(format!(
        "only {up} of {} masters answered PING and a quorum needs {} (first failure: {first}).",
        client.nodes(),
        client.quorum(LockKind::Mutex)
    )))
}
