//! What the sentinels and data nodes of a group say, and the pure check of "the group is
//! ready" over those answers.

use std::collections::HashMap;

use redis::Value;

use crate::ReplyExt;
use crate::replication::{Replication, Role};

/// One instance as a sentinel describes it (`SENTINEL MASTER`, each entry of
/// `SENTINEL REPLICAS` and `SENTINEL SENTINELS`): its `field value` pairs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Instance(HashMap<String, String>);

impl Instance {
    /// Parses a flat `[field, value, field, value, …]` array.
    pub(crate) fn parse(reply: &Value) -> Result<Self, String> {
        let items = reply
            .as_sequence()
            .ok_or_else(|| format!("a sentinel answered {reply:?}"))?;
        let mut map = HashMap::new();
        for pair in items.chunks(2) {
            if let [field, value] = pair
                && let (Some(field), Some(value)) = (field.as_str(), value.as_str())
            {
                map.insert(field.to_owned(), value.to_owned());
            }
        }
        Ok(Self(map))
    }

    /// Parses an array of instances.
    pub(crate) fn parse_all(reply: &Value) -> Result<Vec<Self>, String> {
        reply
            .as_sequence()
            .ok_or_else(|| format!("a sentinel answered {reply:?}"))?
            .iter()
            .map(Self::parse)
            .collect()
    }

    pub(crate) fn get(&self, field: &str) -> &str {
        self.0.get(field).map_or("", String::as_str)
    }

    pub(crate) fn port(&self) -> Option<u16> {
        self.get("port").parse().ok()
    }
}

/// What one reachable sentinel answered in one round of the readiness check.
#[derive(Debug, Clone)]
pub(crate) struct SentinelReport {
    pub(crate) index: usize,
    pub(crate) master: Instance,
    pub(crate) replicas: Vec<Instance>,
    pub(crate) sentinels: Vec<Instance>,
}

/// What one reachable data node answered.
#[derive(Debug, Clone)]
pub(crate) struct DataReport {
    pub(crate) index: usize,
    pub(crate) port: u16,
    pub(crate) replication: Replication,
}

/// The group as a test wants it before acting; returns the primary's index. `Ok` if
///
/// - every reachable sentinel reports the same primary, flagged `master` only (not down,
///   no failover in progress), and that primary is a reachable data node with
///   `role:master`;
/// - every reachable sentinel knows every other reachable data node as a healthy replica
///   of that primary with its link `ok`, and every other reachable sentinel as healthy;
/// - every other reachable data node is a replica of the primary, in sync, and listed
///   online by it.
///
/// `sentinel_ports[j]` is sentinel `j`'s port.
pub(crate) fn check_ready(
    sentinel_ports: &[u16],
    sentinels: &[SentinelReport],
    data: &[DataReport],
) -> Result<usize, String> {
    let first = sentinels.first().ok_or("no sentinel is reachable")?;
    let primary_port = first
        .master
        .port()
        .ok_or_else(|| format!("sentinel {} reports no primary port", first.index))?;
    let primary = data
        .iter()
        .find(|d| d.port == primary_port)
        .ok_or_else(|| format!("the reported primary (port {primary_port}) is not reachable"))?;
    if primary.replication.role != Role::Primary {
        return Err(format!(
            "the reported primary, node {}, is a replica",
            primary.index
        ));
    }
    for s in sentinels {
        let j = s.index;
        if s.master.port() != Some(primary_port) {
            return Err(format!(
                "sentinels {} and {j} report different primaries",
                first.index
            ));
        }
        if s.master.get("flags") != "master" {
            return Err(format!(
                "sentinel {j} flags the primary {}",
                s.master.get("flags")
            ));
        }
        for d in data.iter().filter(|d| d.index != primary.index) {
            let known = s
                .replicas
                .iter()
                .find(|r| r.port() == Some(d.port))
                .ok_or_else(|| format!("sentinel {j} does not know replica {}", d.index))?;
            if known.get("flags") != "slave"
                || known.get("master-link-status") != "ok"
                || known.get("master-port") != primary_port.to_string()
            {
                return Err(format!(
                    "sentinel {j} sees replica {} as {} (link {}, primary port {})",
                    d.index,
                    known.get("flags"),
                    known.get("master-link-status"),
                    known.get("master-port")
                ));
            }
        }
        for other in sentinels.iter().filter(|o| o.index != j) {
            let port = sentinel_ports[other.index];
            let known = s
                .sentinels
                .iter()
                .find(|o| o.port() == Some(port))
                .ok_or_else(|| format!("sentinel {j} does not know sentinel {}", other.index))?;
            // `master_down` is the peer's last vote about the primary, not its own state:
            // Valkey keeps it on the peer's entry after a failover, Redis clears it.
            let flags = known.get("flags");
            if !flags
                .split(',')
                .all(|f| f == "sentinel" || f == "master_down")
            {
                return Err(format!(
                    "sentinel {j} flags sentinel {} {flags}",
                    other.index,
                ));
            }
        }
    }
    for d in data.iter().filter(|d| d.index != primary.index) {
        let r = &d.replication;
        if r.role != Role::Replica || r.primary_port != Some(primary_port) {
            return Err(format!(
                "node {} does not replicate from node {}",
                d.index, primary.index
            ));
        }
        if !r.in_sync {
            return Err(format!("replica {} is not in sync", d.index));
        }
        if !primary.replication.online_replicas.contains(&d.port) {
            return Err(format!(
                "node {} does not list replica {} as online",
                primary.index, d.index
            ));
        }
    }
    Ok(primary.index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(pairs: &[(&str, &str)]) -> Instance {
        Instance::parse(&Value::Array(
            pairs
                .iter()
                .flat_map(|(k, v)| {
                    [
                        Value::BulkString((*k).into()),
                        Value::BulkString((*v).into()),
                    ]
                })
                .collect(),
        ))
        .unwrap_or_default()
    }

    fn replication(text: &str) -> Replication {
        Replication::parse(&Value::BulkString(text.into())).unwrap_or(Replication {
            role: Role::Replica,
            primary_port: None,
            in_sync: false,
            online_replicas: Vec::new(),
        })
    }

    #[test]
    fn readiness_needs_agreeing_sentinels_and_synced_replicas() {
        let sentinel_ports = [26000, 26001];
        let replica = instance(&[
            ("port", "7001"),
            ("flags", "slave"),
            ("master-link-status", "ok"),
            ("master-port", "7000"),
        ]);
        let report = |index: usize, other: u16| SentinelReport {
            index,
            master: instance(&[("port", "7000"), ("flags", "master")]),
            replicas: vec![replica.clone()],
            sentinels: vec![instance(&[
                ("port", &other.to_string()),
                ("flags", "sentinel"),
            ])],
        };
        let sentinels = vec![report(0, 26001), report(1, 26000)];
        let data = vec![
            DataReport {
                index: 0,
                port: 7000,
                replication: replication(
                    "role:master\r\nslave0:ip=127.0.0.1,port=7001,state=online,offset=1,lag=0\r\n",
                ),
            },
            DataReport {
                index: 1,
                port: 7001,
                replication: replication(
                    "role:slave\r\nmaster_port:7000\r\nmaster_link_status:up\r\nmaster_sync_in_progress:0\r\n",
                ),
            },
        ];
        assert_eq!(check_ready(&sentinel_ports, &sentinels, &data), Ok(0));

        let mut failing_over = sentinels.clone();
        failing_over[1].master =
            instance(&[("port", "7000"), ("flags", "master,failover_in_progress")]);
        assert!(check_ready(&sentinel_ports, &failing_over, &data).is_err());

        // A peer's stale vote about the primary (Valkey keeps it after a failover) is no
        // reason to wait; a peer that is down is.
        let mut voted = sentinels.clone();
        voted[0].sentinels[0] = instance(&[("port", "26001"), ("flags", "sentinel,master_down")]);
        assert_eq!(check_ready(&sentinel_ports, &voted, &data), Ok(0));
        voted[0].sentinels[0] = instance(&[("port", "26001"), ("flags", "sentinel,s_down")]);
        assert!(check_ready(&sentinel_ports, &voted, &data).is_err());

        let mut lonely = sentinels.clone();
        lonely[0].sentinels.clear();
        assert!(check_ready(&sentinel_ports, &lonely, &data).is_err());

        let mut lagging = data.clone();
        lagging[1].replication.in_sync = false;
        assert!(check_ready(&sentinel_ports, &sentinels, &lagging).is_err());

        let mut moved = sentinels;
        moved[0].master = instance(&[("port", "7001"), ("flags", "master")]);
        assert!(check_ready(&sentinel_ports, &moved, &data).is_err());
    }
}
