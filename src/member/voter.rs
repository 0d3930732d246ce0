//! A quorum member as the coordinator sees it: one master's scripts and commands, with the
//! restart guard's verdict on every grant.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::Poll;

use redis::{ErrorKind, RedisResult, ServerErrorKind, Value};
use tokio::time::Instant;

use crate::config::group::Replicas;
use crate::error::node_failure::{NodeFailure, classify, unexpected};
use crate::kind::{Holder, KindRequest};
use crate::member::connection::Live;
use crate::member::kinds::{self, Context};
use crate::member::node::{Info, Node};
use crate::member::restart_guard::RestartGuard;
use crate::protocol::quorum::{Acquired, Collector, Request, Voter};
use crate::protocol::scripts;
use crate::protocol::wire;

/// What a member checks after a write that keeps a lock: nothing more for a single master;
/// for a Sentinel group, the primary's identity after a grant and, when asked, its replicas.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AfterWrites {
    /// How many replicas must acknowledge a grant or an extension.
    pub(crate) wait: Option<Replicas>,
    /// Whether extensions and renewals wait for the replicas too (always, but for a
    /// negative control).
    pub(crate) wait_on_extensions: bool,
    /// Whether a grant counts only once the primary's replication id, read back after it,
    /// is the one the restart guard verified (always for a group, but for a negative
    /// control).
    pub(crate) confirm_identity: bool,
}

impl AfterWrites {
    /// A single master's.
    pub(crate) const SINGLE: Self = Self {
        wait: None,
        wait_on_extensions: true,
        confirm_identity: false,
    };
}

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
    /// Whether extensions and renewals wait for the replicas too: always, but for the
    /// negative control ([`Group::without_wait_on_extensions`](crate::Group)).
    wait_on_extensions: bool,
    /// For a group, with the guard on: whether a grant counts only once the primary's
    /// replication id, read back after it, is the verified one (see
    /// [`RestartGuard::admit_seen`]).
    confirm_identity: bool,
    /// `WAIT`'s own timeout, in ms: half a node timeout, at least 1 (0 would wait forever).
    wait_timeout_ms: u64,
    node_timeout: std::time::Duration,
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
        after: AfterWrites,
        config: &crate::config::validated::Config,
    ) -> Self {
        let node_timeout = config.node_timeout;
        let renewal_shares_connection = config.renewal_shares_connection;
        let confirm_identity = after.confirm_identity && guard.is_on();
        let wait_timeout_ms = u64::try_from(node_timeout.as_millis() / 2)
            .unwrap_or(u64::MAX)
            .max(1);
        Self {
            index,
            nodes,
            guard,
            fence_keep_ms,
            wait: after.wait,
            wait_on_extensions: after.wait_on_extensions,
            confirm_identity,
            wait_timeout_ms,
            node_timeout,
            replicas_seen: AtomicUsize::new(0),
            renewal_shares_connection,
        }
    }

    fn node(&self) -> &Node {
        &self.nodes[self.index]
    }

    /// Runs a script the master has cached (`EVALSHA`), or else its body (`EVAL`), with
    /// `keys` and `args`, on `live`. `acquire` is the acquire it belongs to, if any: then
    /// neither is sent once the lock's release has begun (see
    /// [`Wire::enter`](crate::protocol::wire::Wire::enter)). Both go on `live`'s connection: the
    /// restart guard's verdict, and `WAIT`, are for that one.
    async fn invoke<'a>(
        &self,
        (script, source): (&redis::Script, &str),
        keys: &[&str],
        args: impl IntoIterator<Item = &'a str> + Clone,
        live: &Live,
        acquire: Option<&Request>,
    ) -> Result<Value, NodeFailure> {
        let conn = self.node().connection();
        let sha = wire::evalsha(script.get_hash(), keys, args.clone());
        let first = match acquire {
            Some(req) => {
                self.before_release(req, live.generation, conn.send(live.clone(), &sha))
                    .await?
            }
            None => conn.send(live.clone(), &sha).await,
        };
        match first {
            Err(NodeFailure::Server { code, .. }) if code == "NOSCRIPT" => {
                // Not cached there (new, restarted, flushed): the body.
                let body = wire::eval(source, keys, args);
                match acquire {
                    Some(req) => {
                        self.before_release(req, live.generation, conn.send(live.clone(), &body))
                            .await?
                    }
                    None => conn.send(live.clone(), &body).await,
                }
            }
            other => other,
        }
    }

    /// An extension on `live`, counted only once the group's replicas have it (see
    /// [`replicated`](Self::replicated)) — unless the negative control turned `WAIT` after
    /// extensions off; a refusal needs no `WAIT`.
    async fn extension_kept(&self, live: &Live, extended: bool) -> Result<bool, NodeFailure> {
        if extended && self.wait_on_extensions {
            self.replicated(live).await?;
        }
        Ok(extended)
    }

    /// The acquire script of the request's kind (a mutex on several keys, or fenced; a
    /// read, write or permit hold), with the guard's verdict on a grant. Sent as `EVALSHA`;
    /// a master that does not have it cached gets the body (`EVAL`) on the same connection —
    /// unless the lock's release has begun meanwhile (see
    /// [`Wire::enter`](crate::protocol::wire::Wire::enter)).
    async fn acquire_scripted(&self, req: &Request) -> Result<Acquired, NodeFailure> {
        let live = self.node().live().await?;
        let generation = live.generation;
        self.guard.ensure(self.index, generation).await?;
        let call = kinds::acquire(req, &self.context());
        let reply = self
            .invoke(call.script, &call.keys, call.args(), &live, Some(req))
            .await?;
        self.granted_by_script(&reply, &live).await
    }

    /// What this member adds to every request: the guard's keys when it is on, and the
    /// fence counters' idle expiry.
    fn context(&self) -> Context<'_> {
        Context {
            guard: self
                .guard
                .is_on()
                .then(|| (self.guard.marker_key(), self.guard.records_key())),
            fence_keep_ms: self.fence_keep_ms,
        }
    }

    /// The reply of an acquire script on `live`, `{0, blocker?, k?}` or `{1, token, epoch}`,
    /// a grant [`counted`](Self::counted) or not.
    async fn granted_by_script(&self, reply: &Value, live: &Live) -> Result<Acquired, NodeFailure> {
        let Value::Array(items) = reply else {
            return Err(unexpected(reply));
        };
        match items.as_slice() {
            [Value::Int(0), rest @ ..] => {
                let blocker = rest
                    .first()
                    .map(crate::error::node_failure::text_of)
                    .unwrap_or_default();
                let k = match rest.get(1) {
                    Some(Value::Int(k)) => usize::try_from(*k).ok(),
                    _ => None,
                };
                let expires_in = rest.get(2).and_then(remaining);
                Ok(Acquired::Taken(Holder::parse(&blocker, k), expires_in))
            }
            [Value::Int(1), Value::Int(token), epoch] => {
                self.counted(live, text(epoch)?).await?;
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
            let live = conn.get().await?;
            // `WAIT` needs the connection that carried the grant (a clone only when asked).
            let mut waits = self.wait.is_some().then(|| live.clone());
            let generation = live.generation;
            let (reply, expires_in) = if req.waiting {
                // A waiting caller's attempt: how long the holder has left rides behind, in
                // the same round trip (never on `try_lock`'s path).
                let pipe = req.wire.set_nx_ttl.get_or_init(|| {
                    let mut pipe = redis::Pipeline::with_capacity(2);
                    pipe.add_command(set()).add_command(wire::pttl(key));
                    pipe
                });
                let replies = match self
                    .before_release(req, generation, conn.send_all(live, pipe))
                    .await?
                {
                    Err(failure) if broken(&failure) => {
                        let mut again = redis::Pipeline::with_capacity(2);
                        again
                            .add_command(set_or_mine(key, req))
                            .add_command(wire::pttl(key));
                        let live = conn.get().await?;
                        let generation = live.generation;
                        // The grant's connection is the new one.
                        waits = waits.map(|_| live.clone());
                        self.resend(req, generation, conn.send_all(live, &again))
                            .await??
                    }
                    other => other?,
                };
                let [reply, left] = <[Value; 2]>::try_from(replies).map_err(|replies| {
                    NodeFailure::UnexpectedReply(format!(
                        "{} replies to a pipeline of 2",
                        replies.len()
                    ))
                })?;
                (reply, remaining(&left))
            } else {
                let cmd = req.wire.set_nx.get_or_init(set);
                let reply = match self
                    .before_release(req, generation, conn.send(live, cmd))
                    .await?
                {
                    // Found broken on use (the master restarted): once more on a new
                    // connection, within the coordinator's node timeout, as "set if absent,
                    // or already ours" — the first send may have been applied.
                    Err(failure) if broken(&failure) => {
                        let live = conn.get().await?;
                        let generation = live.generation;
                        waits = waits.map(|_| live.clone());
                        let again = set_or_mine(key, req);
                        self.resend(req, generation, conn.send(live, &again))
                            .await??
                    }
                    other => other?,
                };
                (reply, None)
            };
            if !granted(&reply)? {
                return Ok(Acquired::Taken(Holder::Lock, expires_in));
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
        // A group's grant is judged with what is read back on its connection.
        let counts_on = self.reads_back().then(|| live.clone());
        let record = self.guard.refresh_due(self.index, req.ttl);
        let epoch = || wire::hget(self.guard.marker_key(), "epoch");
        let pipe = if record {
            req.wire.guarded_recorded.get_or_init(|| {
                let ttl = req.ttl_millis().to_string();
                let mut pipe = redis::Pipeline::with_capacity(4);
                pipe.add_command(wire::eval(
                    scripts::record_source(),
                    &[self.guard.records_key()],
                    [ttl.as_str()],
                ))
                .add_command(set())
                .add_command(epoch());
                if req.waiting {
                    pipe.add_command(wire::pttl(key));
                }
                pipe
            })
        } else {
            req.wire.guarded.get_or_init(|| {
                let mut pipe = redis::Pipeline::with_capacity(3);
                pipe.add_command(set()).add_command(epoch());
                if req.waiting {
                    pipe.add_command(wire::pttl(key));
                }
                pipe
            })
        };
        let sent = record.then(Instant::now);
        if record {
            // A quarter ttl since the last record here: look at the master's persistence
            // again too, in the background (a durable epoch must not outlive a run-time
            // switch away from `appendfsync always`).
            self.guard.watch_durability(self.index);
        }
        // Any server error in the pipeline (the record's included) fails the whole call, so
        // a record that answered is written.
        let mut generation = generation;
        let replies = match self
            .before_release(req, generation, conn.send_all(live, pipe))
            .await?
        {
            // Found broken on use (the master restarted): once more on a new connection,
            // which the guard verifies first — a grant counts only on a connection it
            // verified — as "set if absent, or already ours", without the record (not
            // known to be written: `recorded` is not called, the next attempt records).
            Err(failure) if broken(&failure) => {
                let live = conn.get().await?;
                generation = live.generation;
                self.guard.ensure(self.index, generation).await?;
                let counts_on = self.reads_back().then(|| live.clone());
                let mut again = redis::Pipeline::with_capacity(3);
                again
                    .add_command(set_or_mine(key, req))
                    .add_command(epoch());
                if req.waiting {
                    again.add_command(wire::pttl(key));
                }
                return self
                    .guarded_reply(
                        req,
                        generation,
                        counts_on,
                        &self
                            .resend(req, generation, conn.send_all(live, &again))
                            .await??,
                        again.len(),
                    )
                    .await;
            }
            other => other?,
        };
        if let Some(sent) = sent {
            self.guard.recorded(self.index, req.ttl, sent);
        }
        self.guarded_reply(req, generation, counts_on, &replies, pipe.len())
            .await
    }

    /// The replies to a guarded `SET NX` pipeline of `sent` commands on the connection of
    /// `generation` (`live`, when a grant there needs more read back: see
    /// [`reads_back`](Self::reads_back)): the `SET` (or its resend), `HGET marker epoch`,
    /// then `PTTL` when waiting, with the guard's verdict on a grant.
    async fn guarded_reply(
        &self,
        req: &Request,
        generation: u64,
        live: Option<Live>,
        replies: &[Value],
        sent: usize,
    ) -> Result<Acquired, NodeFailure> {
        let (replies, expires_in) = match (req.waiting, replies) {
            (true, [rest @ .., left]) => (rest, remaining(left)),
            (_, all) => (all, None),
        };
        let [.., reply, epoch] = replies else {
            return Err(NodeFailure::UnexpectedReply(format!(
                "{} replies to a pipeline of {sent}",
                replies.len(),
            )));
        };
        if !granted(reply)? {
            return Ok(Acquired::Taken(Holder::Lock, expires_in));
        }
        match live {
            Some(live) => self.counted(&live, text(epoch)?).await?,
            None => self.guard.admit(self.index, generation, text(epoch)?)?,
        }
        Ok(Acquired::Granted(0))
    }

    /// Runs `send`, an acquire's hand-over of its command to the connection of
    /// `generation`, unless the lock's release has begun (see
    /// [`Wire::enter`](crate::protocol::wire::Wire::enter)): then it is not sent at all. The entry is
    /// held over the first poll only, which hands the command over (the connection's sends
    /// do so in their first poll), so the release waits for it. Until the server answers,
    /// the request says which connection carries an acquire the server may still run (see
    /// [`release`](Voter::release)).
    ///
    /// Not `async` itself: it hands back [`gated`](Self::gated)'s future, so that the send is
    /// not stored once more in a wrapper's state (every vote's future is copied when the
    /// round starts).
    fn before_release<'a, T, F>(
        &'a self,
        req: &'a Request,
        generation: u64,
        send: F,
    ) -> impl Future<Output = Result<Result<T, NodeFailure>, NodeFailure>> + 'a
    where
        F: Future<Output = Result<T, NodeFailure>> + 'a,
        T: 'a,
    {
        self.gated(req, generation, wire::Send::First, send)
    }

    /// An acquire sent once more, on the new connection of `generation`, after its first
    /// send was found broken: through the same gate as the first (never sent once the lock's
    /// release has begun). The request keeps naming the **first** connection as one that
    /// may still carry an unanswered acquire — bytes of it may yet reach the server (a
    /// middlebox or the server's socket buffer still holding them) — and names the resend's
    /// too until it is answered: the resend's connection may be given up in turn with its
    /// bytes held. The release deals with every such connection first
    /// ([`release_after`](Self::release_after)); otherwise either send could run after the
    /// release and keep the key for a whole ttl.
    ///
    /// Not `async` itself: it hands back [`gated`](Self::gated)'s future, so that the send is
    /// not stored once more in a wrapper's state (every vote's future is copied when the
    /// round starts).
    fn resend<'a, T, F>(
        &'a self,
        req: &'a Request,
        generation: u64,
        send: F,
    ) -> impl Future<Output = Result<Result<T, NodeFailure>, NodeFailure>> + 'a
    where
        F: Future<Output = Result<T, NodeFailure>> + 'a,
        T: 'a,
    {
        self.gated(req, generation, wire::Send::Resend, send)
    }

    /// The gate both sends of an acquire pass: `which` send, on the connection of
    /// `generation`, named as unanswered from before its hand-over until it is answered.
    async fn gated<T, F>(
        &self,
        req: &Request,
        generation: u64,
        which: wire::Send,
        send: F,
    ) -> Result<Result<T, NodeFailure>, NodeFailure>
    where
        F: Future<Output = Result<T, NodeFailure>>,
    {
        let Some(entry) = req.wire.enter() else {
            return Err(NodeFailure::connection(match which {
                wire::Send::First => {
                    "not sent: the lock was being released before this master could be asked"
                }
                wire::Send::Resend => "not sent again: the lock was being released meanwhile",
            }));
        };
        // Under the entry, before the hand-over: a release that begins later sees it.
        req.wire
            .sent(self.nodes.len(), self.index, which, generation);
        let mut send = std::pin::pin!(send);
        let first = std::future::poll_fn(|cx| Poll::Ready(send.as_mut().poll(cx))).await;
        drop(entry);
        let out = match first {
            Poll::Ready(out) => out,
            Poll::Pending => send.await,
        };
        if answered(&out) {
            req.wire.answered(self.index, which);
        }
        Ok(out)
    }

    /// The release `eval` of `req` on `live`: after every connection given up since that
    /// carried an acquire of it the server may not have run yet
    /// ([`release_after`](Self::release_after)), or at once when there is none (answered:
    /// the server ran it, any connection will do; or on this very connection, where the
    /// release follows it).
    async fn release_on(
        &self,
        req: &Request,
        live: Live,
        eval: &redis::Cmd,
    ) -> Result<Value, NodeFailure> {
        let carried: Vec<u64> = req
            .wire
            .unanswered(self.index)
            .into_iter()
            .filter(|&g| g != live.generation)
            .collect();
        if carried.is_empty() {
            self.node().connection().send(live, eval).await
        } else {
            Box::pin(self.release_after(live, &carried, eval)).await
        }
    }

    /// The release of `req` when its acquire went out on `carried`, connections given up
    /// since, and never came back answered: the server may still hold that acquire's bytes
    /// (in its socket buffer, or a proxy on the way may), and run them after anything sent
    /// on a newer connection — such as this release, which would then delete nothing and
    /// leave the key for a whole ttl.
    ///
    /// So, on the same server, `CLIENT KILL` of the old connection goes first, in one
    /// pipeline with the release on the live one. Redis runs one command at a time: when
    /// the release runs, the old connection is closed on the server, and whatever of ours it
    /// had not run yet is thrown away with it, never run after the release; what it did run
    /// ran before, and the release deletes it. Id and address together name that connection
    /// alone (ids start again at 1 when a server restarts; a restarted server holds nothing
    /// of the old connection anyway). A `PING` or any round trip on the new connection would
    /// prove nothing about the old one; waiting a fixed time would only be a guess.
    ///
    /// Where the old connection cannot be closed so — the server would not say who it was
    /// (`CLIENT INFO`, Redis 6.2), or refuses `CLIENT KILL` (an ACL) — the release is sent
    /// now and once more a node timeout later, from a task of its own: a best effort that
    /// covers an acquire delayed no longer than a request may take, and past that the key
    /// ends with its ttl. Behind a Sentinel group whose primary changed, the old connection
    /// reached another server, which this release cannot reach anyway: it is sent once.
    async fn release_after(
        &self,
        live: Live,
        carried: &[u64],
        eval: &redis::Cmd,
    ) -> Result<Value, NodeFailure> {
        let conn = self.node().connection();
        // Connections to another server (a Sentinel group's old primary) reached a server
        // this release cannot reach anyway; the others must be closed first.
        let here: Vec<_> = carried
            .iter()
            .map(|&g| conn.past(g))
            .filter(|past| past.as_ref().is_none_or(|p| p.addr == live.addr))
            .collect();
        if here.is_empty() {
            return conn.send(live, eval).await;
        }
        let peers: Option<Vec<_>> = here.into_iter().map(|p| p.and_then(|p| p.peer)).collect();
        let Some(peers) = peers else {
            let reply = conn.send(live, eval).await;
            self.release_again(eval);
            return reply;
        };
        let mut pipe = redis::Pipeline::with_capacity(peers.len() + 1);
        for peer in &peers {
            pipe.add_command(
                redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("ID")
                    .arg(peer.id)
                    .arg("ADDR")
                    .arg(&peer.addr)
                    .arg("SKIPME")
                    .arg("yes")
                    .clone(),
            );
        }
        pipe.add_command(eval.clone());
        let mut replies = conn.send_each(live, &pipe).await?;
        if replies.len() != peers.len() + 1 {
            return Err(NodeFailure::UnexpectedReply(format!(
                "{} replies to a pipeline of {}",
                replies.len(),
                peers.len() + 1
            )));
        }
        let reply = replies.pop().map_or_else(
            || Err(NodeFailure::UnexpectedReply("no reply".into())),
            |r| r.extract_error().map_err(classify),
        );
        // Each kill answers the number of connections closed: 1, or 0 when it was gone.
        if replies.iter().all(|killed| matches!(killed, Value::Int(_))) {
            return reply;
        }
        tracing::debug!(
            node = self.index,
            ?replies,
            "CLIENT KILL refused; the release is sent again after a node timeout"
        );
        self.release_again(eval);
        reply
    }

    /// Sends the release `eval` once more a node timeout from now, from a task of its own
    /// (see [`release_after`](Self::release_after)); nothing without a runtime.
    fn release_again(&self, eval: &redis::Cmd) {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (conn, eval, timeout) = (
            self.node().connection().clone(),
            eval.clone(),
            self.node_timeout,
        );
        drop(handle.spawn(async move {
            tokio::time::sleep(timeout).await;
            let again = async {
                let live = conn.get().await?;
                conn.send(live, &eval).await
            };
            let _ = tokio::time::timeout(timeout, again).await;
        }));
    }

    /// Whether a grant needs more than its own replies to be judged: behind a group, the
    /// primary's identity read back, or `WAIT` (both on the grant's connection).
    fn reads_back(&self) -> bool {
        self.wait.is_some() || self.confirm_identity
    }

    /// Whether a grant on `live` that read back `epoch` counts: the restart guard's verdict
    /// — behind a group, on `INFO replication` read back after the grant on the same
    /// connection too ([`RestartGuard::admit_seen`]) — and then, with
    /// [`wait_replicas`](crate::Group::wait_replicas), enough replicas' acknowledgement. The
    /// identity rides in one round trip with a fixed `WAIT`; `Replicas::All` needs its count
    /// from it first.
    async fn counted(&self, live: &Live, epoch: Option<&str>) -> Result<(), NodeFailure> {
        let generation = live.generation;
        if !self.confirm_identity {
            self.guard.admit(self.index, generation, epoch)?;
            return self.replicated(live).await;
        }
        let node = self.node();
        if let Some(Replicas::AtLeast(n)) = self.wait {
            let mut pipe = redis::Pipeline::with_capacity(2);
            pipe.add_command(redis::cmd("INFO").arg("replication").clone())
                .add_command(wait_cmd(n, self.wait_timeout_ms));
            let replies = node.connection().send_each(live.clone(), &pipe).await?;
            let [info, waited] = <[Value; 2]>::try_from(replies).map_err(|replies| {
                NodeFailure::UnexpectedReply(format!(
                    "{} replies to a pipeline of 2",
                    replies.len()
                ))
            })?;
            let info = Info::from_reply(&info.extract_error().map_err(classify)?)?;
            self.guard
                .admit_seen(self.index, generation, epoch, &info)?;
            return acknowledged(&waited.extract_error().map_err(classify)?, n);
        }
        let info = node.info_on(live, "replication").await?;
        self.guard
            .admit_seen(self.index, generation, epoch, &info)?;
        match self.wait {
            Some(Replicas::All) => self.wait_for(live, self.every_replica(&info)).await,
            _ => Ok(()),
        }
    }

    /// For a group with [`wait_replicas`](crate::Group::wait_replicas): `WAIT` on the
    /// connection that carried a write that keeps a lock (an extension; a grant without the
    /// guard), which counts only once enough replicas have it. `WAIT` blocks that connection
    /// on the server meanwhile (at most half a node timeout).
    async fn replicated(&self, live: &Live) -> Result<(), NodeFailure> {
        let needed = match self.wait {
            None => return Ok(()),
            Some(Replicas::AtLeast(n)) => n,
            Some(Replicas::All) => {
                let info = self.node().info_on(live, "replication").await?;
                self.every_replica(&info)
            }
        };
        self.wait_for(live, needed).await
    }

    /// `Replicas::All`'s count: the most this client has seen connected, and never fewer
    /// than the sentinels know — a primary cut off from its replicas reports none, and must
    /// not be excused for it, not even to a client that first met it cut off. `info` is the
    /// primary's `INFO replication`.
    fn every_replica(&self, info: &Info) -> usize {
        let known = self.node().connection().replicas_known();
        let now = info
            .number("connected_slaves")
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0);
        self.replicas_seen
            .fetch_max(now, Ordering::Relaxed)
            .max(now)
            .max(known)
    }

    /// `WAIT needed` on `live`: `Ok` once that many replicas acknowledged.
    async fn wait_for(&self, live: &Live, needed: usize) -> Result<(), NodeFailure> {
        if needed == 0 {
            return Ok(());
        }
        let reply = self
            .node()
            .query_on(live, &wait_cmd(needed, self.wait_timeout_ms))
            .await?;
        acknowledged(&reply, needed)
    }

    /// Every request's extension in one pipeline, on the renewal connection (see
    /// [`Node::renewal_connection`]): the plain mutex locks (one key, not fenced) with the
    /// same ttl together in `extend_many.lua` calls of at most [`EXTEND_MANY_MAX`] locks —
    /// one call costs the master far less than one `extend.lua` per lock, and a batch that
    /// keeps every master busy delays acquisitions as long — every other hold in its own
    /// call. Scripts missing from the server's cache (after a restart or `SCRIPT FLUSH`)
    /// cost one more round trip that loads the scripts and repeats only the calls that hit
    /// NOSCRIPT. The answers come back one per request, in order: a lock whose key fails
    /// fails alone.
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
        // Renewals write to the master too: a holder that only renews must see a run-time
        // switch away from `appendfsync always` as an acquisition would (see
        // `RestartGuard::watch_durability`).
        self.guard.watch_durability(self.index);
        let spare = live.clone();
        let calls = renewal_calls(reqs);
        let mut pipe = redis::Pipeline::with_capacity(calls.len());
        for call in &calls {
            pipe.add_command(self.renewal_cmd(reqs, call));
        }
        let replies: Vec<RedisResult<Value>> = conn
            .send_each(live, &pipe)
            .await?
            .into_iter()
            .map(Value::extract_error)
            .collect();
        let mut results: Vec<Result<bool, NodeFailure>> =
            (0..reqs.len()).map(|_| Ok(false)).collect();
        let mut missing = Vec::new();
        for (call, reply) in calls.iter().zip(replies) {
            if matches!(&reply, Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript))
            {
                missing.push(call);
            }
            call.answer(reply, &mut results);
        }
        if missing.is_empty() {
            return self.batch_kept(&spare, results).await;
        }
        let sources = [
            scripts::extend_source(),
            scripts::extend_many_source(),
            scripts::holder_extend_source(),
        ];
        let mut retry = redis::Pipeline::with_capacity(sources.len() + missing.len());
        for source in sources {
            retry.add_command(redis::cmd("SCRIPT").arg("LOAD").arg(source).clone());
        }
        for call in &missing {
            retry.add_command(self.renewal_cmd(reqs, call));
        }
        let replies = conn.send_each(spare.clone(), &retry).await?;
        for (call, reply) in missing.iter().zip(replies.into_iter().skip(sources.len())) {
            call.answer(reply.extract_error(), &mut results);
        }
        self.batch_kept(&spare, results).await
    }

    /// A batch of extensions on `live`, each counted only once the group's replicas have
    /// it: one `WAIT` covers every write sent before it on the connection. Not acknowledged:
    /// every extension of the batch fails with that reason.
    async fn batch_kept(
        &self,
        live: &Live,
        mut results: Vec<Result<bool, NodeFailure>>,
    ) -> Result<Vec<Result<bool, NodeFailure>>, NodeFailure> {
        if self.wait.is_none()
            || !self.wait_on_extensions
            || !results.iter().any(|r| matches!(r, Ok(true)))
        {
            return Ok(results);
        }
        if let Err(failure) = self.replicated(live).await {
            for result in &mut results {
                if matches!(result, Ok(true)) {
                    *result = Err(failure.clone());
                }
            }
        }
        Ok(results)
    }

    /// The `EVALSHA` of one call of a renewal pipeline.
    fn renewal_cmd(&self, reqs: &[Arc<Request>], call: &RenewalCall) -> redis::Cmd {
        match call {
            RenewalCall::One(i) => kinds::extend(&reqs[*i], &self.context()).evalsha(),
            RenewalCall::Many { ttl_ms, of } => {
                let batch: Vec<&Request> = of.iter().map(|&i| &*reqs[i]).collect();
                kinds::extend_many(&batch, *ttl_ms, &self.context()).evalsha()
            }
        }
    }
}

impl Voter for Member {
    async fn acquire(&self, req: &Request) -> Result<Acquired, NodeFailure> {
        match (&req.kind, &*req.keys, &req.fences) {
            // The hot path: plain `SET NX`, no script.
            (KindRequest::Mutex, [key], None) => self.acquire_one(key, req).await,
            // Boxed so that the hot path's future stays small.
            _ => Box::pin(self.acquire_scripted(req)).await,
        }
    }

    async fn fence(&self, req: &Request, token: u64) -> Result<bool, NodeFailure> {
        let Some(call) = kinds::fence(req, &self.context(), token) else {
            return Ok(true);
        };
        let live = self.node().connection().get().await?;
        flag(
            self.invoke(call.script, &call.keys, call.args(), &live, None)
                .await?,
        )
    }

    async fn extend(&self, req: &Request) -> Result<bool, NodeFailure> {
        let live = self.node().connection().get().await?;
        self.guard.watch_durability(self.index);
        let call = kinds::extend(req, &self.context());
        let extended = flag(
            self.invoke(call.script, &call.keys, call.args(), &live, None)
                .await?,
        )?;
        self.extension_kept(&live, extended).await
    }

    /// Sent as `EVAL` with the script's body, not `EVALSHA`: a master that does not have
    /// the script cached (new, restarted, flushed) would answer NOSCRIPT, and if that answer
    /// were lost or late the delete would never run and the key would block the resource
    /// for a whole ttl. One self-contained command always runs, in order after anything we
    /// sent the master before on the same connection (through the outbox, as every command
    /// on the lock's keys). An acquire of ours that the server may still run, on a
    /// connection given up since, is dealt with first: see
    /// [`release_after`](Member::release_after).
    async fn release(&self, req: &Request) -> Result<u64, NodeFailure> {
        let eval = req.wire.release.get_or_init(|| kinds::release(req));
        let conn = self.node().connection();
        let live = conn.get().await?;
        let reply = match self.release_on(req, live, eval).await {
            // Found broken on use (the master restarted): the release is value-checked, so
            // it goes once more on a new connection whether or not the first was written —
            // after the same care for acquires still unanswered on connections given up
            // (the one just found broken is one more of them if it carried an acquire); the
            // coordinator's node timeout bounds both.
            Err(failure) if broken(&failure) => {
                let live = conn.get().await?;
                self.release_on(req, live, eval).await?
            }
            other => other?,
        };
        match reply {
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

/// The most locks in one `extend_many.lua` call. The call runs atomically on the master,
/// which serves nobody else meanwhile. Measured on Redis 7.0 (one MGET, then `PEXPIRE … GT`
/// per lock; restart guard off) on a loaded 2-vCPU machine: 256 locks took the master
/// 75–120 µs a call (0.3–0.5 µs per lock; 65–75 µs with the guard's ttl record; 64 locks
/// 0.5–0.7 µs per lock, 16 locks 0.6–1.2 µs), against 3.8–9.6 µs for each lock's own
/// `extend.lua` — far below any node timeout, and a
/// renewal batch of a thousand locks leaves the master free for others between its calls.
const EXTEND_MANY_MAX: usize = 256;

/// One call of a renewal pipeline, by the requests' positions in the batch.
#[derive(Debug, PartialEq, Eq)]
enum RenewalCall {
    /// `extend.lua` (or the kind's own extension) for one hold.
    One(usize),
    /// `extend_many.lua` for plain mutex locks with the ttl `ttl_ms`.
    Many { ttl_ms: u64, of: Vec<usize> },
}

impl RenewalCall {
    /// Sets the results of this call's requests from its reply: a failed call fails each of
    /// its requests, an `extend_many.lua` answer is one flag per lock, in order.
    fn answer(&self, reply: RedisResult<Value>, results: &mut [Result<bool, NodeFailure>]) {
        match self {
            Self::One(i) => results[*i] = reply.map_err(classify).and_then(flag),
            Self::Many { of, .. } => match reply.map_err(classify) {
                Ok(Value::Array(flags)) if flags.len() == of.len() => {
                    for (&i, answer) in of.iter().zip(flags) {
                        results[i] = flag(answer);
                    }
                }
                Ok(other) => {
                    let failure = unexpected(&other);
                    for &i in of {
                        results[i] = Err(failure.clone());
                    }
                }
                Err(failure) => {
                    for &i in of {
                        results[i] = Err(failure.clone());
                    }
                }
            },
        }
    }
}

/// The calls that renew `reqs`: the plain mutex locks ([`kinds::batchable`]) grouped by ttl
/// into `extend_many.lua` calls of at most [`EXTEND_MANY_MAX`], in the order of their first
/// request; every other hold in a call of its own.
/// `WAIT needed timeout_ms`.
fn wait_cmd(needed: usize, timeout_ms: u64) -> redis::Cmd {
    let mut cmd = redis::cmd("WAIT");
    cmd.arg(needed).arg(timeout_ms);
    cmd
}

/// `WAIT`'s answer: `Ok` when at least `needed` replicas acknowledged.
fn acknowledged(reply: &Value, needed: usize) -> Result<(), NodeFailure> {
    let acknowledged = match reply {
        Value::Int(n) => usize::try_from(*n).unwrap_or(0),
        other => return Err(unexpected(other)),
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

fn renewal_calls(reqs: &[Arc<Request>]) -> Vec<RenewalCall> {
    let mut calls = Vec::new();
    let mut by_ttl: Vec<(u64, Vec<usize>)> = Vec::new();
    for (i, req) in reqs.iter().enumerate() {
        if !kinds::batchable(req) {
            calls.push(RenewalCall::One(i));
            continue;
        }
        let ttl_ms = req.ttl_millis();
        match by_ttl.iter_mut().find(|(ttl, _)| *ttl == ttl_ms) {
            Some((_, of)) => of.push(i),
            None => by_ttl.push((ttl_ms, vec![i])),
        }
    }
    for (ttl_ms, of) in by_ttl {
        calls.extend(of.chunks(EXTEND_MANY_MAX).map(|chunk| RenewalCall::Many {
            ttl_ms,
            of: chunk.to_vec(),
        }));
    }
    calls
}

/// Whether a call's outcome shows that the server ran the command (it answered, if only
/// with an error): then nothing of it can still be waiting to run.
fn answered<T>(out: &Result<T, NodeFailure>) -> bool {
    matches!(
        out,
        Ok(_)
            | Err(NodeFailure::Server { .. }
                | NodeFailure::Auth(_)
                | NodeFailure::ForeignKey { .. })
    )
}

/// Whether `failure` is a connection found broken on use ("broken pipe", "connection
/// reset": typically the first request after the master restarted), which a new connection
/// may well not meet. Not a timeout: a request that may still be on its way is never sent
/// twice here.
fn broken(failure: &NodeFailure) -> bool {
    failure
        .redis_error()
        .is_some_and(|e| e.is_connection_dropped() || e.is_io_error())
}

/// An acquire sent again: `SET NX PX`, or already ours (`set_or_mine.lua`).
fn set_or_mine(key: &str, req: &Request) -> redis::Cmd {
    let ttl = req.ttl_millis().to_string();
    wire::eval(
        scripts::set_or_mine_body(),
        &[key],
        [req.value.as_str(), ttl.as_str()],
    )
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

/// A `PTTL` reply as the time the holder's key has left: `None` when it has no expiry (-1,
/// not ours to guess); zero when it is gone already (-2: released or expired since).
fn remaining(reply: &Value) -> Option<std::time::Duration> {
    match reply {
        Value::Int(-2) => Some(std::time::Duration::ZERO),
        Value::Int(ms) if *ms >= 0 => Some(std::time::Duration::from_millis(ms.unsigned_abs())),
        _ => None,
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::value::LockValue;

    fn req(keys: &[&str], fenced: bool, ttl_ms: u64) -> Arc<Request> {
        let keys: Arc<[String]> = keys.iter().map(|k| (*k).to_owned()).collect();
        let fences = fenced.then(|| keys.iter().map(|k| format!("fence:{k}")).collect());
        Arc::new(Request::new(
            keys,
            fences,
            LockValue::random(),
            Duration::from_millis(ttl_ms),
        ))
    }

    #[test]
    fn plain_mutex_locks_are_renewed_together_by_ttl_in_bounded_calls() {
        let mut reqs = vec![
            req(&["a"], false, 9000),
            req(&["b", "c"], false, 9000),
            req(&["d"], true, 9000),
            req(&["e"], false, 3000),
        ];
        reqs.extend((0..EXTEND_MANY_MAX).map(|i| req(&[&format!("k{i}")], false, 9000)));
        let calls = renewal_calls(&reqs);
        let first: Vec<usize> = std::iter::once(0)
            .chain(4..4 + EXTEND_MANY_MAX - 1)
            .collect();
        assert_eq!(
            calls,
            [
                RenewalCall::One(1),
                RenewalCall::One(2),
                RenewalCall::Many {
                    ttl_ms: 9000,
                    of: first
                },
                RenewalCall::Many {
                    ttl_ms: 9000,
                    of: vec![4 + EXTEND_MANY_MAX - 1]
                },
                RenewalCall::Many {
                    ttl_ms: 3000,
                    of: vec![3]
                },
            ]
        );
    }

    #[test]
    fn each_lock_of_a_batched_call_gets_its_own_answer() {
        let call = RenewalCall::Many {
            ttl_ms: 9000,
            of: vec![2, 0],
        };
        let mut results: Vec<Result<bool, NodeFailure>> = (0..3).map(|_| Ok(false)).collect();
        call.answer(
            Ok(Value::Array(vec![Value::Int(1), Value::Int(0)])),
            &mut results,
        );
        assert!(matches!(
            results.as_slice(),
            [Ok(false), Ok(false), Ok(true)]
        ));
        call.answer(Ok(Value::Array(vec![Value::Int(1)])), &mut results);
        assert!(results[0].is_err() && results[2].is_err() && matches!(results[1], Ok(false)));
    }
}
