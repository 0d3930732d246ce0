//! Asking the nodes of a cluster what they see, for the waits and the queries.

use std::time::Duration;

use super::slot::key_in;
use super::topology::{Report, View, check_ready};
use crate::TestkitError;
use crate::members::{Members, probe_stream};
use crate::replication::{Replication, Role};

/// Time-out of each question during a wait: short, so that one slow node does not eat
/// the whole wait, and long enough for a node on a busy machine.
pub(crate) const ASK_TIMEOUT: Duration = Duration::from_secs(1);

/// One round of the readiness check: `CLUSTER INFO`, `CLUSTER NODES` and
/// `INFO replication` from every running, unpaused node. `Err` says which node did not
/// answer.
pub(crate) fn reports(members: &Members) -> Result<Vec<Report>, String> {
    members
        .responsive()
        .into_iter()
        .map(|index| {
            let fail = |e: TestkitError| format!("node {index} did not answer: {e}");
            let mut conn = members.connect(index, ASK_TIMEOUT).map_err(fail)?;
            let info = conn.call(&["CLUSTER", "INFO"]).map_err(fail)?;
            let view = View::parse(&conn.call(&["CLUSTER", "NODES"]).map_err(fail)?)?;
            let replication =
                Replication::parse(&conn.call(&["INFO", "replication"]).map_err(fail)?)?;
            Ok(Report {
                index,
                info,
                view,
                replication,
            })
        })
        .collect()
}

/// Node `i`'s `CLUSTER NODES`.
pub(crate) fn view_of(members: &Members, i: usize) -> Result<View, TestkitError> {
    let reply = members.cmd(i, &["CLUSTER", "NODES"], ASK_TIMEOUT)?;
    View::parse(&reply).map_err(|detail| TestkitError::Protocol {
        what: format!("reading CLUSTER NODES of node {i}"),
        detail,
    })
}

/// The `CLUSTER NODES` of the first running node that answers.
pub(crate) fn any_view(members: &Members) -> Result<View, TestkitError> {
    let mut last = None;
    for i in members.responsive() {
        match view_of(members, i) {
            Ok(view) => return Ok(view),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| TestkitError::ActionFailed {
        action: "read the cluster's topology".to_owned(),
        reason: "no node is running; restart one first".to_owned(),
    }))
}

/// One round of [`RedisCluster::wait_ready`](crate::RedisCluster::wait_ready): the
/// [`check_ready`] of what the nodes say, then, for every primary with replicas, the
/// probe that its replication stream reaches them now (`probe_stream`). The probe
/// writes and deletes a key of the test kit's own in one transaction (a `PUBLISH` is not
/// replicated in a cluster), so no client ever sees it.
pub(crate) fn ready(
    members: &Members,
    ids: &[String],
    replica_ports: &[u16],
) -> Result<(), String> {
    let reports = reports(members)?;
    check_ready(ids, replica_ports, &reports)?;
    let view = &reports.first().ok_or("no node is reachable")?.view;
    for primary in reports
        .iter()
        .filter(|r| r.replication.role == Role::Primary)
    {
        let id = &ids[primary.index];
        let replicas = reports
            .iter()
            .filter(|r| r.view.myself().and_then(|m| m.primary.as_deref()) == Some(id))
            .count();
        let slots = view.get(id).map(|n| n.slots.as_slice()).unwrap_or_default();
        if replicas == 0 || slots.is_empty() {
            continue;
        }
        let key = key_in(slots, |n| format!("__redquorum_testkit_probe__{{{n}}}"))
            .ok_or("no probe key lands on a primary's slots")?;
        let write: [&[&str]; 4] = [&["MULTI"], &["SET", &key, "1"], &["DEL", &key], &["EXEC"]];
        probe_stream(members, primary.index, replicas, &write, ASK_TIMEOUT)?;
    }
    Ok(())
}
