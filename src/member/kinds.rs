//! The member's calls for the lock kinds beyond the mutex: read and write holds of a
//! read-write lock, permits of a semaphore. Keys of a request of these kinds: a read-write
//! lock's `[readers, writer, pending writer]`, a semaphore's `[holders]`.

use redis::Script;

use super::{Member, flag};
use crate::failure::NodeFailure;
use crate::kind::Kind;
use crate::quorum::{Acquired, Request};
use crate::{scripts, wire};

/// One script call: the script (cached, and its body), its keys and its arguments.
struct Call<'a> {
    script: (&'static Script, &'static str),
    keys: Vec<&'a str>,
    args: Vec<String>,
}

impl Call<'_> {
    fn args(&self) -> impl Iterator<Item = &str> + Clone {
        self.args.iter().map(String::as_str)
    }

    /// As an `EVALSHA` command, for pipelines (the caller reloads on NOSCRIPT).
    fn evalsha(&self) -> redis::Cmd {
        wire::evalsha(self.script.0.get_hash(), &self.keys, self.args())
    }
}

impl Member {
    /// The acquire script of a read, write or permit request, with the guard's verdict.
    /// Through the outbox, as `EVALSHA`, the body on NOSCRIPT; neither once the lock's
    /// release has begun (see [`Wire::enter`](crate::wire::Wire::enter)).
    pub(super) async fn acquire_kind(&self, req: &Request) -> Result<Acquired, NodeFailure> {
        let guarded = self.guard.is_on();
        let live = self.node().live().await?;
        let generation = live.generation;
        self.guard.ensure(self.index, generation).await?;
        let fenced = req.fences.is_some();
        let ttl = req.ttl_millis().to_string();
        let mut call = match &req.kind {
            Kind::Read | Kind::Write { .. } => {
                let (intent, prefer) = match &req.kind {
                    Kind::Write {
                        intent,
                        prefer_writers,
                    } => (intent.as_str(), *prefer_writers),
                    _ => ("", false),
                };
                let mode = if matches!(req.kind, Kind::Read) {
                    "read"
                } else {
                    "write"
                };
                Call {
                    script: (scripts::rw_acquire(), scripts::rw_acquire_source()),
                    keys: vec![&req.keys[1], &req.keys[0], &req.keys[2]],
                    args: vec![
                        req.value.as_str().to_owned(),
                        ttl,
                        mode.to_owned(),
                        intent.to_owned(),
                        u8::from(prefer).to_string(),
                    ],
                }
            }
            Kind::Permit { k } => Call {
                script: (scripts::sem_acquire(), scripts::sem_acquire_source()),
                keys: vec![&req.keys[0]],
                args: vec![req.value.as_str().to_owned(), ttl, k.to_string()],
            },
            Kind::Mutex => return self.acquire_scripted(req).await,
        };
        if let Some(fences) = &req.fences {
            call.keys.extend(fences.iter().map(String::as_str));
        }
        if guarded {
            call.keys
                .extend([self.guard.marker_key(), self.guard.records_key()]);
        }
        call.args.extend([
            u8::from(fenced).to_string(),
            u8::from(guarded).to_string(),
            self.fence_keep_ms.to_string(),
        ]);
        let reply = self
            .invoke(call.script, &call.keys, call.args(), &live, Some(req))
            .await?;
        let acquired = self.granted_by_script(&reply, generation)?;
        self.keeps(&live, matches!(acquired, Acquired::Granted(_)))
            .await?;
        Ok(acquired)
    }

    /// The extension of a read, write or permit hold; `None` for a mutex.
    fn kind_extend<'a>(&'a self, req: &'a Request) -> Option<Call<'a>> {
        let guarded = self.guard.is_on();
        let records = guarded.then(|| self.guard.records_key());
        let (script, key) = match &req.kind {
            Kind::Mutex => return None,
            // A writer's hold is a plain key: the mutex's extension.
            Kind::Write { .. } => (
                (scripts::extend(), scripts::extend_source()),
                req.keys[1].as_str(),
            ),
            Kind::Read | Kind::Permit { .. } => (
                (scripts::holder_extend(), scripts::holder_extend_source()),
                req.keys[0].as_str(),
            ),
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

    /// One extension of a read, write or permit hold on `live`: 1 when extended.
    pub(super) async fn extend_kind(
        &self,
        req: &Request,
        live: &crate::connection::Live,
    ) -> Option<Result<bool, NodeFailure>> {
        let call = self.kind_extend(req)?;
        Some(
            self.invoke(call.script, &call.keys, call.args(), live, None)
                .await
                .and_then(flag),
        )
    }

    /// The fencing write-back of a writer or a permit.
    pub(super) async fn fence_kind(&self, req: &Request, token: u64) -> Result<bool, NodeFailure> {
        let Some(fences) = &req.fences else {
            return Ok(true);
        };
        let (script, key) = match &req.kind {
            Kind::Write { .. } => ((scripts::fence(), scripts::fence_source()), &req.keys[1]),
            Kind::Permit { .. } => (
                (scripts::holder_fence(), scripts::holder_fence_source()),
                &req.keys[0],
            ),
            // Readers and mutexes are not fenced here.
            Kind::Read | Kind::Mutex => return Ok(true),
        };
        let keys: Vec<&str> = std::iter::once(key.as_str())
            .chain(fences.iter().map(String::as_str))
            .collect();
        let numbers = [token.to_string(), self.fence_keep_ms.to_string()];
        let args = std::iter::once(req.value.as_str()).chain(numbers.iter().map(String::as_str));
        let live = self.node().connection().get().await?;
        flag(self.invoke(script, &keys, args, &live, None).await?)
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
