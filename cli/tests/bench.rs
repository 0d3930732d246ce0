//! `redquorum bench` on real masters: the table, valid JSON, and an SVG plot.

mod common;

use common::{cluster, node_args, redquorum};
use serde_json::Value;

#[test]
fn a_short_bench_prints_the_table_and_writes_json_and_svg() {
    let masters = cluster(3);
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("out/bench.json");
    let svg = dir.path().join("out/latency.svg");
    let out = redquorum()
        .arg("bench")
        .args(node_args(&masters))
        .args([
            "--ops",
            "30",
            "--warmup",
            "0",
            "--concurrency",
            "2",
            "--keys",
            "2",
        ])
        .arg("--json")
        .arg(&json)
        .arg("--plot")
        .arg(&svg)
        .assert()
        .success()
        .get_output()
        .clone();
    let table = String::from_utf8(out.stdout).expect("utf-8");
    for needle in [
        "latency:",
        "throughput:",
        "contention:",
        "extend:",
        "floor",
        "ratio",
        "p99.9",
        "votes",
    ] {
        assert!(
            table.contains(needle),
            "`{needle}` missing from the table:\n{table}"
        );
    }

    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON file"))
            .expect("valid JSON");
    assert_eq!(result["masters"], 3);
    assert_eq!(result["quorum"], 2);
    let workloads = result["runs"][0]["workloads"]
        .as_array()
        .expect("workloads");
    let names: Vec<&str> = workloads
        .iter()
        .filter_map(|w| w["workload"].as_str())
        .collect();
    assert_eq!(names, ["latency", "throughput", "contention", "extend"]);
    let latency = &workloads[0];
    // `--ops` bounds each system's attempts exactly.
    assert_eq!(latency["redquorum"]["attempts"], 30);
    assert_eq!(latency["floor"]["attempts"], 30);
    assert!(latency["ratio"]["acquire"]["p50"].is_number(), "{latency}");
    assert_eq!(
        latency["redquorum"]["votes"].as_array().map(Vec::len),
        Some(3)
    );

    let svg = std::fs::read_to_string(&svg).expect("the SVG file");
    assert!(
        svg.starts_with("<svg") || svg.starts_with("<?xml"),
        "{}",
        &svg[..80.min(svg.len())]
    );
    assert!(
        svg.contains("<polyline") || svg.contains("<path"),
        "no line drawn"
    );
    assert!(
        svg.contains("redquorum") && svg.contains("floor"),
        "no legend"
    );
}

#[test]
fn spawned_masters_take_a_profile_and_a_paused_master() {
    let out = redquorum()
        .args([
            "bench",
            "--spawn",
            "3",
            "--profile",
            "1ms,1ms,3ms~1ms",
            "--pause-node",
            "2",
        ])
        .args(["--workload", "latency", "--ops", "10", "--warmup", "0"])
        .assert()
        .success()
        .get_output()
        .clone();
    let stderr = String::from_utf8(out.stderr).expect("utf-8");
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        stderr.contains("started 3 local redis-server masters"),
        "{stderr}"
    );
    assert!(stderr.contains("restart guard is off"), "{stderr}");
    assert!(stdout.contains("master 2 paused"), "{stdout}");
    assert!(
        stdout.contains("one-way delays 1.00ms,1.00ms,3.00ms~1.00ms"),
        "{stdout}"
    );
    assert!(stdout.contains("latency:"), "{stdout}");
}

#[test]
fn profiles_need_spawned_masters() {
    let masters = cluster(1);
    redquorum()
        .arg("bench")
        .args(node_args(&masters))
        .args(["--profile", "one-far-dc", "--ops", "1"])
        .assert()
        .code(64);
}
