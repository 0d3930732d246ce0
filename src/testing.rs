//! Simulated masters for the coordinator's and the renewal task's unit tests.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::failure::NodeFailure;
use crate::kind::Holder;
use crate::quorum::{Acquired, Request, Voter};

/// What a simulated master answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Act {
    Grant,
    Take,
    Fail,
    Never,
}

/// A simulated master: answers every call with its current act after its current delay
/// (both changeable while a test runs), and counts what it is asked.
#[derive(Debug)]
pub(crate) struct Fake {
    behaviour: Mutex<(Act, Duration)>,
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
            acquires: AtomicUsize::new(0),
            extends: AtomicUsize::new(0),
            releases: AtomicUsize::new(0),
            fences: AtomicUsize::new(0),
            batches: Mutex::new(Vec::new()),
            per_renewal: Mutex::new(Duration::ZERO),
            serial: Arc::default(),
        }
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
    fn acquire(&self, _: &Request) -> impl Future<Output = Result<Acquired, NodeFailure>> + Send {
        self.acquires.fetch_add(1, Ordering::SeqCst);
        let token = self.acquires.load(Ordering::SeqCst) as u64;
        let answer = self.answer();
        async move {
            Ok(if answer.await? {
                Acquired::Granted(token)
            } else {
                Acquired::Taken(Holder::Lock)
            })
        }
    }

    fn fence(&self, _: &Request, _: u64) -> impl Future<Output = Result<bool, NodeFailure>> + Send {
        self.fences.fetch_add(1, Ordering::SeqCst);
        self.answer()
    }

    fn extend(&self, _: &Request) -> impl Future<Output = Result<bool, NodeFailure>> + Send {
        self.extends.fetch_add(1, Ordering::SeqCst);
        self.answer()
    }

    fn release(&self, _: &Request) -> impl Future<Output = Result<u64, NodeFailure>> + Send {
        self.releases.fetch_add(1, Ordering::SeqCst);
        let answer = self.answer();
        async move { Ok(u64::from(answer.await?)) }
    }

    fn extend_many(
        &self,
        reqs: &[Arc<Request>],
    ) -> impl Future<Output = Result<Vec<Result<bool, NodeFailure>>, NodeFailure>> + Send {
        self.batches.lock().expect("not poisoned").push(reqs.len());
        let n = reqs.len();
        let cost = *self.per_renewal.lock().expect("not poisoned");
        let one = self.answer_after(cost * u32::try_from(n).unwrap_or(u32::MAX));
        let serial = self.serial.clone();
        async move {
            let _turn = serial.lock().await;
            let answer = one.await?;
            Ok(vec![Ok(answer); n])
        }
    }
}
