//! The counting semaphore: on each master, the permit holders (a holder set with the permit
//! count).

use super::{Call, Context, acquire_call, extend_call, fence_call, holder_release};
use crate::protocol::quorum::Request;
use crate::protocol::scripts;

/// `sem_acquire.lua`: one of `k` permits.
pub(super) fn acquire<'a>(
    req: &'a Request,
    holders: &'a str,
    k: usize,
    ctx: &Context<'a>,
) -> Call<'a> {
    acquire_call(
        (scripts::sem_acquire(), scripts::sem_acquire_source()),
        vec![holders],
        vec![k.to_string()],
        req,
        ctx,
    )
}

/// `holder_extend.lua` on the holders.
pub(super) fn extend<'a>(req: &'a Request, holders: &'a str, ctx: &Context<'a>) -> Call<'a> {
    extend_call(
        (scripts::holder_extend(), scripts::holder_extend_source()),
        vec![holders],
        req,
        ctx,
    )
}

/// A fenced permit: `holder_fence.lua` on the holders.
pub(super) fn fence<'a>(
    req: &'a Request,
    holders: &'a str,
    ctx: &Context<'a>,
    token: u64,
) -> Option<Call<'a>> {
    let fences = req.fences.as_deref()?;
    Some(fence_call(
        (scripts::holder_fence(), scripts::holder_fence_source()),
        vec![holders],
        fences,
        req,
        ctx,
        token,
    ))
}

/// The permit leaves the holders.
pub(super) fn release(req: &Request, holders: &str) -> redis::Cmd {
    holder_release(&[holders], req, "holder", "")
}
