//! `Checker` ties a scenario together (seed, recorder, referee); `Report` is its verdict and
//! one-line summary.

use std::fmt;
use std::io::Write;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;

use super::holds::Recorder;
use super::referee::{Referee, RefereeTally};
use super::seed::{SEED_ENV, SUMMARY_FILE_ENV, rng_for, seed_from_env};
use super::sweep::{Analysis, analyse};
use crate::TestkitError;

/// Hand-overs a scenario needs, unless told otherwise, to count as a test of mutual
/// exclusion.
pub const DEFAULT_MIN_HAND_OVERS: usize = 10;
/// Overlapping pairs shown in a failure message.
const SHOWN_OVERLAPS: usize = 5;

/// The verdict of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No overlap, no lost update, no expired lock handed out, and enough hand-overs.
    Safe,
    /// Mutual exclusion failed: an overlap, a lost update, or a lock handed out expired.
    Unsafe,
    /// Nothing failed, but too few hand-overs happened for the run to show anything. A test
    /// must treat this as a failure, not as green.
    Inconclusive,
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Safe => "SAFE",
            Self::Unsafe => "UNSAFE",
            Self::Inconclusive => "INCONCLUSIVE",
        })
    }
}

/// One scenario's checker: its seed (printed at start), the [`Recorder`] its clients
/// record holds in, and the [`Referee`] they increment inside each hold.
///
/// ```no_run
/// use redquorum_testkit::{Checker, Hold};
/// # fn main() -> Result<(), redquorum_testkit::TestkitError> {
/// let checker = Checker::start("baseline")?.min_hand_overs(20);
/// let recorder = checker.recorder().clone();
/// // … clients record a `Hold` per critical section and use `checker.referee()` …
/// # let _ = recorder;
/// let report = checker.report()?; // prints the one-line summary
/// report.assert_safe();
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Checker {
    name: String,
    seed: u64,
    recorder: Recorder,
    referee: Referee,
    min_hand_overs: usize,
    started: Instant,
}

impl Checker {
    /// A checker with the seed from `REDQUORUM_SEED` or a random one; starts the referee.
    pub fn start(name: &str) -> Result<Self, TestkitError> {
        Self::with_seed(name, seed_from_env())
    }

    /// A checker with a fixed seed; starts the referee.
    pub fn with_seed(name: &str, seed: u64) -> Result<Self, TestkitError> {
        let referee = Referee::start()?;
        println!("[checker] {name}: seed={seed:#x} (replay with {SEED_ENV}={seed:#x})");
        Ok(Self {
            name: name.to_owned(),
            seed,
            recorder: Recorder::new(),
            referee,
            min_hand_overs: DEFAULT_MIN_HAND_OVERS,
            started: Instant::now(),
        })
    }

    /// Hand-overs needed for a conclusive run. Default [`DEFAULT_MIN_HAND_OVERS`].
    pub fn min_hand_overs(mut self, n: usize) -> Self {
        self.min_hand_overs = n;
        self
    }

    /// The hand-overs needed for a conclusive run.
    pub fn needed_hand_overs(&self) -> usize {
        self.min_hand_overs
    }

    /// The scenario's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The scenario's seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// A reproducible random generator for `stream` (a client, a fault schedule).
    pub fn rng(&self, stream: u64) -> StdRng {
        rng_for(self.seed, stream)
    }

    /// Where clients record their holds.
    pub fn recorder(&self) -> &Recorder {
        &self.recorder
    }

    /// The referee clients increment inside their holds.
    pub fn referee(&self) -> &Referee {
        &self.referee
    }

    /// Sweeps the holds, tallies the referee, prints the one-line summary (and appends it to
    /// the file named by `REDQUORUM_SUMMARY_FILE`, if set). Call it once every client has
    /// stopped.
    pub fn report(&self) -> Result<Report, TestkitError> {
        self.report_with(String::new())
    }

    /// [`report`](Self::report) with scenario-specific figures appended to the summary.
    pub fn report_with(&self, notes: impl Into<String>) -> Result<Report, TestkitError> {
        let report = Report {
            name: self.name.clone(),
            seed: self.seed,
            analysis: analyse(&self.recorder.holds()),
            referee: self.referee.tally()?,
            min_hand_overs: self.min_hand_overs,
            elapsed: self.started.elapsed(),
            notes: notes.into(),
        };
        println!("{report}");
        if let Ok(path) = std::env::var(SUMMARY_FILE_ENV) {
            let appended = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .and_then(|mut f| writeln!(f, "{report}"));
            if let Err(e) = appended {
                eprintln!("[checker] could not append to {path}: {e}");
            }
        }
        Ok(report)
    }
}

/// What a scenario showed. `Display` is the one-line summary.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Report {
    /// The scenario.
    pub name: String,
    /// Its seed.
    pub seed: u64,
    /// The sweep of the holds.
    pub analysis: Analysis,
    /// The referee's count.
    pub referee: RefereeTally,
    /// Hand-overs needed for a conclusive run.
    pub min_hand_overs: usize,
    /// Time since the checker started.
    pub elapsed: Duration,
    /// Scenario-specific figures.
    pub notes: String,
}

impl Report {
    /// Overlapping pairs found.
    pub fn overlaps(&self) -> usize {
        self.analysis.overlaps.len()
    }

    /// Lost updates counted by the referee.
    pub fn lost_updates(&self) -> u64 {
        self.referee.lost_updates
    }

    /// The verdict: unsafe on any overlap, lost update or lock expired on arrival;
    /// inconclusive on too few hand-overs; safe otherwise.
    pub fn verdict(&self) -> Verdict {
        let a = &self.analysis;
        if !a.overlaps.is_empty()
            || self.referee.lost_updates > 0
            || self.referee.conflicts > 0
            || a.expired_on_arrival > 0
        {
            Verdict::Unsafe
        } else if a.hand_overs < self.min_hand_overs {
            Verdict::Inconclusive
        } else {
            Verdict::Safe
        }
    }

    /// Panics unless the verdict is [`Verdict::Safe`]; an inconclusive run fails too.
    #[track_caller]
    pub fn assert_safe(&self) {
        match self.verdict() {
            Verdict::Safe => {}
            Verdict::Inconclusive => panic!(
                "{self}\ninconclusive: only {} hand-overs, {} needed; a run that hands nothing over \
                 shows nothing about mutual exclusion",
                self.analysis.hand_overs, self.min_hand_overs
            ),
            Verdict::Unsafe => panic!("{self}\nmutual exclusion failed:\n{}", self.details()),
        }
    }

    /// For negative controls: panics unless the checker found at least one overlap.
    #[track_caller]
    pub fn assert_overlap_found(&self) {
        assert!(
            !self.analysis.overlaps.is_empty(),
            "{self}\nthe negative control found no overlap: the checker (or the scenario) is vacuous"
        );
    }

    /// The first overlapping pairs, one per line, with times relative to the first start.
    pub fn details(&self) -> String {
        let a = &self.analysis;
        let Some(t0) = a
            .overlaps
            .iter()
            .map(|o| o.first.acquired)
            .chain(a.overlaps.iter().map(|o| o.second.acquired))
            .min()
        else {
            return format!(
                "no overlapping pair; lost updates {}, conflicting writes {}, locks expired on arrival {}",
                self.referee.lost_updates, self.referee.conflicts, a.expired_on_arrival
            );
        };
        let ms = |i: Instant| i.saturating_duration_since(t0).as_secs_f64() * 1e3;
        a.overlaps
            .iter()
            .take(SHOWN_OVERLAPS)
            .map(|o| {
                format!(
                    "  {}: client {} [{:.1}, {:.1}] ms and client {} [{:.1}, {:.1}] ms overlap for {:.1} ms",
                    o.resource,
                    o.first.client,
                    ms(o.first.acquired),
                    ms(o.first.end()),
                    o.second.client,
                    ms(o.second.acquired),
                    ms(o.second.end()),
                    o.duration.as_secs_f64() * 1e3
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = &self.analysis;
        write!(
            f,
            "[checker] {}: seed={:#x} acquisitions={} hand-overs={} overlaps={} (worst {:.1} ms) \
             lost-updates={} max-overrun={:.1} ms verdict={} time={:.1} s",
            self.name,
            self.seed,
            a.acquisitions,
            a.hand_overs,
            a.overlaps.len(),
            a.worst_overlap.as_secs_f64() * 1e3,
            self.referee.lost_updates,
            a.max_overrun.as_secs_f64() * 1e3,
            self.verdict(),
            self.elapsed.as_secs_f64(),
        )?;
        if let Some(gap) = a.closest_hand_over {
            write!(f, " closest-hand-over={:.1} ms", gap.as_secs_f64() * 1e3)?;
        }
        if a.expired_on_arrival > 0 {
            write!(f, " expired-on-arrival={}", a.expired_on_arrival)?;
        }
        if !self.notes.is_empty() {
            write!(f, " [{}]", self.notes)?;
        }
        Ok(())
    }
}
