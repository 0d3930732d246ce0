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

#[test]
fn healthy_masters_pass_with_a_table() {
    let masters = cluster(3);
    let (code, out) = probe(&masters.urls(), &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("no problem found"), "{out}");
    for i in 0..3 {
        assert!(out.contains(&masters.url(i)), "row for node {i}: {out}");
    }
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
        .find(|l| l.starts_with("warning: node 1"))
        .unwrap_or_else(|| panic!("no warning for node 1: {out}"));
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
