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
