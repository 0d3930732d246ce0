//! Where things are in a quorum member that is a group of servers: a Redis Cluster's slots
//! and their primaries (`CLUSTER SLOTS`), a Sentinel group's current primary
//! (`SENTINEL get-master-addr-by-name`), and the connection details of a server found there.

use redis::{ConnectionAddr, ConnectionInfo, Value};

use crate::error::node_failure::{NodeFailure, text_of, unexpected};
use crate::slot::SLOTS;

/// A server's address, `host:port`.
pub(crate) type Addr = String;

/// Which primary serves each slot of a Redis Cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Slots {
    /// `(first slot, last slot, primary)`, sorted by first slot.
    ranges: Vec<(u16, u16, Addr)>,
}

impl Slots {
    /// Reads a `CLUSTER SLOTS` reply: `[[start, end, [host, port, id, …], replicas…], …]`.
    pub(crate) fn parse(reply: &Value) -> Result<Self, NodeFailure> {
        let Value::Array(entries) = reply else {
            return Err(unexpected(reply));
        };
        let mut ranges = Vec::with_capacity(entries.len());
        for entry in entries {
            let Value::Array(fields) = entry else {
                return Err(unexpected(entry));
            };
            match fields.as_slice() {
                [
                    Value::Int(start),
                    Value::Int(end),
                    Value::Array(primary),
                    ..,
                ] => {
                    let (Some(host), Some(Value::Int(port))) = (primary.first(), primary.get(1))
                    else {
                        return Err(unexpected(entry));
                    };
                    let (Ok(start), Ok(end)) = (u16::try_from(*start), u16::try_from(*end)) else {
                        return Err(unexpected(entry));
                    };
                    ranges.push((start, end, format!("{}:{port}", text_of(host))));
                }
                _ => return Err(unexpected(entry)),
            }
        }
        ranges.sort_unstable();
        Ok(Self { ranges })
    }

    /// The primary serving `slot`, if the cluster covers it.
    pub(crate) fn owner(&self, slot: u16) -> Option<&str> {
        let i = self.ranges.partition_point(|(start, _, _)| *start <= slot);
        let (start, end, addr) = self.ranges.get(i.checked_sub(1)?)?;
        (*start <= slot && slot <= *end).then_some(addr.as_str())
    }

    /// The first slot each primary serves: where its epoch marker is kept.
    pub(crate) fn first_slot_of(&self, addr: &str) -> Option<u16> {
        self.ranges
            .iter()
            .find(|(_, _, a)| a == addr)
            .map(|(start, _, _)| *start)
    }

    /// Every primary, each once, in slot order.
    pub(crate) fn primaries(&self) -> Vec<Addr> {
        let mut seen: Vec<Addr> = Vec::new();
        for (_, _, addr) in &self.ranges {
            if !seen.contains(addr) {
                seen.push(addr.clone());
            }
        }
        seen
    }

    /// Whether every slot is served.
    pub(crate) fn complete(&self) -> bool {
        let mut next: usize = 0;
        for (start, end, _) in &self.ranges {
            if usize::from(*start) != next {
                return false;
            }
            next = usize::from(*end) + 1;
        }
        next == SLOTS
    }
}

/// The primary a Sentinel group names for `master`, from a
/// `SENTINEL get-master-addr-by-name` reply (`[host, port]`; nil when unknown).
pub(crate) fn sentinel_primary(reply: &Value) -> Result<Option<Addr>, NodeFailure> {
    match reply {
        Value::Nil => Ok(None),
        Value::Array(items) => match items.as_slice() {
            [host, port] => Ok(Some(format!("{}:{}", text_of(host), text_of(port)))),
            _ => Err(unexpected(reply)),
        },
        other => Err(unexpected(other)),
    }
}

/// `template`'s connection details (password, database, TLS) for the server at `addr`.
pub(crate) fn info_at(
    template: &ConnectionInfo,
    addr: &str,
) -> Result<ConnectionInfo, NodeFailure> {
    let (host, port) = addr
        .rsplit_once(':')
        .and_then(|(h, p)| Some((h.to_owned(), p.parse::<u16>().ok()?)))
        .ok_or_else(|| NodeFailure::UnexpectedReply(format!("not an address: {addr}")))?;
    let addr = match template.addr() {
        #[cfg(feature = "tls-rustls")]
        ConnectionAddr::TcpTls {
            insecure,
            tls_params,
            ..
        } => ConnectionAddr::TcpTls {
            host,
            port,
            insecure: *insecure,
            tls_params: tls_params.clone(),
        },
        _ => ConnectionAddr::Tcp(host, port),
    };
    Ok(template.clone().set_addr(addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(start: i64, end: i64, port: i64) -> Value {
        Value::Array(vec![
            Value::Int(start),
            Value::Int(end),
            Value::Array(vec![
                Value::BulkString(b"127.0.0.1".to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ]),
        ])
    }

    #[test]
    fn slots_are_looked_up_by_range() {
        let reply = Value::Array(vec![
            range(5461, 10922, 7001),
            range(0, 5460, 7000),
            range(10923, 16383, 7002),
        ]);
        let slots = Slots::parse(&reply).expect("parses");
        assert!(slots.complete());
        assert_eq!(slots.owner(0), Some("127.0.0.1:7000"));
        assert_eq!(slots.owner(5461), Some("127.0.0.1:7001"));
        assert_eq!(slots.owner(16383), Some("127.0.0.1:7002"));
        assert_eq!(slots.first_slot_of("127.0.0.1:7002"), Some(10923));
        assert_eq!(slots.primaries().len(), 3);
        let partial = Slots::parse(&Value::Array(vec![range(0, 100, 7000)])).expect("parses");
        assert!(!partial.complete());
        assert_eq!(partial.owner(101), None);
    }

    #[test]
    fn sentinels_name_a_primary_or_none() {
        let reply = Value::Array(vec![
            Value::BulkString(b"10.0.0.5".to_vec()),
            Value::BulkString(b"6380".to_vec()),
        ]);
        assert_eq!(
            sentinel_primary(&reply).expect("ok"),
            Some("10.0.0.5:6380".into())
        );
        assert_eq!(sentinel_primary(&Value::Nil).expect("ok"), None);
        let template = redis::Client::open("redis://:pw@seed:1/3")
            .expect("url")
            .get_connection_info()
            .clone();
        let info = info_at(&template, "10.0.0.5:6380").expect("address");
        assert_eq!(info.addr().to_string(), "10.0.0.5:6380");
        assert_eq!(info.redis_settings().db(), 3);
    }
}
