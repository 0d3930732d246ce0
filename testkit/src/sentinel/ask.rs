//! Asking the sentinels and data nodes of a group what they see, for the waits and the
//! queries.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::state::{DataReport, Instance, SentinelReport, check_ready};
use crate::members::{Members, probe_stream};
use crate::replication::Replication;
use crate::{DEFAULT_CMD_TIMEOUT, ReplyExt, Role, TestkitError};

/// Time-out of each question during a wait (see the cluster's `ASK_TIMEOUT`).
pub(crate) const ASK_TIMEOUT: Duration = Duration::from_secs(1);

/// Data node `i`'s `INFO replication`.
pub(crate) fn replication(data: &Members, i: usize) -> Result<Replication, TestkitError> {
    let info = data.cmd(i, &["INFO", "replication"], DEFAULT_CMD_TIMEOUT)?;
    Replication::parse(&info).map_err(|detail| TestkitError::Protocol {
        what: format!("reading INFO replication of node {i}"),
        detail,
    })
}

/// The primary's address as sentinel `j` reports it (`SENTINEL get-master-addr-by-name`).
pub(crate) fn reported_by(
    sentinels: &Members,
    j: usize,
    name: &str,
) -> Result<SocketAddr, TestkitError> {
    let reply = sentinels.cmd(
        j,
        &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", name],
        ASK_TIMEOUT,
    )?;
    let bad = || TestkitError::Protocol {
        what: format!("asking sentinel {j} for the address of {name}"),
        detail: format!("it answered {reply:?}"),
    };
    match reply.as_sequence() {
        Some([ip, port]) => {
            let ip: IpAddr = ip.as_str().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
            let port: u16 = port
                .as_int()
                .and_then(|p| u16::try_from(p).ok())
                .ok_or_else(bad)?;
            Ok(SocketAddr::new(ip, port))
        }
        _ => Err(bad()),
    }
}

/// The primary every running sentinel reports, if it is not node `old` and says
/// `role:master`; else why not.
pub(crate) fn new_primary(
    data: &Members,
    sentinels: &Members,
    name: &str,
    old: usize,
) -> Result<usize, String> {
    let mut port = None;
    for j in sentinels.responsive() {
        let addr = reported_by(sentinels, j, name).map_err(|e| e.to_string())?;
        match port {
            None => port = Some(addr.port()),
            Some(p) if p == addr.port() => {}
            Some(_) => return Err("the sentinels report different primaries".into()),
        }
    }
    let port = port.ok_or("no sentinel is running")?;
    if port == data.port(old) {
        return Err(format!("the sentinels still report node {old}"));
    }
    let new = data.index_of_port(port).ok_or(format!(
        "the sentinels report port {port}, none of the group's"
    ))?;
    match replication(data, new) {
        Ok(r) if r.role == Role::Primary => Ok(new),
        Ok(_) => Err(format!("node {new} is reported but is not a primary yet")),
        Err(e) => Err(e.to_string()),
    }
}

/// One round of [`SentinelGroup::wait_ready`](crate::SentinelGroup::wait_ready): what
/// every running sentinel and data node says, the pure [`check_ready`] over it, then the
/// probe that the primary's replication stream reaches its replicas now
/// (`probe_stream`; outside a cluster a `PUBLISH` is replicated, and touches no key).
/// Returns the primary.
pub(crate) fn ready(data: &Members, sentinels: &Members, name: &str) -> Result<usize, String> {
    let sentinel_reports = sentinels
        .responsive()
        .into_iter()
        .map(|j| {
            let fail = |e: TestkitError| format!("sentinel {j} did not answer: {e}");
            let mut conn = sentinels.connect(j, ASK_TIMEOUT).map_err(fail)?;
            let mut ask = |what: &str| conn.call(&["SENTINEL", what, name]).map_err(fail);
            Ok(SentinelReport {
                index: j,
                master: Instance::parse(&ask("MASTER")?)?,
                replicas: Instance::parse_all(&ask("REPLICAS")?)?,
                sentinels: Instance::parse_all(&ask("SENTINELS")?)?,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let data_reports = data
        .responsive()
        .into_iter()
        .map(|i| {
            let info = data
                .cmd(i, &["INFO", "replication"], ASK_TIMEOUT)
                .map_err(|e| format!("node {i} did not answer: {e}"))?;
            Ok(DataReport {
                index: i,
                port: data.port(i),
                replication: Replication::parse(&info)?,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let primary = check_ready(sentinels.ports(), &sentinel_reports, &data_reports)?;
    let write: [&[&str]; 1] = [&["PUBLISH", "__redquorum_testkit__:probe", "ready"]];
    let replicas = data_reports.len() - 1;
    probe_stream(data, primary, replicas, &write, ASK_TIMEOUT)?;
    Ok(primary)
}
