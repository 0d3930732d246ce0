//! The chooser of the random walks (`spawn_simulation`): a seeded generator of its own
//! (the walks are the same on every machine and every version of `rand`), and weights
//! that make a walk look like a run: requests are delivered more often than time passes,
//! and clients start operations and the environment strikes now and then, at any tick.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use stateright::{Chooser, Model};

use crate::model::{Action, Redlock};

/// Weighted choices: a delivery 8, a message fault 1, anything else 1. Counts the walks.
#[derive(Debug, Clone, Default)]
pub(crate) struct Walk {
    /// Walks started.
    pub(crate) walks: Arc<AtomicUsize>,
}

/// splitmix64.
#[derive(Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

fn weight(a: &Action) -> u64 {
    match a {
        Action::Deliver(..) | Action::DeliverStale(..) => 8,
        _ => 1,
    }
}

impl Chooser<Redlock> for Walk {
    type State = Rng;

    fn new_state(&self, seed: u64) -> Rng {
        self.walks.fetch_add(1, Ordering::Relaxed);
        Rng(seed)
    }

    fn choose_initial_state(
        &self,
        _rng: &mut Rng,
        _initial_states: &[<Redlock as Model>::State],
    ) -> usize {
        0
    }

    fn choose_action(
        &self,
        rng: &mut Rng,
        _current: &<Redlock as Model>::State,
        actions: &[Action],
    ) -> usize {
        let total: u64 = actions.iter().map(weight).sum();
        let mut pick = rng.next() % total.max(1);
        for (i, a) in actions.iter().enumerate() {
            let w = weight(a);
            if pick < w {
                return i;
            }
            pick -= w;
        }
        actions.len().saturating_sub(1)
    }
}
