//! The read-write lock: on each master, the readers (a holder set), the writer (a plain key,
//! extended and fenced as a mutex's) and the pending writer of writer preference
//! ([`RwKeys`]).

use super::{Call, Context, acquire_call, extend_call, fence_call, holder_release};
use crate::kind::RwKeys;
use crate::protocol::quorum::Request;
use crate::protocol::scripts;
use crate::value::LockValue;

/// `rw_acquire.lua`: a read hold (`write` is `None`) or a write hold (its intent, and whether
/// writers are preferred).
pub(super) fn acquire<'a>(
    req: &'a Request,
    keys: &'a RwKeys,
    write: Option<(&str, bool)>,
    ctx: &Context<'a>,
) -> Call<'a> {
    let (mode, intent, prefer) = match write {
        Some((intent, prefer)) => ("write", intent, prefer),
        None => ("read", "", false),
    };
    acquire_call(
        (scripts::rw_acquire(), scripts::rw_acquire_source()),
        vec![&keys.writer, &keys.readers, &keys.pending],
        vec![
            mode.to_owned(),
            intent.to_owned(),
            u8::from(prefer).to_string(),
        ],
        req,
        ctx,
    )
}

/// A reader's hold: `holder_extend.lua` on the readers.
pub(super) fn extend_reader<'a>(req: &'a Request, keys: &'a RwKeys, ctx: &Context<'a>) -> Call<'a> {
    extend_call(
        (scripts::holder_extend(), scripts::holder_extend_source()),
        vec![&keys.readers],
        req,
        ctx,
    )
}

/// A writer's hold is a plain key: the mutex's `extend.lua` on the writer.
pub(super) fn extend_writer<'a>(req: &'a Request, keys: &'a RwKeys, ctx: &Context<'a>) -> Call<'a> {
    extend_call(
        (scripts::extend(), scripts::extend_source()),
        vec![&keys.writer],
        req,
        ctx,
    )
}

/// A fenced writer: the mutex's `fence.lua` on the writer. Readers write nothing to fence.
pub(super) fn fence_writer<'a>(
    req: &'a Request,
    keys: &'a RwKeys,
    ctx: &Context<'a>,
    token: u64,
) -> Option<Call<'a>> {
    let fences = req.fences.as_deref()?;
    Some(fence_call(
        (scripts::fence(), scripts::fence_source()),
        vec![&keys.writer],
        fences,
        req,
        ctx,
        token,
    ))
}

/// A reader leaves the readers.
pub(super) fn release_reader(req: &Request, keys: &RwKeys) -> redis::Cmd {
    holder_release(&[&keys.readers], req, "holder", "")
}

/// A writer deletes its writer key, and its own pending marker.
pub(super) fn release_writer(req: &Request, keys: &RwKeys, intent: &LockValue) -> redis::Cmd {
    holder_release(
        &[&keys.readers, &keys.writer, &keys.pending],
        req,
        "writer",
        intent.as_str(),
    )
}
