//! Helpers for the CLI tests: real masters, the binary, bounded waits.

#![allow(dead_code, unreachable_pub)]

use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use redquorum_testkit::LocalCluster;

/// `n` fresh masters.
pub fn cluster(n: usize) -> LocalCluster {
    LocalCluster::start(n).expect("start redis-server masters (is redis-server installed?)")
}

/// The `redquorum` binary with a clean environment for its own variables.
pub fn redquorum() -> assert_cmd::Command {
    let mut cmd = assert_cmd::Command::cargo_bin("redquorum").expect("the binary is built");
    cmd.env_remove("REDQUORUM_NODES").env_remove("RUST_LOG");
    cmd
}

/// The same, as a plain process to run in the background.
pub fn redquorum_process() -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("redquorum"));
    cmd.env_remove("REDQUORUM_NODES")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    cmd
}

/// `--node URL` for every master, with the restart guard off: the masters are seconds old
/// and the guard (rightly) would not count them for a ttl.
pub fn node_args(cluster: &LocalCluster) -> Vec<String> {
    let mut args: Vec<String> = cluster
        .urls()
        .into_iter()
        .flat_map(|u| ["--node".to_owned(), u])
        .collect();
    args.push("--no-restart-guard".to_owned());
    args
}

/// `--node-timeout` at the most the CLI allows for `ttl` (a tenth of it). The 50 ms default
/// suits production masters; a fresh process on a loaded test machine may need longer for
/// its first round trip, so every test that is not about time-outs passes this.
pub fn patient(ttl: Duration) -> [String; 2] {
    [
        "--node-timeout".to_owned(),
        format!("{}ms", (ttl / 10).as_millis()),
    ]
}

/// Polls `done` until it holds, for at most `limit`; panics with `what` otherwise.
pub fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `child` to exit, for at most `limit` (then kills it and panics).
pub fn wait_exit(child: &mut Child, limit: Duration) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("redquorum did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn exists(path: &Path) -> bool {
    path.exists()
}

/// Exactly one non-empty line.
pub fn one_line(text: &str) -> bool {
    text.lines().filter(|l| !l.trim().is_empty()).count() == 1
}
