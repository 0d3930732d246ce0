//! Asking the nodes of a cluster what they see, for the waits and the queries.

use std::time::Duration;

use super::topology::{Report, View};
use crate::TestkitError;
use crate::members::Members;
use crate::replication::Replication;

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
