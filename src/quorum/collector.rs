//! One task per client and runtime that sees through what rounds leave behind — answers that
//! arrive after a decision, the rest of a release — instead of a task spawned per lock.
//!
//! A round hands its leftovers over **without waking anyone**: under the collector's lock it
//! polls them once with the collector task's own waker, so the answers still to come wake
//! that task, and puts them in its set. Spawning a task per round cost an allocation, a trip
//! through the scheduler and often waking a parked worker thread (a system call), and each
//! of those tasks was woken again for every late answer; the collector is woken once for
//! the late answers that arrive together, and most handovers cost a lock and a poll.
//!
//! **One set per runtime.** A leftover holds timers (its round's deadline) of the runtime it
//! was made on, and a timer polled after its runtime shut down panics. So the leftovers of
//! each runtime are kept apart, polled only by that runtime's collector task and by
//! handovers made on it, and dropped with it: the task owns an [`Exit`] from the moment it
//! is spawned, which, when the runtime drops the task (polled or not), takes that runtime's
//! set away. A client used from one runtime after another (see `connection`'s docs on
//! runtimes) so never polls a dead runtime's leftover, and the next runtime's first handover
//! starts that runtime's task.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll, Waker};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use tokio::runtime::{Handle, Id};

type Leftover = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Where a client's rounds leave what must be seen through.
#[derive(Default)]
pub(crate) struct Collector {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    /// The tasks' wakers again, for `Drop`, which must not take `state` (the last leftover
    /// can drop the collector while a task polls it under that lock).
    wakers: Mutex<Vec<(Id, Waker)>>,
}

#[derive(Default)]
struct State {
    /// One set per runtime that handed leftovers over and has not shut down; few.
    runtimes: Vec<PerRuntime>,
}

/// The leftovers made on one runtime, and that runtime's collector task.
struct PerRuntime {
    runtime: Id,
    leftovers: FuturesUnordered<Leftover>,
    task: Task,
}

/// A runtime's collector task, as a handover sees it.
enum Task {
    /// Started, not polled yet: it will poll what is there.
    Starting,
    /// Running; the waker it last polled with.
    Running(Waker),
}

impl std::fmt::Debug for Collector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = lock(&self.shared);
        let leftovers: usize = state.runtimes.iter().map(|r| r.leftovers.len()).sum();
        f.debug_struct("Collector")
            .field("leftovers", &leftovers)
            .field("runtimes", &state.runtimes.len())
            .finish_non_exhaustive()
    }
}

fn lock(shared: &Shared) -> MutexGuard<'_, State> {
    shared.state.lock().unwrap_or_else(PoisonError::into_inner)
}

fn wakers(shared: &Shared) -> MutexGuard<'_, Vec<(Id, Waker)>> {
    shared.wakers.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Collector {
    /// Sees `leftover` through on the caller's runtime. It is polled once here, so whatever
    /// it had to send first is sent before this returns; from then on it wakes that
    /// runtime's collector task, not the caller. Without a tokio runtime there is nothing to
    /// run it on: it is dropped, and `false` returned.
    pub(crate) fn hand_over(&self, leftover: impl Future<Output = ()> + Send + 'static) -> bool {
        let Ok(handle) = Handle::try_current() else {
            return false;
        };
        let runtime = handle.id();
        let mut state = lock(&self.shared);
        // A set exists exactly while its runtime's task does (its exit removes it).
        let (at, start) = match state.runtimes.iter().position(|r| r.runtime == runtime) {
            Some(at) => (at, false),
            None => {
                state.runtimes.push(PerRuntime {
                    runtime,
                    leftovers: FuturesUnordered::new(),
                    task: Task::Starting,
                });
                (state.runtimes.len() - 1, true)
            }
        };
        let set = &mut state.runtimes[at];
        set.leftovers.push(Box::pin(leftover));
        // A task that has not run yet has no waker: whatever wakes meanwhile is queued in
        // the set, and its first poll takes it from there.
        let waker = match &set.task {
            Task::Running(waker) => waker.clone(),
            Task::Starting => Waker::noop().clone(),
        };
        poll_all(&mut set.leftovers, &mut Context::from_waker(&waker));
        drop(state);
        if start {
            // Outside the lock: a runtime that is shutting down drops the task inside
            // `spawn`, and its exit takes the lock.
            let exit = Exit {
                shared: Arc::downgrade(&self.shared),
                runtime,
            };
            drop(handle.spawn(run(exit)));
        }
        true
    }

    /// Leftovers not seen through yet, on every runtime.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.shared)
            .runtimes
            .iter()
            .map(|r| r.leftovers.len())
            .sum()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        // Each task ends when it finds the collector gone.
        let wakers = std::mem::take(&mut *wakers(&self.shared));
        for (_, waker) in wakers {
            waker.wake();
        }
    }
}

/// Polls every leftover that can make progress; finished ones leave the set.
fn poll_all(leftovers: &mut FuturesUnordered<Leftover>, cx: &mut Context<'_>) {
    while let Poll::Ready(Some(())) = leftovers.poll_next_unpin(cx) {}
}

/// A runtime's collector task: polls that runtime's leftovers whenever one of them wakes it.
/// Ends when the collector is gone. `exit` is an argument, not a local: it is dropped with
/// the task even if the task is never polled.
async fn run(exit: Exit) {
    let (shared, runtime) = (exit.shared.clone(), exit.runtime);
    std::future::poll_fn(|cx| {
        let Some(strong) = shared.upgrade() else {
            return Poll::Ready(());
        };
        {
            let mut wakers = wakers(&strong);
            match wakers.iter_mut().find(|(id, _)| *id == runtime) {
                Some((_, waker)) => waker.clone_from(cx.waker()),
                None => wakers.push((runtime, cx.waker().clone())),
            }
        }
        let mut state = lock(&strong);
        let Some(set) = state.runtimes.iter_mut().find(|r| r.runtime == runtime) else {
            return Poll::Ready(());
        };
        if !matches!(&set.task, Task::Running(w) if w.will_wake(cx.waker())) {
            set.task = Task::Running(cx.waker().clone());
        }
        poll_all(&mut set.leftovers, cx);
        Poll::Pending
    })
    .await;
    drop(exit);
}

/// Takes a runtime's set (and what it holds) away when its task ends or is dropped — its
/// runtime shut down — so that nothing of that runtime is polled again.
struct Exit {
    shared: Weak<Shared>,
    runtime: Id,
}

impl Drop for Exit {
    fn drop(&mut self) {
        let Some(shared) = self.shared.upgrade() else {
            return;
        };
        let gone = {
            let mut state = lock(&shared);
            state
                .runtimes
                .iter()
                .position(|r| r.runtime == self.runtime)
                .map(|at| state.runtimes.swap_remove(at))
        };
        wakers(&shared).retain(|(id, _)| *id != self.runtime);
        // Dropped, never polled, and outside the lock.
        drop(gone);
    }
}
