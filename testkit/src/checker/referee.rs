//! `Referee`: an independent detector of mutual-exclusion failures. Inside each critical
//! section a client reads a counter on a separate, fault-free `redis-server`, pauses, and
//! writes the counter plus one. If two clients ever run that read-modify-write at the same
//! time, one increment is lost; the lost increments are counted at the end, whatever the
//! recorded intervals say.
//!
//! Ours because it is the test's own witness, independent of the lock under test and of
//! the checker's clocks: a second detector that needs no interval to be recorded right.
//! Its transport is redis-rs's multiplexed connection.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Value};

use crate::connection::command;
use crate::{LocalCluster, ReplyExt, TestkitError};

/// Bound on each referee command: the referee has no faults, so this is only a safety net.
const REFEREE_TIMEOUT: Duration = Duration::from_secs(5);

/// The counter key of a resource on the referee.
fn counter_key(resource: &str) -> String {
    format!("referee:{resource}")
}

/// A separate, fault-free Redis master holding one counter per resource.
///
/// Clients take a [`RefereeSession`] each (an async connection on the caller's runtime)
/// and, inside the critical section, call [`read`](RefereeSession::read), pause, then
/// [`write`](RefereeSession::write) the value read plus one. [`tally`](Referee::tally)
/// compares the number of acknowledged writes with the final counters: every missing
/// increment is a lost update, i.e. two read-modify-writes ran concurrently.
///
/// A write must not be cancelled once sent (do not wrap it in a timeout or a lease's `run`):
/// an applied but uncounted write would hide a lost one.
pub struct Referee {
    server: LocalCluster,
    state: Arc<Mutex<BTreeMap<String, Counts>>>,
}

impl fmt::Debug for Referee {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Referee")
            .field("port", &self.server.port(0))
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    writes: u64,
    conflicts: u64,
}

/// What the referee saw, summed over resources.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RefereeTally {
    /// Acknowledged writes (completed critical sections).
    pub writes: u64,
    /// Writes minus the final counters: increments overwritten by a concurrent
    /// read-modify-write.
    pub lost_updates: u64,
    /// Writes that found the counter changed since their own read (`SET … GET` returned
    /// another value): each is a write that clobbered a concurrent one.
    pub conflicts: u64,
}

impl Referee {
    /// Starts the referee's own `redis-server` (one node, no persistence, no faults).
    pub fn start() -> Result<Self, TestkitError> {
        Ok(Self {
            server: LocalCluster::start(1)?,
            state: Arc::default(),
        })
    }

    /// The referee's URL, for inspection.
    pub fn url(&self) -> String {
        self.server.url(0)
    }

    /// A new connection for one client, on the caller's tokio runtime.
    pub async fn session(&self) -> Result<RefereeSession, TestkitError> {
        let fail = |e| TestkitError::redis("connecting to the referee", e, REFEREE_TIMEOUT);
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(REFEREE_TIMEOUT))
            .set_response_timeout(Some(REFEREE_TIMEOUT));
        let conn = redis::Client::open(self.url())
            .map_err(fail)?
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(fail)?;
        Ok(RefereeSession {
            conn,
            state: Arc::clone(&self.state),
        })
    }

    /// Compares the acknowledged writes with the final counters (read synchronously from
    /// the referee). Call it once every client has stopped.
    pub fn tally(&self) -> Result<RefereeTally, TestkitError> {
        let counts: Vec<(String, Counts)> = self
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        let mut tally = RefereeTally::default();
        for (resource, c) in counts {
            let reply = self.server.cmd(0, &["GET", &counter_key(&resource)])?;
            let final_value = match &reply {
                Value::Nil => 0,
                other => other.as_int().ok_or_else(|| TestkitError::Protocol {
                    what: format!("reading the referee counter of {resource}"),
                    detail: format!("{other:?}"),
                })?,
            };
            let final_value = u64::try_from(final_value).unwrap_or(0);
            tally.writes += c.writes;
            tally.conflicts += c.conflicts;
            tally.lost_updates += c.writes.saturating_sub(final_value);
        }
        Ok(tally)
    }
}

/// One client's connection to the [`Referee`].
pub struct RefereeSession {
    conn: MultiplexedConnection,
    state: Arc<Mutex<BTreeMap<String, Counts>>>,
}

impl fmt::Debug for RefereeSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RefereeSession").finish_non_exhaustive()
    }
}

impl RefereeSession {
    /// Reads the counter of `resource` (0 when never written).
    pub async fn read(&mut self, resource: &str) -> Result<i64, TestkitError> {
        match self.call(&["GET", &counter_key(resource)]).await? {
            Value::Nil => Ok(0),
            reply => reply.as_int().ok_or_else(|| TestkitError::Protocol {
                what: "reading a referee counter".into(),
                detail: format!("{reply:?}"),
            }),
        }
    }

    /// Writes `read + 1` to the counter of `resource`, where `read` is what
    /// [`read`](Self::read) returned in the same critical section. Returns `false` when
    /// the counter had changed since that read (another client wrote in between: the
    /// write clobbered its increment).
    pub async fn write(&mut self, resource: &str, read: i64) -> Result<bool, TestkitError> {
        let next = (read + 1).to_string();
        let reply = self
            .call(&["SET", &counter_key(resource), &next, "GET"])
            .await?;
        let before = match &reply {
            Value::Nil => 0,
            other => other.as_int().ok_or_else(|| TestkitError::Protocol {
                what: "writing a referee counter".into(),
                detail: format!("{other:?}"),
            })?,
        };
        let clean = before == read;
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let counts = state.entry(resource.to_owned()).or_default();
        counts.writes += 1;
        if !clean {
            counts.conflicts += 1;
        }
        Ok(clean)
    }

    /// One command; an error reply is an error. Bounded by the connection's response
    /// time-out.
    async fn call(&mut self, args: &[&str]) -> Result<Value, TestkitError> {
        command(args)
            .query_async(&mut self.conn)
            .await
            .map_err(|e| {
                TestkitError::redis(
                    format!("talking to the referee ({})", args.join(" ")),
                    e,
                    REFEREE_TIMEOUT,
                )
            })
    }
}
