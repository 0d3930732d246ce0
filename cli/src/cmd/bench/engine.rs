//! Runs one workload: redquorum and the floor measured in alternating time slices, by the
//! same workers, so that whatever else the machine does hits both alike.
//!
//! A measurement is a sequence of rounds; each round is one slice of redquorum and one of
//! the floor (their order alternates from round to round). In a slice every worker runs
//! cycles of that system until the slice's time is up or its share of `--ops` is done;
//! then all workers meet at a barrier. A system's throughput is its cycles over the time of
//! its own slices.
//!
//! With a fleet (`--clients K`) every client's workers run on that client's runtime, and
//! the slices are the fleet's: all clients run redquorum, then all run the floor.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use indicatif::ProgressBar;
use tokio::sync::Barrier;
use tokio::time::Instant;

use super::fleet::Member;
use super::record::Recorder;
use super::workload::{System, Worker, Workload};

/// How long a measurement runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    pub(crate) workers: usize,
    /// Measured cycles per system.
    pub(crate) ops: Option<u64>,
    /// Measured time, both systems together.
    pub(crate) duration: Option<Duration>,
    pub(crate) warmup: Duration,
    /// Longest slice.
    pub(crate) slice: Duration,
    /// Bound on cleanup calls at the end.
    pub(crate) node_timeout: Duration,
}

/// What a measurement found, per system (indexed by [`System`]).
#[derive(Debug)]
pub(crate) struct Measured {
    /// Every client's workers together.
    pub(crate) recorders: [Recorder; 2],
    /// Each client's workers, in client order.
    pub(crate) clients: Vec<[Recorder; 2]>,
    pub(crate) elapsed: [Duration; 2],
}

/// What the workers do in the next slice.
#[derive(Debug, Clone, Copy)]
struct Slice {
    system: System,
    deadline: Instant,
    quota: Option<u64>,
    record: bool,
    stop: bool,
}

struct Shared {
    slice: Mutex<Slice>,
    taken: AtomicU64,
    barrier: Barrier,
}

impl Shared {
    fn slice(&self) -> Slice {
        *self.slice.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Measures `workload` per `plan`, with `plan.workers` workers per client. `hold` is called
/// with `true` when the measured part starts (after the warm-up) and `false` when it ends:
/// it pauses and resumes a master.
pub(crate) async fn measure(
    clients: &[Member],
    workload: Workload,
    plan: Plan,
    progress: &ProgressBar,
    hold: &(dyn Fn(bool) + Sync),
) -> Measured {
    let shared = Arc::new(Shared {
        slice: Mutex::new(Slice {
            system: System::Redquorum,
            deadline: Instant::now(),
            quota: None,
            record: false,
            stop: false,
        }),
        taken: AtomicU64::new(0),
        barrier: Barrier::new(clients.len() * plan.workers + 1),
    });
    // Worker ids are unique across the fleet: they make each worker's keys its own.
    let workers: Vec<Vec<_>> = clients
        .iter()
        .enumerate()
        .map(|(c, client)| {
            (0..plan.workers)
                .map(|i| {
                    let worker = Worker::new(client.ctx.clone(), workload, c * plan.workers + i);
                    client
                        .handle
                        .spawn(work(worker, shared.clone(), plan.node_timeout))
                })
                .collect()
        })
        .collect();

    let mut run = Coordinator {
        shared: &shared,
        plan,
    };
    run.warm_up().await;
    hold(true);
    let elapsed = run.measured(progress).await;
    hold(false);
    run.set(Slice {
        system: System::Redquorum,
        deadline: Instant::now(),
        quota: None,
        record: false,
        stop: true,
    });
    shared.barrier.wait().await;

    let mut recorders = [Recorder::default(), Recorder::default()];
    let mut per_client = Vec::with_capacity(clients.len());
    for client in workers {
        let mut theirs = [Recorder::default(), Recorder::default()];
        for worker in client {
            // A worker task only ends by returning; a panic in one is a bug worth seeing.
            let mine = worker
                .await
                .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
            for (total, part) in theirs.iter_mut().zip(&mine) {
                total.merge(part);
            }
        }
        for (total, part) in recorders.iter_mut().zip(&theirs) {
            total.merge(part);
        }
        per_client.push(theirs);
    }
    Measured {
        recorders,
        clients: per_client,
        elapsed,
    }
}

struct Coordinator<'a> {
    shared: &'a Shared,
    plan: Plan,
}

impl Coordinator<'_> {
    fn set(&self, slice: Slice) {
        *self
            .shared
            .slice
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = slice;
        self.shared.taken.store(0, Ordering::SeqCst);
    }

    /// Runs one slice and returns its wall time and the cycles started in it.
    async fn slice(
        &self,
        system: System,
        length: Duration,
        quota: Option<u64>,
        record: bool,
    ) -> (Duration, u64) {
        let started = Instant::now();
        self.set(Slice {
            system,
            deadline: started + length,
            quota,
            record,
            stop: false,
        });
        self.shared.barrier.wait().await; // start
        self.shared.barrier.wait().await; // every worker is done
        let taken = self.shared.taken.load(Ordering::SeqCst);
        (started.elapsed(), quota.map_or(taken, |q| taken.min(q)))
    }

    async fn warm_up(&mut self) {
        let until = Instant::now() + self.plan.warmup;
        let mut round = 0;
        while Instant::now() < until {
            for system in order(round) {
                let left = until.saturating_duration_since(Instant::now());
                self.slice(system, left.min(self.plan.slice), None, false)
                    .await;
            }
            round += 1;
        }
    }

    async fn measured(&mut self, progress: &ProgressBar) -> [Duration; 2] {
        let plan = self.plan;
        let per_slice = plan.ops.map(|n| (n / 10).max(plan.workers as u64).max(1));
        progress.set_length(match (plan.ops, plan.duration) {
            (Some(n), _) => 2 * n,
            (None, Some(d)) => u64::try_from(d.as_millis()).unwrap_or(u64::MAX),
            (None, None) => 0,
        });
        progress.set_position(0);
        let mut elapsed = [Duration::ZERO; 2];
        let mut done = [0u64; 2];
        let mut round = 0;
        loop {
            for system in order(round) {
                let i = system as usize;
                let quota = match (plan.ops, per_slice) {
                    (Some(n), Some(_)) if done[i] >= n => continue,
                    (Some(n), Some(per)) => Some(per.min(n - done[i])),
                    _ => None,
                };
                let length = match plan.duration {
                    Some(d) => d
                        .saturating_sub(elapsed[0] + elapsed[1])
                        .min(plan.slice)
                        .max(Duration::from_millis(1)),
                    None => plan.slice,
                };
                let (took, cycles) = self.slice(system, length, quota, true).await;
                elapsed[i] += took;
                done[i] += cycles;
                progress.set_position(match plan.ops {
                    Some(_) => done[0] + done[1],
                    None => u64::try_from((elapsed[0] + elapsed[1]).as_millis()).unwrap_or(0),
                });
            }
            round += 1;
            let ops_done = plan.ops.is_some_and(|n| done.iter().all(|&d| d >= n));
            let time_done = plan.duration.is_some_and(|d| elapsed[0] + elapsed[1] >= d);
            if ops_done || time_done {
                return elapsed;
            }
        }
    }
}

/// Redquorum first in even rounds, the floor first in odd ones.
fn order(round: u64) -> [System; 2] {
    if round.is_multiple_of(2) {
        [System::Redquorum, System::Floor]
    } else {
        [System::Floor, System::Redquorum]
    }
}

/// A worker task: cycles in every slice until told to stop; returns its recorders.
async fn work(mut worker: Worker, shared: Arc<Shared>, timeout: Duration) -> [Recorder; 2] {
    let mut recorders = [Recorder::default(), Recorder::default()];
    let mut scratch = Recorder::default();
    loop {
        shared.barrier.wait().await;
        let slice = shared.slice();
        if slice.stop {
            break;
        }
        let rec = if slice.record {
            &mut recorders[slice.system as usize]
        } else {
            &mut scratch
        };
        while Instant::now() < slice.deadline {
            let ticket = shared.taken.fetch_add(1, Ordering::SeqCst);
            if slice.quota.is_some_and(|q| ticket >= q) {
                break;
            }
            worker.cycle(slice.system, rec).await;
        }
        shared.barrier.wait().await;
    }
    worker.finish(timeout).await;
    recorders
}
