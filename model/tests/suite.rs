//! Every instance of the tiny suite concludes what it must: the protocol instances hold
//! (over a two-tick horizon here, the cluster's at t = 0; `make model` checks the longer
//! ones), and every finding and negative control finds its counterexample.

use redquorum_model::{Expect, Size, Verdict, check, suite};

fn run(name: &str) {
    let cfg = suite(Size::Tiny)
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no instance {name}"));
    let expect = cfg.expect;
    // One thread each: the test harness already runs the tests side by side.
    let out = check(cfg, 1);
    if let Expect::Fails(p) = expect {
        let (found, trace) = out.counterexample().expect("a counterexample");
        assert_eq!(found, p, "{name} failed another property");
        assert!(trace.len() > 1, "{name}: empty trace");
    }
    assert!(
        out.as_expected(),
        "{name}: {:?}",
        out.verdicts
            .iter()
            .map(|(n, v)| (n, matches!(v, Verdict::Holds | Verdict::Witnessed)))
            .collect::<Vec<_>>()
    );
}

macro_rules! instances {
    ($($test:ident => $name:literal),* $(,)?) => {
        $(#[test] fn $test() { run($name); })*
    };
}

instances! {
    mutex_restart => "mutex-restart",
    mutex_flush => "mutex-flush",
    mutex_network => "mutex-network",
    fencing => "fencing",
    rwlock => "rwlock",
    semaphore => "semaphore",
    clocks => "clocks",
    first_seen => "first-seen",
    finding_1_records_in_flight => "finding-1-records-in-flight",
    finding_2_boot_anchor => "finding-2-boot-anchor",
    control_a_guard_off => "control-a-guard-off",
    control_b_old_guard => "control-b-old-guard",
    control_c_set_xx => "control-c-set-xx",
    control_d_semaphore_majority => "control-d-semaphore-majority",
    control_e_zero_drift => "control-e-zero-drift",
    control_f_no_connection_check => "control-f-no-connection-check",
    cluster_lossy => "cluster-lossy",
    cluster_failback => "cluster-failback",
    cluster_failback_run_id => "cluster-failback-run-id",
    cluster_failback_epoch_only => "cluster-failback-epoch-only",
    control_cluster_member_epoch => "control-cluster-member-epoch",
    control_cluster_moved_followed => "control-cluster-moved-followed",
    control_cluster_failover_kept => "control-cluster-failover-kept",
}

#[test]
fn anchors() {
    use redquorum_model::{Anchor, restart_anchor_ms};
    // Booted at 10.9 s, asked at 12.0 s: uptime_in_seconds = 12 - 10 = 2, real 1.1 s.
    let (boot, now, up) = (10_900, 12_000, 2);
    assert!(restart_anchor_ms(Anchor::Note, now, up) < boot);
    assert!(restart_anchor_ms(Anchor::Uptime, now, up) < boot);
    assert!(restart_anchor_ms(Anchor::Safe, now, up) >= boot);
}
