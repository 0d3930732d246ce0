//! Moving a hash slot from one primary to another with the steps `redis-cli --cluster
//! reshard` takes: `IMPORTING` on the target, `MIGRATING` on the source, the keys moved with
//! `MIGRATE` in batches, then `SETSLOT … NODE` on the target, the source and every other
//! primary. The steps are separate so that a test can stop half-way and see `ASK`.
//!
//! `MIGRATE` is a connection from the source node to the target node, and with
//! `tls-cluster yes` (how the test kit starts every node) Redis makes it over TLS: it goes to
//! the target's own TLS port, not the replication proxy the node announces, so that a
//! replication partition does not stop a migration.

use std::collections::HashSet;
use std::time::Duration;

use redis::Value;

use super::ask::ASK_TIMEOUT;
use super::slot::key_slot;
use super::topology::View;
use crate::members::{Members, expect_ok};
use crate::{ReplyExt, TestkitError};

/// Keys per `MIGRATE` (and per `CLUSTER GETKEYSINSLOT`), as `redis-cli`'s default pipeline.
const BATCH: usize = 100;

/// How long the source node may take to move one batch to the target (`MIGRATE`'s own
/// time-out, and the test kit's wait for its answer): generous, for a loaded machine.
const MIGRATE_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a slot goes: the target node's index, id and own TLS port, and the password
/// `MIGRATE` authenticates with there.
#[derive(Debug)]
pub(crate) struct Target<'a> {
    pub(crate) index: usize,
    pub(crate) id: &'a str,
    pub(crate) tls_port: u16,
    pub(crate) password: Option<&'a str>,
}

/// Opens the move: `IMPORTING` on the target first (so that a client the source sends
/// there with `ASK` finds it ready), then `MIGRATING` on the source.
pub(crate) fn open(
    members: &Members,
    slot: u16,
    from: (usize, &str),
    to: &Target<'_>,
) -> Result<(), TestkitError> {
    let slot_arg = slot.to_string();
    let (source, source_id) = from;
    expect_ok(
        members.cmd(
            to.index,
            &["CLUSTER", "SETSLOT", &slot_arg, "IMPORTING", source_id],
            ASK_TIMEOUT,
        )?,
        || format!("mark slot {slot} as importing on node {}", to.index),
    )?;
    expect_ok(
        members.cmd(
            source,
            &["CLUSTER", "SETSLOT", &slot_arg, "MIGRATING", to.id],
            ASK_TIMEOUT,
        )?,
        || format!("mark slot {slot} as migrating on node {source}"),
    )
}

/// Moves `keys` (all in `slot`) from node `from` to the target with `MIGRATE`, in batches.
/// Keys the source no longer has are skipped by Redis (`NOKEY`).
pub(crate) fn migrate(
    members: &Members,
    slot: u16,
    from: usize,
    to: &Target<'_>,
    keys: &[&str],
) -> Result<(), TestkitError> {
    if let Some(stray) = keys.iter().find(|k| key_slot(k) != slot) {
        return Err(TestkitError::InvalidOption {
            message: format!(
                "key {stray:?} is in slot {}, not in slot {slot}; pass keys of the slot being moved",
                key_slot(stray)
            ),
        });
    }
    let port = to.tls_port.to_string();
    let timeout_ms = MIGRATE_TIMEOUT.as_millis().to_string();
    for batch in keys.chunks(BATCH) {
        let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", &timeout_ms];
        if let Some(password) = to.password {
            args.extend(["AUTH", password]);
        }
        args.push("KEYS");
        args.extend(batch);
        let reply = members.cmd(from, &args, MIGRATE_TIMEOUT + ASK_TIMEOUT)?;
        let moved = matches!(&reply, Value::Okay)
            || reply.as_str().is_some_and(|s| s == "OK" || s == "NOKEY");
        if !moved {
            return Err(TestkitError::ActionFailed {
                action: format!(
                    "migrate {} keys of slot {slot} from node {from} to node {}",
                    batch.len(),
                    to.index
                ),
                reason: match reply.as_error() {
                    Some(e) => format!("Redis answered {e}"),
                    None => format!("Redis answered {reply:?}"),
                },
            });
        }
    }
    Ok(())
}

/// Moves every key node `from` still has in `slot` to the target (`CLUSTER GETKEYSINSLOT`
/// and `MIGRATE` until none is left); returns how many it moved.
pub(crate) fn migrate_all(
    members: &Members,
    slot: u16,
    from: usize,
    to: &Target<'_>,
) -> Result<usize, TestkitError> {
    let (slot_arg, batch_arg) = (slot.to_string(), BATCH.to_string());
    let mut moved = 0;
    // A key that comes back in the next batch was not moved: stop rather than loop.
    let mut seen = HashSet::new();
    loop {
        let reply = members.cmd(
            from,
            &["CLUSTER", "GETKEYSINSLOT", &slot_arg, &batch_arg],
            ASK_TIMEOUT,
        )?;
        let keys = key_names(&reply).ok_or_else(|| TestkitError::Protocol {
            what: format!("reading the keys of slot {slot} on node {from}"),
            detail: format!("CLUSTER GETKEYSINSLOT answered {reply:?}"),
        })?;
        if keys.is_empty() {
            return Ok(moved);
        }
        if let Some(stuck) = keys.iter().find(|k| !seen.insert((*k).clone())) {
            return Err(TestkitError::ActionFailed {
                action: format!("migrate slot {slot} from node {from} to node {}", to.index),
                reason: format!("key {stuck:?} is still on node {from} after MIGRATE"),
            });
        }
        let names: Vec<&str> = keys.iter().map(String::as_str).collect();
        migrate(members, slot, from, to, &names)?;
        moved += keys.len();
    }
}

/// The key names of a `CLUSTER GETKEYSINSLOT` reply; `None` if it is not a list of
/// UTF-8 strings (the test kit's commands are text).
fn key_names(reply: &Value) -> Option<Vec<String>> {
    let Value::Array(items) = reply else {
        return None;
    };
    items
        .iter()
        .map(|item| match item {
            Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
            _ => None,
        })
        .collect()
}

/// Closes the move: `SETSLOT … NODE` on the target first (it takes the slot and a new
/// config epoch), then on the source (which refuses while it still holds keys of the
/// slot), then on every other primary in `others`, so that nobody waits for gossip.
pub(crate) fn assign(
    members: &Members,
    slot: u16,
    from: usize,
    to: &Target<'_>,
    others: &[usize],
) -> Result<(), TestkitError> {
    let slot_arg = slot.to_string();
    let order = [to.index, from].into_iter().chain(
        others
            .iter()
            .copied()
            .filter(|&i| i != to.index && i != from),
    );
    for node in order {
        expect_ok(
            members.cmd(
                node,
                &["CLUSTER", "SETSLOT", &slot_arg, "NODE", to.id],
                ASK_TIMEOUT,
            )?,
            || format!("assign slot {slot} to node {} on node {node}", to.index),
        )?;
    }
    Ok(())
}

/// `Ok` once every running, unpaused node says that the node with id `owner` serves
/// `slot` and that nobody is importing or migrating it; else which node does not (yet).
pub(crate) fn agreed(members: &Members, slot: u16, owner: &str) -> Result<(), String> {
    let pending = [format!("[{slot}->-"), format!("[{slot}-<-")];
    for i in members.responsive() {
        let reply = members
            .cmd(i, &["CLUSTER", "NODES"], ASK_TIMEOUT)
            .map_err(|e| e.to_string())?;
        match View::parse(&reply)?.owner(slot) {
            Some(node) if node.id == owner => {}
            Some(node) => return Err(format!("node {i} says {} serves slot {slot}", node.id)),
            None => return Err(format!("node {i} says nobody serves slot {slot}")),
        }
        // `View` leaves out the `[slot->-id]` / `[slot-<-id]` marks of a migration.
        if reply
            .as_str()
            .is_some_and(|t| pending.iter().any(|p| t.contains(p.as_str())))
        {
            return Err(format!("node {i} still migrates or imports slot {slot}"));
        }
    }
    Ok(())
}
