//! `RawConnection`: a tiny synchronous Redis client for tests.

use std::fmt;
use std::io::{BufReader, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::{Reply, TestkitError, resp, url};

/// Default time-out of [`LocalCluster::cmd`](crate::LocalCluster::cmd).
pub const DEFAULT_CMD_TIMEOUT: Duration = Duration::from_secs(2);

/// A blocking connection speaking RESP2, with one time-out for connect, read and write.
///
/// It exists so that tests can talk to a node or through a fault proxy with exact control of
/// what is sent and when (pipelining, reading later, observing a time-out or a reset),
/// independently of the library under test. Each call either completes or fails with
/// [`TestkitError::Timeout`] / [`TestkitError::ConnectionClosed`]; nothing waits unbounded.
pub struct RawConnection {
    reader: BufReader<TcpStream>,
    peer: SocketAddr,
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
        let stream = TcpStream::connect_timeout(&addr, timeout)
            .map_err(|e| TestkitError::io(format!("connecting to {addr}"), e, timeout))?;
        let what = || format!("configuring the connection to {addr}");
        stream
            .set_read_timeout(Some(timeout))
            .and_then(|()| stream.set_write_timeout(Some(timeout)))
            .and_then(|()| stream.set_nodelay(true))
            .map_err(|e| TestkitError::os(what(), e))?;
        Ok(Self {
            reader: BufReader::new(stream),
            peer: addr,
            timeout,
        })
    }

    /// Connects to a `redis://[[user]:password@]host:port` URL and sends `AUTH` if the URL
    /// has a password. A refused `AUTH` is [`TestkitError::Auth`].
    pub fn open(url: &str, timeout: Duration) -> Result<Self, TestkitError> {
        let parsed = url::parse(url)?;
        let addr = (parsed.host.as_str(), parsed.port)
            .to_socket_addrs()
            .map_err(|e| TestkitError::os(format!("resolving {}", parsed.host), e))?
            .next()
            .ok_or_else(|| TestkitError::InvalidUrl {
                url: url::redact(url),
            })?;
        let mut conn = Self::connect(addr, timeout)?;
        if let Some(password) = parsed.password.as_deref() {
            let reply = match parsed.username.as_deref() {
                Some(user) => conn.call(&["AUTH", user, password])?,
                None => conn.call(&["AUTH", password])?,
            };
            if let Reply::Error(message) = reply {
                return Err(TestkitError::Auth { message });
            }
        }
        Ok(conn)
    }

    /// The address this connection is connected to.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Changes the time-out of later reads and writes.
    pub fn set_timeout(&mut self, timeout: Duration) -> Result<(), TestkitError> {
        let stream = self.reader.get_ref();
        stream
            .set_read_timeout(Some(timeout))
            .and_then(|()| stream.set_write_timeout(Some(timeout)))
            .map_err(|e| TestkitError::os("setting a socket time-out", e))?;
        self.timeout = timeout;
        Ok(())
    }

    /// Sends one command without waiting for its reply (pipelining).
    pub fn send(&mut self, args: &[&str]) -> Result<(), TestkitError> {
        self.send_raw(&resp::encode(args))
    }

    /// Sends several commands in one write, so they reach the server as one pipeline.
    pub fn send_pipeline(&mut self, commands: &[&[&str]]) -> Result<(), TestkitError> {
        let bytes: Vec<u8> = commands.iter().flat_map(|c| resp::encode(c)).collect();
        self.send_raw(&bytes)
    }

    /// Writes raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) -> Result<(), TestkitError> {
        let timeout = self.timeout;
        let peer = self.peer;
        let stream = self.reader.get_mut();
        stream
            .write_all(bytes)
            .and_then(|()| stream.flush())
            .map_err(|e| TestkitError::io(format!("sending to {peer}"), e, timeout))
    }

    /// Reads the next reply.
    pub fn read_reply(&mut self) -> Result<Reply, TestkitError> {
        let what = || format!("reading a reply from {}", self.peer);
        resp::read_reply(&mut self.reader).map_err(|e| {
            if e.kind() == std::io::ErrorKind::InvalidData {
                TestkitError::Protocol {
                    what: what(),
                    detail: e.to_string(),
                }
            } else {
                TestkitError::io(what(), e, self.timeout)
            }
        })
    }

    /// Sends one command and reads its reply.
    pub fn call(&mut self, args: &[&str]) -> Result<Reply, TestkitError> {
        self.send(args)?;
        self.read_reply()
    }
}
