//! Bad command lines: one line on stderr, the usage exit code; and the documented help.

mod common;

use common::{one_line, redquorum};

fn stderr_of(args: &[&str], code: i32) -> String {
    let out = redquorum()
        .args(args)
        .assert()
        .code(code)
        .get_output()
        .clone();
    assert!(out.stdout.is_empty(), "nothing on stdout for {args:?}");
    String::from_utf8(out.stderr).expect("utf-8")
}

#[test]
fn unknown_flags_and_bad_values_are_one_line_usage_errors() {
    for (args, needle) in [
        (&["bench", "--bogus"][..], "--bogus"),
        (&["bench", "--ttl", "fast"], "fast"),
        (&["bench", "--profile", "moon"], "moon"),
        (&["bench", "--workload", "sprint"], "sprint"),
        (
            &["run", "--node", "redis://127.0.0.1:1", "--resource", "r"],
            "COMMAND",
        ),
        (&["launch"], "launch"),
    ] {
        let err = stderr_of(args, 64);
        assert!(one_line(&err), "one line for {args:?}: {err}");
        assert!(err.starts_with("redquorum: "), "{err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn bad_urls_are_usage_errors_that_hide_passwords() {
    let err = stderr_of(
        &[
            "run",
            "--node",
            "redis://:hunter2@",
            "--resource",
            "r",
            "--",
            "true",
        ],
        64,
    );
    assert!(one_line(&err), "{err}");
    assert!(err.contains("invalid URL"), "{err}");
    assert!(!err.contains("hunter2"), "the password leaked: {err}");

    let err = stderr_of(&["probe", "--node", "not a url"], 64);
    assert!(one_line(&err) && err.contains("invalid URL"), "{err}");

    let err = stderr_of(
        &[
            "probe",
            "--node",
            "redis://127.0.0.1:7",
            "--node",
            "redis://127.0.0.1:7",
        ],
        64,
    );
    assert!(one_line(&err) && err.contains("same server"), "{err}");
}

#[test]
fn a_missing_node_list_is_a_usage_error() {
    let err = stderr_of(&["run", "--resource", "r", "--", "true"], 64);
    assert!(one_line(&err) && err.contains("--node"), "{err}");
    let err = stderr_of(&["probe"], 64);
    assert!(err.contains("REDQUORUM_NODES"), "{err}");
}

#[test]
fn refused_option_combinations_are_configuration_errors() {
    let err = stderr_of(
        &[
            "run",
            "--node",
            "redis://127.0.0.1:7",
            "--ttl",
            "1ms",
            "--resource",
            "r",
            "--",
            "true",
        ],
        78,
    );
    assert!(one_line(&err) && err.contains("ttl"), "{err}");
}

#[test]
fn help_documents_the_exit_codes() {
    let out = redquorum()
        .args(["run", "--help"])
        .assert()
        .success()
        .get_output()
        .clone();
    let help = String::from_utf8(out.stdout).expect("utf-8");
    for code in ["64", "69", "75", "76", "78", "128+N"] {
        assert!(help.contains(code), "exit code {code} missing from --help");
    }
    // No subcommand: the help, as a usage error.
    redquorum().assert().code(64);
}
