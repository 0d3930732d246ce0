//! The simulated master: for the coordinator's and the renewal task's unit tests (scripted
//! answers and delays), and for `benches/coordinator.rs` through [`internals`](crate::internals)
//! (a master that keeps its keys in a map and answers at once).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::error::node_failure::NodeFailure;
use crate::kind::Holder;
use crate::protocol::quorum::{Acquired, Request, Voter};

/// What a simulated master answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Act {
    Grant,
    Take,
    Fail,
    Never,
}

/// A simulated master: answers every call with its current act after its current delay
/// (both changeable while a test runs), and counts what it is asked. A [`memory`](Fake::memory)
/// master instead keeps the keys it grants and answers from them at once.
#[derive(Debug)]
pub(crate) struct Fake {
    behaviour: Mutex<(Act, Duration)>,
    /// A memory master's keys (key → value); `None`: answers as `behaviour` says.
    keys: Option<Mutex<HashMap<String, String>>>,
    pub(crate) acquires: AtomicUsize,
    pub(crate) extends: AtomicUsize,
    pub(crate) releases: AtomicUsize,
    pub(crate) fences: AtomicUsize,
    /// Size of every `extend_many` batch, in order.
    pub(crate) batches: Mutex<Vec<usize>>,
    /// What each renewal of an `extend_many` batch adds to its delay (a master runs a
    /// batch's extensions one after the other).
    per_renewal: Mutex<Duration>,
    /// Held while a batch runs: a master runs one batch after the other.
    serial: Arc<tokio::sync::Mutex<()>>,
}

impl Fake {
    pub(crate) fn new(act: Act, delay_ms: u64) -> Self {
        Self {
            behaviour: Mutex::new((act, Duration::from_millis(delay_ms))),
            keys: None,
            acquires: AtomicUsize::new(0),
            extends: AtomicUsize::new(0),
            releases: AtomicUsize::new(0),
            fences: AtomicUsize::new(0),
            batches: Mutex::new(Vec::new()),
            per_renewal: Mutex::new(Duration::ZERO),
            serial: Arc::default(),
        }
    }

    /// A master that grants a key only when absent, and extends, fences and releases only
    /// keys holding the request's value: a real master's contract, in memory, without delay.
    pub(crate) fn memory() -> Self {
        Self {
            keys: Some(Mutex::default()),
            ..Self::new(Act::Grant, 0)
        }
    }

    /// For a memory master: `f` on its keys; `None` for a scripted one.
    fn with_keys<T>(&self, f: impl FnOnce(&mut HashMap<String, String>) -> T) -> Option<T> {
        let keys = self.keys.as_ref()?;
        Some(f(&mut keys.lock().unwrap_or_else(PoisonError::into_inner)))
    }

    /// For a memory master: whether every key of `req` holds its value.
    fn holds(&self, req: &Request) -> Option<bool> {
        self.with_keys(|m| {
            req.keys
                .iter()
                .all(|k| m.get(k).map(String::as_str) == Some(req.value.as_str()))
        })
    }

    /// Makes each renewal of a batch cost `cost` more delay.
    pub(crate) fn set_per_renewal(&self, cost: Duration) {
        *self.per_renewal.lock().expect("not poisoned") = cost;
    }

    pub(crate) fn set(&self, act: Act, delay_ms: u64) {
        *self.behaviour.lock().expect("not poisoned") = (act, Duration::from_millis(delay_ms));
    }

    pub(crate) fn batch_sizes(&self) -> Vec<usize> {
        self.batches.lock().expect("not poisoned").clone()
    }

    /// A memory master's answer (`known`) at once, or else the scripted one.
    fn answer_or(
        &self,
        known: Option<bool>,
    ) -> impl Future<Output = Result<bool, NodeFailure>> + Send + use<> {
        let answer = self.answer();
        async move {
            match known {
                Some(known) => Ok(known),
                None => answer.await,
            }
        }
    }

    fn answer(&self) -> impl Future<Output = Result<bool, NodeFailure>> + Send + use<> {
        self.answer_after(Duration::ZERO)
    }

    fn answer_after(
        &self,
        more: Duration,
    ) -> impl Future<Output = Result<bool, NodeFailure>> + Send + use<> {
        let (act, delay) = *self.behaviour.lock().expect("not poisoned");
        let delay = delay + more;
        async move {
            tokio::time::sleep(delay).await;
            match act {
                Act::Grant => Ok(true),
                Act::Take => Ok(false),
                Act::Fail => Err(NodeFailure::Connection("refused".into())),
                Act::Never => std::future::pending().await,
            }
        }
    }
}

impl Voter for Fake {
    fn acquire(&self, req: &Request) -> impl Future<Output = Result<Acquired, NodeFailure>> + Send {
        self.acquires.fetch_add(1, Ordering::SeqCst);
        let token = self.acquires.load(Ordering::SeqCst) as u64;
        let memory = self.with_keys(|m| {
            if req.keys.iter().any(|k| m.contains_key(k)) {
                return Acquired::Taken(Holder::Lock, None);
            }
            for k in req.keys.iter() {
                m.insert(k.clone(), req.value.as_str().to_owned());
            }
            Acquired::Granted(0)
        });
        let answer = self.answer();
        async move {
            if let Some(acquired) = memory {
                return Ok(acquired);
            }
            Ok(if answer.await? {
                Acquired::Granted(token)
            } else {
                Acquired::Taken(Holder::Lock, None)
            })
        }
    }

    fn fence(
        &self,
        req: &Request,
        _: u64,
    ) -> impl Future<Output = Result<bool, NodeFailure>> + Send {
        self.fences.fetch_add(1, Ordering::SeqCst);
        self.answer_or(self.holds(req))
    }

    fn extend(&self, req: &Request) -> impl Future<Output = Result<bool, NodeFailure>> + Send {
        self.extends.fetch_add(1, Ordering::SeqCst);
        self.answer_or(self.holds(req))
    }

    fn release(&self, req: &Request) -> impl Future<Output = Result<u64, NodeFailure>> + Send {
        self.releases.fetch_add(1, Ordering::SeqCst);
        let memory = self.with_keys(|m| {
            let mut n = 0;
            for k in req.keys.iter() {
                if m.get(k).map(String::as_str) == Some(req.value.as_str()) {
                    m.remove(k);
                    n += 1;
                }
            }
            n
        });
        let answer = self.answer();
        async move {
            match memory {
                Some(n) => Ok(n),
                None => Ok(u64::from(answer.await?)),
            }
        }
    }

    fn extend_many(
        &self,
        reqs: &[Arc<Request>],
    ) -> impl Future<Output = Result<Vec<Result<bool, NodeFailure>>, NodeFailure>> + Send {
        self.batches.lock().expect("not poisoned").push(reqs.len());
        let memory: Option<Vec<Result<bool, NodeFailure>>> = self.keys.as_ref().map(|_| {
            reqs.iter()
                .map(|r| Ok(self.holds(r) == Some(true)))
                .collect()
        });
        let n = reqs.len();
        let cost = *self.per_renewal.lock().expect("not poisoned");
        let one = self.answer_after(cost * u32::try_from(n).unwrap_or(u32::MAX));
        let serial = self.serial.clone();
        async move {
            let _turn = serial.lock().await;
            if let Some(results) = memory {
                return Ok(results);
            }
            let answer = one.await?;
            Ok(vec![Ok(answer); n])
        }
    }
}
