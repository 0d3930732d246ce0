//! Guard v3 where it can fail (issue 19 finding 1): two data losses in one run, clients
//! that cannot reach some masters, so that a verifier's readers may be the very masters
//! that lost their records. On three masters every interleaving is checked; on five (the
//! finding's own shape) every interleaving up to symmetry.

use super::{Named, Size, V3, five, two_losses};
use crate::config::*;
use crate::model::MUTEX;

fn declared(cfg: &mut Config) {
    cfg.guard = GuardMode::Epochs(Guard {
        declared_ms: Some(2000),
        ..V3
    });
}

fn readers(cfg: &mut Config, readers: ReaderRule) {
    cfg.guard = GuardMode::Epochs(Guard { readers, ..V3 });
    cfg.expect = Expect::Fails(MUTEX);
}

pub(super) fn protocol(size: Size) -> Vec<Config> {
    let large = size == Size::Large;
    let losses = two_losses(Named {
        name: "three-two-losses",
        about: "guard v3, 3 masters: c0 (2 s) reaches masters 0 and 1, c1 (1 s) all three; masters 0 and 1 both lose their data (restart empty, restart keeping the marker)",
    });
    let mut three_declared = two_losses(Named {
        name: "three-declared",
        about: "three-two-losses with deployment_max_ttl = 2 s declared: too few trusted readers fall back to it",
    });
    declared(&mut three_declared);
    let five_losses = five(Named {
        name: "five-two-losses",
        about: "guard v3, 5 masters (Q = 3): c0 (2 s) reaches 0-2, c1 (1 s) reaches 0, 1, 3, 4 (finding 1's partitions); masters 0 and 1 lose their data",
    });
    let mut all = vec![losses, three_declared, five_losses];
    if large {
        let mut spread = two_losses(Named {
            name: "three-two-losses-spread-reads",
            about: "three-two-losses with every ttl read a request of its own (delivered at any time, in any order)",
        });
        spread.guard = GuardMode::Epochs(Guard {
            atomic_reads: false,
            ..V3
        });
        let mut five_declared = five(Named {
            name: "five-declared",
            about: "five-two-losses with deployment_max_ttl = 2 s declared",
        });
        declared(&mut five_declared);
        all.extend([spread, five_declared]);
    }
    all
}

pub(super) fn findings(_size: Size) -> Vec<Config> {
    let mut v2 = two_losses(Named {
        name: "i19-finding-1-v2-readers",
        about: "issue 19 finding 1: three-two-losses with guard v2's reader rule (every answering reader counts)",
    });
    readers(&mut v2, ReaderRule::Any);
    let mut v2_five = five(Named {
        name: "i19-finding-1-v2-readers-five",
        about: "issue 19 finding 1 in its own shape: five-two-losses with guard v2's reader rule",
    });
    readers(&mut v2_five, ReaderRule::Any);
    vec![v2, v2_five]
}

/// The first v3 design's vouch step, on three masters: both clients reach every master,
/// c0 (2 s) and c1 (1 s), two restarts without persistence on masters 0 and 1.
fn vouch(id: Named, n: usize) -> Config {
    let mut cfg = two_losses(id);
    cfg.masters = vec![cfg.masters[0]; n];
    cfg.clients = vec![super::client(2000), super::client(1000)];
    if n == 5 {
        // c1 cannot reach master 2, c0 not master 4.
        cfg.clients[0].reach = 0b01111;
        cfg.clients[1].reach = 0b11011;
    }
    cfg.faults.keep_marker = false;
    readers(&mut cfg, ReaderRule::Vouched);
    cfg.search = Search::Exhaustive;
    cfg
}

pub(super) fn controls(size: Size) -> Vec<Config> {
    let mut all = vec![vouch(
        Named {
            name: "control-vouch",
            about: "negative control: the first v3 design (a verifier with enough trusted readers vouches for the master, which is then trusted), 3 masters, two restarts, a record round still in flight",
        },
        3,
    )];
    let mut no_age = two_losses(Named {
        name: "control-reader-no-age",
        about: "negative control: three-two-losses trusting any reader whose marker belongs to the live server, however recent its epoch",
    });
    readers(&mut no_age, ReaderRule::NoAge);
    all.push(no_age);
    if size == Size::Large {
        all.push(vouch(
            Named {
                name: "control-vouch-five",
                about: "negative control: control-vouch on 5 masters (c0 cannot reach master 4, c1 not master 2)",
            },
            5,
        ));
    }
    all
}
