//! The mutex: one holder of every lock key (`{prefix}lock:{resource}`, one per resource; a
//! mutex may span several resources, all or none on each master). A plain unfenced mutex on
//! one key never comes here for its acquire: the member sends `SET NX` instead.

use super::{Call, Context, acquire_call, extend_call, fence_call};
use crate::protocol::quorum::Request;
use crate::protocol::{scripts, wire};

fn keys(req: &Request) -> Vec<&str> {
    req.keys.iter().map(String::as_str).collect()
}

/// `acquire.lua`: every lock key if none exists; its own argument is the number of keys.
pub(super) fn acquire<'a>(req: &'a Request, ctx: &Context<'a>) -> Call<'a> {
    acquire_call(
        (scripts::acquire(), scripts::acquire_source()),
        keys(req),
        vec![req.keys.len().to_string()],
        req,
        ctx,
    )
}

/// `extend.lua` on every lock key.
pub(super) fn extend<'a>(req: &'a Request, ctx: &Context<'a>) -> Call<'a> {
    extend_call(
        (scripts::extend(), scripts::extend_source()),
        keys(req),
        req,
        ctx,
    )
}

/// Whether `req` can be renewed by [`extend_many`]: a mutex on one key, not fenced.
pub(super) fn batchable(req: &Request) -> bool {
    req.keys.len() == 1 && req.fences.is_none()
}

/// `extend_many.lua` on the one lock key of each of `reqs` (all [`batchable`], all with
/// the ttl `ttl_ms`): keys in order then the ttl records when guarded; arguments the ttl,
/// guarded, then each lock's value in the order of its key.
pub(super) fn extend_many<'a>(reqs: &[&'a Request], ttl_ms: u64, ctx: &Context<'a>) -> Call<'a> {
    let mut keys: Vec<&str> = Vec::with_capacity(reqs.len() + 1);
    keys.extend(reqs.iter().map(|req| req.keys[0].as_str()));
    keys.extend(ctx.records());
    let mut args = Vec::with_capacity(reqs.len() + 2);
    args.push(ttl_ms.to_string());
    args.push(u8::from(ctx.guarded()).to_string());
    args.extend(reqs.iter().map(|req| req.value.as_str().to_owned()));
    Call {
        script: (scripts::extend_many(), scripts::extend_many_source()),
        keys,
        args,
    }
}

/// `fence.lua` on every lock key and its fence counter.
pub(super) fn fence<'a>(req: &'a Request, ctx: &Context<'a>, token: u64) -> Call<'a> {
    let fences = req.fences.as_deref().unwrap_or_default();
    fence_call(
        (scripts::fence(), scripts::fence_source()),
        keys(req),
        fences,
        req,
        ctx,
        token,
    )
}

/// `release.lua` on every lock key.
pub(super) fn release(req: &Request) -> redis::Cmd {
    wire::eval(scripts::release_body(), &req.keys, [req.value.as_str()])
}
