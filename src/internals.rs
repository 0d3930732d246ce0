//! Not part of the API: the coordinator over in-memory masters, so that
//! `benches/coordinator.rs` can measure redquorum's own cost without any network. Built only
//! with the `internals` feature.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::config::validated::Timing;
use crate::error::node_failure::NodeFailure;
use crate::kind::Holder;
use crate::protocol::quorum::{self, Acquired, Request, Voter};
use crate::value::LockValue;

/// A master that keeps its keys in a map and answers at once.
#[derive(Debug, Default)]
pub struct MemoryMaster {
    keys: Mutex<HashMap<String, String>>,
}

impl MemoryMaster {
    fn with_keys<T>(&self, f: impl FnOnce(&mut HashMap<String, String>) -> T) -> T {
        f(&mut self.keys.lock().unwrap_or_else(PoisonError::into_inner))
    }

    fn holds(&self, req: &Request) -> bool {
        self.with_keys(|m| {
            req.keys
                .iter()
                .all(|k| m.get(k).map(String::as_str) == Some(req.value.as_str()))
        })
    }
}

impl Voter for MemoryMaster {
    async fn acquire(&self, req: &Request) -> Result<Acquired, NodeFailure> {
        Ok(self.with_keys(|m| {
            if req.keys.iter().any(|k| m.contains_key(k)) {
                return Acquired::Taken(Holder::Lock);
            }
            for k in req.keys.iter() {
                m.insert(k.clone(), req.value.as_str().to_owned());
            }
            Acquired::Granted(0)
        }))
    }

    async fn fence(&self, req: &Request, _: u64) -> Result<bool, NodeFailure> {
        Ok(self.holds(req))
    }

    async fn extend(&self, req: &Request) -> Result<bool, NodeFailure> {
        Ok(self.holds(req))
    }

    async fn release(&self, req: &Request) -> Result<u64, NodeFailure> {
        Ok(self.with_keys(|m| {
            let mut n = 0;
            for k in req.keys.iter() {
                if m.get(k).map(String::as_str) == Some(req.value.as_str()) {
                    m.remove(k);
                    n += 1;
                }
            }
            n
        }))
    }

    async fn extend_many(
        &self,
        reqs: &[Arc<Request>],
    ) -> Result<Vec<Result<bool, NodeFailure>>, NodeFailure> {
        Ok(reqs.iter().map(|r| Ok(self.holds(r))).collect())
    }
}

/// `n` in-memory masters and the coordinator's timing.
#[derive(Debug)]
pub struct MemoryQuorum {
    nodes: Arc<[MemoryMaster]>,
    timing: Timing,
}

impl MemoryQuorum {
    /// `n` empty masters, a 10 s ttl and a 50 ms node timeout.
    pub fn new(n: usize) -> Self {
        Self {
            nodes: (0..n).map(|_| MemoryMaster::default()).collect(),
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
