//! `LinkSet`: one client's links to every node of a cluster.

use std::fmt;

use super::fault::{Direction, Fault};
use super::link::LinkProxy;
use crate::TestkitError;

/// One [`LinkProxy`] per node, in node order: the network as seen by one client.
///
/// Created by [`LocalCluster::links`](crate::LocalCluster::links) (random seed) or
/// [`LocalCluster::links_seeded`](crate::LocalCluster::links_seeded). Give each simulated
/// client its own set so that faults can differ per client. Dropping the set stops its
/// listeners and resets its connections.
pub struct LinkSet {
    links: Vec<LinkProxy>,
    seed: u64,
}

impl fmt::Debug for LinkSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LinkSet")
            .field("seed", &self.seed)
            .field("links", &self.links)
            .finish()
    }
}

impl LinkSet {
    /// Starts one proxy in front of each port.
    pub(crate) fn start(
        ports: &[u16],
        password: Option<&str>,
        seed: u64,
    ) -> Result<Self, TestkitError> {
        let mut links = Vec::with_capacity(ports.len());
        for (node, &port) in ports.iter().enumerate() {
            let link_seed = seed ^ (node as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            // On error the links started so far are stopped by `LinkSet`'s drop below.
            let link = LinkProxy::start(node, port, password.map(str::to_owned), link_seed);
            match link {
                Ok(link) => links.push(link),
                Err(e) => {
                    drop(Self { links, seed });
                    return Err(e);
                }
            }
        }
        Ok(Self { links, seed })
    }

    /// The proxies' URLs (`redis://[:password@]127.0.0.1:PORT`), in node order.
    pub fn urls(&self) -> Vec<String> {
        self.links.iter().map(LinkProxy::url).collect()
    }

    /// The link to node `i`.
    ///
    /// # Panics
    /// If `i >= self.len()`, like slice indexing.
    pub fn link(&self, i: usize) -> &LinkProxy {
        &self.links[i]
    }

    /// All links, in node order.
    pub fn links(&self) -> &[LinkProxy] {
        &self.links
    }

    /// Number of links (= nodes).
    pub fn len(&self) -> usize {
        self.links.len()
    }

    /// True if the cluster has no nodes.
    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// The seed the jitter of this set is drawn from; log it to reproduce a failure with
    /// [`LocalCluster::links_seeded`](crate::LocalCluster::links_seeded).
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Sets the same fault on every link.
    pub fn set_all(&self, dir: Direction, fault: Fault) {
        for link in &self.links {
            link.set(dir, fault);
        }
    }

    /// Resets the connections of every link (see [`LinkProxy::reset_connections`]).
    pub fn reset_all(&self) {
        for link in &self.links {
            link.reset_connections();
        }
    }
}

impl Drop for LinkSet {
    fn drop(&mut self) {
        for link in &self.links {
            link.shared().stop();
        }
    }
}
