//! `redquorum probe` against real masters: a clean set, a replica, an evicting policy, and
//! one server listed twice.

mod common;

use common::{cluster, redquorum};
use serde_json::Value;

fn probe(urls: &[String], extra: &[&str]) -> (i32, String) {
    let mut cmd = redquorum();
    cmd.arg("probe")
        .args(["--clock-window", "100ms"])
        .args(extra);
    for url in urls {
        cmd.args(["--node", url]);
    }
    let out = cmd.output().expect("run redquorum probe");
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    (out.status.code().expect("exited"), stdout)
}

/// `redquorum guard <action>` over `urls`: exit code and stdout.
fn guard(action: &str, urls: &[String]) -> (i32, String) {
    guard_with(action, urls, &[])
}

/// `redquorum guard <action>` on master `member` of the deployment `urls`.
fn guard_member(action: &str, urls: &[String], member: usize) -> (i32, String) {
    guard_with(action, urls, &["--member", &urls[member]])
}

fn guard_with(action: &str, urls: &[String], extra: &[&str]) -> (i32, String) {
    let mut cmd = redquorum();
    cmd.args(["guard", action]);
    for url in urls {
        cmd.args(["--node", url]);
    }
    cmd.args(extra);
    let out = cmd.output().expect("run redquorum guard");
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let stderr = String::from_utf8(out.stderr).expect("utf-8");
    (
        out.status.code().expect("exited"),
        format!("{stdout}{stderr}"),
    )
}

#[test]
fn healthy_commissioned_masters_pass_with_a_table() {
    let masters = redquorum_testkit::LocalCluster::builder()
        .nodes(3)
        .persistence(redquorum_testkit::Persistence::AofAlways)
        .start()
        .expect("start");
    let (code, out) = guard("commission", &masters.urls());
    assert_eq!(code, 0, "{out}");
    assert_eq!(out.matches(": commissioned").count(), 3, "{out}");
    let (code, out) = probe(&masters.urls(), &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("no problem found"), "{out}");
    for i in 0..3 {
        assert!(out.contains(&masters.url(i)), "row for node {i}: {out}");
    }
    assert_eq!(out.matches("counted").count(), 3, "{out}");
    // In service now: commissioning again is refused, and says why.
    let (code, out) = guard_member("commission", &masters.urls(), 0);
    assert_eq!(code, 78, "{out}");
    assert!(out.contains("in service"), "{out}");
}

#[test]
fn new_masters_are_reported_as_kept_out_until_commissioned() {
    let masters = cluster(3);
    let (code, out) = probe(&masters.urls(), &[]);
    assert_eq!(code, 1, "{out}");
    for i in 0..3 {
        assert!(
            out.lines()
                .any(|l| l.starts_with(&format!("warning: node {i}"))
                    && l.contains("stays out")
                    && l.contains("commission")),
            "node {i} is reported as kept out: {out}"
        );
        assert!(
            out.lines()
                .any(|l| l.starts_with(&format!("warning: node {i}"))
                    && l.contains("appendfsync always")),
            "node {i}'s restarts will cost a quarantine: {out}"
        );
    }
    // A reset epoch keeps a commissioned master out again.
    let (code, out) = guard("commission", &masters.urls());
    assert_eq!(code, 0, "{out}");
    let (code, out) = guard_member("reset", &masters.urls(), 0);
    assert_eq!(code, 0, "{out}");
    let (_, out) = probe(&masters.urls(), &["--json"]);
    let report: Value = serde_json::from_str(&out).expect("probe --json prints JSON");
    let guards: Vec<&str> = report["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| n["guard"].as_str().expect("guard"))
        .collect();
    assert_eq!(guards, ["quarantined", "counted", "counted"], "{out}");
}

#[test]
fn a_replica_makes_the_set_unusable() {
    let masters = cluster(3);
    let port = masters.port(0).to_string();
    masters
        .cmd(2, &["REPLICAOF", "127.0.0.1", &port])
        .expect("REPLICAOF");
    let (code, out) = probe(&masters.urls(), &[]);
    assert_eq!(code, 69, "{out}");
    assert!(
        out.contains("error: node 2") && out.contains("replica"),
        "{out}"
    );
}

#[test]
fn an_evicting_policy_is_a_warning_that_says_what_to_set() {
    let masters = cluster(3);
    masters
        .cmd(1, &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"])
        .expect("CONFIG SET");
    let (code, out) = probe(&masters.urls(), &[]);
    assert_eq!(code, 1, "{out}");
    let warning = out
        .lines()
        .find(|l| l.starts_with("warning: node 1") && l.contains("maxmemory-policy"))
        .unwrap_or_else(|| panic!("no eviction warning for node 1: {out}"));
    assert!(
        warning.contains("allkeys-lru") && warning.contains("noeviction"),
        "{warning}"
    );
}

#[test]
fn one_server_under_two_names_is_flagged_as_a_duplicate() {
    let masters = cluster(2);
    let mut urls = masters.urls();
    // Not the same URL (the client refuses that outright): another name for the same port.
    urls.push(format!("redis://localhost:{}", masters.port(0)));
    let (code, out) = probe(&urls, &["--json"]);
    assert_eq!(code, 1, "{out}");
    let report: Value = serde_json::from_str(&out).expect("probe --json prints JSON");
    assert_eq!(report["exit_code"], 1);
    let problems = report["problems"].as_array().expect("problems");
    let duplicate = problems
        .iter()
        .find(|p| p["kind"] == "duplicate")
        .unwrap_or_else(|| panic!("no duplicate flagged: {out}"));
    assert_eq!(duplicate["node"], 2);
    assert!(
        duplicate["message"]
            .as_str()
            .is_some_and(|m| m.contains("node 0"))
    );
    assert_eq!(report["nodes"].as_array().map(Vec::len), Some(3));
}

/// Issue 19, finding 7: a master in service whose data was deleted (`FLUSHALL`) looks new
/// on its own data, so `guard commission` must find out from the other masters (which note
/// every master a client verifies or commissions) and refuse it, naming that memory; with
/// `--force` it is commissioned.
///
/// The operator gives the deployment's masters and names the one to commission with
/// `--member`; given that master alone, the command has no other master to ask and refuses.
#[test]
fn a_flushed_master_in_service_is_not_commissioned_again_without_force() {
    let masters = cluster(5);
    let urls = masters.urls();
    let (code, out) = guard("commission", &urls);
    assert_eq!(code, 0, "{out}");
    // In service: a lock through every master with the guard on, which verifies each.
    let mut run = redquorum();
    run.arg("run");
    for url in &urls {
        run.args(["--node", url]);
    }
    run.args(common::patient(std::time::Duration::from_secs(5)))
        .args(["--ttl", "5s", "--resource", "in-service", "--", "true"])
        .assert()
        .code(0);
    masters.cmd(3, &["FLUSHALL"]).expect("FLUSHALL");
    let (code, out) = guard_member("commission", &urls, 3);
    assert_eq!(code, 78, "a flushed master in service is refused: {out}");
    assert!(
        out.contains("remembers"),
        "the refusal names the memory: {out}"
    );
    let (code, out) = guard("commission", &urls[3..4]);
    assert_eq!(code, 78, "alone, there is no one to ask: {out}");
    assert!(out.contains("no other member"), "{out}");
    let mut forced = redquorum();
    forced.args(["guard", "commission", "--force", "--node", &urls[3]]);
    forced.assert().code(0);
}
