//! Not part of the API: the coordinator over in-memory masters, so that
//! `benches/coordinator.rs` can measure redquorum's own cost without any network. Built only
//! with `--cfg redquorum_unsafe` (`RUSTFLAGS="--cfg redquorum_unsafe"`): a cfg, unlike a
//! feature, no dependent crate can switch on by accident. The masters are the unit tests'
//! simulated master (`Fake::memory`).

use std::sync::Arc;
use std::time::Duration;

use crate::config::validated::Timing;
use crate::protocol::quorum::{self, Request};
use crate::protocol::testing::Fake;
use crate::value::LockValue;

/// `n` in-memory masters and the coordinator's timing.
#[derive(Debug)]
pub struct MemoryQuorum {
    nodes: Arc<[Fake]>,
    timing: Timing,
}

impl MemoryQuorum {
    /// `n` empty masters, a 10 s ttl and a 50 ms node timeout.
    pub fn new(n: usize) -> Self {
        Self {
            nodes: (0..n).map(|_| Fake::memory()).collect(),
            timing: Timing {
                ttl: Duration::from_secs(10),
                drift: Duration::from_millis(102),
                node_timeout: Duration::from_millis(50),
                min_validity: Duration::from_secs(1),
            },
        }
    }

    /// One acquire round on `key` followed by the release of every master, as `try_lock`
    /// and `release` do: returns whether the lock was granted.
    pub async fn lock_and_release(&self, key: &str) -> bool {
        let req = Arc::new(Request::new(
            vec![key.to_owned()].into(),
            None,
            LockValue::random(),
            self.timing.ttl,
        ));
        let granted = quorum::acquire(&self.nodes, &req, self.timing, 1)
            .await
            .is_ok();
        quorum::release_all(&self.nodes, &req, self.timing.node_timeout).await;
        granted
    }
}
