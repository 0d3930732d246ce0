//! Reentrant locking by an explicit owner: [`Owner`] holds each lock once on the quorum and
//! counts its nested holds in the process.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::client::{LockOptions, Redlock};
use crate::error::Error;
use crate::keepalive::KeepAlive;
use crate::kind::LockKind;
use crate::lease::Lease;
use crate::lock::Lock;

/// An owner of reentrant locks: locking a resource this owner already holds succeeds at
/// once and nests; the lock is released on the quorum when the outermost hold ends.
///
/// The owner is a value, not a thread: clone it into every task that works on its behalf
/// (clones are the same owner), move it across tasks and threads. Get one from
/// [`Redlock::owner`]. Two different owners exclude each other exactly as two clients do.
///
/// **Where the count lives.** In this process, in the owner: the quorum sees one holder —
/// the owner's first acquisition — and nested holds never reach the masters. So reentrancy
/// is per owner value and per process: an owner cannot be shared with another process (its
/// holds there would be a second holder, refused). Locks an owner holds are kept alive
/// (renewed in the background, like [`Redlock::with_lock`]) until the outermost hold is
/// released, and every hold sees the same [`Lease`]: if the lock is lost, every nested
/// hold is told.
///
/// Reentrancy is per set of resources and kind: holding `["a", "b"]` does not make a lock
/// of `["a"]` reentrant (it is refused as held by another client), nor does a write hold
/// make a read hold of the same resource reentrant.
///
/// ```no_run
/// # async fn run(redlock: redquorum::Redlock) -> Result<(), redquorum::Error> {
/// let owner = redlock.owner();
/// let outer = owner.lock("ledger").await?; // acquired on the quorum
/// let inner = owner.lock("ledger").await?; // nested: at once, no round trip
/// assert_eq!(inner.depth(), 2);
/// inner.release().await?;                  // still held
/// outer.release().await?;                  // released on the quorum
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Owner {
    redlock: Redlock,
    holds: Arc<Mutex<HashMap<HoldKey, Arc<Slot>>>>,
}

impl fmt::Debug for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let held: Vec<HoldKey> = self.map().keys().cloned().collect();
        f.debug_struct("Owner").field("holds", &held).finish()
    }
}

/// What a hold is of: the sorted, de-duplicated resources and the kind.
type HoldKey = (Vec<String>, LockKind);

/// One lock of the owner: the quorum lock while held, and how deeply it is held.
#[derive(Default)]
struct Slot {
    state: tokio::sync::Mutex<Option<Shared>>,
}

struct Shared {
    lock: Lock,
    keep: KeepAlive,
    lease: Lease,
    depth: usize,
}

impl Owner {
    pub(crate) fn new(redlock: Redlock) -> Self {
        Self {
            redlock,
            holds: Arc::default(),
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<HoldKey, Arc<Slot>>> {
        self.holds.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Locks `resource` (a mutex, with the client's ttl and retry policy), or nests in this
    /// owner's hold of it.
    pub async fn lock(&self, resource: &str) -> Result<OwnedLock, Error> {
        self.lock_with([resource], LockOptions::new()).await
    }

    /// Locks `resources` with `options` (any kind), or nests in this owner's hold of the
    /// same resources and kind. A nested hold ignores `options`: it shares the outer hold's
    /// lock, ttl and lease.
    ///
    /// Fails with [`Error::Lost`] or [`Error::Expired`] when the owner's hold of these
    /// resources exists but is no longer valid: the outer holder must stop too.
    pub async fn lock_with<I, S>(
        &self,
        resources: I,
        options: LockOptions,
    ) -> Result<OwnedLock, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut names: Vec<String> = resources
            .into_iter()
            .map(|r| r.as_ref().to_owned())
            .collect();
        names.sort_unstable();
        names.dedup();
        let key: HoldKey = (names, options.kind_of());
        let slot = self.map().entry(key.clone()).or_default().clone();
        // Held across the acquisition: the owner's other tasks asking for the same lock wait
        // for it instead of racing it on the quorum (where they would meet our own key).
        let mut state = slot.state.lock().await;
        let lease = match &mut *state {
            Some(shared) => {
                shared.lease.check_held()?;
                shared.depth += 1;
                shared.lease.clone()
            }
            None => {
                let lock = self.redlock.lock_with(&key.0, options).await?;
                let keep = lock.keep_alive()?;
                let lease = keep.lease();
                *state = Some(Shared {
                    lock,
                    keep,
                    lease: lease.clone(),
                    depth: 1,
                });
                lease
            }
        };
        drop(state);
        Ok(OwnedLock {
            owner: self.clone(),
            key,
            slot,
            lease,
            handle: tokio::runtime::Handle::try_current().ok(),
            released: false,
        })
    }

    /// Runs `body` under a (possibly nested) hold of `resources`, released on every path;
    /// the body is cancelled if the lock is lost. As [`Redlock::with_lock`], with one `?`.
    pub async fn with_lock<I, S, F, Fut, T, E>(&self, resources: I, body: F) -> Result<T, E>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
        F: FnOnce(Lease) -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<Error>,
    {
        let hold = self.lock_with(resources, LockOptions::new()).await?;
        let lease = hold.lease();
        let watcher = lease.clone();
        let outcome = tokio::select! {
            biased;
            value = body(lease) => value,
            reason = watcher.lost() => Err(E::from(Error::Lost { reason })),
        };
        // Its error (the lock ran out) is the body's to see through the lease.
        let _ = hold.release().await;
        outcome
    }

    /// Ends one hold of `key`; the last one releases the lock on the quorum.
    async fn release_one(&self, key: &HoldKey, slot: &Arc<Slot>) -> Result<(), Error> {
        let mut state = slot.state.lock().await;
        let Some(shared) = &mut *state else {
            return Ok(());
        };
        shared.depth = shared.depth.saturating_sub(1);
        if shared.depth > 0 {
            return Ok(());
        }
        let Some(Shared { lock, keep, .. }) = state.take() else {
            return Ok(());
        };
        drop(state);
        {
            let mut map = self.map();
            if map.get(key).is_some_and(|s| Arc::ptr_eq(s, slot)) && Arc::strong_count(slot) <= 2 {
                map.remove(key);
            }
        }
        drop(keep);
        lock.release().await.map(|_| ())
    }
}

/// One hold of an [`Owner`]'s reentrant lock. Dropping it without
/// [`release`](OwnedLock::release) ends the hold from a background task.
#[must_use = "dropping an OwnedLock ends the hold at once; keep it for the critical section"]
pub struct OwnedLock {
    owner: Owner,
    key: HoldKey,
    slot: Arc<Slot>,
    lease: Lease,
    /// The runtime the hold was taken on: a drop on a thread without a runtime ends the hold
    /// there (as a lock's `Held` state does). Ending it needs the slot's async lock, so it
    /// cannot be done in `Drop` itself.
    handle: Option<tokio::runtime::Handle>,
    released: bool,
}

impl fmt::Debug for OwnedLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedLock")
            .field("resources", &self.key.0)
            .field("kind", &self.key.1)
            .field("remaining", &self.remaining())
            .finish_non_exhaustive()
    }
}

impl OwnedLock {
    /// The lease shared by every hold of this lock: validity left, loss signal, checks.
    pub fn lease(&self) -> Lease {
        self.lease.clone()
    }

    /// The resources held.
    pub fn resources(&self) -> &[String] {
        &self.key.0
    }

    /// The lock's current deadline (renewals push it back).
    pub fn deadline(&self) -> Instant {
        self.lease.deadline()
    }

    /// Validity left; zero once lost.
    pub fn remaining(&self) -> Duration {
        self.lease.remaining()
    }

    /// The fencing token of the owner's acquisition, when fenced.
    pub fn fencing_token(&self) -> Option<u64> {
        self.lease.fencing_token()
    }

    /// How many holds of this lock the owner has now (1 for the outermost alone).
    pub fn depth(&self) -> usize {
        self.slot
            .state
            .try_lock()
            .ok()
            .and_then(|s| s.as_ref().map(|s| s.depth))
            .unwrap_or(1)
    }

    /// Ends this hold; the outermost one releases the lock on the quorum (cancellation-safe,
    /// as [`Lock::release`]). Returns the release's error when the lock had expired or was
    /// lost before the outermost hold ended.
    pub async fn release(mut self) -> Result<(), Error> {
        self.released = true;
        let (owner, key, slot) = (self.owner.clone(), self.key.clone(), self.slot.clone());
        // As `Lock::release`: the work is handed to a task before the first await, so a
        // dropped caller never leaves the count (or the lock) behind.
        match tokio::spawn(async move { owner.release_one(&key, &slot).await }).await {
            Ok(result) => result,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Ok(()),
        }
    }
}

impl Drop for OwnedLock {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let (owner, key, slot) = (self.owner.clone(), self.key.clone(), self.slot.clone());
        // The runtime of the dropping thread if it has one, else the one the hold was taken
        // on. With neither, the count stays up and the keep-alive renews on: say so.
        let Some(handle) = tokio::runtime::Handle::try_current()
            .ok()
            .or_else(|| self.handle.clone())
        else {
            tracing::warn!(
                resources = ?self.key.0,
                "an OwnedLock was dropped with no tokio runtime to end its hold on"
            );
            return;
        };
        handle.spawn(async move {
            let _ = owner.release_one(&key, &slot).await;
        });
    }
}

// Reentrant owners; the rest of `Redlock` is in `client.rs`.
impl Redlock {
    /// A new owner of reentrant locks: see [`Owner`].
    pub fn owner(&self) -> Owner {
        Owner::new(self.clone())
    }
}
