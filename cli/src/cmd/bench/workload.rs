//! The workloads, and one worker's cycle of each, for redquorum and for the floor.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use redquorum::{Lock, LockOptions, Redlock};
use redquorum_floor::{Floor, FloorError};
use tokio::time::Instant;

use super::record::{self, Recorder};

/// What a benchmark measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Workload {
    /// Lock + release cycles on distinct keys, one worker: the latency of one lock.
    Latency,
    /// Lock + release cycles on distinct keys at `--concurrency` workers.
    Throughput,
    /// `--concurrency` workers trying once each on `--keys` shared keys: acquisitions per
    /// second and refusals.
    Contention,
    /// Extensions of a held lock, one worker.
    Extend,
    /// `--waiters` workers taking turns on one resource through `lock()` (waiting), each
    /// holding it `--hold` then releasing: the hand-over gap (release acknowledged → next
    /// grant). The floor's slices measure its acquire + release on distinct keys, the round
    /// trips a hand-over cannot beat. Not part of `all`.
    Handover,
    /// All of the above but handover, in that order.
    All,
}

impl Workload {
    pub(crate) const EACH: [Workload; 4] = [
        Workload::Latency,
        Workload::Throughput,
        Workload::Contention,
        Workload::Extend,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Latency => "latency",
            Self::Throughput => "throughput",
            Self::Contention => "contention",
            Self::Extend => "extend",
            Self::Handover => "handover",
            Self::All => "all",
        }
    }

    /// Workers for this workload at `--concurrency` (`--waiters` for the hand-over).
    pub(crate) fn workers(self, concurrency: usize, waiters: usize) -> usize {
        match self {
            Self::Throughput | Self::Contention => concurrency,
            Self::Handover => waiters,
            _ => 1,
        }
    }

    /// The operation whose latency this workload is about.
    pub(crate) fn headline(self) -> &'static str {
        match self {
            Self::Extend => "extend",
            _ => "acquire",
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The two systems measured side by side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum System {
    Redquorum = 0,
    Floor = 1,
}

/// What every worker of a measurement shares.
pub(crate) struct Ctx {
    pub(crate) client: Redlock,
    pub(crate) floor: Arc<Floor>,
    pub(crate) ttl_ms: u64,
    /// Makes this run's keys unique, so runs never meet each other's locks.
    pub(crate) tag: String,
    /// Shared keys of the contention workload.
    pub(crate) keys: usize,
    /// The hand-over workload: how long each grant is held, and whether waiters poll.
    pub(crate) hold: Duration,
    pub(crate) poll: bool,
    /// When the last hand-over release was acknowledged (taken by the next grant).
    pub(crate) last_release: std::sync::Mutex<Option<Instant>>,
}

/// Key prefix of the floor, as long as redquorum's `redquorum:lock:` so that both send
/// requests of the same size.
const FLOOR_PREFIX: &str = "redquorum:floo:";

/// One worker: its counters and the locks it holds for the extend workload.
pub(crate) struct Worker {
    ctx: Arc<Ctx>,
    workload: Workload,
    id: usize,
    seq: u64,
    held: Option<Lock>,
    held_floor: Option<(String, String)>,
}

impl Worker {
    pub(crate) fn new(ctx: Arc<Ctx>, workload: Workload, id: usize) -> Self {
        Self {
            ctx,
            workload,
            id,
            seq: 0,
            held: None,
            held_floor: None,
        }
    }

    /// One cycle of `system`, recorded in `rec`.
    pub(crate) async fn cycle(&mut self, system: System, rec: &mut Recorder) {
        self.seq += 1;
        let resource = match self.workload {
            Workload::Contention => {
                let k = (self.id as u64 + self.seq) % self.ctx.keys as u64;
                format!("bench:{}:shared:{k}", self.ctx.tag)
            }
            _ => format!("bench:{}:{}:{}", self.ctx.tag, self.id, self.seq),
        };
        match (self.workload, system) {
            (Workload::Handover, System::Redquorum) => self.handover(rec).await,
            (Workload::Extend, System::Redquorum) => self.extend(resource, rec).await,
            (Workload::Extend, System::Floor) => self.extend_floor(resource, rec).await,
            (_, System::Redquorum) => self.lock_release(&resource, rec).await,
            (_, System::Floor) => self.lock_release_floor(&resource, rec).await,
        }
    }

    async fn lock_release(&mut self, resource: &str, rec: &mut Recorder) {
        rec.attempts += 1;
        let started = Instant::now();
        let lock = match self.ctx.client.try_lock(resource).await {
            Ok(lock) => lock,
            Err(e) => return rec.fail(record::kind(&e)),
        };
        rec.acquire.record(started.elapsed());
        rec.acquired += 1;
        rec.votes(&lock.stats());
        let started = Instant::now();
        match lock.release().await {
            Ok(_) => {
                rec.release.record(started.elapsed());
                rec.cycles += 1;
            }
            Err(e) => rec.fail(record::kind(&e)),
        }
    }

    /// One turn on the shared resource: wait for it through `lock()`, hold it, release it.
    async fn handover(&mut self, rec: &mut Recorder) {
        let resource = format!("bench:{}:handover", self.ctx.tag);
        let options = LockOptions::new()
            .wait(Duration::from_secs(30))
            .poll(self.ctx.poll);
        let asked = Instant::now();
        let lock = match self.ctx.client.lock_with([&resource], options).await {
            Ok(lock) => lock,
            Err(e) => {
                rec.attempts += 1;
                return rec.fail(record::kind(&e));
            }
        };
        let granted = Instant::now();
        let released = self
            .ctx
            .last_release
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        match released {
            // A hand-over: we were waiting when the release was acknowledged.
            Some(at) if at > asked => rec.gap.record(granted.saturating_duration_since(at)),
            // Asked after it (the lock was free: no hand-over), or after the pause between
            // slices.
            Some(_) => {}
            // Granted before the releaser saw its release acknowledged.
            None => rec.early_grants += 1,
        }
        rec.acquire.record(granted - asked);
        rec.acquired += 1;
        rec.attempts += u64::from(lock.stats().attempt());
        // Held for `hold`, on the clock rather than tokio's millisecond timer.
        while granted.elapsed() < self.ctx.hold {
            tokio::task::yield_now().await;
        }
        let started = Instant::now();
        match lock.release().await {
            Ok(_) => {
                let now = Instant::now();
                *self
                    .ctx
                    .last_release
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(now);
                rec.release.record(now - started);
                rec.cycles += 1;
            }
            Err(e) => rec.fail(record::kind(&e)),
        }
    }

    async fn lock_release_floor(&mut self, resource: &str, rec: &mut Recorder) {
        rec.attempts += 1;
        let floor = &self.ctx.floor;
        let key = format!("{FLOOR_PREFIX}{resource}");
        let value = self.value();
        let started = Instant::now();
        if let Err(e) = floor.acquire(&key, &value, self.ctx.ttl_ms).await {
            floor.spawn_release(key, value);
            return rec.fail(floor_kind(e));
        }
        rec.acquire.record(started.elapsed());
        rec.acquired += 1;
        let started = Instant::now();
        match floor.release(&key, &value).await {
            Ok(()) => {
                rec.release.record(started.elapsed());
                rec.cycles += 1;
            }
            Err(e) => rec.fail(floor_kind(e)),
        }
    }

    async fn extend(&mut self, resource: String, rec: &mut Recorder) {
        if self.held.is_none() {
            rec.attempts += 1;
            let started = Instant::now();
            match self.ctx.client.try_lock(&resource).await {
                Ok(lock) => {
                    rec.acquire.record(started.elapsed());
                    rec.acquired += 1;
                    self.held = Some(lock);
                }
                Err(e) => return rec.fail(record::kind(&e)),
            }
        }
        let Some(lock) = &self.held else { return };
        let started = Instant::now();
        match lock.extend().await {
            Ok(extended) => {
                rec.extend.record(started.elapsed());
                rec.cycles += 1;
                rec.votes(extended.stats());
            }
            Err(e) => {
                rec.fail(record::kind(&e));
                if e.is_lost() {
                    self.held = None;
                }
            }
        }
    }

    async fn extend_floor(&mut self, resource: String, rec: &mut Recorder) {
        let floor = self.ctx.floor.clone();
        if self.held_floor.is_none() {
            rec.attempts += 1;
            let key = format!("{FLOOR_PREFIX}{resource}");
            let value = self.value();
            let started = Instant::now();
            match floor.acquire(&key, &value, self.ctx.ttl_ms).await {
                Ok(()) => {
                    rec.acquire.record(started.elapsed());
                    rec.acquired += 1;
                    self.held_floor = Some((key, value));
                }
                Err(e) => {
                    floor.spawn_release(key, value);
                    return rec.fail(floor_kind(e));
                }
            }
        }
        let Some((key, value)) = &self.held_floor else {
            return;
        };
        let started = Instant::now();
        match floor.extend(key, value, self.ctx.ttl_ms).await {
            Ok(()) => {
                rec.extend.record(started.elapsed());
                rec.cycles += 1;
            }
            Err(e) => {
                rec.fail(floor_kind(e));
                self.held_floor = None;
            }
        }
    }

    /// A 40-character value, as long as redquorum's (unique; randomness is not the point).
    fn value(&self) -> String {
        format!("{:020x}{:020x}", self.id, self.seq)
    }

    /// Releases what the worker still holds.
    pub(crate) async fn finish(mut self, timeout: Duration) {
        if let Some(lock) = self.held.take() {
            let _ = tokio::time::timeout(timeout, lock.release()).await;
        }
        if let Some((key, value)) = self.held_floor.take() {
            let _ = tokio::time::timeout(timeout, self.ctx.floor.release(&key, &value)).await;
        }
    }
}

fn floor_kind(e: FloorError) -> &'static str {
    match e {
        FloorError::Contended => "contended",
        FloorError::NoQuorum => "no-quorum",
    }
}
