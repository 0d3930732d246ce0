//! Counterexamples made short: a counterexample found depth-first or by a random walk
//! carries every step the search happened to take. The steps are replayed without each
//! one in turn (an action no longer enabled is skipped), and dropped whenever the
//! property still fails, until no single step can go: a 1-minimal counterexample, real
//! because every replay runs the model itself.

use stateright::{Model, Path};

use crate::log::Log;
use crate::model::{Action, Redlock};
use crate::state::State;

/// The steps of `path`, shrunk while the `always` property `name` still fails; as
/// `(state, action taken from it)` pairs ending with the violating state.
pub(crate) fn shrink(
    model: &Redlock,
    path: &Path<State, Action>,
    name: &str,
) -> Vec<(State, Option<Action>)> {
    let mut actions: Vec<Action> = path.clone().into_actions();
    if let Some(end) = replay(model, &actions, name) {
        actions.truncate(end);
    }
    loop {
        let before = actions.len();
        let mut i = 0;
        while i < actions.len() {
            let mut fewer = actions.clone();
            fewer.remove(i);
            match replay(model, &fewer, name) {
                Some(end) => {
                    fewer.truncate(end);
                    actions = fewer;
                }
                None => i += 1,
            }
        }
        if actions.len() == before {
            break;
        }
    }
    steps(model, &actions)
}

/// Replays `actions` from the initial state, skipping those not enabled; the number of
/// actions up to and including the first state where `name` fails, if it does.
fn replay(model: &Redlock, actions: &[Action], name: &str) -> Option<usize> {
    let prop = model.properties().into_iter().find(|p| p.name == name)?;
    let mut s = model.init_states().pop()?;
    let mut enabled = Vec::new();
    for (i, &a) in actions.iter().enumerate() {
        enabled.clear();
        model.actions(&s, &mut enabled);
        if !enabled.contains(&a) {
            continue;
        }
        model.apply(&mut s, a, &mut Log::quiet());
        if !(prop.condition)(model, &s) {
            return Some(i + 1);
        }
    }
    None
}

/// The states `actions` go through (skipping those not enabled).
fn steps(model: &Redlock, actions: &[Action]) -> Vec<(State, Option<Action>)> {
    let mut out = Vec::new();
    let Some(mut s) = model.init_states().pop() else {
        return out;
    };
    let mut enabled = Vec::new();
    for &a in actions {
        enabled.clear();
        model.actions(&s, &mut enabled);
        if !enabled.contains(&a) {
            continue;
        }
        let mut next = s.clone();
        model.apply(&mut next, a, &mut Log::quiet());
        out.push((s, Some(a)));
        s = next;
    }
    out.push((s, None));
    out
}
