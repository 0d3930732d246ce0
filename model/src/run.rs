//! Runs the checker on one instance and says what it found.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use stateright::{Checker, Expectation, HasDiscoveries, Model, Path};

use crate::config::{Config, Expect, Search};
use crate::model::{Action, Redlock};
use crate::state::State;
use crate::trace;

/// What the checker concluded about one property.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// An `always` property with no counterexample in the explored states.
    Holds,
    /// An `always` property with a counterexample (its trace).
    Fails(Vec<String>),
    /// A `sometimes` property with a witness.
    Witnessed,
    /// A `sometimes` property never witnessed.
    NotWitnessed,
    /// The run stopped (at the expected counterexample) before this was settled.
    Unsettled,
}

/// The result of checking one instance.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The instance.
    pub cfg: Config,
    /// Unique states explored (for a simulation: states visited, repeats included).
    pub states: usize,
    /// The deepest path explored, in steps.
    pub depth: usize,
    /// Random walks made (simulation).
    pub walks: usize,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// Each property's verdict.
    pub verdicts: Vec<(&'static str, Verdict)>,
    /// Whether the run explored every reachable state.
    pub complete: bool,
    /// For a simulation that found nothing: every walk it made ended as it must (no
    /// counterexample in `states` states), which is all a simulation can say.
    pub simulated: bool,
}

impl Outcome {
    /// Whether the instance concluded what it must: every property holds (and every
    /// `sometimes` is witnessed) for the protocol, the expected counterexample for a
    /// negative control.
    pub fn as_expected(&self) -> bool {
        match self.cfg.expect {
            Expect::Holds => {
                (self.complete || self.simulated)
                    && self
                        .verdicts
                        .iter()
                        .all(|(_, v)| matches!(v, Verdict::Holds | Verdict::Witnessed))
            }
            Expect::Fails(p) => self
                .verdicts
                .iter()
                .any(|(name, v)| *name == p && matches!(v, Verdict::Fails(_))),
        }
    }

    /// The trace of the first counterexample, if any.
    pub fn counterexample(&self) -> Option<(&'static str, &[String])> {
        self.verdicts.iter().find_map(|(name, v)| match v {
            Verdict::Fails(t) => Some((*name, t.as_slice())),
            _ => None,
        })
    }
}

/// A run stops after generating this many states, repeats included (the checker's memory
/// grows with them; a run that stops here is incomplete and counts as unexpected).
pub const MAX_STATES: usize = 2_000_000_000;

/// How to run the checker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Checker threads.
    pub threads: usize,
    /// Breadth-first for every exhaustive instance (shortest counterexamples, more
    /// memory).
    pub bfs: bool,
    /// Depth-first for every exhaustive instance (least memory, long counterexamples).
    pub dfs: bool,
    /// Stop after this long (the run is then incomplete).
    pub timeout: Option<Duration>,
    /// Symmetry reduction (depth-first runs).
    pub symmetry: bool,
}

/// Checks `cfg` on `threads` threads. A protocol instance runs until every reachable state
/// is explored or a property fails; a negative control stops at its expected
/// counterexample.
pub fn check(cfg: Config, threads: usize) -> Outcome {
    check_with(
        cfg,
        Options {
            threads,
            bfs: false,
            dfs: false,
            timeout: None,
            symmetry: false,
        },
    )
}

/// [`check`] with more options.
pub fn check_with(cfg: Config, opts: Options) -> Outcome {
    let (threads, bfs) = (opts.threads, opts.bfs);
    let model = Redlock::new(cfg.clone());
    let finish = match cfg.expect {
        Expect::Holds => HasDiscoveries::AnyFailures,
        Expect::Fails(p) => HasDiscoveries::AnyOf([p].into_iter().collect()),
    };
    let started = Instant::now();
    let builder = model
        .clone()
        .checker()
        .threads(threads)
        .finish_when(finish)
        .target_state_count(MAX_STATES);
    let builder = match opts.timeout {
        Some(t) => builder.timeout(t),
        None => builder,
    };
    // Depth-first for the instances that must hold (its memory is the fingerprints and
    // one path; breadth-first keeps a whole frontier of states), breadth-first for the
    // controls (their counterexamples are then the shortest).
    let walk = crate::walk::Walk::default();
    let (states, generated, depth, found) = match (cfg.search, cfg.expect, bfs) {
        (Search::Simulation { seed, states }, _, _) => summarize(
            builder
                .target_state_count(states)
                .spawn_simulation(seed, walk.clone())
                .join(),
        ),
        (Search::DepthFirst, _, false) | (_, Expect::Holds, false) | (_, _, false)
            if opts.dfs || cfg.expect == Expect::Holds || cfg.search == Search::DepthFirst =>
        {
            let builder = if opts.symmetry {
                builder.symmetry_fn(crate::symmetry::representative)
            } else {
                builder
            };
            summarize(builder.spawn_dfs().join())
        }
        _ => summarize(builder.spawn_bfs().join()),
    };
    let elapsed = started.elapsed();
    let simulated = matches!(cfg.search, Search::Simulation { .. });
    let mut complete =
        !simulated && generated < MAX_STATES && opts.timeout.is_none_or(|t| elapsed < t);
    let verdicts = model
        .properties()
        .into_iter()
        .map(|p| {
            let found = found.get(p.name).cloned();
            let v = match (p.expectation, found) {
                (Expectation::Sometimes, Some(_)) => Verdict::Witnessed,
                (Expectation::Sometimes, None) => Verdict::NotWitnessed,
                (_, Some(path)) => {
                    complete = false;
                    let shortest = cfg.search == Search::Exhaustive
                        && (bfs || !opts.dfs)
                        && cfg.expect != Expect::Holds;
                    if shortest {
                        Verdict::Fails(trace::lines(&model, &path))
                    } else {
                        let steps = crate::shrink::shrink(&model, &path, p.name);
                        Verdict::Fails(trace::lines_of(&model, &steps))
                    }
                }
                (_, None) => Verdict::Holds,
            };
            (p.name, v)
        })
        .collect::<Vec<_>>();
    let failed = verdicts.iter().any(|(_, v)| matches!(v, Verdict::Fails(_)));
    let simulated = simulated && !failed;
    let verdicts = if complete || simulated {
        verdicts
    } else {
        verdicts
            .into_iter()
            .map(|(n, v)| match v {
                Verdict::Holds | Verdict::NotWitnessed => (n, Verdict::Unsettled),
                v => (n, v),
            })
            .collect()
    };
    Outcome {
        cfg,
        walks: walk.walks.load(std::sync::atomic::Ordering::Relaxed),
        states,
        depth,
        elapsed,
        verdicts,
        complete,
        simulated,
    }
}

/// The state count and the discoveries of a finished run.
type Found = HashMap<&'static str, Path<State, Action>>;

fn summarize(checker: impl Checker<Redlock>) -> (usize, usize, usize, Found) {
    (
        checker.unique_state_count(),
        checker.state_count(),
        checker.max_depth(),
        checker.discoveries(),
    )
}
