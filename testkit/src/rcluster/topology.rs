//! What the nodes of a Redis Cluster say about it (`CLUSTER NODES`, `CLUSTER INFO`,
//! `INFO replication`), and the pure check of "the cluster is ready" over those answers.

use std::collections::BTreeMap;

use redis::Value;

use super::slot::SLOT_COUNT;
use crate::ReplyExt;
use crate::replication::{Replication, Role};

/// Flags of a node that is not (yet, or any more) a healthy member.
const UNHEALTHY_FLAGS: [&str; 4] = ["fail", "fail?", "handshake", "noaddr"];

/// One line of `CLUSTER NODES`: one node as the answering node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeLine {
    pub(crate) id: String,
    pub(crate) flags: Vec<String>,
    /// The id of its primary, for a replica.
    pub(crate) primary: Option<String>,
    /// The answering node's bus link to this node is up (always true for `myself`).
    pub(crate) connected: bool,
    /// Slot ranges it serves, inclusive.
    pub(crate) slots: Vec<(u16, u16)>,
}

impl NodeLine {
    fn has(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }

    pub(crate) fn is_primary(&self) -> bool {
        self.has("master")
    }

    pub(crate) fn is_myself(&self) -> bool {
        self.has("myself")
    }

    fn unhealthy(&self) -> Option<&str> {
        UNHEALTHY_FLAGS.into_iter().find(|f| self.has(f))
    }
}

/// One node's `CLUSTER NODES`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct View {
    pub(crate) nodes: Vec<NodeLine>,
}

impl View {
    /// Parses `CLUSTER NODES`: `<id> <ip:port@cport> <flags> <primary|-> <ping> <pong>
    /// <epoch> <connected|disconnected> <slot>...`. Slots being imported or migrated
    /// (`[…]`) are ignored.
    pub(crate) fn parse(reply: &Value) -> Result<Self, String> {
        let text = reply
            .as_str()
            .ok_or_else(|| format!("CLUSTER NODES answered {reply:?}"))?;
        let mut nodes = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 8 {
                return Err(format!("CLUSTER NODES has a short line: {line:?}"));
            }
            let mut slots = Vec::new();
            for slot in fields[8..].iter().filter(|s| !s.starts_with('[')) {
                let (start, end) = slot.split_once('-').unwrap_or((slot, slot));
                match (start.parse(), end.parse()) {
                    (Ok(start), Ok(end)) => slots.push((start, end)),
                    _ => return Err(format!("CLUSTER NODES has a bad slot {slot:?}")),
                }
            }
            nodes.push(NodeLine {
                id: fields[0].to_owned(),
                flags: fields[2].split(',').map(str::to_owned).collect(),
                primary: Some(fields[3]).filter(|p| *p != "-").map(str::to_owned),
                connected: fields[7] == "connected",
                slots,
            });
        }
        Ok(Self { nodes })
    }

    pub(crate) fn myself(&self) -> Option<&NodeLine> {
        self.nodes.iter().find(|n| n.is_myself())
    }

    pub(crate) fn get(&self, id: &str) -> Option<&NodeLine> {
        self.nodes.iter().find(|n| n.id == id)
    }

    /// The node serving `slot`.
    pub(crate) fn owner(&self, slot: u16) -> Option<&NodeLine> {
        self.nodes
            .iter()
            .find(|n| n.slots.iter().any(|&(s, e)| (s..=e).contains(&slot)))
    }

    /// Who serves which slots, as `start -> (end, owner id)`; comparable across views.
    fn ownership(&self) -> BTreeMap<u16, (u16, &str)> {
        self.nodes
            .iter()
            .flat_map(|n| n.slots.iter().map(move |&(s, e)| (s, (e, n.id.as_str()))))
            .collect()
    }

    /// Each node's role and primary, by id; comparable across views.
    fn roles(&self) -> BTreeMap<&str, (bool, Option<&str>)> {
        self.nodes
            .iter()
            .map(|n| (n.id.as_str(), (n.is_primary(), n.primary.as_deref())))
            .collect()
    }
}

/// What one reachable node answered in one round of the readiness check.
#[derive(Debug, Clone)]
pub(crate) struct Report {
    pub(crate) index: usize,
    /// `CLUSTER INFO`.
    pub(crate) info: Value,
    pub(crate) view: View,
    pub(crate) replication: Replication,
}

/// The cluster as a test wants it before acting: `Ok` if every reachable node
///
/// - reports `cluster_state:ok` with all [`SLOT_COUNT`] slots assigned and ok,
/// - has the same view as the others of who serves which slot and who replicates whom,
/// - sees every other reachable node as healthy (no `fail`, `fail?`, `handshake`,
///   `noaddr`), over a connected bus link,
///
/// and every reachable replica's link to its primary is up, with no sync in progress, and
/// its primary lists it as `online`. `ids[i]` is node `i`'s id and `replica_ports[i]` the
/// port it announces to its primary; `reports` has one entry per reachable node.
pub(crate) fn check_ready(
    ids: &[String],
    replica_ports: &[u16],
    reports: &[Report],
) -> Result<(), String> {
    let first = reports.first().ok_or("no node is reachable")?;
    for r in reports {
        let i = r.index;
        let field = |name| r.info.info_field(name).unwrap_or("?");
        if field("cluster_state") != "ok" {
            return Err(format!(
                "node {i} reports cluster_state:{}",
                field("cluster_state")
            ));
        }
        for name in ["cluster_slots_assigned", "cluster_slots_ok"] {
            if field(name) != SLOT_COUNT.to_string() {
                return Err(format!("node {i} reports {name}:{}", field(name)));
            }
        }
        if r.view.ownership() != first.view.ownership() {
            return Err(format!(
                "nodes {} and {i} disagree on who serves which slots",
                first.index
            ));
        }
        if r.view.roles() != first.view.roles() {
            return Err(format!(
                "nodes {} and {i} disagree on who replicates whom",
                first.index
            ));
        }
        for other in reports.iter().filter(|o| o.index != i) {
            let id = &ids[other.index];
            let line = r
                .view
                .get(id)
                .ok_or_else(|| format!("node {i} does not know node {}", other.index))?;
            if let Some(flag) = line.unhealthy() {
                return Err(format!("node {i} flags node {} as {flag}", other.index));
            }
            if !line.connected {
                return Err(format!("node {i} has no bus link to node {}", other.index));
            }
        }
    }
    for r in reports {
        let i = r.index;
        let Some(me) = r.view.myself() else {
            return Err(format!("node {i} does not list itself"));
        };
        if me.is_primary() {
            if r.replication.role != Role::Primary {
                return Err(format!("node {i} is a primary that reports role:slave"));
            }
            continue;
        }
        let primary_id = me
            .primary
            .as_deref()
            .ok_or(format!("replica {i} has no primary"))?;
        if !r.replication.in_sync {
            return Err(format!("replica {i} is not in sync with its primary"));
        }
        let primary = reports
            .iter()
            .find(|p| ids[p.index] == primary_id)
            .ok_or_else(|| format!("the primary of replica {i} is not reachable"))?;
        if !primary
            .replication
            .online_replicas
            .contains(&replica_ports[i])
        {
            return Err(format!(
                "node {} does not list replica {i} as online",
                primary.index
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-8191 [8192->-b2]\n\
b2 127.0.0.1:7001@17001 master - 0 1 2 connected 8192-16383\n\
c3 127.0.0.1:7002@17002 slave,fail? a1 0 1 1 disconnected\n";

    #[test]
    fn parses_cluster_nodes() -> Result<(), String> {
        let view = View::parse(&Value::BulkString(NODES.into()))?;
        assert_eq!(view.nodes.len(), 3);
        let me = view.myself().ok_or("myself")?;
        assert_eq!(
            (me.id.as_str(), me.slots.as_slice()),
            ("a1", &[(0, 8191)][..])
        );
        assert_eq!(view.owner(9000).map(|n| n.id.as_str()), Some("b2"));
        let replica = view.get("c3").ok_or("c3")?;
        assert_eq!(replica.primary.as_deref(), Some("a1"));
        assert!(!replica.is_primary() && !replica.connected);
        assert_eq!(replica.unhealthy(), Some("fail?"));
        Ok(())
    }

    #[test]
    fn readiness_needs_every_check() -> Result<(), String> {
        let ids: Vec<String> = ["a1", "b2", "c3"].map(String::from).into();
        let ports = [7000, 7001, 7002];
        let healthy = "\
a1 127.0.0.1:7000@17000 master - 0 0 1 connected 0-8191\n\
b2 127.0.0.1:7001@17001 master - 0 1 2 connected 8192-16383\n\
c3 127.0.0.1:7002@17002 slave a1 0 1 1 connected\n";
        let info = Value::BulkString(
            "cluster_state:ok\r\ncluster_slots_assigned:16384\r\ncluster_slots_ok:16384\r\n".into(),
        );
        // Node `me`'s view: the healthy topology with its own line marked `myself`.
        let view_of = |me: &str| {
            healthy
                .lines()
                .map(|l| match l.strip_prefix(me) {
                    Some(rest) => format!(
                        "{me}{}",
                        rest.replacen(" master", " myself,master", 1).replacen(
                            " slave",
                            " myself,slave",
                            1
                        )
                    ),
                    None => l.to_owned(),
                })
                .collect::<Vec<_>>()
                .join("\n")
        };
        let report = |index: usize, repl: &str| -> Result<Report, String> {
            Ok(Report {
                index,
                info: info.clone(),
                view: View::parse(&Value::BulkString(view_of(&ids[index]).into()))?,
                replication: Replication::parse(&Value::BulkString(repl.into()))?,
            })
        };
        let primary_a =
            "role:master\r\nslave0:ip=127.0.0.1,port=7002,state=online,offset=1,lag=0\r\n";
        let replica_c = "role:slave\r\nmaster_port:7000\r\nmaster_link_status:up\r\nmaster_sync_in_progress:0\r\n";
        let reports = vec![
            report(0, primary_a)?,
            report(1, "role:master\r\n")?,
            report(2, replica_c)?,
        ];
        check_ready(&ids, &ports, &reports)?;

        let mut lagging = reports.clone();
        lagging[2].replication.in_sync = false;
        assert!(check_ready(&ids, &ports, &lagging).is_err());

        let mut not_listed = reports.clone();
        not_listed[0].replication.online_replicas.clear();
        assert!(check_ready(&ids, &ports, &not_listed).is_err());

        let mut failing = reports.clone();
        failing[1].info = Value::BulkString("cluster_state:fail\r\n".into());
        assert!(check_ready(&ids, &ports, &failing).is_err());

        let mut disagree = reports;
        disagree[1].view.nodes[0].slots = vec![(0, 100)];
        assert!(check_ready(&ids, &ports, &disagree).is_err());
        Ok(())
    }
}
