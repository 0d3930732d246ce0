//! Symmetry reduction: members with the same configuration, reached by the same clients
//! and hit by the same faults are interchangeable (every client sends to all of those it
//! reaches, alike), so a state and the state with two such members swapped — their data,
//! connections, the clients' views of them, every bit that names them — have the same
//! futures up to the same swap. The checker keeps one of them: the one whose
//! interchangeable members are sorted by a digest of everything about them.
//!
//! Sorting by a digest is a representative in the orbit whatever the digests are (it only
//! permutes members within their class), so the reduction is sound even where two
//! different members happen to tie; ties only leave some symmetric states unmerged.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use crate::config::{Config, MasterSpec};
use crate::state::{Req, State, Verify};

/// The class of each member (`0`: interchangeable with no other), for [`State::classes`].
pub(crate) fn classes(cfg: &Config) -> [u8; 8] {
    let mut out = [0u8; 8];
    if !cfg.v2() || cfg.cluster.is_some() {
        // Epoch ids are renumbered after a permutation; the old guard's views hold
        // run_ids instead. A cluster member's extra places are not permuted.
        return out;
    }
    let key = |m: usize| -> (MasterSpec, bool, Vec<bool>) {
        (
            cfg.masters[m],
            cfg.faults.on & (1 << m) != 0,
            (0..cfg.clients.len()).map(|c| cfg.reaches(c, m)).collect(),
        )
    };
    let mut next = 1;
    for m in 0..cfg.n() {
        if out[m] != 0 || cfg.is_group(m) {
            continue;
        }
        let mates: Vec<usize> = (m + 1..cfg.n())
            .filter(|&j| !cfg.is_group(j) && key(j) == key(m))
            .collect();
        if mates.is_empty() {
            continue;
        }
        out[m] = next;
        for j in mates {
            out[j] = next;
        }
        next += 1;
    }
    out
}

/// The representative of `s`'s orbit (for `CheckerBuilder::symmetry_fn`).
pub(crate) fn representative(s: &State) -> State {
    let n = s.clients.first().map_or(0, |c| c.views.len());
    // perm[new] = old
    let mut perm: Vec<usize> = (0..n).collect();
    let mut moved = false;
    for class in 1..=4u8 {
        let members: Vec<usize> = (0..n).filter(|&m| s.classes[m] == class).collect();
        if members.len() < 2 {
            continue;
        }
        let mut keyed: Vec<(u64, usize)> = members.iter().map(|&m| (digest(s, m), m)).collect();
        keyed.sort_unstable();
        for (slot, &(_, old)) in members.iter().zip(&keyed) {
            perm[*slot] = old;
            moved |= *slot != old;
        }
    }
    if !moved {
        return s.clone();
    }
    permute(s, &perm)
}

/// Everything about member `m`, hashed: its server, each client's connection and view of
/// it, and every bit that names it.
fn digest(s: &State, m: usize) -> u64 {
    let n = s.clients[0].views.len();
    let mut h = DefaultHasher::new();
    s.masters[m].hash(&mut h);
    let bit = |set: u8| set & (1 << m) != 0;
    for (j, master) in s.masters.iter().enumerate() {
        if j != m {
            bit(master.data.members).hash(&mut h);
        }
    }
    for (c, client) in s.clients.iter().enumerate() {
        s.chans[c * n + m].hash(&mut h);
        for (i, r) in &s.stale {
            if usize::from(*i) == c * n + m {
                r.hash(&mut h);
            }
        }
        client.views[m].hash(&mut h);
        client.recorded[m].hash(&mut h);
        for slot in &client.slots {
            bit(slot.orphans).hash(&mut h);
            if let Some(r) = slot.round() {
                (bit(r.yes), bit(r.no)).hash(&mut h);
            }
        }
        for (k, v) in client.views.iter().enumerate() {
            if let Verify::Reading(r) = v.verify {
                (k == m, bit(r.asked), bit(r.answered), bit(r.trusted)).hash(&mut h);
            }
        }
        for (k, q) in s.chans[c * n..(c + 1) * n].iter().enumerate() {
            for r in q {
                if let Req::Read { of } = r
                    && usize::from(*of) == m
                {
                    k.hash(&mut h);
                }
            }
        }
    }
    h.finish()
}

/// `s` with member `perm[new]` moved to `new`.
fn permute(s: &State, perm: &[usize]) -> State {
    let n = perm.len();
    let mut inv = vec![0usize; n];
    for (new, &old) in perm.iter().enumerate() {
        inv[old] = new;
    }
    let bits = |set: u8| -> u8 {
        let mut out = set & !((1u16 << n) - 1) as u8;
        for (old, &new) in inv.iter().enumerate() {
            if set & (1 << old) != 0 {
                out |= 1 << new;
            }
        }
        out
    };
    let mut t = s.clone();
    for (new, &old) in perm.iter().enumerate() {
        t.masters[new] = s.masters[old].clone();
    }
    for m in &mut t.masters {
        m.data.members = bits(m.data.members);
        if let Some(d) = &mut m.disk {
            d.members = bits(d.members);
        }
    }
    let clients = s.clients.len();
    for c in 0..clients {
        for (new, &old) in perm.iter().enumerate() {
            t.chans[c * n + new] = s.chans[c * n + old].clone();
        }
        let (src, dst) = (&s.clients[c], &mut t.clients[c]);
        for (new, &old) in perm.iter().enumerate() {
            dst.views[new] = src.views[old];
            dst.recorded[new] = src.recorded[old];
        }
        for slot in &mut dst.slots {
            slot.orphans = bits(slot.orphans);
            if let Some(r) = slot.round_mut() {
                r.yes = bits(r.yes);
                r.no = bits(r.no);
            }
        }
        for v in &mut dst.views {
            if let Verify::Reading(r) = &mut v.verify {
                r.asked = bits(r.asked);
                r.answered = bits(r.answered);
                r.trusted = bits(r.trusted);
            }
        }
    }
    for (i, _) in &mut t.stale {
        let (c, m) = (usize::from(*i) / n, usize::from(*i) % n);
        *i = (c * n + inv[m]) as u8;
    }
    for r in t
        .chans
        .iter_mut()
        .flatten()
        .chain(t.stale.iter_mut().map(|(_, r)| r))
    {
        if let Req::Read { of } = r {
            *of = inv[usize::from(*of)] as u8;
        }
    }
    if let Some((m, v, c)) = t.history.overwrite {
        t.history.overwrite = Some((inv[usize::from(m)] as u8, v, c));
    }
    crate::model::canonical_epochs(&mut t);
    t
}
