//! Helpers shared by the test kit's integration tests.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use redquorum_testkit::{RawConnection, ReplyExt};

/// The error type of the tests: any error, with `?`.
pub type TestResult = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Polls `condition` every 5 ms until it holds, failing after `timeout`.
pub fn wait_until(
    timeout: Duration,
    what: &str,
    mut condition: impl FnMut() -> bool,
) -> Result<Duration, String> {
    let started = Instant::now();
    loop {
        if condition() {
            return Ok(started.elapsed());
        }
        if started.elapsed() >= timeout {
            return Err(format!("timed out after {timeout:?} waiting for {what}"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// True if a process with this pid exists (a zombie counts: it has not been reaped).
pub fn process_exists(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Pids of processes whose command line mentions `needle`.
pub fn processes_mentioning(needle: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
        .collect()
}

/// A node on `port` that requires the password `s3cret`: its URL (`url`) carries it, and a
/// client that does not authenticate is refused with `NOAUTH`.
pub fn assert_password_required(url: &str, port: u16) -> TestResult {
    assert_eq!(url, format!("redis://:s3cret@127.0.0.1:{port}"));
    let mut anonymous = RawConnection::connect(
        SocketAddr::from(([127, 0, 0, 1], port)),
        Duration::from_secs(2),
    )?;
    let refused = anonymous.call(&["GET", "k"])?;
    assert!(
        refused.as_error().is_some_and(|e| e.code() == "NOAUTH"),
        "{refused:?}"
    );
    Ok(())
}
