//! The restart guard when two masters lose their data within one ttl, randomized (issue 19,
//! finding 1), on five real masters without persistence and four clients with fixed
//! partitions and ttls from 1 s to 20 s. Every client declares `deployment_max_ttl` (20 s,
//! the longest ttl in use): a master that lost data is believed as a reader again 40 s later,
//! and until then a verifier without three trusted readers keeps the lost master out for the
//! declared 20 s. (Without a declared bound the partitioned clients could not count a lost
//! master again for two weeks, and the scenario would stall; `guard_losses.rs` checks the
//! reader rule without one.) Guard v2's rule believes three answering readers, whatever they
//! lost, and never falls back.
//!
//! | client | ttl | reaches | holds |
//! |---|---|---|---|
//! | A | 20 s | 0, 1, 2 | `res-0`, 6–14 s |
//! | B | 1 s | 0, 1, 3, 4 | a few ms |
//! | C | 2 s | all | a few ms, every 50–200 ms |
//! | D | 4 s | 0, 1, 3, 4 | 0.5–2.5 s |
//!
//! A's 20 s ttl record lives only on masters 0–2. While A holds `res-0`, the chaos thread
//! takes the data of masters 0 and 1 (a `FLUSHALL` or a restart without persistence, each):
//! finding 1's pattern. B and D then read 1 (lost: no record), 3 and 4 (never had A's).
//! The order that exposes guard v2 is forced with a hook: B, C and D stay idle between two
//! locks while both masters lose their data, then B and D go on, and C — the only other
//! client that reads master 2 — only once B has judged both masters. Guard v2 believed B's three readers and kept masters 0 and 1 out
//! for D's 4 s, and B was granted `res-0` while A held it. Guard v3 believes only readers
//! that cannot have lost the records, so B and D keep both masters out for the declared
//! 20 s.
//!
//! The later rounds wait until D holds a lock (4 s, held for seconds: the longest once A's
//! are over) and take the data of two masters holding the longest lock at that moment,
//! back to back. Every other round is a **replacement**: the first of the two masters is
//! killed and a brand-new server started in its place at the same address, and the
//! operator does what the docs say for a new master — `Redlock::commission` on a client
//! configured with every master — which is refused because the other masters remember a
//! server at that address, then resets its epoch as the refusal says. (At a new address it
//! would be commissioned and count at once, which is safe only if no lock still held relied
//! on the lost master; and `redquorum guard commission` given that one master, as the
//! README shows it, asks no other master: see `cli/tests/probe.rs`.) Each round waits
//! until C counts every master again, then for a third of the hand-overs the run needs;
//! the run lasts until it has its rounds (× soak) and 200 hand-overs (× soak). The checker
//! then reports 0 overlaps and 0 lost updates.
//!
//! A reaches exactly a quorum, so it can never read `N − Q + 1 = 3` other masters: once one
//! of its masters lost data, A counts it again only by the declared bound. The summary says
//! how many locks A took before and after the first loss.
//!
//! The negative control (`--cfg redquorum_unsafe`) runs the same scenario with guard v2's reader
//! rule (`RedlockBuilder::guard_trusts_every_reader`) on fresh masters until the checker
//! finds the overlap; a run without it, within its budget, fails.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::common::hold::lease_without_renewal;
use crate::common::scenario::soak;
use crate::common::{builder, commission};
use rand::RngExt;
use rand::rngs::StdRng;
use redquorum::{EpochCause, Error, GuardStatus, LockOptions, Redlock, RetryPolicy};
use redquorum_testkit::{Checker, Hold, LocalCluster, ReplyExt, Report};

/// Addresses where nothing listens, one per master a client cannot reach (a client refuses
/// the same URL twice).
const NOWHERE: [&str; 2] = ["redis://127.0.0.1:1", "redis://127.0.0.1:2"];
const RESOURCES: usize = 2;

#[derive(Debug, Clone, Copy)]
struct Spec {
    ttl: Duration,
    cut: &'static [usize],
    /// How long a critical section lasts: uniform in `[hold.0, hold.1]`.
    hold: (Duration, Duration),
    /// The pause between two locks: uniform in `[think.0, think.1]`.
    think: (Duration, Duration),
}

const fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

const A: usize = 0;
const B: usize = 1;
const C: usize = 2;
const D: usize = 3;
const SPECS: [Spec; 4] = [
    // A: the long lock, on exactly a quorum.
    Spec {
        ttl: Duration::from_secs(20),
        cut: &[3, 4],
        hold: (ms(6_000), ms(14_000)),
        think: (ms(100), ms(500)),
    },
    // B: the short client that cannot read A's records.
    Spec {
        ttl: Duration::from_secs(1),
        cut: &[2],
        hold: (ms(0), ms(20)),
        think: (ms(0), ms(20)),
    },
    // C: reaches every master; the only one that reads A's record on master 2 after 0 and 1
    // lost data. Locks at a slower pace than B.
    Spec {
        ttl: Duration::from_secs(2),
        cut: &[],
        hold: (ms(0), ms(20)),
        think: (ms(50), ms(200)),
    },
    // D: as B, with a longer ttl and holds of seconds: the long lock of the later rounds
    // (A's locks stop at the first loss).
    Spec {
        ttl: Duration::from_secs(4),
        cut: &[2],
        hold: (ms(500), ms(2_500)),
        think: (ms(1_000), ms(3_000)),
    },
];

fn between(rng: &mut StdRng, (lo, hi): (Duration, Duration)) -> Duration {
    lo + hi.saturating_sub(lo).mul_f64(rng.random_range(0.0..=1.0))
}

/// Client `c`'s URLs: the masters it reaches, and an address where nothing listens for
/// each one it does not.
fn urls_of(masters: &LocalCluster, c: usize) -> Vec<String> {
    let mut nowhere = NOWHERE.iter();
    (0..masters.len())
        .map(|i| {
            if SPECS[c].cut.contains(&i) {
                (*nowhere.next().expect("at most two cuts")).to_owned()
            } else {
                masters.url(i)
            }
        })
        .collect()
}

/// The longest ttl any client uses, declared to every client's guard.
const LONGEST: Duration = Duration::from_secs(20);

fn client(masters: &LocalCluster, c: usize, v2_readers: bool) -> Redlock {
    let builder = builder(urls_of(masters, c))
        .ttl(SPECS[c].ttl)
        .node_timeout(ms(100))
        .restart_guard(true)
        .deployment_max_ttl(LONGEST)
        .retry(
            RetryPolicy::new()
                .unlimited_attempts()
                .timeout(Duration::from_secs(1))
                .delay(ms(10), ms(10)),
        );
    #[cfg(redquorum_unsafe)]
    let builder = if v2_readers {
        builder.guard_trusts_every_reader()
    } else {
        builder
    };
    #[cfg(not(redquorum_unsafe))]
    assert!(
        !v2_readers,
        "the v2 reader rule needs --cfg redquorum_unsafe"
    );
    builder.build().expect("valid")
}

/// What the workers and the chaos thread share.
#[derive(Default)]
pub(crate) struct Shared {
    /// Set to end the run.
    stop: AtomicBool,
    /// Locks each client took.
    acquired: [AtomicU64; 4],
    /// Locks A took after the first loss.
    a_after_loss: AtomicU64,
    /// Whether A holds `res-0` now, and how many times it has taken it.
    a_holding: AtomicBool,
    a_holds: AtomicU64,
    /// When each client's current hold began (none between holds).
    in_hold: [Mutex<Option<Instant>>; 4],
    /// When A released the hold the chaos struck under (control runs).
    a_struck_released: Mutex<Option<Instant>>,
    /// The A hold the first loss struck under.
    a_struck: AtomicU64,
    first_loss: AtomicBool,
    /// Asks a client to stay idle between two locks (the hook that orders the pattern
    /// round), and its answer that it is idle.
    park: [AtomicBool; 4],
    parked: [AtomicBool; 4],
}

impl Shared {
    fn hold_began(&self, c: usize) -> Option<Instant> {
        *self.in_hold[c]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn set_hold(&self, c: usize, at: Option<Instant>) {
        *self.in_hold[c]
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = at;
    }
}

/// The faults of a run.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    flushes: AtomicUsize,
    empty_restarts: AtomicUsize,
    /// Masters killed and replaced by a new server at the same address.
    replacements: AtomicUsize,
    /// Commissions of a replacement refused because another master remembers it.
    refused_by_memory: AtomicUsize,
    /// Commissions of a replacement refused for another reason (it already held a lock key
    /// that a client set while it was out, or a client had begun its epoch).
    refused_otherwise: AtomicUsize,
    /// Two losses back to back on masters that both held the longest lock held then.
    double_losses: AtomicUsize,
    /// Of those, the ones whose lock was still held after both (by a quorum elsewhere, or
    /// in its holder's view: A's lock lives on exactly the three masters it reaches).
    under_live_lock: AtomicUsize,
    /// Of those, finding 1's pattern: masters 0 and 1 under A's lock.
    under_a: AtomicUsize,
    /// Rounds completed, the cluster back to every master counted by C.
    rounds: AtomicUsize,
    done: AtomicBool,
}

impl Faults {
    fn get(c: &AtomicUsize) -> usize {
        c.load(Ordering::SeqCst)
    }

    fn enough(&self) -> bool {
        let n = soak() as usize;
        Self::get(&self.under_a) >= 1
            && Self::get(&self.double_losses) >= 3 * n
            && Self::get(&self.replacements) >= n
    }

    pub(crate) fn summary(&self, shared: &Shared) -> String {
        let acquired: Vec<u64> = shared
            .acquired
            .iter()
            .map(|a| a.load(Ordering::SeqCst))
            .collect();
        format!(
            "faults: flushes={} empty-restarts={} replacements={} (commission refused: by memory {}, otherwise {}) double-losses={} (under a live lock {}, finding 1's pattern under A's lock {}) rounds={} | locks per client A,B,C,D={acquired:?}, A after the first loss={}",
            Self::get(&self.flushes),
            Self::get(&self.empty_restarts),
            Self::get(&self.replacements),
            Self::get(&self.refused_by_memory),
            Self::get(&self.refused_otherwise),
            Self::get(&self.double_losses),
            Self::get(&self.under_live_lock),
            Self::get(&self.under_a),
            Self::get(&self.rounds),
            shared.a_after_loss.load(Ordering::SeqCst),
        )
    }
}

async fn worker(c: usize, client: Redlock, checker: Arc<Checker>, shared: Arc<Shared>) {
    let spec = SPECS[c];
    let mut rng = checker.rng(100 + c as u64);
    let mut session = checker.referee().session().await.expect("referee");
    while !shared.stop.load(Ordering::SeqCst) {
        if shared.park[c].load(Ordering::SeqCst) {
            shared.parked[c].store(true, Ordering::SeqCst);
            while shared.park[c].load(Ordering::SeqCst) && !shared.stop.load(Ordering::SeqCst) {
                tokio::time::sleep(ms(5)).await;
            }
            shared.parked[c].store(false, Ordering::SeqCst);
            continue;
        }
        let resource = if c == A {
            "res-0".to_owned()
        } else {
            format!("res-{}", rng.random_range(0..RESOURCES))
        };
        // Polling (the policy's delay): attempts all along the moments after a loss.
        let options = LockOptions::new().poll(true);
        if let Ok(lock) = client.lock_with([&resource], options).await {
            let acquired = Instant::now();
            shared.set_hold(c, Some(acquired));
            shared.acquired[c].fetch_add(1, Ordering::SeqCst);
            if c == A {
                shared.a_holds.fetch_add(1, Ordering::SeqCst);
                shared.a_holding.store(true, Ordering::SeqCst);
                if shared.first_loss.load(Ordering::SeqCst) {
                    shared.a_after_loss.fetch_add(1, Ordering::SeqCst);
                }
            }
            let lease = lease_without_renewal(&lock, spec.ttl / 5).await;
            let mut deadline = lock.deadline().into_std();
            if let Some(lease) = lease {
                let read = session.read(&resource).await.expect("referee read");
                let work = between(&mut rng, spec.hold);
                let worked = lease.run(tokio::time::sleep(work)).await.is_ok();
                // The side effect the lock protects, only with margin to spare.
                if worked && lease.check().is_ok() {
                    session.write(&resource, read).await.expect("referee write");
                }
                deadline = lease.deadline().into_std();
            }
            let released = Instant::now();
            if c == A {
                shared.a_holding.store(false, Ordering::SeqCst);
                if shared.a_holds.load(Ordering::SeqCst) == shared.a_struck.load(Ordering::SeqCst) {
                    *shared
                        .a_struck_released
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = Some(released);
                }
            }
            let _ = lock.release().await;
            checker
                .recorder()
                .record(Hold::new(c, &resource, acquired, deadline, released));
            shared.set_hold(c, None);
        }
        // The pause between two locks, cut short when the chaos thread asks this client to
        // park (it waits for it).
        let until = tokio::time::Instant::now() + between(&mut rng, spec.think);
        while tokio::time::Instant::now() < until && !shared.park[c].load(Ordering::SeqCst) {
            tokio::time::sleep(ms(10).min(until - tokio::time::Instant::now())).await;
        }
    }
}

/// What the chaos thread works with.
struct Chaos {
    masters: Arc<LocalCluster>,
    /// Reaches every master, direct: the operator's commission and reset.
    admin: Redlock,
    /// Client C: the round ends when it counts every master again.
    c: Redlock,
    /// Client B, whose verdict the pattern round waits for.
    b: Redlock,
    runtime: tokio::runtime::Handle,
    rng: StdRng,
    shared: Arc<Shared>,
    faults: Arc<Faults>,
    /// Guarded runs go on with more rounds; the control stops after finding 1's pattern.
    rounds: bool,
    checker: Arc<Checker>,
    /// Hand-overs each calm spell waits for before the next round.
    calm_hand_overs: usize,
}

/// How a master loses its data.
#[derive(Debug, Clone, Copy)]
enum Loss {
    Flush,
    EmptyRestart,
}

impl Chaos {
    fn hand_overs(&self) -> usize {
        redquorum_testkit::hand_overs(&self.checker.recorder().holds())
    }

    fn stopped(&self) -> bool {
        self.shared.stop.load(Ordering::SeqCst)
    }

    /// Sleeps `d` unless the run stops first (pacing only).
    fn pause(&self, d: Duration) -> bool {
        let until = Instant::now() + d;
        while Instant::now() < until {
            if self.stopped() {
                return false;
            }
            std::thread::sleep(ms(5).min(until.saturating_duration_since(Instant::now())));
        }
        !self.stopped()
    }

    /// Polls `done` every 10 ms until it holds (true) or the run stops (false).
    fn until(&self, mut done: impl FnMut(&Self) -> bool) -> bool {
        while !self.stopped() {
            if done(self) {
                return true;
            }
            std::thread::sleep(ms(10));
        }
        false
    }

    fn lose(&mut self, i: usize) {
        let loss = if self.rng.random_bool(0.5) {
            Loss::Flush
        } else {
            Loss::EmptyRestart
        };
        match loss {
            Loss::Flush => {
                self.masters.cmd(i, &["FLUSHALL"]).expect("FLUSHALL");
                self.faults.flushes.fetch_add(1, Ordering::SeqCst);
            }
            Loss::EmptyRestart => {
                self.masters.kill(i).expect("kill");
                self.masters.restart(i).expect("restart, empty");
                self.faults.empty_restarts.fetch_add(1, Ordering::SeqCst);
            }
        }
        self.shared.first_loss.store(true, Ordering::SeqCst);
    }

    /// Master `i` dies and a brand-new server takes its place at the same address; the
    /// operator commissions it (through a client configured with every master), is refused
    /// (another master remembers a server at this address), and resets its epoch as the
    /// refusal says.
    fn replace(&mut self, i: usize) {
        self.masters.kill(i).expect("kill");
        self.masters.restart(i).expect("a new, empty server");
        self.shared.first_loss.store(true, Ordering::SeqCst);
        self.faults.replacements.fetch_add(1, Ordering::SeqCst);
        let commissioned = self.operator(|admin| admin.commission(i, false));
        match commissioned {
            Err(Error::GuardRefused { reason, .. }) => {
                let counter = if reason.contains("remembers") {
                    &self.faults.refused_by_memory
                } else {
                    &self.faults.refused_otherwise
                };
                counter.fetch_add(1, Ordering::SeqCst);
            }
            other => panic!(
                "commissioning a replacement at the address of a master in service must be refused: {other:?}"
            ),
        }
        self.operator(|admin| admin.reset_epoch(i))
            .unwrap_or_else(|e| panic!("reset the replacement's epoch: {e}"));
    }

    /// An operator's command, tried again while the master cannot be reached (the admin's
    /// connection to the replaced server reconnects), as an operator would.
    fn operator<'a, F, Fut>(&'a self, action: F) -> Result<(), Error>
    where
        F: Fn(&'a Redlock) -> Fut,
        Fut: std::future::Future<Output = Result<(), Error>>,
    {
        let mut outcome = self.runtime.block_on(action(&self.admin));
        for _ in 0..100 {
            if !matches!(&outcome, Err(Error::Node { .. })) {
                break;
            }
            std::thread::sleep(ms(50));
            outcome = self.runtime.block_on(action(&self.admin));
        }
        outcome
    }

    /// The lock key with the most time left on any master, with its value and the masters
    /// that hold it: the lock the next losses aim at.
    fn longest_lock(&self) -> Option<(String, String, Vec<usize>)> {
        let mut locks: HashMap<(String, String), (i64, Vec<usize>)> = HashMap::new();
        for i in 0..self.masters.len() {
            let Ok(keys) = self.masters.cmd(i, &["KEYS", "redquorum:lock:*"]) else {
                continue;
            };
            let keys = match &keys {
                redis::Value::Array(items) => items.as_slice(),
                _ => &[],
            };
            for key in keys {
                let Some(key) = key.as_str() else { continue };
                let value = self.masters.cmd(i, &["GET", key]).ok();
                let pttl = self.masters.cmd(i, &["PTTL", key]).ok();
                if let (Some(value), Some(pttl)) = (
                    value.as_ref().and_then(|v| v.as_str()),
                    pttl.and_then(|p| p.as_int()),
                ) {
                    let entry = locks
                        .entry((key.to_owned(), value.to_owned()))
                        .or_insert((0, Vec::new()));
                    entry.0 = entry.0.max(pttl);
                    entry.1.push(i);
                }
            }
        }
        locks
            .into_iter()
            .filter(|(_, (_, holders))| holders.len() >= 2)
            .max_by_key(|(_, (pttl, _))| *pttl)
            .map(|((key, value), (_, holders))| (key, value, holders))
    }

    fn still_held(&self, key: &str, value: &str, holders: &[usize], struck: &[usize]) -> bool {
        holders.iter().filter(|i| !struck.contains(i)).any(|&i| {
            self.masters
                .cmd(i, &["GET", key])
                .ok()
                .is_some_and(|v| v.as_str() == Some(value))
        })
    }

    /// Whether C counts every master now (its health check verifies them first).
    fn all_counted(&self) -> bool {
        self.runtime
            .block_on(self.c.health_with(ms(10)))
            .is_ok_and(|report| report.nodes.iter().all(|n| n.guard.counts()))
    }

    /// Finding 1's pattern: while A holds `res-0` on 0–2, masters 0 and 1 lose their data.
    /// The order that exposes guard v2 is forced: B, C and D stay idle between two locks
    /// while both masters lose their data (a client that looks between the two losses reads
    /// A's record on the second); then B and D go on, and C (the only other client that
    /// reads master 2, where A's record is) only once B has judged both masters.
    fn pattern_round(&mut self) -> bool {
        if !self.until(|ch| ch.shared.a_holding.load(Ordering::SeqCst)) {
            return false;
        }
        let hold = self.shared.a_holds.load(Ordering::SeqCst);
        let others = [B, C, D];
        for c in others {
            self.shared.park[c].store(true, Ordering::SeqCst);
        }
        if !self.until(|ch| {
            others
                .iter()
                .all(|&c| ch.shared.parked[c].load(Ordering::SeqCst))
        }) {
            return false;
        }
        let early = between(&mut self.rng, (ms(0), ms(300)));
        if !self.pause(early) {
            return false;
        }
        let still_a = |ch: &Self| {
            ch.shared.a_holding.load(Ordering::SeqCst)
                && ch.shared.a_holds.load(Ordering::SeqCst) == hold
        };
        if !still_a(self) {
            // A's hold ended while the others parked: strike under its next one (after the
            // losses A cannot lock again, so the pattern gets one chance per run).
            for c in others {
                self.shared.park[c].store(false, Ordering::SeqCst);
            }
            return self.pattern_round();
        }
        self.shared.a_struck.store(hold, Ordering::SeqCst);
        self.lose(0);
        self.lose(1);
        self.faults.double_losses.fetch_add(1, Ordering::SeqCst);
        if still_a(self) {
            self.faults.under_a.fetch_add(1, Ordering::SeqCst);
            self.faults.under_live_lock.fetch_add(1, Ordering::SeqCst);
        }
        for c in [B, D] {
            self.shared.park[c].store(false, Ordering::SeqCst);
        }
        let judged = self.until(|ch| ch.b_judged(0) && ch.b_judged(1));
        self.shared.park[C].store(false, Ordering::SeqCst);
        // Nothing here looks at the masters through C until A's hold is over.
        judged && self.until(|ch| !ch.shared.a_holding.load(Ordering::SeqCst))
    }

    /// Whether B has judged master `i` since it lost its data: it keeps it out for a new
    /// epoch (guard v2: for the ttl it read), or found too few readers it may believe
    /// (guard v3). Its lock attempts make it look; so does its health check.
    fn b_judged(&self, i: usize) -> bool {
        let Ok(report) = self.runtime.block_on(self.b.health_with(ms(10))) else {
            return false;
        };
        match &report.nodes[i].guard {
            GuardStatus::Quarantined { cause, .. } | GuardStatus::Counted { cause } => {
                *cause != EpochCause::Commissioned
            }
            GuardStatus::Unverified {
                reason: Some(reason),
            } => reason.contains("believed") || reason.contains("trusted"),
            _ => false,
        }
    }

    /// Two masters holding the longest lock held now lose their data back to back; with
    /// `replace`, the first is a replacement.
    fn aimed_round(&mut self, replace: bool) -> bool {
        // D's locks (4 s, held for seconds) are the longest once A's are over.
        if !self.until(|ch| ch.shared.hold_began(D).is_some()) {
            return false;
        }
        let Some((key, value, holders)) = self.longest_lock_soon() else {
            return !self.stopped();
        };
        let first = holders[self.rng.random_range(0..holders.len())];
        let rest: Vec<usize> = holders.iter().copied().filter(|&i| i != first).collect();
        let second = rest[self.rng.random_range(0..rest.len())];
        if replace {
            self.replace(first);
        } else {
            self.lose(first);
        }
        self.lose(second);
        self.faults.double_losses.fetch_add(1, Ordering::SeqCst);
        if self.still_held(&key, &value, &holders, &[first, second]) {
            self.faults.under_live_lock.fetch_add(1, Ordering::SeqCst);
        }
        true
    }

    /// [`longest_lock`](Self::longest_lock), looked for until one is held (clients may be
    /// between locks).
    fn longest_lock_soon(&self) -> Option<(String, String, Vec<usize>)> {
        let mut found = None;
        self.until(|ch| {
            found = ch.longest_lock();
            found.is_some()
        });
        found
    }

    fn run(mut self) {
        let (mut pattern, mut struck) = (false, false);
        while !self.stopped() {
            // A calm spell once every master counts again (for C), for hand-overs.
            if !self.until(Self::all_counted) {
                return;
            }
            if struck {
                self.faults.rounds.fetch_add(1, Ordering::SeqCst);
            }
            if self.faults.enough() {
                self.faults.done.store(true, Ordering::SeqCst);
                while self.pause(ms(50)) {}
                return;
            }
            // Hand-overs in the calm spell, before the next round takes masters out (the
            // first round strikes as soon as A holds its lock).
            let before = self.hand_overs();
            if pattern && !self.until(|ch| ch.hand_overs() >= before + ch.calm_hand_overs) {
                return;
            }
            let calm = between(&mut self.rng, (ms(0), ms(1_000)));
            if !self.pause(calm) {
                return;
            }
            let going = if !pattern {
                pattern = true;
                self.pattern_round()
            } else if !self.rounds {
                // The control: finding 1's pattern only, on fresh masters each time.
                self.faults.done.store(true, Ordering::SeqCst);
                while self.pause(ms(50)) {}
                return;
            } else {
                // After the pattern: a replacement round, then a plain one, and again.
                let replace = Faults::get(&self.faults.replacements) < soak() as usize
                    && Faults::get(&self.faults.double_losses) % 2 == 1;
                self.aimed_round(replace)
            };
            if !going {
                return;
            }
            struck = true;
        }
    }
}

/// One run on fresh masters: the checker's report and the faults.
pub(crate) async fn run(
    name: &str,
    v2_readers: bool,
    needed: usize,
) -> (Report, Arc<Faults>, Arc<Shared>) {
    let masters = Arc::new(LocalCluster::start(5).expect("start masters"));
    commission(&masters).await;
    let checker = Arc::new(
        Checker::start(name)
            .expect("referee")
            .min_hand_overs(needed),
    );
    let clients: Vec<Redlock> = (0..SPECS.len())
        .map(|c| client(&masters, c, v2_readers))
        .collect();
    let shared = Arc::new(Shared::default());
    let faults = Arc::new(Faults::default());
    let chaos = Chaos {
        masters: masters.clone(),
        admin: builder(masters.urls())
            .restart_guard(true)
            .deployment_max_ttl(LONGEST)
            .build()
            .expect("valid"),
        c: clients[C].clone(),
        b: clients[B].clone(),
        runtime: tokio::runtime::Handle::current(),
        rng: checker.rng(1),
        shared: shared.clone(),
        faults: faults.clone(),
        rounds: !v2_readers,
        checker: checker.clone(),
        // A calm spell after each of the 3 (× soak) rounds.
        calm_hand_overs: needed / (3 * soak() as usize),
    };
    let chaos = std::thread::Builder::new()
        .name("chaos-two-losses".into())
        .spawn(move || chaos.run())
        .expect("spawn the chaos thread");
    let workers: Vec<_> = clients
        .iter()
        .cloned()
        .enumerate()
        .map(|(c, client)| tokio::spawn(worker(c, client, checker.clone(), shared.clone())))
        .collect();
    let started = Instant::now();
    let budget = Duration::from_secs(if v2_readers { 90 } else { 300 }) * soak();
    loop {
        let holds = checker.recorder().holds();
        let done = if v2_readers {
            !redquorum_testkit::find_overlaps(&holds).is_empty()
                || (faults.done.load(Ordering::SeqCst) && struck_hold_settled(&shared))
        } else {
            faults.done.load(Ordering::SeqCst) && redquorum_testkit::hand_overs(&holds) >= needed
        };
        if done || started.elapsed() >= budget {
            break;
        }
        tokio::time::sleep(ms(50)).await;
    }
    crate::common::chaos::wind_down(&shared.stop, chaos, workers).await;
    let report = checker
        .report_with(faults.summary(&shared))
        .expect("read the referee");
    (report, faults, shared)
}

/// For the control: A's struck hold is over and recorded, and no other client is still in a
/// hold that began before it ended (so every hold that could overlap it is recorded).
fn struck_hold_settled(shared: &Shared) -> bool {
    let Some(released) = *shared
        .a_struck_released
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
    else {
        return false;
    };
    shared.hold_began(A).is_none_or(|began| began > released)
        && (1..SPECS.len()).all(|c| shared.hold_began(c).is_none_or(|began| began > released))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_losses_within_a_ttl_and_a_replacement_never_hand_a_held_lock_over() {
    let needed = 200 * soak() as usize;
    let (report, faults, shared) = run(
        "guard v3: two losses within a ttl, a replacement, partitioned clients",
        false,
        needed,
    )
    .await;
    assert!(
        faults.done.load(Ordering::SeqCst),
        "inconclusive: the chaos did not complete its rounds within the budget ({})",
        faults.summary(&shared)
    );
    report.assert_safe();
}
