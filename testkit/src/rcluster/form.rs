//! Forming a cluster out of started nodes, with the commands `redis-cli --cluster create`
//! would send: unique config epochs, slots split evenly over the primaries, `CLUSTER MEET`
//! (with the explicit bus port, which `redis-cli` would not know), `CLUSTER REPLICATE`.
//! Done by hand rather than through `redis-cli` so that each step's answer is checked and
//! the bus ports need no guessing.

use std::time::Duration;

use super::ask::ASK_TIMEOUT;
use super::slot::SLOT_COUNT;
use super::spawn::NodeNet;
use crate::members::{Members, expect_ok};
use redis::Value;

use crate::{ReplyExt, TestkitError, poll};

/// The slots primary `p` of `primaries` starts with, inclusive.
pub(crate) fn initial_slots(p: usize, primaries: usize) -> (u16, u16) {
    let count = usize::from(SLOT_COUNT);
    let start = p * count / primaries;
    let end = (p + 1) * count / primaries - 1;
    // Both are below SLOT_COUNT, so they fit.
    (start as u16, end as u16)
}

/// Forms the cluster; returns every node's id. Nodes `0..primaries` get the slots,
/// replica `j` of primary `p` is node `primaries + p * replicas_per_primary + j`.
pub(crate) fn form(
    members: &Members,
    nets: &[NodeNet],
    primaries: usize,
    replicas_per_primary: usize,
    timeout: Duration,
) -> Result<Vec<String>, TestkitError> {
    let n = members.len();
    let call = |i: usize, args: &[&str]| members.cmd(i, args, ASK_TIMEOUT);
    let ids = (0..n)
        .map(|i| {
            let reply = call(i, &["CLUSTER", "MYID"])?;
            reply
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| TestkitError::ActionFailed {
                    action: format!("read node {i}'s id"),
                    reason: format!("CLUSTER MYID answered {reply:?}"),
                })
        })
        .collect::<Result<Vec<String>, _>>()?;
    for i in 0..n {
        let epoch = (i + 1).to_string();
        expect_ok(call(i, &["CLUSTER", "SET-CONFIG-EPOCH", &epoch])?, || {
            format!("set node {i}'s config epoch")
        })?;
    }
    for p in 0..primaries {
        let (start, end) = initial_slots(p, primaries);
        let (start, end) = (start.to_string(), end.to_string());
        expect_ok(
            call(p, &["CLUSTER", "ADDSLOTSRANGE", &start, &end])?,
            || format!("give node {p} slots {start}-{end}"),
        )?;
    }
    for (i, net) in nets.iter().enumerate().skip(1) {
        let (port, bus) = (members.port(i).to_string(), net.bus_port.to_string());
        expect_ok(
            call(0, &["CLUSTER", "MEET", "127.0.0.1", &port, &bus])?,
            || format!("introduce node {i} to node 0"),
        )?;
    }
    for (p, primary_id) in ids.iter().enumerate().take(primaries) {
        for j in 0..replicas_per_primary {
            let r = primaries + p * replicas_per_primary + j;
            // The replica learns of its primary through gossip, a moment after MEET.
            poll::until(
                timeout,
                || format!("making node {r} a replica of node {p}"),
                || match call(r, &["CLUSTER", "REPLICATE", primary_id]) {
                    Ok(Value::Okay) => Ok(()),
                    Ok(other) => Err(format!("CLUSTER REPLICATE answered {other:?}")),
                    Err(e) => Err(e.to_string()),
                },
            )?;
        }
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_slots_cover_every_slot_once() {
        for primaries in [1, 2, 3, 5, 7] {
            let mut next = 0_u32;
            for p in 0..primaries {
                let (start, end) = initial_slots(p, primaries);
                assert_eq!(u32::from(start), next);
                assert!(end >= start);
                next = u32::from(end) + 1;
            }
            assert_eq!(next, u32::from(SLOT_COUNT));
        }
    }
}
