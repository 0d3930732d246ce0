//! `RawConnection`: one blocking connection for tests, on redis-rs's `Connection`.
//!
//! redis-rs speaks the wire format and does the set-up (`AUTH` from the URL); what the kit
//! adds is what a fault test needs on top of it: one time-out for connect, write and read,
//! error *replies* returned as values rather than errors, sending and reading as separate
//! steps, and failures told apart as [`TestkitError::Timeout`] or
//! [`TestkitError::ConnectionClosed`].

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

use redis::{Cmd, ConnectionAddr, ConnectionInfo, ConnectionLike, IntoConnectionInfo, Value};

use crate::{TestkitError, url};

/// Default time-out of [`LocalCluster::cmd`](crate::LocalCluster::cmd).
pub const DEFAULT_CMD_TIMEOUT: Duration = Duration::from_secs(2);

/// A blocking connection speaking RESP2, with one time-out for connect, read and write.
///
/// It exists so that tests can talk to a node or through a fault proxy with exact control of
/// what is sent and when (pipelining, reading later, observing a time-out or a reset),
/// independently of the library under test. Each call either completes or fails with
/// [`TestkitError::Timeout`] / [`TestkitError::ConnectionClosed`]; nothing waits unbounded.
/// A reply that arrives after its read timed out is skipped by the next read, so a later
/// command never receives an earlier one's reply (redis-rs's own rule).
///
/// Nothing is sent that the test did not ask for, except `AUTH` when the URL has a
/// password: no `CLIENT SETINFO` (a fault proxy's request tap sees only the test's
/// commands, and a link that drops replies does not stall the connect).
pub struct RawConnection {
    conn: redis::Connection,
    peer: String,
    timeout: Duration,
}

impl fmt::Debug for RawConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RawConnection")
            .field("peer", &self.peer)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl RawConnection {
    /// Connects to `addr` without authenticating.
    pub fn connect(addr: SocketAddr, timeout: Duration) -> Result<Self, TestkitError> {
        let info = ConnectionAddr::Tcp(addr.ip().to_string(), addr.port()).into_connection_info();
        Self::with_info(
            info.map_err(|e| TestkitError::redis("connecting", e, timeout))?,
            timeout,
        )
    }

    /// Connects to a `redis://[[user]:password@]host:port` URL and sends `AUTH` if the URL
    /// has a password. A refused `AUTH` is [`TestkitError::Auth`].
    pub fn open(url: &str, timeout: Duration) -> Result<Self, TestkitError> {
        let info = url
            .into_connection_info()
            .map_err(|_| TestkitError::InvalidUrl {
                url: url::redact(url),
            })?;
        Self::with_info(info, timeout)
    }

    fn with_info(info: ConnectionInfo, timeout: Duration) -> Result<Self, TestkitError> {
        let peer = info.addr().to_string();
        let settings = info.redis_settings().clone().set_skip_set_lib_name();
        let client = redis::Client::open(info.set_redis_settings(settings))
            .map_err(|e| TestkitError::redis(format!("connecting to {peer}"), e, timeout))?;
        let conn = client
            .get_connection_with_timeout(timeout)
            .map_err(|e| TestkitError::redis(format!("connecting to {peer}"), e, timeout))?;
        let mut conn = Self {
            conn,
            peer,
            timeout,
        };
        conn.set_timeout(timeout)?;
        Ok(conn)
    }

    /// Changes the time-out of later reads and writes.
    pub fn set_timeout(&mut self, timeout: Duration) -> Result<(), TestkitError> {
        let what = || format!("setting the time-out of the connection to {}", self.peer);
        self.conn
            .set_read_timeout(Some(timeout))
            .and_then(|()| self.conn.set_write_timeout(Some(timeout)))
            .map_err(|e| TestkitError::redis(what(), e, timeout))?;
        self.timeout = timeout;
        Ok(())
    }

    /// Sends one command without waiting for its reply (pipelining).
    pub fn send(&mut self, args: &[&str]) -> Result<(), TestkitError> {
        self.send_packed(&command(args).get_packed_command())
    }

    /// Sends several commands in one write, so they reach the server as one pipeline.
    pub fn send_pipeline(&mut self, commands: &[&[&str]]) -> Result<(), TestkitError> {
        let bytes: Vec<u8> = commands
            .iter()
            .flat_map(|c| command(c).get_packed_command())
            .collect();
        self.send_packed(&bytes)
    }

    fn send_packed(&mut self, bytes: &[u8]) -> Result<(), TestkitError> {
        self.conn
            .send_packed_command(bytes)
            .map_err(|e| TestkitError::redis(format!("sending to {}", self.peer), e, self.timeout))
    }

    /// Reads the next reply; an error reply is `Ok(Value::ServerError(..))`.
    pub fn read_reply(&mut self) -> Result<Value, TestkitError> {
        self.conn.recv_response().map_err(|e| {
            TestkitError::redis(
                format!("reading a reply from {}", self.peer),
                e,
                self.timeout,
            )
        })
    }

    /// Sends one command and reads its reply; an error reply is
    /// `Ok(Value::ServerError(..))`.
    pub fn call(&mut self, args: &[&str]) -> Result<Value, TestkitError> {
        self.conn
            .req_command(&command(args))
            .map_err(|e| TestkitError::redis(format!("calling {}", self.peer), e, self.timeout))
    }
}

/// `args` as one command: the first is its name.
pub(crate) fn command(args: &[&str]) -> Cmd {
    let mut cmd = Cmd::new();
    for arg in args {
        cmd.arg(*arg);
    }
    cmd
}
