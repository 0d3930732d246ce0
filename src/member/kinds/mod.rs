//! One place per lock kind: each kind's module builds its acquire, extend, fence and release
//! requests to a member — which script, on which of its keys (typed, by role), with which
//! arguments. No I/O here: the member ([`voter`](crate::member::voter)) sends them, with the
//! restart guard's verdict on a grant. The plain `SET NX` fast path (a mutex on one key,
//! unfenced) is the member's own and the only special case.

use redis::Script;

use crate::kind::KindRequest;
use crate::protocol::quorum::Request;
use crate::protocol::wire;

mod mutex;
mod read_write;
mod semaphore;

/// One script call: the script (cached, and its body), its keys and its arguments.
#[derive(Debug)]
pub(crate) struct Call<'a> {
    pub(crate) script: (&'static Script, &'static str),
    pub(crate) keys: Vec<&'a str>,
    pub(crate) args: Vec<String>,
}

impl Call<'_> {
    pub(crate) fn args(&self) -> impl Iterator<Item = &str> + Clone {
        self.args.iter().map(String::as_str)
    }

    /// As an `EVALSHA` command, for pipelines (the caller reloads on NOSCRIPT).
    pub(crate) fn evalsha(&self) -> redis::Cmd {
        wire::evalsha(self.script.0.get_hash(), &self.keys, self.args())
    }
}

/// What a member adds to every request of every kind.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Context<'a> {
    /// The restart guard's epoch marker and ttl records, when the guard is on.
    pub(crate) guard: Option<(&'a str, &'a str)>,
    /// How long an idle fence counter is kept, in ms (0: forever).
    pub(crate) fence_keep_ms: u64,
}

impl<'a> Context<'a> {
    fn guarded(&self) -> bool {
        self.guard.is_some()
    }

    fn records(&self) -> Option<&'a str> {
        self.guard.map(|(_, records)| records)
    }
}

/// The acquire script of the request's kind.
pub(crate) fn acquire<'a>(req: &'a Request, ctx: &Context<'a>) -> Call<'a> {
    match &req.kind {
        KindRequest::Mutex => mutex::acquire(req, ctx),
        KindRequest::Read { keys } => read_write::acquire(req, keys, None, ctx),
        KindRequest::Write {
            keys,
            intent,
            prefer_writers,
        } => read_write::acquire(req, keys, Some((intent.as_str(), *prefer_writers)), ctx),
        KindRequest::Permit { holders, k } => semaphore::acquire(req, holders, *k, ctx),
    }
}

/// The extension of the request's hold: one script call, also as one command of the
/// renewal task's pipelines ([`Call::evalsha`]).
pub(crate) fn extend<'a>(req: &'a Request, ctx: &Context<'a>) -> Call<'a> {
    match &req.kind {
        KindRequest::Mutex => mutex::extend(req, ctx),
        KindRequest::Read { keys } => read_write::extend_reader(req, keys, ctx),
        KindRequest::Write { keys, .. } => read_write::extend_writer(req, keys, ctx),
        KindRequest::Permit { holders, .. } => semaphore::extend(req, holders, ctx),
    }
}

/// Whether the request's extension may go in an [`extend_many`] call with others: a mutex
/// on one key, not fenced. Every other hold is extended by its own call ([`extend`]).
pub(crate) fn batchable(req: &Request) -> bool {
    matches!(req.kind, KindRequest::Mutex) && mutex::batchable(req)
}

/// One call extending many holds at once, each where its key holds its value
/// (`extend_many.lua`): `reqs` all [`batchable`] and all with the ttl `ttl_ms`. Answers one
/// flag per request, in order.
pub(crate) fn extend_many<'a>(reqs: &[&'a Request], ttl_ms: u64, ctx: &Context<'a>) -> Call<'a> {
    debug_assert!(reqs.iter().all(|req| batchable(req)));
    mutex::extend_many(reqs, ttl_ms, ctx)
}

/// The fencing write-back of the request's hold, raising its fence counters to `token`;
/// `None` when there is nothing to write back (readers, or a hold of a kind that is not
/// fenced this time).
pub(crate) fn fence<'a>(req: &'a Request, ctx: &Context<'a>, token: u64) -> Option<Call<'a>> {
    match &req.kind {
        KindRequest::Mutex => Some(mutex::fence(req, ctx, token)),
        KindRequest::Read { .. } => None,
        KindRequest::Write { keys, .. } => read_write::fence_writer(req, keys, ctx, token),
        KindRequest::Permit { holders, .. } => semaphore::fence(req, holders, ctx, token),
    }
}

/// The release of the request's hold, as one self-contained `EVAL` (see
/// [`Voter::release`](crate::protocol::quorum::Voter::release) on a member for why).
pub(crate) fn release(req: &Request) -> redis::Cmd {
    match &req.kind {
        KindRequest::Mutex => mutex::release(req),
        KindRequest::Read { keys } => read_write::release_reader(req, keys),
        KindRequest::Write { keys, intent, .. } => read_write::release_writer(req, keys, intent),
        KindRequest::Permit { holders, .. } => semaphore::release(req, holders),
    }
}

/// An acquire script's call, in the shape all three share: `own` keys, then the fence
/// counters when fenced, then the guard's marker and records when guarded; arguments value,
/// ttl, the kind's own (`kind_args`), then fenced, guarded and the fence counters' idle
/// expiry.
fn acquire_call<'a>(
    script: (&'static Script, &'static str),
    own: Vec<&'a str>,
    kind_args: Vec<String>,
    req: &'a Request,
    ctx: &Context<'a>,
) -> Call<'a> {
    let mut keys = own;
    if let Some(fences) = &req.fences {
        keys.extend(fences.iter().map(String::as_str));
    }
    if let Some((marker, records)) = ctx.guard {
        keys.extend([marker, records]);
    }
    let mut args = vec![req.value.as_str().to_owned(), req.ttl_millis().to_string()];
    args.extend(kind_args);
    args.extend([
        u8::from(req.fences.is_some()).to_string(),
        u8::from(ctx.guarded()).to_string(),
        ctx.fence_keep_ms.to_string(),
    ]);
    Call { script, keys, args }
}

/// An extension's call: `own` keys then the ttl records when guarded; arguments value, ttl,
/// guarded.
fn extend_call<'a>(
    script: (&'static Script, &'static str),
    own: Vec<&'a str>,
    req: &'a Request,
    ctx: &Context<'a>,
) -> Call<'a> {
    let mut keys = own;
    keys.extend(ctx.records());
    Call {
        script,
        keys,
        args: vec![
            req.value.as_str().to_owned(),
            req.ttl_millis().to_string(),
            u8::from(ctx.guarded()).to_string(),
        ],
    }
}

/// A fencing write-back's call: `own` keys then the fence counters; arguments value, token,
/// the counters' idle expiry.
fn fence_call<'a>(
    script: (&'static Script, &'static str),
    own: Vec<&'a str>,
    fences: &'a [String],
    req: &'a Request,
    ctx: &Context<'a>,
    token: u64,
) -> Call<'a> {
    let mut keys = own;
    keys.extend(fences.iter().map(String::as_str));
    Call {
        script,
        keys,
        args: vec![
            req.value.as_str().to_owned(),
            token.to_string(),
            ctx.fence_keep_ms.to_string(),
        ],
    }
}

/// A holder's release (`holder_release.lua`): `keys`, the value, the role (`writer` or
/// `holder`) and the writer's intent.
fn holder_release(keys: &[&str], req: &Request, role: &str, intent: &str) -> redis::Cmd {
    let mut eval = redis::cmd("EVAL");
    eval.arg(crate::protocol::scripts::holder_release_body())
        .arg(keys.len())
        .arg(keys)
        .arg(req.value.as_str())
        .arg(role)
        .arg(intent);
    eval
}
