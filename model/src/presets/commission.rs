//! Commissioning (`guard-v3.md` "Commissioning: only when no lock can be held"): a lost
//! master replaced by a new server at a new address, which an operator commissions (it then
//! counts at once and is believed as a reader), beside a data loss; and a flushed master in
//! service that a fresh client tries to commission (issue 19 finding 7).

use super::{Named, Size, base, five, quiet};
use crate::config::*;
use crate::model::MUTEX;

/// A replacement and a commission attempt, beside `losses` other data losses, on the
/// masters of `five` (or of `base` on three masters: both clients reach every master).
fn replacement(cfg: &mut Config, losses: u8) {
    cfg.faults.data_losses = losses;
    cfg.faults.replacements = 1;
    cfg.faults.commissions = 1;
    cfg.faults.keep_marker = false;
    cfg.faults.flush = losses > 0;
}

fn three(id: Named, losses: u8) -> Config {
    let mut cfg = base(id);
    replacement(&mut cfg, losses);
    cfg.faults.on = 0b011;
    quiet(&mut cfg);
    cfg.horizon = 3;
    cfg
}

pub(super) fn protocol(_size: Size) -> Vec<Config> {
    let mut five_replaced = five(Named {
        name: "five-replacement",
        about: "guard v3, 5 masters, finding 1's partitions: one data loss and one server replaced by a new one at a new address, which an operator commissions if every check passes",
    });
    replacement(&mut five_replaced, 1);
    let three_replaced = three(
        Named {
            name: "three-replacement",
            about: "guard v3, 3 masters: a server replaced by a new one at a new address, which an operator commissions if every check passes",
        },
        0,
    );
    vec![three_replaced, five_replaced]
}

pub(super) fn findings(_size: Size) -> Vec<Config> {
    let mut forgets = three(
        Named {
            name: "i19-finding-7-commission-forgets",
            about: "issue 19 finding 7: a flushed master in service commissioned by a check that looks only at the master itself (no memory, no records)",
        },
        1,
    );
    forgets.faults.replacements = 0;
    forgets.commission = CommissionRule {
        memory: false,
        live_records: false,
        ruled_out: false,
    };
    forgets.expect = Expect::Fails(MUTEX);
    vec![forgets]
}

pub(super) fn controls(_size: Size) -> Vec<Config> {
    let mut no_records = three(
        Named {
            name: "control-commission-no-record-check",
            about: "negative control: three-replacement commissioning without the live-record check",
        },
        0,
    );
    no_records.commission.live_records = false;
    no_records.expect = Expect::Fails(MUTEX);
    vec![no_records]
}
