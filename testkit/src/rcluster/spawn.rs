//! Starting one cluster node: its ports, its proxies and its `redis-server` options.
//!
//! Every node listens on three ports: plain text for clients (and the test kit), TLS, and
//! the cluster bus (`cluster-port`, picked explicitly: the default `port + 10000`
//! overflows for the high ports free-port probing hands out). Replication runs over TLS
//! (`tls-replication`, `tls-cluster`), and each node announces a fault proxy in front of
//! its TLS port as its TLS port (`cluster-announce-tls-port`). Replicas connect to the
//! announced TLS port of their primary, so all replication traffic *into* a node's
//! replicas crosses that node's replication proxy, while plain-text clients are told the
//! plain port (`cluster-announce-port`) and never touch it: a fault on the proxy cuts a
//! primary off from its replicas only. See `RedisCluster::partition_replicas`.

use std::path::Path;
use std::time::Duration;

use crate::node::{self, Slot};
use crate::ports::free_ports;
use crate::proxy::LinkProxy;
use crate::server::NodeSpec;
use crate::{TestkitError, TlsCerts};

/// What a node is started with besides its `NodeSpec`.
#[derive(Debug)]
pub(crate) struct NodeOptions<'a> {
    pub(crate) certs: &'a TlsCerts,
    pub(crate) node_timeout: Duration,
    pub(crate) client_proxy: bool,
    pub(crate) password: Option<&'a str>,
    pub(crate) extra_args: &'a [String],
}

/// A node's ports besides its plain one, and its proxies. Dropping it stops the proxies.
#[derive(Debug)]
pub(crate) struct NodeNet {
    pub(crate) tls_port: u16,
    pub(crate) bus_port: u16,
    /// In front of the TLS port; the node announces it, so its replicas sync through it.
    pub(crate) replication: LinkProxy,
    /// In front of the plain port, announced to clients when client proxies are on.
    pub(crate) client: Option<LinkProxy>,
}

impl Drop for NodeNet {
    fn drop(&mut self) {
        self.replication.shared().stop();
        if let Some(client) = &self.client {
            client.shared().stop();
        }
    }
}

/// Starts one node on fresh ports (retrying all of them on a lost port race) and waits
/// until it answers `PING`.
pub(crate) fn start(
    mut spec: NodeSpec,
    opts: &NodeOptions<'_>,
) -> Result<(Slot, NodeNet), TestkitError> {
    let mut net: Option<NodeNet> = None;
    let server = node::start_fresh_with(&mut spec, |spec| {
        // The previous attempt's proxies point at ports that are being given up.
        drop(net.take());
        let [port, tls_port, bus_port] = free_ports()?;
        let replication = LinkProxy::start(spec.index, tls_port, None, rand::random())?;
        let client = if opts.client_proxy {
            let password = opts.password.map(str::to_owned);
            match LinkProxy::start(spec.index, port, password, rand::random()) {
                Ok(client) => Some(client),
                Err(e) => {
                    replication.shared().stop();
                    return Err(e);
                }
            }
        } else {
            None
        };
        let fresh = NodeNet {
            tls_port,
            bus_port,
            replication,
            client,
        };
        spec.port = port;
        spec.extra_args = args(&spec.dir, &fresh, port, opts);
        net = Some(fresh);
        Ok(())
    })?;
    let net = net.ok_or_else(|| {
        TestkitError::os(
            "starting a cluster node",
            std::io::Error::other("the node started without ports"),
        )
    })?;
    Ok((Slot::new(spec, server), net))
}

fn args(dir: &Path, net: &NodeNet, port: u16, opts: &NodeOptions<'_>) -> Vec<String> {
    let announced_port = net.client.as_ref().map_or(port, LinkProxy::port);
    let file = |p: std::path::PathBuf| p.to_string_lossy().into_owned();
    let mut args: Vec<String> = [
        ("cluster-enabled", "yes".to_owned()),
        ("cluster-config-file", file(dir.join("nodes.conf"))),
        (
            "cluster-node-timeout",
            opts.node_timeout.as_millis().to_string(),
        ),
        ("cluster-port", net.bus_port.to_string()),
        ("cluster-announce-ip", "127.0.0.1".to_owned()),
        // Needed even without client proxies: with `cluster-announce-tls-port` set, a
        // node announces no plain-text port unless this is set too, and plain-text
        // clients would then be sent to the TLS (replication) port.
        ("cluster-announce-port", announced_port.to_string()),
        (
            "cluster-announce-tls-port",
            net.replication.port().to_string(),
        ),
        // A replica may always be promoted, however long it was cut off from its
        // primary: the tests that partition replication then fail over want exactly that.
        ("cluster-replica-validity-factor", "0".to_owned()),
        // Replicas stay with the primary a test gave them.
        ("cluster-allow-replica-migration", "no".to_owned()),
        ("tls-port", net.tls_port.to_string()),
        ("tls-cluster", "yes".to_owned()),
        ("tls-replication", "yes".to_owned()),
        ("tls-cert-file", file(opts.certs.server_cert_path())),
        ("tls-key-file", file(opts.certs.server_key_path())),
        ("tls-ca-cert-file", file(opts.certs.ca_cert_path())),
        ("tls-auth-clients", "no".to_owned()),
        // Full syncs start at once instead of waiting 5 s for more replicas.
        ("repl-diskless-sync-delay", "0".to_owned()),
    ]
    .into_iter()
    .flat_map(|(name, value)| [format!("--{name}"), value])
    .collect();
    if let Some(pw) = opts.password {
        args.extend(["--masterauth".to_owned(), pw.to_owned()]);
    }
    args.extend(opts.extra_args.iter().cloned());
    args
}
