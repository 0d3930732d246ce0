//! The floor: what a quorum lock costs at the very least on these masters. Raw commands,
//! sent concurrently over one multiplexed connection per master, waiting only until a
//! majority decided: `SET key value NX PX ttl` to acquire, a compare-and-delete script to
//! release, a compare-and-`PEXPIRE` script to extend. No restart guard, no validity
//! arithmetic, no stats, no cleanup guard: everything redquorum adds is measured against
//! this.

use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;
use redis::{Script, Value};

use crate::exit::Failure;

const RELEASE: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";
const EXTEND: &str = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end";

/// Why a floor round failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FloorError {
    /// A majority answered "taken" (or "not ours" for an extension).
    Contended,
    /// Too many masters failed or timed out for a majority.
    NoQuorum,
}

/// One multiplexed connection per master, and the two scripts.
pub(crate) struct Floor {
    conns: Vec<MultiplexedConnection>,
    timeout: Duration,
    release: Script,
    extend: Script,
}

impl Floor {
    /// Connects to every master (at most `connect_timeout` each) and loads the scripts.
    pub(crate) async fn connect(
        urls: &[String],
        timeout: Duration,
        connect_timeout: Duration,
    ) -> Result<Self, Failure> {
        let mut conns = Vec::with_capacity(urls.len());
        for (i, url) in urls.iter().enumerate() {
            let client = redis::Client::open(url.as_str())
                .map_err(|e| Failure::usage(format!("node {i} has an invalid URL: {e}.")))?;
            let conn = tokio::time::timeout(
                connect_timeout,
                // No response timeout of the connection's own, as in redquorum: every call
                // is bounded by the node timeout instead.
                client.get_multiplexed_async_connection_with_config(
                    &AsyncConnectionConfig::new().set_response_timeout(None),
                ),
            )
            .await
            .map_err(|_| {
                Failure::unavailable(format!(
                    "node {i} did not accept a connection within {connect_timeout:?}."
                ))
            })?
            .map_err(|e| Failure::unavailable(format!("could not connect to node {i}: {e}.")))?;
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
    pub(crate) async fn acquire(
        &self,
        key: &str,
        value: &str,
        ttl_ms: u64,
    ) -> Result<(), FloorError> {
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
    pub(crate) async fn release(&self, key: &str, value: &str) -> Result<(), FloorError> {
        let mut call = self.release.prepare_invoke();
        call.key(key).arg(value);
        self.answered(|mut conn| {
            let call = &call;
            async move { call.invoke_async::<Value>(&mut conn).await }
        })
        .await
    }

    /// The compare-and-`PEXPIRE` on every master; done once a majority extended.
    pub(crate) async fn extend(
        &self,
        key: &str,
        value: &str,
        ttl_ms: u64,
    ) -> Result<(), FloorError> {
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
    pub(crate) fn spawn_release(self: &std::sync::Arc<Self>, key: String, value: String) {
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
