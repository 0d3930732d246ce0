//! One task per client that sees through what rounds leave behind — answers that arrive
//! after a decision, the rest of a release — instead of a task spawned per lock.
//!
//! A round hands its leftovers over **without waking anyone**: under the collector's lock it
//! polls them once with the collector task's own waker, so the answers still to come wake
//! that task, and puts them in its set. Spawning a task per round cost an allocation, a trip
//! through the scheduler and often waking a parked worker thread (a system call), and each
//! of those tasks was woken again for every late answer; the collector is woken once for
//! the late answers that arrive together, and most handovers cost a lock and a poll.
//!
//! The collector task is started on the first handover, on the runtime of that caller, and
//! ends with the collector; if that runtime goes away first, what it held is dropped (as
//! spawned tasks are) and the next handover starts a new one.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll, Waker};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use futures::task::AtomicWaker;

type Leftover = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Where a client's rounds leave what must be seen through.
#[derive(Default)]
pub(crate) struct Collector {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// The task's waker again, for `Drop`, which must not take the lock (the last leftover
    /// can drop the collector while the task polls it under the lock).
    task_waker: AtomicWaker,
}

#[derive(Default)]
struct State {
    leftovers: FuturesUnordered<Leftover>,
    task: Task,
}

/// The collector task, as a handover sees it.
#[derive(Default)]
enum Task {
    /// Not running: never started, or its runtime went away.
    #[default]
    Absent,
    /// Started, not polled yet: it will poll what is there.
    Starting,
    /// Running; the waker it last polled with.
    Running(Waker),
}

impl std::fmt::Debug for Collector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = lock(&self.shared);
        f.debug_struct("Collector")
            .field("leftovers", &state.leftovers.len())
            .finish_non_exhaustive()
    }
}

fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    shared.state.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Collector {
    /// Sees `leftover` through. It is polled once here, so whatever it had to send first is
    /// sent before this returns; from then on it wakes the collector task, not the caller.
    /// Without a tokio runtime there is nothing to run it on: it is dropped, and `false`
    /// returned.
    pub(crate) fn hand_over(&self, leftover: impl Future<Output = ()> + Send + 'static) -> bool {
        let mut state = lock(&self.shared);
        if matches!(state.task, Task::Absent) {
            let Ok(handle) = tokio::runtime::Handle::try_current() else {
                return false;
            };
            state.task = Task::Starting;
            handle.spawn(run(Arc::downgrade(&self.shared)));
        }
        state.leftovers.push(Box::pin(leftover));
        // A task that has not run yet has no waker: whatever wakes meanwhile is queued in
        // the set, and its first poll takes it from there.
        let waker = match &state.task {
            Task::Running(waker) => waker.clone(),
            _ => Waker::noop().clone(),
        };
        poll_all(&mut state.leftovers, &mut Context::from_waker(&waker));
        true
    }

    /// Leftovers not seen through yet.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.shared).leftovers.len()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        // The task ends when it finds the collector gone.
        self.shared.task_waker.wake();
    }
}

/// Polls every leftover that can make progress; finished ones leave the set.
fn poll_all(leftovers: &mut FuturesUnordered<Leftover>, cx: &mut Context<'_>) {
    while let Poll::Ready(Some(())) = leftovers.poll_next_unpin(cx) {}
}

/// The collector task: polls the leftovers whenever one of them wakes it. Ends when the
/// collector is gone and nothing is left.
async fn run(shared: Weak<Shared>) {
    let _exit = Exit(shared.clone());
    std::future::poll_fn(|cx| {
        let Some(strong) = shared.upgrade() else {
            return Poll::Ready(());
        };
        strong.task_waker.register(cx.waker());
        let mut state = lock(&strong);
        if !matches!(&state.task, Task::Running(w) if w.will_wake(cx.waker())) {
            state.task = Task::Running(cx.waker().clone());
        }
        poll_all(&mut state.leftovers, cx);
        Poll::Pending
    })
    .await;
}

/// Marks the task gone when it is dropped (its runtime shut down), with what it held.
struct Exit(Weak<Shared>);

impl Drop for Exit {
    fn drop(&mut self) {
        if let Some(shared) = self.0.upgrade() {
            let mut state = lock(&shared);
            state.task = Task::Absent;
            state.leftovers.clear();
        }
    }
}
