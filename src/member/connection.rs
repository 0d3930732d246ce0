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

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, Cmd, Pipeline, RedisError, Value};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use self::outbox::Outbox;
use crate::error::node_failure::{NodeFailure, classify};

mod outbox;

/// The first pause after a failed connection attempt; it doubles up to [`MAX_BACKOFF`].
const MIN_BACKOFF: Duration = Duration::from_millis(10);
/// The longest pause between connection attempts to a master that stays down.
const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// Messages the connection's driver queues before a sender has to wait for room.
const PIPELINE_BUFFER: usize = 1 << 20;

/// A live connection and its generation.
#[derive(Clone)]
pub(crate) struct Live {
    pub(crate) generation: u64,
    pub(crate) conn: MultiplexedConnection,
    /// The server it reaches, `host:port` (for a Sentinel group: the primary found).
    pub(crate) addr: Arc<str>,
}

/// A connection as its server knows it: enough to close it there (`CLIENT KILL ID … ADDR
/// …`) after we have given it up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Peer {
    /// The server's id of the connection (ids start again at 1 when the server restarts).
    pub(crate) id: u64,
    /// Our address as the server sees it: with the id, it names this connection alone.
    pub(crate) addr: String,
}

impl Peer {
    /// The fields of a `CLIENT INFO` line: `id=7 addr=10.0.0.5:51234 laddr=…`.
    fn parse(line: &str) -> Option<Self> {
        let field = |name: &str| {
            line.split_ascii_whitespace()
                .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
        };
        Some(Self {
            id: field("id")?.parse().ok()?,
            addr: field("addr")?.to_owned(),
        })
    }
}

/// A generation that has been made, as remembered after it is gone (with how the server
/// knew it, when it said: `CLIENT INFO`).
#[derive(Debug, Clone)]
pub(crate) struct Past {
    pub(crate) generation: u64,
    /// The server it reached.
    pub(crate) addr: Arc<str>,
    pub(crate) peer: Option<Arc<Peer>>,
}

/// Generations remembered (see [`Connection::past`]).
const PAST: usize = 8;

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
    /// Whether the restart guard believes the group's ttl records only once its replicas
    /// acknowledged after the read (always, but for the negative control).
    pub(crate) readers_confirmed: bool,
    /// How many replicas the sentinels last said the primary has (connected or not).
    pub(crate) replicas_known: Arc<std::sync::atomic::AtomicUsize>,
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
                        redis::pipe()
                            .cmd("SENTINEL")
                            .arg("get-master-addr-by-name")
                            .arg(&s.master)
                            .cmd("SENTINEL")
                            .arg("replicas")
                            .arg(&s.master)
                            .query_async::<(redis::Value, redis::Value)>(&mut conn)
                            .await
                    };
                    match tokio::time::timeout(timeout, ask).await {
                        Ok(Ok((reply, replicas))) => {
                            match crate::member::topology::sentinel_primary(&reply)? {
                                Some(addr) => {
                                    // `WAIT` for every replica counts the ones the sentinels
                                    // know, connected or not: a primary cut off from its
                                    // replicas must not be excused by reporting none.
                                    if let redis::Value::Array(known) = &replicas {
                                        s.replicas_known.store(
                                            known.len(),
                                            std::sync::atomic::Ordering::Relaxed,
                                        );
                                    }
                                    let info = crate::member::topology::info_at(&s.data, &addr)?;
                                    let client = Client::open(info).map_err(classify)?;
                                    return Ok((client, addr));
                                }
                                None => {
                                    last = NodeFailure::connection(format!(
                                        "the sentinels know no master named `{}`",
                                        s.master
                                    ));
                                }
                            }
                        }
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
    /// Requests waiting to leave together (see `outbox`).
    outbox: Outbox,
}

struct State {
    slot: Slot,
    /// Generations handed out so far.
    generations: u64,
    /// Connection attempts that failed in a row.
    failures: u32,
    /// The last generations made, newest last.
    past: std::collections::VecDeque<Past>,
}

enum Slot {
    /// No connection. After a failed attempt: when it failed, the pause before the next
    /// one, and why.
    Idle {
        failure: Option<(Instant, Duration, NodeFailure)>,
    },
    Connecting,
    /// A live connection.
    Ready {
        live: Live,
        /// Tells the task that made the connection (and watches its runtime) that it has
        /// been replaced, by being dropped with the slot.
        _replaced: oneshot::Sender<()>,
    },
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match &self.state().slot {
            Slot::Idle { .. } => "idle",
            Slot::Connecting => "connecting",
            Slot::Ready { .. } => "ready",
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
            .set_response_timeout(None)
            // Room for every request ever in flight: handing one over never waits, which the
            // outbox's ordering relies on (with batching, the queue holds few messages).
            .set_pipeline_buffer_size(PIPELINE_BUFFER);
        Self {
            target,
            config,
            connect_timeout,
            state: Mutex::new(State {
                slot: Slot::Idle { failure: None },
                generations: 0,
                failures: 0,
                past: std::collections::VecDeque::new(),
            }),
            changed: Notify::new(),
            outbox: Outbox::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A connection of its own for `SUBSCRIBE`, to the server this slot reaches now (asked
    /// of the sentinels again for a group), within the connect timeout. Subscriptions never
    /// share the multiplexed connection: a subscribed connection takes no other commands.
    pub(crate) async fn pubsub(&self) -> Result<redis::aio::PubSub, NodeFailure> {
        let (client, _) = self.target.resolve(self.connect_timeout).await?;
        tokio::time::timeout(self.connect_timeout, client.get_async_pubsub())
            .await
            .map_err(|_| NodeFailure::Timeout(self.connect_timeout))?
            .map_err(classify)
    }

    /// The live connection, connecting first if there is none. A master whose last attempt
    /// failed less than a back-off ago fails at once with that failure; callers bound the
    /// wait for a new attempt themselves (the connection attempt itself runs in a task of its
    /// own, so a caller that gives up does not stop it).
    pub(crate) async fn get(self: &Arc<Self>) -> Result<Live, NodeFailure> {
        // Whether this call started an attempt (on its own runtime): if the slot is back to
        // idle without a failure, that attempt was dropped by the runtime — ours, shutting
        // down — and starting another would only lose it again.
        let mut started = false;
        loop {
            // Registered before looking, so a change in between still wakes us.
            let changed = self.changed.notified();
            let connect = {
                let mut state = self.state();
                match &state.slot {
                    Slot::Ready { live, .. } => return Ok(live.clone()),
                    Slot::Connecting => false,
                    Slot::Idle { failure: None } if started => {
                        return Err(NodeFailure::connection(
                            "the connection attempt was dropped by its runtime, which is shutting down",
                        ));
                    }
                    Slot::Idle { failure } => {
                        if let Some((at, pause, failure)) = failure
                            && at.elapsed() < *pause
                        {
                            return Err(failure.clone());
                        }
                        state.slot = Slot::Connecting;
                        true
                    }
                }
            };
            if connect {
                started = true;
                self.spawn_connect();
            }
            changed.await;
        }
    }

    /// How many replicas the sentinels last named for a group's primary (0 for a single
    /// server).
    pub(crate) fn replicas_known(&self) -> usize {
        match &self.target {
            Target::Sentinel(s) => s.replicas_known.load(std::sync::atomic::Ordering::Relaxed),
            Target::Fixed(_) => 0,
        }
    }

    /// Whether the restart guard must confirm, with `WAIT`, that a group's server is still
    /// its primary before believing its ttl records.
    pub(crate) fn confirms_readers(&self) -> bool {
        matches!(&self.target, Target::Sentinel(s) if s.readers_confirmed)
    }

    /// `host:port` of a single server (`None` behind a Sentinel group, or over a Unix
    /// socket).
    pub(crate) fn fixed_addr(&self) -> Option<String> {
        let Target::Fixed(client) = &self.target else {
            return None;
        };
        match client.get_connection_info().addr() {
            redis::ConnectionAddr::Tcp(host, port)
            | redis::ConnectionAddr::TcpTls { host, port, .. } => Some(format!("{host}:{port}")),
            _ => None,
        }
    }

    /// The live connection if there is one, without connecting.
    pub(crate) fn current(&self) -> Option<Live> {
        match &self.state().slot {
            Slot::Ready { live, .. } => Some(live.clone()),
            _ => None,
        }
    }

    /// What is remembered of `generation`, if it is one of the last few made.
    pub(crate) fn past(&self, generation: u64) -> Option<Past> {
        self.state()
            .past
            .iter()
            .find(|p| p.generation == generation)
            .cloned()
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
        tracing::debug!(generation, %err, "connection lost; reconnecting");
        self.replace(generation);
    }

    /// Replaces the connection of `generation`, if it is still the live one, by a new one
    /// (behind a Sentinel group: to the primary the sentinels name now).
    pub(crate) fn replace(self: &Arc<Self>, generation: u64) {
        let mut state = self.state();
        if matches!(&state.slot, Slot::Ready { live, .. } if live.generation == generation) {
            state.slot = Slot::Connecting;
            drop(state);
            self.spawn_connect();
        }
    }

    /// Runs `call` on `live` (a connection obtained earlier); an error that broke the
    /// connection replaces it. For calls off the hot path (the restart guard's), which
    /// need no batching: nothing else is sent on their keys.
    pub(crate) async fn run_on<T, F, Fut>(
        self: &Arc<Self>,
        live: &Live,
        call: F,
    ) -> Result<T, NodeFailure>
    where
        F: FnOnce(MultiplexedConnection) -> Fut,
        Fut: Future<Output = redis::RedisResult<T>>,
    {
        self.finish(live.generation, call(live.conn.clone()).await)
    }

    /// Sends one encoded command on `live` and returns its reply (a server error as `Err`).
    ///
    /// The hot path: with few requests in flight the command is handed to redis-rs at once,
    /// through its own send (its `ConnectionLike` path boxes every request's future), on
    /// `live`'s handle (consumed: the only clone of the multiplexed connection the call
    /// makes). Under load it waits in the outbox and leaves with the others in one write.
    pub(crate) async fn send(
        self: &Arc<Self>,
        live: Live,
        cmd: &Cmd,
    ) -> Result<Value, NodeFailure> {
        let generation = live.generation;
        let ticket = self.outbox.enter();
        let reply = if ticket.direct {
            let mut conn = live.conn;
            // Boxed: redis-rs's future is over a kilobyte, and inline it would make every
            // request's future (one allocation each in the round) that large too. Out of
            // tokio's budget: with the task's budget spent, the driver's queue would refuse
            // the command in this poll, and a request made after it could pass it (the
            // outbox's ordering, and the acquire's hand-over before a release, need the
            // command handed over in the first poll).
            Box::pin(tokio::task::coop::unconstrained(
                conn.send_packed_command(cmd),
            ))
            .await
        } else {
            match self
                .outbox
                .push(self, &live, std::iter::once(cmd.clone()))
                .await
            {
                Ok(answer) => answer,
                Err(_) => return Err(unsent()),
            }
        };
        drop(ticket);
        self.finish(generation, reply.and_then(Value::extract_error))
    }

    /// Sends `pipe` on `live` and returns every command's reply, in order (including those
    /// the pipeline marks as ignored); under load it leaves with other requests, as
    /// [`send`](Self::send) says. A server error in any of them fails the whole call with
    /// the first one, as redis-rs's `Pipeline::query_async` does.
    pub(crate) async fn send_all(
        self: &Arc<Self>,
        live: Live,
        pipe: &Pipeline,
    ) -> Result<Vec<Value>, NodeFailure> {
        let generation = live.generation;
        let replies = self
            .exchange(live, pipe)
            .await?
            .and_then(|replies| replies.into_iter().map(Value::extract_error).collect());
        self.finish(generation, replies)
    }

    /// As [`send_all`](Self::send_all), but each command's server error stays its own
    /// reply (a `Value::ServerError`), as with `Pipeline::ignore_errors`.
    pub(crate) async fn send_each(
        self: &Arc<Self>,
        live: Live,
        pipe: &Pipeline,
    ) -> Result<Vec<Value>, NodeFailure> {
        let generation = live.generation;
        let replies = self.exchange(live, pipe).await?;
        self.finish(generation, replies)
    }

    async fn exchange(
        self: &Arc<Self>,
        live: Live,
        pipe: &Pipeline,
    ) -> Result<redis::RedisResult<Vec<Value>>, NodeFailure> {
        let ticket = self.outbox.enter();
        let replies = if ticket.direct {
            let mut conn = live.conn;
            // Out of tokio's budget, as in `send`.
            Box::pin(tokio::task::coop::unconstrained(conn.send_packed_commands(
                pipe,
                0,
                pipe.len(),
            )))
            .await
        } else {
            match self
                .outbox
                .push(self, &live, pipe.cmd_iter().cloned())
                .await
            {
                Ok(Ok(Value::Array(values))) if values.len() == pipe.len() => Ok(values),
                Ok(Ok(_)) => Err(missing()),
                Ok(Err(err)) => Err(err),
                Err(_) => return Err(unsent()),
            }
        };
        drop(ticket);
        Ok(replies)
    }

    /// A call's result: an error that broke the connection of `generation` replaces it.
    fn finish<T>(
        self: &Arc<Self>,
        generation: u64,
        result: redis::RedisResult<T>,
    ) -> Result<T, NodeFailure> {
        result.map_err(|err| {
            self.saw_error(generation, &err);
            classify(err)
        })
    }

    /// Starts one connection attempt in its own task, on the caller's runtime. The caller
    /// has set the slot to `Connecting`, and holds no lock: on a runtime that is shutting
    /// down, `spawn` drops the task at once, and its guard takes the lock.
    fn spawn_connect(self: &Arc<Self>) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            self.state().slot = Slot::Idle {
                failure: Some((
                    Instant::now(),
                    MAX_BACKOFF,
                    NodeFailure::connection("no tokio runtime to connect from"),
                )),
            };
            self.changed.notify_waiters();
            return;
        };
        let watch = Watch {
            conn: Arc::downgrade(self),
            generation: None,
            armed: true,
        };
        handle.spawn(connect(self.clone(), watch));
    }
}

/// One connection attempt, then the watch over the generation it made: the task lives
/// until that generation is replaced, so that if its runtime shuts down first — taking the
/// connection's driver with it — the task's drop tells the slot (see [`Watch`]).
async fn connect(this: Arc<Connection>, mut watch: Watch) {
    let attempt = async {
        let (client, addr) = this.target.resolve(this.connect_timeout).await?;
        let mut conn = client
            .get_multiplexed_async_connection_with_config(&this.config)
            .await
            .map_err(classify)?;
        // How the server knows this connection, so that a release can close it there once
        // it has been given up (see `Member::release`). A server that refuses (older than
        // 6.2, or an ACL) leaves it unknown: the connection is made all the same.
        let peer = redis::cmd("CLIENT")
            .arg("INFO")
            .query_async::<String>(&mut conn)
            .await
            .ok()
            .and_then(|line| Peer::parse(&line))
            .map(Arc::new);
        Ok::<_, NodeFailure>((conn, addr, peer))
    };
    let result = match tokio::time::timeout(this.connect_timeout, attempt).await {
        Ok(result) => result,
        Err(_) => Err(NodeFailure::connection(format!(
            "no connection within {:?}",
            this.connect_timeout
        ))),
    };
    let replaced = {
        let mut state = this.state();
        match result {
            Ok((conn, addr, peer)) => {
                state.generations += 1;
                state.failures = 0;
                let generation = state.generations;
                let addr: Arc<str> = addr.into();
                if state.past.len() == PAST {
                    state.past.pop_front();
                }
                state.past.push_back(Past {
                    generation,
                    addr: addr.clone(),
                    peer,
                });
                let (retire, replaced) = oneshot::channel();
                state.slot = Slot::Ready {
                    live: Live {
                        generation,
                        conn,
                        addr,
                    },
                    _replaced: retire,
                };
                watch.generation = Some(generation);
                Some(replaced)
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
                None
            }
        }
    };
    this.changed.notify_waiters();
    // Only a weak reference from here on: a client that goes away is not kept by its watch.
    drop(this);
    if let Some(replaced) = replaced {
        // Resolves (with an error) when the slot drops its sender: replaced, or gone.
        let _ = replaced.await;
    }
    watch.armed = false;
}

/// Dropped armed — the connection task died with its runtime before its generation was
/// replaced, or while it was still connecting — it puts the slot back to idle (a new
/// attempt at once, from the next caller's runtime) and wakes whoever waits for it (the
/// caller that started it, on the dying runtime, gives up: see [`Connection::get`]).
struct Watch {
    conn: Weak<Connection>,
    /// The generation the attempt made; `None` while connecting.
    generation: Option<u64>,
    armed: bool,
}

impl Drop for Watch {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let Some(conn) = self.conn.upgrade() else {
            return;
        };
        let stale = {
            let mut state = conn.state();
            let ours = match (&state.slot, self.generation) {
                // Only one attempt runs at a time: a slot still connecting is this one's.
                (Slot::Connecting, None) => true,
                (Slot::Ready { live, .. }, Some(generation)) => live.generation == generation,
                _ => false,
            };
            // Taken out, and dropped once the lock is released.
            ours.then(|| std::mem::replace(&mut state.slot, Slot::Idle { failure: None }))
        };
        if stale.is_some() {
            tracing::debug!(
                generation = ?self.generation,
                "the runtime this connection ran on shut down; reconnecting on the next use"
            );
            drop(stale);
            conn.changed.notify_waiters();
        }
    }
}

/// A batch that came back with fewer answers than it had commands.
fn missing() -> RedisError {
    RedisError::from((
        redis::ErrorKind::UnexpectedReturnType,
        "fewer replies than commands",
    ))
}

/// The failure of a request left in the outbox when its sender task went away (its
/// runtime shut down, or there was none).
fn unsent() -> NodeFailure {
    NodeFailure::connection("the request was not sent: no task was left to send it")
}

#[cfg(test)]
impl Connection {
    /// A slot already holding `conn`, as generation 1.
    pub(crate) fn ready(conn: MultiplexedConnection) -> Arc<Self> {
        let this = Self::new(
            Target::Fixed(Client::open("redis://127.0.0.1:1").expect("a valid URL")),
            Duration::from_millis(100),
        );
        {
            let mut state = this.state();
            state.generations = 1;
            state.slot = Slot::Ready {
                live: Live {
                    generation: 1,
                    conn,
                    addr: "127.0.0.1:1".into(),
                },
                _replaced: oneshot::channel().0,
            };
        }
        Arc::new(this)
    }
}

#[cfg(test)]
mod tests;
