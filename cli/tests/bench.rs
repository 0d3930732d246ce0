//! `redquorum bench` on real masters: the table, valid JSON, and an SVG plot.

mod common;

use common::{cluster, node_args, one_line, redquorum};
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
        .output()
        .expect("redquorum runs");
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
    assert!(stdout.contains("link check:"), "{stdout}");
    // A machine too busy for the proxy to keep time makes the link check refuse (70):
    // whether it does is the machine's business, what each outcome prints is ours.
    match out.status.code() {
        Some(0) => assert!(stdout.contains("latency:"), "{stdout}"),
        Some(70) => assert_link_check_refused(&stdout, &stderr),
        other => panic!("exit {other:?}:\n{stdout}\n{stderr}"),
    }
}

/// What a refused link check prints: the table with the link that is off, one error line,
/// and no measurement.
fn assert_link_check_refused(stdout: &str, stderr: &str) {
    assert!(stdout.contains("OFF"), "{stdout}");
    assert!(
        !stdout.contains("latency:"),
        "nothing is measured:\n{stdout}"
    );
    assert!(one_line(stderr.lines().last().unwrap_or("")), "{stderr}");
    let last = stderr.lines().last().unwrap_or("");
    assert!(
        last.starts_with("redquorum: the link check failed: node "),
        "{stderr}"
    );
    assert!(last.contains("nothing was measured"), "{stderr}");
}

#[test]
fn a_profile_run_checks_every_link_first_and_reports_the_check() {
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("bench.json");
    let out = redquorum()
        .args(["bench", "--spawn", "3", "--profile", "1ms,1ms,2ms~500us"])
        .args(["--workload", "latency", "--ops", "5", "--warmup", "0"])
        .arg("--json")
        .arg(&json)
        .output()
        .expect("redquorum runs");
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let stderr = String::from_utf8(out.stderr).expect("utf-8");
    assert!(
        stdout.contains("link check: round trip through each link, median of 41 PINGs"),
        "{stdout}"
    );
    assert!(stdout.contains("tolerance ±10%"), "{stdout}");
    for row in ["  0 ", "  1 ", "  2 "] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(row) && l.contains('%')),
            "no row for node{row}in\n{stdout}"
        );
    }
    assert!(stdout.contains("2.00ms~500.0µs"), "{stdout}");
    match out.status.code() {
        Some(0) => {
            let result: Value =
                serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON file"))
                    .expect("valid JSON");
            let check = &result["runs"][0]["link_check"];
            assert_eq!(check["pings"], 41, "{check}");
            assert_eq!(check["tolerance_pct"], 10.0, "{check}");
            assert_eq!(check["passed"], true, "{check}");
            let links = check["links"].as_array().expect("links");
            assert_eq!(links.len(), 3);
            assert_eq!(links[2]["one_way_ms"], 2.0, "{check}");
            assert_eq!(links[2]["jitter_ms"], 0.5, "{check}");
            for field in [
                "loopback_us",
                "expected_us",
                "measured_us",
                "p10_us",
                "p90_us",
                "off_pct",
            ] {
                assert!(links[0][field].is_number(), "{field} in {check}");
            }
            assert!(stdout.contains("latency:"), "{stdout}");
        }
        Some(70) => {
            assert_link_check_refused(&stdout, &stderr);
            assert!(!json.exists(), "a refused run writes no results");
        }
        other => panic!("exit {other:?}:\n{stdout}\n{stderr}"),
    }
}

#[test]
fn a_link_off_its_profile_stops_the_benchmark_with_exit_70() {
    // With no tolerance at all, a link would have to match its profile to the nanosecond.
    let out = redquorum()
        .args(["bench", "--spawn", "3", "--profile", "lan"])
        .args([
            "--link-tolerance",
            "0",
            "--workload",
            "latency",
            "--ops",
            "5",
        ])
        .assert()
        .code(70)
        .get_output()
        .clone();
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let stderr = String::from_utf8(out.stderr).expect("utf-8");
    assert!(stdout.contains("tolerance ±0%"), "{stdout}");
    assert_link_check_refused(&stdout, &stderr);
    assert!(stderr.contains("--link-tolerance"), "{stderr}");
}

#[test]
fn a_fleet_reports_every_client_and_the_aggregate() {
    let masters = cluster(3);
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("fleet.json");
    let out = redquorum()
        .arg("bench")
        .args(node_args(&masters))
        .args(["--clients", "3", "--workload", "latency,contention,extend"])
        .args(["--ops", "30", "--warmup", "0", "--concurrency", "2"])
        .arg("--json")
        .arg(&json)
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        stdout.contains("3 clients (each its own Redlock, floor and runtime)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("1 worker(s) in each of 3 clients (figures for all together)"),
        "{stdout}"
    );
    for needle in [
        "acquire p50",
        "acquire p99",
        "acquired/s",
        "extended/s",
        "client 0",
        "client 2",
        "3 clients: redquorum",
    ] {
        assert!(stdout.contains(needle), "`{needle}` missing:\n{stdout}");
    }

    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON file"))
            .expect("valid JSON");
    assert_eq!(result["clients"], 3);
    assert!(
        result["runs"][0]["link_check"].is_null(),
        "no proxy, no check"
    );
    for w in result["runs"][0]["workloads"]
        .as_array()
        .expect("workloads")
    {
        assert_eq!(w["clients"], 3, "{w}");
        let clients = w["per_client"].as_array().expect("per_client");
        assert_eq!(clients.len(), 3, "{w}");
        for system in ["redquorum", "floor"] {
            // `--ops` counts the fleet's cycles: the clients' attempts add up to the total.
            let sum: u64 = clients
                .iter()
                .map(|c| c[system]["attempts"].as_u64().expect("attempts"))
                .sum();
            assert_eq!(Some(sum), w[system]["attempts"].as_u64(), "{system} in {w}");
            for c in clients {
                assert!(c[system]["acquisitions_per_s"].is_number(), "{c}");
                assert!(c[system]["cycles_per_s"].is_number(), "{c}");
            }
        }
        assert_eq!(clients[1]["client"], 1);
    }
    let latency = &result["runs"][0]["workloads"][0];
    assert_eq!(latency["redquorum"]["attempts"], 30);
    assert!(latency["per_client"][0]["redquorum"]["latency"]["p99_us"].is_number());
}

#[test]
fn bad_fleet_sizes_and_tolerances_are_usage_errors() {
    let masters = cluster(1);
    for bad in [
        ["--clients", "0"],
        ["--clients", "65"],
        ["--clients", "many"],
        ["--link-tolerance", "101"],
        ["--link-tolerance=-5", "--no-restart-guard"],
        ["--link-tolerance", "tight"],
    ] {
        let out = redquorum()
            .arg("bench")
            .args(node_args(&masters))
            .args(bad)
            .args(["--ops", "1"])
            .assert()
            .code(64)
            .get_output()
            .clone();
        let stderr = String::from_utf8(out.stderr).expect("utf-8");
        assert!(one_line(&stderr), "{bad:?}: {stderr}");
        let flag = bad[0].split('=').next().unwrap_or_default();
        assert!(stderr.contains(flag), "{bad:?}: {stderr}");
    }
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
