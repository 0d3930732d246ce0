//! A quorum member as the coordinator sees it: one master's scripts and commands, with the
//! restart guard's verdict on every grant.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use redis::{ErrorKind, RedisResult, ServerErrorKind, Value};
use tokio::time::Instant;

use crate::connection::Live;
use crate::failure::{NodeFailure, classify, unexpected};
use crate::group::Replicas;
use crate::kind::{Holder, Kind};
use crate::node::Node;
use crate::quorum::{Acquired, Request, Voter};
use crate::restart_guard::RestartGuard;
use crate::scripts;

mod kinds;

/// One member: a single master.
#[derive(Debug)]
pub(crate) struct Member {
    index: usize,
    nodes: Arc<[Node]>,
    guard: Arc<RestartGuard>,
    /// How long an idle fence counter is kept, in ms (0: forever).
    fence_keep_ms: u64,
    /// For a group: how many replicas must acknowledge a grant.
    wait: Option<Replicas>,
    /// `WAIT`'s own timeout, in ms: half a node timeout, at least 1 (0 would wait forever).
    wait_timeout_ms: u64,
    /// The most replicas this client has seen connected to the group's primary.
    replicas_seen: AtomicUsize,
}

impl Member {
    pub(crate) fn new(
        index: usize,
        nodes: Arc<[Node]>,
        guard: Arc<RestartGuard>,
        fence_keep_ms: u64,
        wait: Option<Replicas>,
        node_timeout: std::time::Duration,
    ) -> Self {
        let wait_timeout_ms = u64::try_from(node_timeout.as_millis() / 2)
            .unwrap_or(u64::MAX)
            .max(1);
        Self {
            index,
            nodes,
            guard,
            fence_keep_ms,
            wait,
            wait_timeout_ms,
            replicas_seen: AtomicUsize::new(0),
        }
    }

    fn node(&self) -> &Node {
        &self.nodes[self.index]
    }

    /// Sends one command and returns its reply.
    async fn query(&self, cmd: &redis::Cmd) -> Result<Value, NodeFailure> {
        let (_, reply) = self
            .node()
            .connection()
            .run(|mut c| async move { cmd.query_async::<Value>(&mut c).await })
            .await?;
        Ok(reply)
    }

    /// Runs `script` on the master with the request's keys and `args`.
    async fn invoke(
        &self,
        script: &redis::Script,
        keys: impl Iterator<Item = &str>,
        args: impl FnOnce(&mut redis::ScriptInvocation<'_>),
    ) -> Result<Value, NodeFailure> {
        let mut call = script.prepare_invoke();
        for key in keys {
            call.key(key);
        }
        args(&mut call);
        self.node()
            .connection()
            .run(|mut c| async move { call.invoke_async(&mut c).await })
            .await
            .map(|(_, v)| v)
    }

    /// The acquire script (several keys, or fenced), with the guard's verdict on a grant.
    async fn acquire_scripted(&self, req: &Request) -> Result<Acquired, NodeFailure> {
        let guarded = self.guard.is_on();
        let node = self.node();
        let live = node.live().await?;
        self.guard.ensure(self.index, live.generation).await?;
        let mut call = scripts::acquire().prepare_invoke();
        call.key(&*req.keys);
        if let Some(fences) = &req.fences {
            call.key(&**fences);
        }
        if guarded {
            call.key(self.guard.marker_key())
                .key(self.guard.records_key());
        }
        call.arg(req.value.as_str())
            .arg(req.ttl_millis())
            .arg(req.keys.len())
            .arg(u8::from(req.fences.is_some()))
            .arg(u8::from(guarded))
            .arg(self.fence_keep_ms);
        let reply: Value = node
            .connection()
            .run_on(
                &live,
                |mut c| async move { call.invoke_async(&mut c).await },
            )
            .await?;
        self.granted_by_script(&reply, live.generation)
    }

    /// The reply of an acquire script, `{0, blocker?, k?}` or `{1, token, epoch}`, with the
    /// guard's verdict on a grant.
    fn granted_by_script(&self, reply: &Value, generation: u64) -> Result<Acquired, NodeFailure> {
        let Value::Array(items) = reply else {
            return Err(unexpected(reply));
        };
        match items.as_slice() {
            [Value::Int(0), rest @ ..] => {
                let blocker = rest
                    .first()
                    .map(crate::failure::text_of)
                    .unwrap_or_default();
                let k = match rest.get(1) {
                    Some(Value::Int(k)) => usize::try_from(*k).ok(),
                    _ => None,
                };
                Ok(Acquired::Taken(Holder::parse(&blocker, k)))
            }
            [Value::Int(1), Value::Int(token), epoch] => {
                let epoch = match epoch {
                    Value::BulkString(bytes) => Some(String::from_utf8_lossy(bytes).into_owned()),
                    Value::Nil => None,
                    other => return Err(unexpected(other)),
                };
                self.guard.admit(self.index, generation, epoch.as_deref())?;
                Ok(Acquired::Granted(token.unsigned_abs()))
            }
            _ => Err(unexpected(reply)),
        }
    }

    /// One key, no fencing: the acquire script's contract is exactly `SET key value NX PX
    /// ttl`. With the guard on, `HGET marker epoch` rides behind it on the same connection
    /// (so it reads the same incarnation of the master), and, when this client has not
    /// recorded the ttl there within half a ttl, the record goes before it. Plain commands
    /// cost the master less than a script, and this is the hot path.
    async fn acquire_one(&self, key: &str, req: &Request) -> Result<Acquired, NodeFailure> {
        let node = self.node();
        let set = || {
            let mut set = redis::cmd("SET");
            set.arg(key)
                .arg(req.value.as_str())
                .arg("NX")
                .arg("PX")
                .arg(req.ttl_millis());
            set
        };
        if !self.guard.is_on() {
            let cmd = req.wire.set_nx.get_or_init(set);
            let live = node.live().await?;
            let reply = node
                .connection()
                .run_on(&live, |mut c| async move {
                    cmd.query_async::<Value>(&mut c).await
                })
                .await?;
            if !granted(&reply)? {
                return Ok(Acquired::Taken(Holder::Lock));
            }
            self.guard.check_strict(self.index)?;
            self.replicated(&live).await?;
            return Ok(Acquired::Granted(0));
        }
        let live = node.live().await?;
        self.guard.ensure(self.index, live.generation).await?;
        let record = self.guard.refresh_due(self.index, req.ttl);
        let pipe = if record {
            req.wire.guarded_recorded.get_or_init(|| {
                let mut pipe = redis::pipe();
                pipe.cmd("EVAL")
                    .arg(scripts::record_source())
                    .arg(1)
                    .arg(self.guard.records_key())
                    .arg(req.ttl_millis())
                    .ignore()
                    .add_command(set())
                    .cmd("HGET")
                    .arg(self.guard.marker_key())
                    .arg("epoch");
                pipe
            })
        } else {
            req.wire.guarded.get_or_init(|| {
                let mut pipe = redis::pipe();
                pipe.add_command(set())
                    .cmd("HGET")
                    .arg(self.guard.marker_key())
                    .arg("epoch");
                pipe
            })
        };
        let sent = Instant::now();
        let (reply, epoch): (Value, Option<String>) = node
            .connection()
            .run_on(&live, |mut c| async move { pipe.query_async(&mut c).await })
            .await?;
        if record {
            // The pipeline fails as a whole if the record failed, so it is written.
            self.guard.recorded(self.index, req.ttl, sent);
        }
        if !granted(&reply)? {
            return Ok(Acquired::Taken(Holder::Lock));
        }
        self.guard
            .admit(self.index, live.generation, epoch.as_deref())?;
        self.replicated(&live).await?;
        Ok(Acquired::Granted(0))
    }

    /// For a group with [`wait_replicas`](crate::Group::wait_replicas): `WAIT` on the
    /// connection that carried the grant, counting the grant only once enough replicas have
    /// it. `WAIT` blocks that connection on the server meanwhile (at most half a node
    /// timeout).
    async fn replicated(&self, live: &Live) -> Result<(), NodeFailure> {
        let Some(wait) = self.wait else {
            return Ok(());
        };
        let node = self.node();
        let needed = match wait {
            Replicas::AtLeast(n) => n,
            Replicas::All => {
                // The most this client has seen connected: a primary cut off from its
                // replicas reports none, and must not be excused for it.
                let now = node
                    .info_on(live, "replication")
                    .await?
                    .number("connected_slaves")
                    .and_then(|n| usize::try_from(n).ok())
                    .unwrap_or(0);
                self.replicas_seen
                    .fetch_max(now, Ordering::Relaxed)
                    .max(now)
            }
        };
        if needed == 0 {
            return Ok(());
        }
        let reply = node
            .query_on(
                live,
                redis::cmd("WAIT").arg(needed).arg(self.wait_timeout_ms),
            )
            .await?;
        let acknowledged = match reply {
            Value::Int(n) => usize::try_from(n).unwrap_or(0),
            other => return Err(unexpected(&other)),
        };
        if acknowledged >= needed {
            Ok(())
        } else {
            Err(NodeFailure::NotReplicated {
                acknowledged,
                needed,
            })
        }
    }

    /// The extend script for every request in one pipeline. Scripts missing from the
    /// server's cache (after a restart or `SCRIPT FLUSH`) cost one more round trip that loads
    /// the script and repeats only the requests that hit NOSCRIPT.
    async fn extend_pipelined(
        &self,
        reqs: &[Arc<Request>],
    ) -> Result<Vec<Result<bool, NodeFailure>>, NodeFailure> {
        let node = self.node();
        let live = node.live().await?;
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for req in reqs {
            pipe.add_command(self.extend_cmd(req));
        }
        let replies: Vec<RedisResult<Value>> = node
            .connection()
            .run_on(&live, |mut c| async move { pipe.query_async(&mut c).await })
            .await?;
        let missing: Vec<usize> = replies
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                matches!(r, Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript))
            })
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
        for source in [scripts::extend_source(), scripts::holder_extend_source()] {
            retry.cmd("SCRIPT").arg("LOAD").arg(source).ignore();
        }
        for &i in &missing {
            retry.add_command(self.extend_cmd(&reqs[i]));
        }
        let replies: Vec<RedisResult<Value>> = node
            .connection()
            .run_on(
                &live,
                |mut c| async move { retry.query_async(&mut c).await },
            )
            .await?;
        for (&i, reply) in missing.iter().zip(replies) {
            results[i] = reply.map_err(classify).and_then(flag);
        }
        Ok(results)
    }

    fn extend_cmd(&self, req: &Request) -> redis::Cmd {
        if let Some(cmd) = self.kind_extend_cmd(req) {
            return cmd;
        }
        let guarded = self.guard.is_on();
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(scripts::extend().get_hash())
            .arg(req.keys.len() + usize::from(guarded))
            .arg(&*req.keys);
        if guarded {
            cmd.arg(self.guard.records_key());
        }
        cmd.arg(req.value.as_str())
            .arg(req.ttl_millis())
            .arg(u8::from(guarded));
        cmd
    }
}

impl Voter for Member {
    async fn acquire(&self, req: &Request) -> Result<Acquired, NodeFailure> {
        match (&req.kind, &*req.keys, &req.fences) {
            (Kind::Mutex, [key], None) => self.acquire_one(key, req).await,
            (Kind::Mutex, ..) => self.acquire_scripted(req).await,
            _ => self.acquire_kind(req).await,
        }
    }

    async fn fence(&self, req: &Request, token: u64) -> Result<bool, NodeFailure> {
        if !matches!(req.kind, Kind::Mutex) {
            return self.fence_kind(req, token).await;
        }
        let fences = req.fences.as_deref().unwrap_or_default();
        let keys = req.keys.iter().chain(fences).map(String::as_str);
        let keep = self.fence_keep_ms;
        flag(
            self.invoke(scripts::fence(), keys, |call| {
                call.arg(req.value.as_str()).arg(token).arg(keep);
            })
            .await?,
        )
    }

    async fn extend(&self, req: &Request) -> Result<bool, NodeFailure> {
        if let Some(extended) = self.extend_kind(req).await {
            return extended;
        }
        let guarded = self.guard.is_on();
        let records = guarded.then(|| self.guard.records_key());
        let keys = req.keys.iter().map(String::as_str).chain(records);
        flag(
            self.invoke(scripts::extend(), keys, |call| {
                call.arg(req.value.as_str())
                    .arg(req.ttl_millis())
                    .arg(u8::from(guarded));
            })
            .await?,
        )
    }

    /// Sent as `EVAL` with the script's body, not `EVALSHA`: a master that does not have
    /// the script cached (new, restarted, flushed) would answer NOSCRIPT, and if that answer
    /// were lost or late the delete would never run and the key would block the resource
    /// for a whole ttl. One self-contained command always runs, in order after anything we
    /// sent the master before.
    async fn release(&self, req: &Request) -> Result<u64, NodeFailure> {
        let eval = req.wire.release.get_or_init(|| match &req.kind {
            Kind::Mutex => {
                let mut eval = redis::cmd("EVAL");
                eval.arg(scripts::release_body())
                    .arg(req.keys.len())
                    .arg(&*req.keys)
                    .arg(req.value.as_str());
                eval
            }
            _ => kinds::release_cmd(req),
        });
        match self.query(eval).await? {
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

/// Whether a `SET … NX` reply is a grant (`OK`) or a refusal (nil).
fn granted(reply: &Value) -> Result<bool, NodeFailure> {
    match reply {
        Value::Nil => Ok(false),
        Value::Okay => Ok(true),
        Value::SimpleString(s) if s == "OK" => Ok(true),
        other => Err(unexpected(other)),
    }
}

/// A script reply of 1 or 0.
fn flag(value: Value) -> Result<bool, NodeFailure> {
    match value {
        Value::Int(1) => Ok(true),
        Value::Int(0) => Ok(false),
        other => Err(unexpected(&other)),
    }
}
