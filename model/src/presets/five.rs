//! Guard v3 at the size where it can fail (issue 19 finding 1): five masters, two data
//! losses in one run (or a loss and a replacement), clients that cannot reach some
//! masters, so a verifier's readers may be the very masters that lost their records.

use super::{Size, V3, five};
use crate::config::*;
use crate::model::MUTEX;

pub(super) fn protocol(size: Size) -> Vec<Config> {
    let large = size == Size::Large;
    let losses = five(
        "five-two-losses",
        "guard v3, 5 masters: c0 (2 s) reaches 0-2, c1 (1 s) reaches 0, 1, 3, 4; masters 0 and 1 lose their data (restart, restart keeping the marker, FLUSHALL)",
    );

    let mut declared = five(
        "five-declared",
        "five-two-losses with deployment_max_ttl = 2 s declared: too few trusted readers fall back to it",
    );
    declared.guard = GuardMode::Epochs(Guard {
        declared_ms: Some(2000),
        ..V3
    });

    let mut replaced = five(
        "five-replacement",
        "guard v3, 5 masters, the partitions of five-two-losses: one data loss and one server replaced by a new one, which an operator tries to commission",
    );
    replaced.faults.data_losses = 1;
    replaced.faults.replacements = 1;
    replaced.faults.commissions = 1;

    let mut all = vec![losses, declared, replaced];
    if large {
        let mut spread = five(
            "five-two-losses-spread-reads",
            "five-two-losses with every ttl read a request of its own (delivered at any time, in any order)",
        );
        spread.guard = GuardMode::Epochs(Guard {
            atomic_reads: false,
            ..V3
        });
        let mut any = five(
            "five-two-losses-anywhere",
            "five-two-losses with the losses on any two masters",
        );
        any.faults.on = 0b11111;
        all.extend([spread, any]);
    }
    all
}

pub(super) fn findings(_size: Size) -> Vec<Config> {
    let mut v2 = five(
        "i19-finding-1-v2-readers",
        "issue 19 finding 1: the v2 reader rule (every answering reader counts, no vouch) on five-two-losses",
    );
    v2.guard = GuardMode::Epochs(Guard {
        readers: ReaderRule::Any,
        vouch: Vouch::Off,
        ..V3
    });
    v2.expect = Expect::Fails(MUTEX);

    let mut forgets = five(
        "i19-finding-7-commission-forgets",
        "issue 19 finding 7: five-replacement with a commission that does not ask the other members whether they remember the master",
    );
    forgets.faults.data_losses = 1;
    forgets.faults.replacements = 1;
    forgets.faults.commissions = 1;
    forgets.commission = CommissionRule::Forgets;
    forgets.expect = Expect::Fails(MUTEX);
    vec![v2, forgets]
}

pub(super) fn controls(_size: Size) -> Vec<Config> {
    let mut flag = five(
        "control-k-vouch-without-records",
        "negative control: the vouch sets vouched without restoring the ttl records",
    );
    flag.guard = GuardMode::Epochs(Guard {
        vouch: Vouch::FlagOnly,
        ..V3
    });
    flag.expect = Expect::Fails(MUTEX);

    let mut unvouched = five(
        "control-l-unvouched-reader",
        "negative control: a reader with a marker of the live server is trusted, vouched or not",
    );
    unvouched.guard = GuardMode::Epochs(Guard {
        readers: ReaderRule::AnyMarker,
        ..V3
    });
    unvouched.expect = Expect::Fails(MUTEX);
    vec![flag, unvouched]
}
