//! Misconfiguration is reported as typed errors with messages that say what to do.

mod common;

use std::path::PathBuf;

use common::TestResult;
use redquorum_testkit::{LocalCluster, TestkitError};

#[test]
fn a_missing_redis_server_says_how_to_install_it() {
    let result = LocalCluster::builder()
        .nodes(1)
        .redis_server(PathBuf::from("/nonexistent/redis-server"))
        .start();
    let err = result.expect_err("a missing binary cannot start");
    assert!(
        matches!(err, TestkitError::RedisServerNotFound { .. }),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains("apt-get install -y redis-server"),
        "{message}"
    );
    assert!(message.contains("REDQUORUM_REDIS_SERVER"), "{message}");
}

#[test]
fn invalid_options_are_rejected_before_anything_starts() {
    let empty = LocalCluster::builder().password("").start();
    assert!(matches!(empty, Err(TestkitError::InvalidOption { .. })));
    let zero = LocalCluster::builder()
        .ready_timeout(std::time::Duration::ZERO)
        .start();
    assert!(matches!(zero, Err(TestkitError::InvalidOption { .. })));
}

#[test]
fn a_bad_redis_argument_fails_with_the_log_tail() {
    let result = LocalCluster::builder()
        .nodes(1)
        .extra_args(["--no-such-directive", "1"])
        .start();
    let err = result.expect_err("redis-server rejects unknown directives");
    let message = err.to_string();
    assert!(matches!(err, TestkitError::NotReady { .. }), "{err:?}");
    assert!(message.contains("exited"), "{message}");
    assert!(
        message.contains("no-such-directive"),
        "the log tail is included: {message}"
    );
}

#[test]
fn a_program_that_is_not_redis_never_becomes_ready() {
    let result = LocalCluster::builder()
        .nodes(1)
        .redis_server(PathBuf::from("/bin/true"))
        .start();
    assert!(
        matches!(result, Err(TestkitError::NotReady { .. })),
        "{result:?}"
    );
}

#[test]
fn an_empty_cluster_is_allowed() -> TestResult {
    let cluster = LocalCluster::start(0)?;
    assert!(cluster.is_empty());
    assert!(cluster.urls().is_empty());
    assert!(cluster.links()?.is_empty());
    Ok(())
}
