//! A quorum member as the coordinator sees it: one master's scripts and commands, with the
//! restart guard's verdict on every grant.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;

use redis::{ErrorKind, RedisResult, ServerErrorKind, Value};
use tokio::time::Instant;

use crate::connection::Live;
use crate::failure::{NodeFailure, classify, unexpected};
use crate::group::Replicas;
use crate::kind::{Holder, Kind};
use crate::node::Node;
use crate::quorum::{Acquired, Collector, Request, Voter};
use crate::restart_guard::RestartGuard;
use crate::scripts;
use crate::wire;

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
    /// Whether renewal batches go on the connection of acquisitions and releases (through
    /// its outbox) instead of their own (benchmarks only: see `Node::renewal_connection`).
    renewal_shares_connection: bool,
}

impl Member {
    pub(crate) fn new(
        index: usize,
        nodes: Arc<[Node]>,
        guard: Arc<RestartGuard>,
        fence_keep_ms: u64,
        wait: Option<Replicas>,
        node_timeout: std::time::Duration,
        renewal_shares_connection: bool,
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
            renewal_shares_connection,
        }
    }

    fn node(&self) -> &Node {
        &self.nodes[self.index]
    }

    /// Sends one command on a lock's keys (through the outbox) and returns its reply.
    async fn query(&self, cmd: &redis::Cmd) -> Result<Value, NodeFailure> {
        let conn = self.node().connection();
        let live = conn.get().await?;
        conn.send(live, cmd).await
    }

    /// Runs a script the master has cached (`EVALSHA`), or else its body (`EVAL`), with
    /// `keys` and `args`. `acquire` is the acquire it belongs to, if any: then neither is
    /// sent once the lock's release has begun (see [`Wire::enter`](crate::wire::Wire::enter)),
    /// and both go on the connection of `live` (the restart guard's verdict is for that one).
    async fn invoke<'a>(
        &self,
        (script, source): (&redis::Script, &str),
        keys: &[&str],
        args: impl IntoIterator<Item = &'a str> + Clone,
        acquire: Option<(&Request, Live)>,
    ) -> Result<Value, NodeFailure> {
        let conn = self.node().connection();
        let sha = wire::evalsha(script.get_hash(), keys, args.clone());
        let first = match &acquire {
            Some((req, live)) => before_release(req, conn.send(live.clone(), &sha)).await?,
            None => conn.send(conn.get().await?, &sha).await,
        };
        match first {
            Err(NodeFailure::Server { code, .. }) if code == "NOSCRIPT" => {
                // Not cached there (new, restarted, flushed): the body.
                let body = wire::eval(source, keys, args);
                match acquire {
                    Some((req, live)) => before_release(req, conn.send(live, &body)).await?,
                    None => conn.send(conn.get().await?, &body).await,
                }
            }
            other => other,
        }
    }

    /// The acquire script (several keys, or fenced), with the guard's verdict on a grant.
    /// Sent as `EVALSHA`; a master that does not have it cached gets the body (`EVAL`) on
    /// the same connection — unless the lock's release has begun meanwhile (see
    /// [`Wire::enter`](crate::wire::Wire::enter)).
    async fn acquire_scripted(&self, req: &Request) -> Result<Acquired, NodeFailure> {
        let guarded = self.guard.is_on();
        let live = self.node().live().await?;
        let generation = live.generation;
        self.guard.ensure(self.index, generation).await?;
        let mut keys: Vec<&str> = req.keys.iter().map(String::as_str).collect();
        if let Some(fences) = &req.fences {
            keys.extend(fences.iter().map(String::as_str));
        }
        if guarded {
            keys.extend([self.guard.marker_key(), self.guard.records_key()]);
        }
        let numbers = [
            req.ttl_millis().to_string(),
            req.keys.len().to_string(),
            u8::from(req.fences.is_some()).to_string(),
            u8::from(guarded).to_string(),
            self.fence_keep_ms.to_string(),
        ];
        let args = std::iter::once(req.value.as_str()).chain(numbers.iter().map(String::as_str));
        let script = (scripts::acquire(), scripts::acquire_source());
        let reply = self.invoke(script, &keys, args, Some((req, live))).await?;
        self.granted_by_script(&reply, generation)
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
                self.guard.admit(self.index, generation, text(epoch)?)?;
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
        let conn = self.node().connection();
        let set = || wire::set_nx(key, req.value.as_str(), req.ttl_millis());
        if !self.guard.is_on() {
            let cmd = req.wire.set_nx.get_or_init(set);
            let live = conn.get().await?;
            // `WAIT` needs the connection that carried the grant (a clone only when asked).
            let waits = self.wait.is_some().then(|| live.clone());
            if !granted(&before_release(req, conn.send(live, cmd)).await??)? {
                return Ok(Acquired::Taken(Holder::Lock));
            }
            self.guard.check_strict(self.index)?;
            if let Some(live) = waits {
                self.replicated(&live).await?;
            }
            return Ok(Acquired::Granted(0));
        }
        let live = conn.get().await?;
        let generation = live.generation;
        self.guard.ensure(self.index, generation).await?;
        let waits = self.wait.is_some().then(|| live.clone());
        let record = self.guard.refresh_due(self.index, req.ttl);
        let epoch = || wire::hget(self.guard.marker_key(), "epoch");
        let pipe = if record {
            req.wire.guarded_recorded.get_or_init(|| {
                let ttl = req.ttl_millis().to_string();
                let mut pipe = redis::Pipeline::with_capacity(3);
                pipe.add_command(wire::eval(
                    scripts::record_source(),
                    &[self.guard.records_key()],
                    [ttl.as_str()],
                ))
                .add_command(set())
                .add_command(epoch());
                pipe
            })
        } else {
            req.wire.guarded.get_or_init(|| {
                let mut pipe = redis::Pipeline::with_capacity(2);
                pipe.add_command(set()).add_command(epoch());
                pipe
            })
        };
        let sent = record.then(Instant::now);
        // Any server error in the pipeline (the record's included) fails the whole call, so
        // a record that answered is written.
        let replies = before_release(req, conn.send_all(live, pipe)).await??;
        if let Some(sent) = sent {
            self.guard.recorded(self.index, req.ttl, sent);
        }
        let [.., reply, epoch] = replies.as_slice() else {
            return Err(NodeFailure::UnexpectedReply(format!(
                "{} replies to a pipeline of {}",
                replies.len(),
                pipe.len()
            )));
        };
        if !granted(reply)? {
            return Ok(Acquired::Taken(Holder::Lock));
        }
        self.guard.admit(self.index, generation, text(epoch)?)?;
        if let Some(live) = waits {
            self.replicated(&live).await?;
        }
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

    /// The extend script for every request in one pipeline, on the renewal connection (see
    /// [`Node::renewal_connection`]). Scripts missing from the server's cache (after a
    /// restart or `SCRIPT FLUSH`) cost one more round trip that loads the script and repeats
    /// only the requests that hit NOSCRIPT.
    async fn extend_pipelined(
        &self,
        reqs: &[Arc<Request>],
    ) -> Result<Vec<Result<bool, NodeFailure>>, NodeFailure> {
        let conn = if self.renewal_shares_connection {
            self.node().connection()
        } else {
            self.node().renewal_connection()
        };
        let live = conn.get().await?;
        let spare = live.clone();
        let mut pipe = redis::Pipeline::with_capacity(reqs.len());
        for req in reqs {
            pipe.add_command(self.extend_cmd(req));
        }
        let replies: Vec<RedisResult<Value>> = conn
            .send_each(live, &pipe)
            .await?
            .into_iter()
            .map(Value::extract_error)
            .collect();
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
        let sources = [scripts::extend_source(), scripts::holder_extend_source()];
        let mut retry = redis::Pipeline::with_capacity(sources.len() + missing.len());
        for source in sources {
            retry.add_command(redis::cmd("SCRIPT").arg("LOAD").arg(source).clone());
        }
        for &i in &missing {
            retry.add_command(self.extend_cmd(&reqs[i]));
        }
        let replies = conn.send_each(spare, &retry).await?;
        for (&i, reply) in missing.iter().zip(replies.into_iter().skip(sources.len())) {
            results[i] = reply.extract_error().map_err(classify).and_then(flag);
        }
        Ok(results)
    }

    fn extend_cmd(&self, req: &Request) -> redis::Cmd {
        if let Some(cmd) = self.kind_extend_cmd(req) {
            return cmd;
        }
        let guarded = self.guard.is_on();
        let mut keys: Vec<&str> = req.keys.iter().map(String::as_str).collect();
        if guarded {
            keys.push(self.guard.records_key());
        }
        let ttl = req.ttl_millis().to_string();
        let flag = if guarded { "1" } else { "0" };
        wire::evalsha(
            scripts::extend().get_hash(),
            &keys,
            [req.value.as_str(), ttl.as_str(), flag],
        )
    }
}

impl Voter for Member {
    async fn acquire(&self, req: &Request) -> Result<Acquired, NodeFailure> {
        match (&req.kind, &*req.keys, &req.fences) {
            (Kind::Mutex, [key], None) => self.acquire_one(key, req).await,
            // Boxed so that the hot path's future stays small.
            (Kind::Mutex, ..) => Box::pin(self.acquire_scripted(req)).await,
            _ => Box::pin(self.acquire_kind(req)).await,
        }
    }

    async fn fence(&self, req: &Request, token: u64) -> Result<bool, NodeFailure> {
        if !matches!(req.kind, Kind::Mutex) {
            return self.fence_kind(req, token).await;
        }
        let fences = req.fences.as_deref().unwrap_or_default();
        let keys: Vec<&str> = req.keys.iter().chain(fences).map(String::as_str).collect();
        let numbers = [token.to_string(), self.fence_keep_ms.to_string()];
        let args = std::iter::once(req.value.as_str()).chain(numbers.iter().map(String::as_str));
        let script = (scripts::fence(), scripts::fence_source());
        flag(self.invoke(script, &keys, args, None).await?)
    }

    async fn extend(&self, req: &Request) -> Result<bool, NodeFailure> {
        if let Some(extended) = self.extend_kind(req).await {
            return extended;
        }
        let guarded = self.guard.is_on();
        let mut keys: Vec<&str> = req.keys.iter().map(String::as_str).collect();
        if guarded {
            keys.push(self.guard.records_key());
        }
        let ttl = req.ttl_millis().to_string();
        let flag_arg = if guarded { "1" } else { "0" };
        let args = [req.value.as_str(), ttl.as_str(), flag_arg];
        let script = (scripts::extend(), scripts::extend_source());
        flag(self.invoke(script, &keys, args, None).await?)
    }

    /// Sent as `EVAL` with the script's body, not `EVALSHA`: a master that does not have
    /// the script cached (new, restarted, flushed) would answer NOSCRIPT, and if that answer
    /// were lost or late the delete would never run and the key would block the resource
    /// for a whole ttl. One self-contained command always runs, in order after anything we
    /// sent the master before (through the outbox, as every command on the lock's keys).
    async fn release(&self, req: &Request) -> Result<u64, NodeFailure> {
        let eval = req.wire.release.get_or_init(|| match &req.kind {
            Kind::Mutex => wire::eval(scripts::release_body(), &req.keys, [req.value.as_str()]),
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

    /// Every member of a client shares the first master's collector.
    fn collector(&self) -> Option<&Collector> {
        self.nodes.first().map(Node::collector)
    }
}

/// Runs `send`, an acquire's hand-over of its command to the connection, unless the
/// lock's release has begun (see [`Wire::enter`](crate::wire::Wire::enter)): then it is not
/// sent at all. The entry is held over the first poll only, which hands the command over
/// (the connection's sends do so in their first poll), so the release waits for it.
async fn before_release<F: Future>(req: &Request, send: F) -> Result<F::Output, NodeFailure> {
    let Some(entry) = req.wire.enter() else {
        return Err(NodeFailure::connection(
            "not sent: the lock was being released before this master could be asked",
        ));
    };
    let mut send = std::pin::pin!(send);
    let first = std::future::poll_fn(|cx| Poll::Ready(send.as_mut().poll(cx))).await;
    drop(entry);
    match first {
        Poll::Ready(out) => Ok(out),
        Poll::Pending => Ok(send.await),
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

/// A reply that is text or nil (`HGET`).
fn text(reply: &Value) -> Result<Option<&str>, NodeFailure> {
    match reply {
        Value::Nil => Ok(None),
        Value::BulkString(bytes) => std::str::from_utf8(bytes)
            .map(Some)
            .map_err(|_| unexpected(reply)),
        Value::SimpleString(s) => Ok(Some(s)),
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
