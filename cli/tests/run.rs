//! `redquorum run` against real masters: the child's status, its environment, refusal while
//! another run holds the resource, and stopping the child when the lock is lost.

mod common;

use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{cluster, node_args, patient, redquorum, redquorum_process, wait_exit, wait_until};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// `redquorum run`'s default `--ttl`.
const DEFAULT_TTL: Duration = Duration::from_secs(10);

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_millis()
}

#[test]
fn the_childs_status_and_environment_come_through() {
    let masters = cluster(3);
    let before = now_ms();
    let out = redquorum()
        .arg("run")
        .args(node_args(&masters))
        .args(patient(Duration::from_secs(5)))
        .args(["--resource", "env-check", "--fencing", "--ttl", "5s", "--"])
        .args([
            "sh",
            "-c",
            "echo \"$REDQUORUM_RESOURCE $REDQUORUM_DEADLINE_MS $REDQUORUM_FENCING_TOKEN\"; exit 3",
        ])
        .assert()
        .code(3)
        .get_output()
        .clone();
    let after = now_ms();
    let stdout = String::from_utf8(out.stdout).expect("utf-8");
    let fields: Vec<&str> = stdout.split_whitespace().collect();
    assert_eq!(fields.len(), 3, "{stdout}");
    assert_eq!(fields[0], "env-check");
    let deadline: u128 = fields[1].parse().expect("deadline in epoch ms");
    assert!(
        deadline > before && deadline <= after + 5_000,
        "{deadline} vs {before}..{after}"
    );
    let token: u64 = fields[2].parse().expect("a fencing token");
    assert!(token >= 1);

    // A child killed by a signal: 128 + the signal, as shells report it.
    redquorum()
        .arg("run")
        .args(node_args(&masters))
        .args(patient(DEFAULT_TTL))
        .args(["--resource", "env-check", "--", "sh", "-c", "kill -TERM $$"])
        .assert()
        .code(128 + 15);
    // A command that does not exist: 127, as shells report it.
    redquorum()
        .arg("run")
        .args(node_args(&masters))
        .args(patient(DEFAULT_TTL))
        .args(["--resource", "env-check", "--", "/nonexistent/command"])
        .assert()
        .code(127);
}

#[test]
fn a_held_resource_is_refused_until_released() {
    let masters = cluster(3);
    let dir = tempfile::tempdir().expect("tempdir");
    let started = dir.path().join("started");
    let mut holder = redquorum_process()
        .arg("run")
        .args(node_args(&masters))
        .args(patient(DEFAULT_TTL))
        .args([
            "--resource",
            "shared",
            "--",
            "sh",
            "-c",
            "echo > \"$STARTED\"; exec sleep 30",
        ])
        .env("STARTED", &started)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the holder");
    wait_until(
        "the holder's command to start",
        Duration::from_secs(60),
        || started.exists(),
    );

    let out = redquorum()
        .arg("run")
        .args(node_args(&masters))
        .args(patient(DEFAULT_TTL))
        .args(["--resource", "shared", "--wait", "300ms", "--", "true"])
        .assert()
        .code(75)
        .get_output()
        .clone();
    let err = String::from_utf8(out.stderr).expect("utf-8");
    assert!(err.contains("held by another client"), "{err}");

    // SIGTERM to redquorum reaches the command; redquorum releases and reports it.
    let pid = Pid::from_raw(i32::try_from(holder.id()).expect("pid"));
    kill(pid, Signal::SIGTERM).expect("signal the holder");
    let status = wait_exit(&mut holder, Duration::from_secs(60));
    assert_eq!(status.code(), Some(128 + 15));

    redquorum()
        .arg("run")
        .args(node_args(&masters))
        .args(patient(DEFAULT_TTL))
        .args(["--resource", "shared", "--", "true"])
        .assert()
        .code(0);
}

#[test]
fn losing_the_lock_stops_the_child_with_the_lost_code() {
    let masters = cluster(5);
    let dir = tempfile::tempdir().expect("tempdir");
    let started = dir.path().join("started");
    let stopped = dir.path().join("stopped");
    let script =
        "trap 'echo term > \"$STOPPED\"; exit 0' TERM; echo > \"$STARTED\"; sleep 30 & wait";
    let mut run = redquorum_process()
        .arg("run")
        .args(node_args(&masters))
        .args(patient(Duration::from_secs(2)))
        .args(["--resource", "doomed", "--ttl", "2s", "--grace", "5s", "--"])
        .args(["sh", "-c", script])
        .env("STARTED", &started)
        .env("STOPPED", &stopped)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn redquorum run");
    wait_until("the command to start", Duration::from_secs(60), || {
        started.exists()
    });
    for i in 0..3 {
        masters.kill(i).expect("kill a master");
    }
    let status = wait_exit(&mut run, Duration::from_secs(20));
    let mut err = String::new();
    std::io::Read::read_to_string(&mut run.stderr.take().expect("stderr"), &mut err)
        .expect("read stderr");
    assert_eq!(status.code(), Some(76), "{err}");
    assert!(err.contains("was lost"), "{err}");
    // The command was told to stop (and exiting 0 on its own did not hide the loss).
    assert_eq!(
        std::fs::read_to_string(&stopped)
            .expect("the command got SIGTERM")
            .trim(),
        "term"
    );
}

/// A `redquorum run` of `args` whose command marks `marker` and sleeps.
fn hold(
    masters: &redquorum_testkit::LocalCluster,
    args: &[&str],
    marker: &std::path::Path,
) -> std::process::Child {
    redquorum_process()
        .arg("run")
        .args(node_args(masters))
        .args(args)
        .args(["--", "sh", "-c", "echo > \"$MARKER\"; exec sleep 30"])
        .env("MARKER", marker)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn a holder")
}

fn stop(child: &mut std::process::Child) {
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    kill(pid, Signal::SIGTERM).expect("signal");
    wait_exit(child, Duration::from_secs(60));
}

#[test]
fn shell_jobs_share_a_resource_as_readers_writers_and_permit_holders() {
    let masters = cluster(3);
    let dir = tempfile::tempdir().expect("tempdir");
    // Two readers run together; a writer is refused meanwhile, and says who holds.
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let mut readers = vec![
        hold(&masters, &["--resource", "doc", "--read"], &a),
        hold(&masters, &["--resource", "doc", "--read"], &b),
    ];
    wait_until("both readers to run", Duration::from_secs(60), || {
        a.exists() && b.exists()
    });
    let out = redquorum()
        .arg("run")
        .args(node_args(&masters))
        .args(["--resource", "doc", "--write", "--", "true"])
        .assert()
        .code(75)
        .get_output()
        .clone();
    let err = String::from_utf8(out.stderr).expect("utf-8");
    assert!(err.contains("readers"), "{err}");
    for r in &mut readers {
        stop(r);
    }
    redquorum()
        .arg("run")
        .args(node_args(&masters))
        .args(["--resource", "doc", "--write", "--", "true"])
        .assert()
        .code(0);
    // Two permits: two jobs run, a third is refused.
    let (p, q) = (dir.path().join("p"), dir.path().join("q"));
    let mut holders = vec![
        hold(&masters, &["--resource", "pool", "--permits", "2"], &p),
        hold(&masters, &["--resource", "pool", "--permits", "2"], &q),
    ];
    wait_until(
        "both permit holders to run",
        Duration::from_secs(60),
        || p.exists() && q.exists(),
    );
    redquorum()
        .arg("run")
        .args(node_args(&masters))
        .args(["--resource", "pool", "--permits", "2", "--", "true"])
        .assert()
        .code(75);
    for h in &mut holders {
        stop(h);
    }
    // Conflicting kinds are a usage error.
    redquorum()
        .arg("run")
        .args(node_args(&masters))
        .args(["--resource", "x", "--read", "--write", "--", "true"])
        .assert()
        .code(64);
}
