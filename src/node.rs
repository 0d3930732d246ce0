//! One Redis master: a lazily connecting, reconnecting multiplexed connection, the lock
//! scripts, and the mapping of every redis error to a typed per-node failure.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, ErrorKind, RedisError, RedisResult, ServerErrorKind, Value};

use crate::guard::Guard;
use crate::quorum::{Request, Voter};
use crate::scripts;
use crate::stats::NodeFailure;

/// A master. Its connection is created on first use (inside the caller's tokio runtime),
/// then kept and re-established after failures by the `ConnectionManager`.
///
/// One multiplexed connection per master is deliberate: commands to a master are then
/// processed in the order they were sent, so a release sent after an acquire is processed
/// after it. For the same reason the connection has no response timeout of its own (a
/// timeout there would tear the connection down and lose that ordering): every call is
/// bounded by the coordinator's `node_timeout` instead.
pub(crate) struct Node {
    index: usize,
    name: String,
    client: Client,
    connect_timeout: Duration,
    conn: OnceLock<Result<ConnectionManager, NodeFailure>>,
    guard: Arc<Guard>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("index", &self.index)
            .field("url", &self.name)
            .finish_non_exhaustive()
    }
}

impl Node {
    pub(crate) fn new(
        index: usize,
        name: String,
        client: Client,
        connect_timeout: Duration,
        guard: Guard,
    ) -> Self {
        Self {
            index,
            name,
            client,
            connect_timeout,
            conn: OnceLock::new(),
            guard: Arc::new(guard),
        }
    }

    /// The master's restart guard.
    pub(crate) fn guard(&self) -> &Guard {
        &self.guard
    }

    /// The node's URL with its password redacted.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    fn connection(&self) -> Result<ConnectionManager, NodeFailure> {
        self.conn
            .get_or_init(|| {
                // Reconnect quickly, a few times, then let the next call start over: a
                // master that comes back should be usable within a few tens of ms.
                let config = ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(self.connect_timeout))
                    .set_response_timeout(None)
                    .set_min_delay(Duration::from_millis(10))
                    .set_max_delay(Duration::from_millis(500))
                    .set_exponent_base(2.0)
                    .set_number_of_retries(3);
                let manager = ConnectionManager::new_lazy_with_config(self.client.clone(), config)
                    .map_err(classify)?;
                // A lazy connection only makes progress while a call polls it, and every
                // call gives up after `node_timeout`, which may be shorter than a
                // handshake over a long link: drive the first connection from a task.
                let mut warm = manager.clone();
                let index = self.index;
                let guard = self.guard.clone();
                tokio::spawn(async move {
                    let ping = redis::cmd("PING");
                    if let Err(err) = ping.query_async::<Value>(&mut warm).await {
                        tracing::debug!(node = index, %err, "first connection failed");
                    } else if let Err(failure) = guard.ensure_verified(&warm).await {
                        tracing::debug!(node = index, %failure, "restart guard check failed");
                    }
                });
                Ok(manager)
            })
            .clone()
    }

    /// Runs `script` by SHA (loading it on NOSCRIPT) and returns its raw reply.
    async fn eval(&self, script: &redis::Script, req: &Request) -> Result<Value, NodeFailure> {
        let mut conn = self.connection()?;
        let mut call = script.prepare_invoke();
        call.key(&*req.keys)
            .arg(req.value.as_str())
            .arg(req.ttl_millis());
        call.invoke_async(&mut conn).await.map_err(classify)
    }

    /// Sends an arbitrary command (used by health checks), bounded by `timeout`.
    pub(crate) async fn query(
        &self,
        cmd: &redis::Cmd,
        timeout: Duration,
    ) -> Result<Value, NodeFailure> {
        let mut conn = self.connection()?;
        tokio::time::timeout(timeout, cmd.query_async(&mut conn))
            .await
            .map_err(|_| NodeFailure::Timeout(timeout))?
            .map_err(classify)
    }
}

impl Voter for Node {
    fn acquire(
        &self,
        req: &Request,
    ) -> impl Future<Output = Result<Option<u64>, NodeFailure>> + Send {
        self.acquire_checked(req)
    }

    async fn fence(&self, req: &Request, token: u64) -> Result<bool, NodeFailure> {
        let mut conn = self.connection()?;
        let mut call = scripts::fence().prepare_invoke();
        call.key(&*req.keys);
        if let Some(fences) = &req.fences {
            call.key(&**fences);
        }
        call.arg(req.value.as_str()).arg(token);
        flag(call.invoke_async(&mut conn).await.map_err(classify)?)
    }

    async fn extend(&self, req: &Request) -> Result<bool, NodeFailure> {
        flag(self.eval(scripts::extend(), req).await?)
    }

    /// Sent as `EVAL` with the script's body, not `EVALSHA`: a master that does not have
    /// the script cached (new, restarted, flushed) would answer NOSCRIPT, and if that answer
    /// were lost or late the delete would never run and the key would block the resource
    /// for a whole ttl. One self-contained command always runs, in order after anything we
    /// sent the master before.
    async fn release(&self, req: &Request) -> Result<u64, NodeFailure> {
        let mut conn = self.connection()?;
        let eval = req.built.release.get_or_init(|| {
            let mut eval = redis::cmd("EVAL");
            eval.arg(scripts::release_body())
                .arg(req.keys.len())
                .arg(&*req.keys)
                .arg(req.value.as_str());
            eval
        });
        match eval.query_async(&mut conn).await.map_err(classify)? {
            Value::Int(n) if n >= 0 => Ok(n.unsigned_abs()),
            other => Err(unexpected(&other)),
        }
    }

    fn extend_many(
        &self,
        reqs: &[Arc<Request>],
    ) -> impl Future<Output = Result<Vec<Result<bool, NodeFailure>>, NodeFailure>> + Send {
        self.extend_pipelined(reqs)
    }
}

impl Node {
    /// The acquire script, with the restart guard's verdict on a grant.
    async fn acquire_checked(&self, req: &Request) -> Result<Option<u64>, NodeFailure> {
        let mut conn = self.connection()?;
        self.guard.ensure_verified(&conn).await?;
        let marker = self.guard.marker_key();
        if let ([key], None) = (&*req.keys, &req.fences) {
            return self.acquire_one(&mut conn, key, req, marker).await;
        }
        let mut call = scripts::acquire().prepare_invoke();
        call.key(&*req.keys);
        if let Some(fences) = &req.fences {
            call.key(&**fences);
        }
        if let Some(marker) = marker {
            call.key(marker);
        }
        call.arg(req.value.as_str())
            .arg(req.ttl_millis())
            .arg(req.keys.len())
            .arg(u8::from(req.fences.is_some()))
            .arg(u8::from(marker.is_some()));
        let reply: Value = call.invoke_async(&mut conn).await.map_err(classify)?;
        let Value::Array(items) = &reply else {
            return Err(unexpected(&reply));
        };
        match items.as_slice() {
            [Value::Int(0)] => Ok(None),
            [Value::Int(1), Value::Int(token), marker] => {
                let marker = match marker {
                    Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
                    Value::Nil => None,
                    other => return Err(unexpected(other)),
                };
                self.guard.admit(marker.as_deref(), &conn)?;
                Ok(Some(token.unsigned_abs()))
            }
            _ => Err(unexpected(&reply)),
        }
    }

    /// One key, no fencing: the acquire script's contract is exactly `SET key value NX PX
    /// ttl` (plus, with the guard, a `GET` of the marker pipelined behind it on the same
    /// connection, so it reads the same incarnation of the master). Plain commands cost the
    /// master less than a script, and this is the hot path.
    async fn acquire_one(
        &self,
        conn: &mut ConnectionManager,
        key: &str,
        req: &Request,
        marker: Option<&str>,
    ) -> Result<Option<u64>, NodeFailure> {
        let set = || {
            let mut set = redis::cmd("SET");
            set.arg(key)
                .arg(req.value.as_str())
                .arg("NX")
                .arg("PX")
                .arg(req.ttl_millis());
            set
        };
        let (reply, marker) = match marker {
            None => {
                let set = req.built.acquire.get_or_init(set);
                (set.query_async(conn).await.map_err(classify)?, None)
            }
            Some(marker_key) => {
                let pipe = req.built.acquire_guarded.get_or_init(|| {
                    let mut pipe = redis::pipe();
                    pipe.add_command(set()).cmd("GET").arg(marker_key);
                    pipe
                });
                let (reply, marker): (Value, Option<String>) =
                    pipe.query_async(conn).await.map_err(classify)?;
                (reply, marker)
            }
        };
        match reply {
            Value::Nil => Ok(None),
            Value::Okay => {
                self.guard.admit(marker.as_deref(), conn)?;
                Ok(Some(0))
            }
            Value::SimpleString(s) if s == "OK" => {
                self.guard.admit(marker.as_deref(), conn)?;
                Ok(Some(0))
            }
            other => Err(unexpected(&other)),
        }
    }

    /// The extend script for every request in one pipeline. Scripts missing from the
    /// server's cache (after a restart or `SCRIPT FLUSH`) cost one more round trip that loads
    /// the script and repeats only the requests that hit NOSCRIPT.
    async fn extend_pipelined(
        &self,
        reqs: &[Arc<Request>],
    ) -> Result<Vec<Result<bool, NodeFailure>>, NodeFailure> {
        let mut conn = self.connection()?;
        let script = scripts::extend();
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for req in reqs {
            pipe.add_command(extend_cmd(script, req));
        }
        let replies: Vec<RedisResult<Value>> =
            pipe.query_async(&mut conn).await.map_err(classify)?;
        let missing: Vec<usize> = replies
            .iter()
            .enumerate()
            .filter(|(_, r)| matches!(r, Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript)))
            .map(|(i, _)| i)
            .collect();
        let mut results: Vec<Result<bool, NodeFailure>> = replies
            .into_iter()
            .map(|r| r.map_err(classify).and_then(flag))
            .collect();
        if missing.is_empty() {
            return Ok(results);
        }
        let mut retry = redis::pipe();
        retry.ignore_errors();
        retry
            .cmd("SCRIPT")
            .arg("LOAD")
            .arg(scripts::EXTEND_SOURCE)
            .ignore();
        for &i in &missing {
            retry.add_command(extend_cmd(script, &reqs[i]));
        }
        let replies: Vec<RedisResult<Value>> =
            retry.query_async(&mut conn).await.map_err(classify)?;
        for (&i, reply) in missing.iter().zip(replies) {
            results[i] = reply.map_err(classify).and_then(flag);
        }
        Ok(results)
    }
}

fn extend_cmd(script: &redis::Script, req: &Request) -> redis::Cmd {
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(script.get_hash())
        .arg(req.keys.len())
        .arg(&*req.keys)
        .arg(req.value.as_str())
        .arg(req.ttl_millis());
    cmd
}

/// A script reply of 1 or 0.
fn flag(value: Value) -> Result<bool, NodeFailure> {
    match value {
        Value::Int(1) => Ok(true),
        Value::Int(0) => Ok(false),
        other => Err(unexpected(&other)),
    }
}

fn unexpected(value: &Value) -> NodeFailure {
    let mut shown = format!("{value:?}");
    shown.truncate(80);
    NodeFailure::UnexpectedReply(shown)
}

/// Maps a redis error to the failure it means for this master's vote.
pub(crate) fn classify(err: RedisError) -> NodeFailure {
    let code = err.code().map(str::to_owned);
    if err.kind() == ErrorKind::AuthenticationFailed
        || matches!(code.as_deref(), Some("WRONGPASS" | "NOAUTH" | "NOPERM"))
    {
        return NodeFailure::Auth(err.to_string());
    }
    if err.is_timeout() {
        return NodeFailure::Connection(format!("timed out: {err}"));
    }
    if let Some(code) = code {
        return NodeFailure::Server {
            code,
            message: err.detail().unwrap_or_default().to_owned(),
        };
    }
    match err.kind() {
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType => {
            NodeFailure::UnexpectedReply(err.to_string())
        }
        _ => NodeFailure::Connection(err.to_string()),
    }
}
