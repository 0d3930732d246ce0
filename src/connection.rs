//! One master's connection: a multiplexed connection made on first use, replaced as soon
//! as it breaks, and numbered.
//!
//! The number (the *generation*) is what the restart guard verifies: a server that
//! restarted always breaks our connection to it, so grants that arrive on a connection the
//! guard has not verified yet never count. redis-rs's `ConnectionManager` reconnects out of
//! sight, which is why this module does it instead.
//!
//! One multiplexed connection per master is deliberate: commands to a master are processed
//! in the order they were sent, so a release sent after an acquire is processed after it. For
//! the same reason the connection has no response timeout of its own (a timeout there would
//! tear it down and lose that ordering): the coordinator bounds every call by `node_timeout`.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, RedisError};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::failure::{NodeFailure, classify};

/// The first pause after a failed connection attempt; it doubles up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(10);
/// The longest pause between connection attempts to a master that stays down.
const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// A live connection and its generation.
#[derive(Clone)]
pub(crate) struct Live {
    pub(crate) generation: u64,
    pub(crate) conn: MultiplexedConnection,
    /// The server it reaches, `host:port` (for a Sentinel group: the primary found).
    pub(crate) addr: Arc<str>,
}

/// Where a connection goes.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    /// One server.
    Fixed(Client),
    /// The primary that a Sentinel group names: asked again for every new connection.
    Sentinel(SentinelTarget),
}

/// A Sentinel group's primary: the sentinels, the master's name, how to reach data nodes.
#[derive(Debug, Clone)]
pub(crate) struct SentinelTarget {
    pub(crate) sentinels: Vec<Client>,
    pub(crate) master: String,
    pub(crate) data: redis::ConnectionInfo,
    /// Whether the restart guard treats a new server behind the group as a restart (always,
    /// but for the negative control that shows why).
    pub(crate) failover_is_restart: bool,
}

impl Target {
    /// A client for the server to connect to now, and its address.
    async fn resolve(&self, timeout: Duration) -> Result<(Client, String), NodeFailure> {
        match self {
            Self::Fixed(client) => Ok((
                client.clone(),
                client.get_connection_info().addr().to_string(),
            )),
            Self::Sentinel(s) => {
                let mut last = NodeFailure::connection("no sentinel was given");
                for sentinel in &s.sentinels {
                    let ask = async {
                        let mut conn = sentinel.get_multiplexed_async_connection().await?;
                        redis::cmd("SENTINEL")
                            .arg("get-master-addr-by-name")
                            .arg(&s.master)
                            .query_async::<redis::Value>(&mut conn)
                            .await
                    };
                    match tokio::time::timeout(timeout, ask).await {
                        Ok(Ok(reply)) => match crate::topology::sentinel_primary(&reply)? {
                            Some(addr) => {
                                let info = crate::topology::info_at(&s.data, &addr)?;
                                let client = Client::open(info).map_err(classify)?;
                                return Ok((client, addr));
                            }
                            None => {
                                last = NodeFailure::connection(format!(
                                    "the sentinels know no master named `{}`",
                                    s.master
                                ));
                            }
                        },
                        Ok(Err(err)) => last = classify(err),
                        Err(_) => last = NodeFailure::Timeout(timeout),
                    }
                }
                Err(last)
            }
        }
    }

    /// Whether the server behind this target can change (a failover).
    pub(crate) fn replicated(&self) -> bool {
        matches!(self, Self::Sentinel(_))
    }

    /// Whether the restart guard must treat a new server behind it as a restart that lost
    /// data.
    fn failover_is_restart(&self) -> bool {
        matches!(self, Self::Sentinel(s) if s.failover_is_restart)
    }
}

/// One master's connection slot.
pub(crate) struct Connection {
    target: Target,
    config: AsyncConnectionConfig,
    connect_timeout: Duration,
    state: Mutex<State>,
    changed: Notify,
}

struct State {
    slot: Slot,
    /// Generations handed out so far.
    generations: u64,
    /// Connection attempts that failed in a row.
    failures: u32,
}

enum Slot {
    /// No connection. After a failed attempt: when it failed, the pause before the next
    /// one, and why.
    Idle {
        failure: Option<(Instant, Duration, NodeFailure)>,
    },
    Connecting,
    Ready(Live),
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state().slot {
            Slot::Idle { .. } => "idle",
            Slot::Connecting => "connecting",
            Slot::Ready(_) => "ready",
        };
        f.debug_struct("Connection")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}

impl Connection {
    pub(crate) fn new(target: Target, connect_timeout: Duration) -> Self {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(connect_timeout))
            .set_response_timeout(None);
        Self {
            target,
            config,
            connect_timeout,
            state: Mutex::new(State {
                slot: Slot::Idle { failure: None },
                generations: 0,
                failures: 0,
            }),
            changed: Notify::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The live connection, connecting first if there is none. A master whose last attempt
    /// failed less than a back-off ago fails at once with that failure; callers bound the
    /// wait for a new attempt themselves (the connection attempt itself runs in a task of its
    /// own, so a caller that gives up does not stop it).
    pub(crate) async fn get(self: &Arc<Self>) -> Result<Live, NodeFailure> {
        loop {
            // Registered before looking, so a change in between still wakes us.
            let changed = self.changed.notified();
            {
                let mut state = self.state();
                match &state.slot {
                    Slot::Ready(live) => return Ok(live.clone()),
                    Slot::Connecting => {}
                    Slot::Idle { failure } => {
                        if let Some((at, pause, failure)) = failure
                            && at.elapsed() < *pause
                        {
                            return Err(failure.clone());
                        }
                        state.slot = Slot::Connecting;
                        self.spawn_connect();
                    }
                }
            }
            changed.await;
        }
    }

    /// The live connection if there is one, without connecting.
    pub(crate) fn current(&self) -> Option<Live> {
        match &self.state().slot {
            Slot::Ready(live) => Some(live.clone()),
            _ => None,
        }
    }

    /// Whether a new server behind this connection (a Sentinel group's new primary) must be
    /// treated by the restart guard as a restart that lost data.
    pub(crate) fn failover_is_restart(&self) -> bool {
        self.target.failover_is_restart()
    }

    /// Reports an error seen on the connection of `generation`. One that means the
    /// connection is gone (I/O, reset, EOF) replaces it: a new one is made at once, under a
    /// new generation. Errors the server answered (a script error, `WRONGTYPE`) leave it —
    /// except `READONLY` behind a Sentinel group: the server we reach is no longer the
    /// primary, so the group is asked again.
    pub(crate) fn saw_error(self: &Arc<Self>, generation: u64, err: &RedisError) {
        let demoted = self.target.replicated()
            && err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly);
        if !(demoted
            || err.is_unrecoverable_error()
            || err.is_connection_dropped()
            || err.is_io_error())
        {
            return;
        }
        let mut state = self.state();
        if matches!(&state.slot, Slot::Ready(live) if live.generation == generation) {
            tracing::debug!(generation, %err, "connection lost; reconnecting");
            state.slot = Slot::Connecting;
            self.spawn_connect();
        }
    }

    /// Runs `call` on the live connection; an error that broke the connection replaces it.
    /// Returns the generation the call ran on with its result.
    pub(crate) async fn run<T, F, Fut>(self: &Arc<Self>, call: F) -> Result<(u64, T), NodeFailure>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        let live = self.get().await?;
        self.run_on(&live, call).await.map(|v| (live.generation, v))
    }

    /// Runs `call` on `live` (a connection obtained earlier), as [`run`](Self::run) does.
    pub(crate) async fn run_on<T, F, Fut>(
        self: &Arc<Self>,
        live: &Live,
        call: F,
    ) -> Result<T, NodeFailure>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        match call(live.conn.clone()).await {
            Ok(value) => Ok(value),
            Err(err) => {
                self.saw_error(live.generation, &err);
                Err(classify(err))
            }
        }
    }

    /// Starts one connection attempt in its own task. The caller has set the slot to
    /// `Connecting`.
    fn spawn_connect(self: &Arc<Self>) {
        let this = self.clone();
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            self.state().slot = Slot::Idle {
                failure: Some((
                    Instant::now(),
                    MAX_BACKOFF,
                    NodeFailure::connection("no tokio runtime to connect from"),
                )),
            };
            return;
        };
        handle.spawn(async move {
            let attempt = async {
                let (client, addr) = this.target.resolve(this.connect_timeout).await?;
                let conn = client
                    .get_multiplexed_async_connection_with_config(&this.config)
                    .await
                    .map_err(classify)?;
                Ok::<_, NodeFailure>((conn, addr))
            };
            let result = match tokio::time::timeout(this.connect_timeout, attempt).await {
                Ok(result) => result,
                Err(_) => Err(NodeFailure::connection(format!(
                    "no connection within {:?}",
                    this.connect_timeout
                ))),
            };
            {
                let mut state = this.state();
                match result {
                    Ok((conn, addr)) => {
                        state.generations += 1;
                        state.failures = 0;
                        state.slot = Slot::Ready(Live {
                            generation: state.generations,
                            conn,
                            addr: addr.into(),
                        });
                    }
                    Err(failure) => {
                        tracing::debug!(%failure, "connection attempt failed");
                        let pause = MIN_BACKOFF
                            .saturating_mul(1 << state.failures.min(16))
                            .min(MAX_BACKOFF);
                        state.failures = state.failures.saturating_add(1);
                        state.slot = Slot::Idle {
                            failure: Some((Instant::now(), pause, failure)),
                        };
                    }
                }
            }
            this.changed.notify_waiters();
        });
    }
}
