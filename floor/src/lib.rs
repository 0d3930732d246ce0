//! The floor: what a quorum lock costs at the very least on these masters. Raw commands,
//! sent concurrently over one multiplexed connection per master, waiting only until a
//! majority decided: `SET key value NX PX ttl` to acquire, a compare-and-delete script to
//! release, a compare-and-`PEXPIRE` script to extend. No restart guard, no validity
//! arithmetic, no stats, no cleanup guard: everything redquorum adds is measured against
//! this.
//!
//! A crate of its own because two measurers share it: `redquorum bench` (the CLI, whose
//! installed binary must carry neither the test kit nor benches) and `benches/hotpath.rs`
//! (the library's dev-dependencies). It depends on redis-rs alone, not on redquorum: the
//! floor must not share code with what it is the floor of.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;
use redis::{RedisError, Script, Value};

const RELEASE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";
const EXTEND: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";

/// Why [`Floor::connect`] failed; the message names the master.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The master's URL is not a Redis URL (a usage error).
    #[error("node {node} has an invalid URL: {source}.")]
    InvalidUrl {
        /// The master's index.
        node: usize,
        /// redis-rs's reason.
        source: RedisError,
    },
    /// The master did not accept a connection in time.
    #[error("node {node} did not accept a connection within {after:?}.")]
    Timeout {
        /// The master's index.
        node: usize,
        /// The connect time-out.
        after: Duration,
    },
    /// The master refused the connection or its set-up (`AUTH`).
    #[error("could not connect to node {node}: {source}.")]
    Connect {
        /// The master's index.
        node: usize,
        /// redis-rs's reason.
        source: RedisError,
    },
}

/// Why a floor round failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloorError {
    /// A majority answered "taken" (or "not ours" for an extension).
    Contended,
    /// Too many masters failed or timed out for a majority.
    NoQuorum,
}

/// One multiplexed connection per master, and the two scripts.
pub struct Floor {
    conns: Vec<MultiplexedConnection>,
    timeout: Duration,
    release: Script,
    extend: Script,
}

impl fmt::Debug for Floor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Floor")
            .field("masters", &self.conns.len())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Floor {
    /// Connects to every master (at most `connect_timeout` each) and loads the scripts;
    /// each later call to a master is bounded by `timeout`.
    pub async fn connect(
        urls: &[String],
        timeout: Duration,
        connect_timeout: Duration,
    ) -> Result<Self, ConnectError> {
        let mut conns = Vec::with_capacity(urls.len());
        for (node, url) in urls.iter().enumerate() {
            let client = redis::Client::open(url.as_str())
                .map_err(|source| ConnectError::InvalidUrl { node, source })?;
            let conn = tokio::time::timeout(
                connect_timeout,
                // No response timeout of the connection's own, as in redquorum: every call
                // is bounded by the node timeout instead.
                client.get_multiplexed_async_connection_with_config(
                    &AsyncConnectionConfig::new().set_response_timeout(None),
                ),
            )
            .await
            .map_err(|_| ConnectError::Timeout {
                node,
                after: connect_timeout,
            })?
            .map_err(|source| ConnectError::Connect { node, source })?;
            conns.push(conn);
        }
        let floor = Self {
            conns,
            timeout,
            release: Script::new(RELEASE),
            extend: Script::new(EXTEND),
        };
        for conn in &floor.conns {
            // Loaded up front so that no measured call pays for a NOSCRIPT fallback.
            let mut conn = conn.clone();
            for script in [&floor.release, &floor.extend] {
                let _ = tokio::time::timeout(connect_timeout, script.load_async(&mut conn)).await;
            }
        }
        Ok(floor)
    }

    fn quorum(&self) -> usize {
        self.conns.len() / 2 + 1
    }

    /// `SET key value NX PX ttl` on every master; done once a majority said OK (or a
    /// majority became impossible).
    pub async fn acquire(&self, key: &str, value: &str, ttl_ms: u64) -> Result<(), FloorError> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(key).arg(value).arg("NX").arg("PX").arg(ttl_ms);
        self.decide(
            |mut conn| {
                let cmd = &cmd;
                async move { cmd.query_async::<Value>(&mut conn).await }
            },
            |v| matches!(v, Value::Okay) || matches!(v, Value::SimpleString(s) if s == "OK"),
        )
        .await
    }

    /// The compare-and-delete on every master; done once a majority answered.
    pub async fn release(&self, key: &str, value: &str) -> Result<(), FloorError> {
        let mut call = self.release.prepare_invoke();
        call.key(key).arg(value);
        self.answered(|mut conn| {
            let call = &call;
            async move { call.invoke_async::<Value>(&mut conn).await }
        })
        .await
    }

    /// The compare-and-`PEXPIRE` on every master; done once a majority extended.
    pub async fn extend(&self, key: &str, value: &str, ttl_ms: u64) -> Result<(), FloorError> {
        let mut call = self.extend.prepare_invoke();
        call.key(key).arg(value).arg(ttl_ms);
        self.decide(
            |mut conn| {
                let call = &call;
                async move { call.invoke_async::<Value>(&mut conn).await }
            },
            |v| matches!(v, Value::Int(1)),
        )
        .await
    }

    /// Sends the release from a background task without waiting (the cleanup after a
    /// failed acquisition, as redquorum does it).
    pub fn spawn_release(self: &Arc<Self>, key: String, value: String) {
        let floor = self.clone();
        tokio::spawn(async move {
            let _ = floor.release(&key, &value).await;
        });
    }

    /// Runs `send` on every master concurrently; `Ok` once a majority answered `yes`.
    async fn decide<F, Fut>(&self, send: F, yes: impl Fn(&Value) -> bool) -> Result<(), FloorError>
    where
        F: Fn(MultiplexedConnection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<Value>>,
    {
        let n = self.conns.len();
        let q = self.quorum();
        let mut pending: FuturesUnordered<_> = self
            .conns
            .iter()
            .map(|c| tokio::time::timeout(self.timeout, send(c.clone())))
            .collect();
        let (mut granted, mut taken, mut failed) = (0, 0, 0);
        while let Some(answer) = pending.next().await {
            match answer {
                Ok(Ok(v)) if yes(&v) => granted += 1,
                Ok(Ok(_)) => taken += 1,
                _ => failed += 1,
            }
            if granted >= q {
                return Ok(());
            }
            if taken + failed > n - q {
                break;
            }
        }
        Err(if failed > n - q {
            FloorError::NoQuorum
        } else {
            FloorError::Contended
        })
    }

    /// Runs `send` on every master concurrently; `Ok` once a majority answered at all.
    async fn answered<F, Fut>(&self, send: F) -> Result<(), FloorError>
    where
        F: Fn(MultiplexedConnection) -> Fut,
        Fut: std::future::Future<Output = redis::RedisResult<Value>>,
    {
        self.decide(send, |_| true).await
    }
}
