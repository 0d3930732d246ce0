//! [`Role`], and what a data node's `INFO replication` says about its replication.

use redis::Value;

use crate::ReplyExt;

/// What a data node currently is, as it reports itself (`role:` of `INFO replication`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// A primary (`role:master`): it accepts writes.
    Primary,
    /// A replica (`role:slave`) of some primary.
    Replica,
}

/// The fields of `INFO replication` the groups wait on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Replication {
    pub(crate) role: Role,
    /// A replica's primary port (`master_port`).
    pub(crate) primary_port: Option<u16>,
    /// A replica's link to its primary is up and no sync is in progress.
    pub(crate) in_sync: bool,
    /// A primary's replicas in state `online`, by the port they announce.
    pub(crate) online_replicas: Vec<u16>,
}

impl Replication {
    /// Parses an `INFO replication` reply; `Err` says what is missing.
    pub(crate) fn parse(info: &Value) -> Result<Self, String> {
        let role = match info.info_field("role") {
            Some("master") => Role::Primary,
            Some("slave") => Role::Replica,
            other => return Err(format!("INFO replication has role {other:?}")),
        };
        let primary_port = info.info_field("master_port").and_then(|p| p.parse().ok());
        let in_sync = info.info_field("master_link_status") == Some("up")
            && info.info_field("master_sync_in_progress") == Some("0");
        let text = info.as_str().unwrap_or_default();
        let online_replicas = text
            .lines()
            .filter(|line| line.starts_with("slave") && line.contains("state=online"))
            .filter_map(|line| {
                line.split_once(':')?
                    .1
                    .split(',')
                    .find_map(|kv| kv.strip_prefix("port="))?
                    .trim()
                    .parse()
                    .ok()
            })
            .collect();
        Ok(Self {
            role,
            primary_port,
            in_sync,
            online_replicas,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_primary_and_a_replica() -> Result<(), String> {
        let primary = Value::BulkString(
            "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n\
             slave0:ip=127.0.0.1,port=7001,state=online,offset=42,lag=0\r\n\
             slave1:ip=127.0.0.1,port=7002,state=wait_bgsave,offset=0,lag=0\r\n"
                .into(),
        );
        let p = Replication::parse(&primary)?;
        assert_eq!(p.role, Role::Primary);
        assert_eq!(p.online_replicas, vec![7001]);
        let replica = Value::BulkString(
            "role:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:7000\r\n\
             master_link_status:up\r\nmaster_sync_in_progress:0\r\n"
                .into(),
        );
        let r = Replication::parse(&replica)?;
        assert_eq!(
            (r.role, r.primary_port, r.in_sync),
            (Role::Replica, Some(7000), true)
        );
        assert!(Replication::parse(&Value::BulkString(b"x:1".to_vec())).is_err());
        Ok(())
    }
}
