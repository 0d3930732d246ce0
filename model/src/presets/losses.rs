//! Guard v3 where it can fail (issue 19 finding 1): two data losses in one run (or a
//! loss and a replaced server), clients that cannot reach some masters, so that a
//! verifier's readers may be the very masters that lost their records. On three masters
//! every interleaving is checked; on five (the finding's own shape) seeded random walks.

use super::{Size, V3, five, two_losses, walks};
use crate::config::*;
use crate::model::MUTEX;

fn declared(cfg: &mut Config) {
    cfg.guard = GuardMode::Epochs(Guard {
        declared_ms: Some(2000),
        ..V3
    });
}

fn replacement(cfg: &mut Config) {
    cfg.faults.data_losses = 1;
    cfg.faults.replacements = 1;
    cfg.faults.commissions = 1;
}

fn v2_readers(cfg: &mut Config) {
    cfg.guard = GuardMode::Epochs(Guard {
        readers: ReaderRule::Any,
        vouch: Vouch::Off,
        ..V3
    });
    cfg.expect = Expect::Fails(MUTEX);
    walks(cfg);
}

pub(super) fn protocol(size: Size) -> Vec<Config> {
    let large = size == Size::Large;
    let losses = two_losses(
        "three-two-losses",
        "guard v3: c0 (2 s) reaches masters 0 and 1, c1 (1 s) all three; masters 0 and 1 both lose their data (restart, restart keeping the marker, FLUSHALL)",
    );
    let mut three_declared = two_losses(
        "three-declared",
        "three-two-losses with deployment_max_ttl = 2 s declared: too few trusted readers fall back to it",
    );
    declared(&mut three_declared);
    let mut replaced = two_losses(
        "three-replacement",
        "guard v3, the partitions of three-two-losses: one data loss and one server replaced by a new one, which an operator tries to commission",
    );
    replacement(&mut replaced);
    let five_losses = five(
        "five-two-losses",
        "guard v3, 5 masters: c0 (2 s) reaches 0-2, c1 (1 s) reaches 0, 1, 3, 4; masters 0 and 1 lose their data",
    );
    let mut five_replaced = five(
        "five-replacement",
        "guard v3, 5 masters, the partitions of five-two-losses: a data loss and a replaced server an operator tries to commission",
    );
    replacement(&mut five_replaced);
    let mut all = vec![losses, three_declared, replaced, five_losses, five_replaced];
    if large {
        let mut spread = two_losses(
            "three-two-losses-spread-reads",
            "three-two-losses with every ttl read and every vouch a request of its own (delivered at any time, in any order)",
        );
        spread.guard = GuardMode::Epochs(Guard {
            atomic_reads: false,
            ..V3
        });
        let mut five_declared = five(
            "five-declared",
            "five-two-losses with deployment_max_ttl = 2 s declared",
        );
        declared(&mut five_declared);
        let mut anywhere = five(
            "five-two-losses-anywhere",
            "five-two-losses with the losses on any two masters",
        );
        anywhere.faults.on = 0b11111;
        all.extend([spread, five_declared, anywhere]);
    }
    all
}

pub(super) fn findings(_size: Size) -> Vec<Config> {
    let mut v2 = two_losses(
        "i19-finding-1-v2-readers",
        "issue 19 finding 1: three-two-losses with the v2 reader rule (every answering reader counts, no vouch)",
    );
    v2_readers(&mut v2);
    let mut v2_five = five(
        "i19-finding-1-v2-readers-five",
        "issue 19 finding 1 in its own shape: five-two-losses with the v2 reader rule",
    );
    v2_readers(&mut v2_five);
    let mut forgets = two_losses(
        "i19-finding-7-commission-forgets",
        "issue 19 finding 7: three-replacement with a commission that does not ask the other members whether they remember the master",
    );
    replacement(&mut forgets);
    forgets.commission = CommissionRule::Forgets;
    forgets.expect = Expect::Fails(MUTEX);
    walks(&mut forgets);
    vec![v2, v2_five, forgets]
}

pub(super) fn controls(_size: Size) -> Vec<Config> {
    let mut flag = two_losses(
        "control-k-vouch-without-records",
        "negative control: three-two-losses with a vouch that sets vouched without restoring the ttl records",
    );
    flag.guard = GuardMode::Epochs(Guard {
        vouch: Vouch::FlagOnly,
        ..V3
    });
    flag.expect = Expect::Fails(MUTEX);
    walks(&mut flag);

    let mut unvouched = two_losses(
        "control-l-unvouched-reader",
        "negative control: three-two-losses trusting a reader whose marker belongs to the live server, vouched or not",
    );
    unvouched.guard = GuardMode::Epochs(Guard {
        readers: ReaderRule::AnyMarker,
        ..V3
    });
    unvouched.expect = Expect::Fails(MUTEX);
    walks(&mut unvouched);
    vec![flag, unvouched]
}
