//! The member's calls for the lock kinds beyond the mutex: read and write holds of a
//! read-write lock, permits of a semaphore. Keys of a request of these kinds: a read-write
//! lock's `[readers, writer, pending writer]`, a semaphore's `[holders]`.

use redis::{Script, Value};

use super::{Member, flag};
use crate::failure::NodeFailure;
use crate::kind::Kind;
use crate::quorum::{Acquired, Request};
use crate::scripts;

/// One script call: the script, its keys and its arguments.
struct Call<'a> {
    script: &'static Script,
    keys: Vec<&'a str>,
    args: Vec<String>,
}

impl Call<'_> {
    /// As an `EVALSHA` command, for pipelines (the caller reloads on NOSCRIPT).
    fn evalsha(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(self.script.get_hash())
            .arg(self.keys.len())
            .arg(&self.keys)
            .arg(&self.args);
        cmd
    }
}

impl Member {
    /// The acquire script of a read, write or permit request, with the guard's verdict.
    pub(super) async fn acquire_kind(&self, req: &Request) -> Result<Acquired, NodeFailure> {
        let guarded = self.guard.is_on();
        let node = self.node();
        let live = node.live().await?;
        self.guard.ensure(self.index, live.generation).await?;
        let fenced = req.fences.is_some();
        let mut call = match &req.kind {
            Kind::Read | Kind::Write { .. } => {
                let (intent, prefer) = match &req.kind {
                    Kind::Write {
                        intent,
                        prefer_writers,
                    } => (intent.as_str(), *prefer_writers),
                    _ => ("", false),
                };
                let mut call = scripts::rw_acquire().prepare_invoke();
                call.key(&req.keys[1]).key(&req.keys[0]).key(&req.keys[2]);
                call.arg(req.value.as_str())
                    .arg(req.ttl_millis())
                    .arg(if matches!(req.kind, Kind::Read) {
                        "read"
                    } else {
                        "write"
                    })
                    .arg(intent)
                    .arg(u8::from(prefer));
                call
            }
            Kind::Permit { k } => {
                let mut call = scripts::sem_acquire().prepare_invoke();
                call.key(&req.keys[0]);
                call.arg(req.value.as_str()).arg(req.ttl_millis()).arg(*k);
                call
            }
            Kind::Mutex => return self.acquire_scripted(req).await,
        };
        if let Some(fences) = &req.fences {
            call.key(&**fences);
        }
        if guarded {
            call.key(self.guard.marker_key())
                .key(self.guard.records_key());
        }
        call.arg(u8::from(fenced))
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

    /// The extension of a read, write or permit hold; `None` for a mutex.
    fn kind_extend<'a>(&'a self, req: &'a Request) -> Option<Call<'a>> {
        let guarded = self.guard.is_on();
        let records = guarded.then(|| self.guard.records_key());
        let (script, key) = match &req.kind {
            Kind::Mutex => return None,
            // A writer's hold is a plain key: the mutex's extension.
            Kind::Write { .. } => (scripts::extend(), req.keys[1].as_str()),
            Kind::Read | Kind::Permit { .. } => (scripts::holder_extend(), req.keys[0].as_str()),
        };
        Some(Call {
            script,
            keys: std::iter::once(key).chain(records).collect(),
            args: vec![
                req.value.as_str().to_owned(),
                req.ttl_millis().to_string(),
                u8::from(guarded).to_string(),
            ],
        })
    }

    /// The extension as one command, for the renewal task's pipelines.
    pub(super) fn kind_extend_cmd(&self, req: &Request) -> Option<redis::Cmd> {
        self.kind_extend(req).map(|call| call.evalsha())
    }

    /// One extension of a read, write or permit hold: 1 when extended.
    pub(super) async fn extend_kind(&self, req: &Request) -> Option<Result<bool, NodeFailure>> {
        let call = self.kind_extend(req)?;
        let mut invocation = call.script.prepare_invoke();
        for key in &call.keys {
            invocation.key(*key);
        }
        for arg in &call.args {
            invocation.arg(arg);
        }
        Some(
            self.node()
                .connection()
                .run(|mut c| async move { invocation.invoke_async(&mut c).await })
                .await
                .and_then(|(_, v)| flag(v)),
        )
    }

    /// The fencing write-back of a writer or a permit.
    pub(super) async fn fence_kind(&self, req: &Request, token: u64) -> Result<bool, NodeFailure> {
        let Some(fences) = &req.fences else {
            return Ok(true);
        };
        let (script, key) = match &req.kind {
            Kind::Write { .. } => (scripts::fence(), &req.keys[1]),
            Kind::Permit { .. } => (scripts::holder_fence(), &req.keys[0]),
            // Readers and mutexes are not fenced here.
            Kind::Read | Kind::Mutex => return Ok(true),
        };
        let mut call = script.prepare_invoke();
        call.key(key).key(&**fences);
        call.arg(req.value.as_str())
            .arg(token)
            .arg(self.fence_keep_ms);
        let (_, reply) = self
            .node()
            .connection()
            .run(|mut c| async move { call.invoke_async::<Value>(&mut c).await })
            .await?;
        flag(reply)
    }
}

/// The release of a read, write or permit hold, as a self-contained `EVAL`.
pub(super) fn release_cmd(req: &Request) -> redis::Cmd {
    let mut eval = redis::cmd("EVAL");
    eval.arg(scripts::holder_release_body());
    match &req.kind {
        Kind::Write { intent, .. } => {
            eval.arg(3)
                .arg(&*req.keys)
                .arg(req.value.as_str())
                .arg("writer")
                .arg(intent.as_str());
        }
        _ => {
            eval.arg(1)
                .arg(&req.keys[0])
                .arg(req.value.as_str())
                .arg("holder")
                .arg("");
        }
    }
    eval
}
