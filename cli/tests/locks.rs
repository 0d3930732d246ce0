//! `redquorum locks` against real masters: every kind held, a lock on a minority of masters
//! only, a quarantined master and a master that is down; the JSON parsed, the table read.

mod common;

use std::time::Duration;

use common::{cluster, redquorum};
use redis::AsyncCommands;
use redquorum::{LockOptions, Redlock};
use redquorum_testkit::LocalCluster;
use serde_json::Value;

/// `--node URL` for every master, the restart guard on (the test commissions them): the
/// guard's view is part of what is shown.
fn node_args(cluster: &LocalCluster) -> Vec<String> {
    cluster
        .urls()
        .into_iter()
        .flat_map(|u| ["--node".to_owned(), u])
        .collect()
}

fn locks(args: &[String], extra: &[&str]) -> (i32, String) {
    let out = redquorum()
        .arg("locks")
        .args(args)
        .args(extra)
        .output()
        .expect("run redquorum locks");
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    (out.status.code().expect("exited"), stdout)
}

/// The JSON entries of `resource`.
fn entries<'a>(view: &'a Value, resource: &str) -> Vec<&'a Value> {
    view["locks"]
        .as_array()
        .expect("locks")
        .iter()
        .filter(|l| l["resource"] == resource)
        .collect()
}

fn held_on(entry: &Value) -> Vec<bool> {
    entry["masters"]
        .as_array()
        .expect("masters")
        .iter()
        .map(|m| !m.is_null())
        .collect()
}

#[test]
fn every_kind_a_minority_a_quarantined_and_a_down_master_are_shown() {
    let masters = cluster(5);
    let urls = masters.urls();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    // Held by this client for the whole test: its locks outlive the command's runs.
    let (client, held) = runtime.block_on(async {
        let client = Redlock::builder()
            .nodes(urls.clone())
            .ttl(Duration::from_secs(60))
            .node_timeout(Duration::from_millis(500))
            .build()
            .expect("valid");
        for i in 0..5 {
            client.commission(i, false).await.expect("commission");
        }
        let mut held = vec![client.lock("orders").await.expect("mutex")];
        for _ in 0..2 {
            held.push(
                client
                    .lock_with(["catalog"], LockOptions::new().read())
                    .await
                    .expect("read"),
            );
        }
        held.push(
            client
                .lock_with(["ledger"], LockOptions::new().write())
                .await
                .expect("write"),
        );
        held.push(
            client
                .lock_with(["pool"], LockOptions::new().permits(2))
                .await
                .expect("permit"),
        );
        // Keys on two masters only: a failed acquisition's leftovers, held by no one.
        for i in [0, 1] {
            let mut c = redis::Client::open(masters.url(i))
                .expect("url")
                .get_multiplexed_async_connection()
                .await
                .expect("connect");
            let _: () = c
                .set_ex("redquorum:lock:stale", "leftover-value", 60)
                .await
                .expect("SET");
        }
        (client, held)
    });

    // All five up: every holder on every master.
    let (code, out) = locks(&node_args(&masters), &["--json"]);
    assert_eq!(code, 0, "{out}");
    let view: Value = serde_json::from_str(&out).expect("JSON");
    let orders = entries(&view, "orders");
    assert_eq!(orders.len(), 1, "{out}");
    assert_eq!(orders[0]["kind"], "mutex");
    assert_eq!(orders[0]["quorum_view"], "held");
    assert_eq!(orders[0]["held_on"], 5);
    assert_eq!(orders[0]["quorum"], 3);
    assert!(
        held[0]
            .value()
            .starts_with(orders[0]["holder"].as_str().expect("holder"))
    );
    let until = orders[0]["until_ms"].as_u64().expect("until");
    assert!(until > 50_000 && until <= 60_000, "{until}");
    let catalog = entries(&view, "catalog");
    assert_eq!(catalog.len(), 2, "two readers: {out}");
    assert!(
        catalog
            .iter()
            .all(|c| c["kind"] == "read" && c["quorum_view"] == "held")
    );
    assert_eq!(entries(&view, "ledger")[0]["kind"], "write");
    let pool = entries(&view, "pool");
    assert_eq!(pool[0]["kind"], "permits");
    assert_eq!(pool[0]["quorum"], 4, "2 permits of 5 masters need 4");
    let stale = entries(&view, "stale");
    assert_eq!(stale[0]["quorum_view"], "minority", "{out}");
    assert_eq!(held_on(stale[0]), [true, true, false, false, false]);
    // The guard's view: every master commissioned, counted.
    for m in view["masters"].as_array().expect("masters") {
        assert_eq!(m["state"], "up");
        assert_eq!(m["quarantined"], false, "{m}");
        assert!(
            m["guard"].as_str().expect("guard").starts_with("counted"),
            "{m}"
        );
    }
    // The resource filter.
    let (_, out) = locks(&node_args(&masters), &["--json", "--resource", "c*"]);
    let filtered: Value = serde_json::from_str(&out).expect("JSON");
    let names: Vec<&str> = filtered["locks"]
        .as_array()
        .expect("locks")
        .iter()
        .map(|l| l["resource"].as_str().expect("resource"))
        .collect();
    assert_eq!(names, ["catalog", "catalog"]);

    // Master 3 loses its data (quarantined for the longest ttl), master 4 goes down.
    masters.cmd(3, &["FLUSHALL"]).expect("FLUSHALL");
    masters.kill(4).expect("kill");
    let (code, out) = locks(&node_args(&masters), &["--json"]);
    assert_eq!(code, 0, "three of five masters read: {out}");
    let view: Value = serde_json::from_str(&out).expect("JSON");
    let ms = view["masters"].as_array().expect("masters");
    assert_eq!(ms[4]["state"], "down", "{out}");
    assert!(ms[4]["error"].is_string());
    assert_eq!(ms[3]["state"], "up");
    assert_eq!(ms[3]["quarantined"], true, "{out}");
    let orders = entries(&view, "orders");
    assert_eq!(held_on(orders[0]), [true, true, true, false, false]);
    assert_eq!(orders[0]["quorum_view"], "held");
    // Two permits need four masters: three hold it now.
    assert_eq!(entries(&view, "pool")[0]["quorum_view"], "minority");

    let (_, table) = locks(&node_args(&masters), &[]);
    println!("{table}");
    assert!(
        table.contains("master 4") && table.contains("down"),
        "{table}"
    );
    assert!(table.contains("quarantined"), "{table}");
    assert!(table.contains("minority 2/5"), "{table}");
    assert!(table.contains("held on 3/5"), "{table}");

    drop(held);
    drop(client);
}

#[test]
fn watch_prints_one_table_after_another_when_not_on_a_terminal() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let masters = cluster(3);
    let mut child = common::redquorum_process()
        .arg("locks")
        .args(node_args(&masters))
        .args(["--no-restart-guard", "--watch", "--interval", "50ms"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("start redquorum locks --watch");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    // Each refresh starts with the masters' lines; three refreshes, then stop it.
    let mut refreshes = 0;
    while refreshes < 3 {
        let line = lines.next().expect("more output").expect("utf-8");
        assert!(
            !line.contains("\u{1b}["),
            "no screen control off a terminal: {line:?}"
        );
        if line.starts_with("master 0 ") {
            refreshes += 1;
        }
    }
    child.kill().expect("stop it");
    child.wait().expect("reaped");
}
