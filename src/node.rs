//! One Redis master: its name, its connection, and the calls the members, the restart guard
//! and the health checks make on it.

use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use crate::connection::{Connection, Live, Target};
use crate::failure::{NodeFailure, text_of, unexpected};
use crate::quorum::Collector;

/// A master, connected on first use.
pub(crate) struct Node {
    index: usize,
    name: String,
    conn: Arc<Connection>,
    /// The connection that carries the renewal task's batches (see
    /// [`renewal_connection`](Node::renewal_connection)), made on first use.
    renewal: Arc<Connection>,
    /// Used in the first master only: the client's collector of what rounds leave behind.
    collector: Collector,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("index", &self.index)
            .field("url", &self.name)
            .finish_non_exhaustive()
    }
}

impl Node {
    pub(crate) fn new(
        index: usize,
        name: String,
        target: Target,
        connect_timeout: Duration,
    ) -> Self {
        Self {
            index,
            name,
            conn: Arc::new(Connection::new(target.clone(), connect_timeout)),
            renewal: Arc::new(Connection::new(target, connect_timeout)),
            collector: Collector::default(),
        }
    }

    /// Where rounds leave their answers still to come, and the rest of a release.
    pub(crate) fn collector(&self) -> &Collector {
        &self.collector
    }

    /// Position in the configured list.
    pub(crate) fn index(&self) -> usize {
        self.index
    }

    /// The node's URL with its password redacted.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// The connection, for calls that need its generation.
    pub(crate) fn connection(&self) -> &Arc<Connection> {
        &self.conn
    }

    /// The connection of the renewal task's batches, apart from the one that carries
    /// acquisitions and releases: a master runs one connection's commands in order, so a
    /// batch of thousands of extensions on the shared connection would hold back every
    /// acquisition sent after it until the whole batch has run. On a connection of its own
    /// the master interleaves the batch with the other connection's commands (it reads at
    /// most 16 KiB of one connection's commands per turn of its event loop), and a `WAIT`
    /// after a batch blocks only the renewals.
    ///
    /// Releases stay on the other connection, so the order between a lock's release and an
    /// extension of it still in flight (one that outlived its node timeout) is not kept on
    /// the master; it need not be: an extension is value-checked and never recreates a key,
    /// so one that runs after the delete changes nothing (DESIGN.md §2.2), and the renewal
    /// gate keeps any extension from being *sent* once a release has begun.
    pub(crate) fn renewal_connection(&self) -> &Arc<Connection> {
        &self.renewal
    }

    /// The live connection, connecting first if needed.
    pub(crate) async fn live(&self) -> Result<Live, NodeFailure> {
        self.conn.get().await
    }

    /// Sends one command on `live`.
    pub(crate) async fn query_on(
        &self,
        live: &Live,
        cmd: &redis::Cmd,
    ) -> Result<Value, NodeFailure> {
        self.conn
            .run_on(live, |mut c| async move { cmd.query_async(&mut c).await })
            .await
    }

    /// Sends an arbitrary command (health checks, probes), bounded by `timeout` including
    /// the connection.
    pub(crate) async fn query(
        &self,
        cmd: &redis::Cmd,
        timeout: Duration,
    ) -> Result<Value, NodeFailure> {
        let call = async {
            let live = self.live().await?;
            self.query_on(&live, cmd).await
        };
        tokio::time::timeout(timeout, call)
            .await
            .map_err(|_| NodeFailure::Timeout(timeout))?
    }

    /// `INFO <section>` as text.
    pub(crate) async fn info_on(&self, live: &Live, section: &str) -> Result<Info, NodeFailure> {
        let reply = self.query_on(live, redis::cmd("INFO").arg(section)).await?;
        Info::from_reply(&reply)
    }

    /// `CONFIG GET <name>`: `None` when the server does not allow it.
    pub(crate) async fn config_on(&self, live: &Live, name: &str) -> Option<String> {
        let reply = self
            .query_on(live, redis::cmd("CONFIG").arg("GET").arg(name))
            .await
            .ok()?;
        config_value(&reply)
    }
}

/// The value in a `CONFIG GET <name>` reply (RESP2 array or RESP3 map); `None` for an
/// error (a server that refuses `CONFIG`) or no such setting.
pub(crate) fn config_value(reply: &Value) -> Option<String> {
    match reply {
        Value::Array(items) => items.get(1).map(text_of),
        Value::Map(pairs) => pairs.first().map(|(_, v)| text_of(v)),
        _ => None,
    }
}

/// The text of an `INFO` reply, with its fields.
#[derive(Debug, Clone)]
pub(crate) struct Info(String);

impl Info {
    pub(crate) fn from_reply(reply: &Value) -> Result<Self, NodeFailure> {
        match reply {
            Value::BulkString(bytes) => Ok(Self(String::from_utf8_lossy(bytes).into_owned())),
            Value::VerbatimString { text, .. } => Ok(Self(text.clone())),
            other => Err(unexpected(other)),
        }
    }

    /// The value of `field` (`field:value` lines).
    pub(crate) fn field(&self, name: &str) -> Option<&str> {
        self.0
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    }

    /// A numeric field.
    pub(crate) fn number(&self, name: &str) -> Option<u64> {
        self.field(name)?.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields() {
        let info = Info::from_reply(&Value::BulkString(
            b"# Server\r\nrun_id:abc\r\nuptime_in_seconds:42\r\n".to_vec(),
        ))
        .expect("text");
        assert_eq!(info.field("run_id"), Some("abc"));
        assert_eq!(info.number("uptime_in_seconds"), Some(42));
        assert_eq!(info.field("missing"), None);
        assert!(Info::from_reply(&Value::Int(1)).is_err());
    }
}
