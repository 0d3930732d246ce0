//! TLS servers: certificates made at test time, TLS clients with the right and the wrong
//! authority, the ACL user, and client certificates. The test kit has no TLS client, so
//! these tests talk TLS through `redis-cli --tls`.

mod common;

use std::path::Path;
use std::process::Command;

use common::{TestResult, process_exists};
use redquorum_testkit::{ReplyExt, TestkitError, TlsAuthClients, TlsCerts, TlsServer};

/// `redis-cli --tls` against the server's TLS port; stdout (and stderr) of the command.
fn tls_cli(
    server: &TlsServer,
    ca: &Path,
    extra: &[&str],
    command: &[&str],
) -> Result<String, String> {
    let output = Command::new("redis-cli")
        .args(["--tls", "--cacert"])
        .arg(ca)
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &server.tls_port().to_string(),
            "--no-auth-warning",
        ])
        .args(extra)
        .args(command)
        .output()
        .map_err(|e| format!("running redis-cli: {e}"))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(text.trim().to_owned())
}

fn as_user(server: &TlsServer) -> Vec<&str> {
    vec!["--user", server.username(), "--pass", server.password()]
}

#[test]
fn answers_ping_over_tls_with_the_right_ca_and_user() -> TestResult {
    let server = TlsServer::start()?;
    let url = server.url();
    assert!(
        url.starts_with("rediss://redquorum:")
            && url.ends_with(&format!("@127.0.0.1:{}", server.tls_port())),
        "unexpected URL {url}"
    );
    assert!(
        server
            .ca_cert_pem()
            .starts_with(b"-----BEGIN CERTIFICATE-----")
    );
    assert_eq!(server.cmd(&["PING"])?.as_str(), Some("PONG"));
    let reply = tls_cli(
        &server,
        &server.ca_cert_path(),
        &as_user(&server),
        &["PING"],
    )?;
    assert_eq!(reply, "PONG");
    let whoami = tls_cli(
        &server,
        &server.ca_cert_path(),
        &as_user(&server),
        &["ACL", "WHOAMI"],
    )?;
    assert_eq!(whoami, "redquorum");
    Ok(())
}

#[test]
fn refuses_a_client_that_trusts_another_ca_or_does_not_authenticate() -> TestResult {
    let server = TlsServer::builder().user("alice", "s3cret").start()?;
    assert_eq!(
        server.url(),
        format!("rediss://alice:s3cret@127.0.0.1:{}", server.tls_port())
    );
    let wrong_ca = tls_cli(
        &server,
        &server.certs().other_ca_cert_path(),
        &as_user(&server),
        &["PING"],
    )?;
    assert!(wrong_ca.contains("certificate verify failed"), "{wrong_ca}");
    let anonymous = tls_cli(&server, &server.ca_cert_path(), &[], &["PING"])?;
    assert!(anonymous.contains("NOAUTH"), "{anonymous}");
    let wrong_password = tls_cli(
        &server,
        &server.ca_cert_path(),
        &["--user", "alice", "--pass", "nope"],
        &["PING"],
    )?;
    assert!(
        wrong_password.contains("WRONGPASS") || wrong_password.contains("invalid"),
        "{wrong_password}"
    );
    Ok(())
}

#[test]
fn client_certificates_are_required_when_asked_for() -> TestResult {
    let server = TlsServer::builder()
        .auth_clients(TlsAuthClients::Yes)
        .start()?;
    let certs = server.certs();
    let without = tls_cli(&server, &certs.ca_cert_path(), &as_user(&server), &["PING"])?;
    assert_ne!(
        without, "PONG",
        "a client without a certificate must be refused"
    );
    let cert = certs.client_cert_path();
    let key = certs.client_key_path();
    let mut with: Vec<&str> = as_user(&server);
    let (cert, key) = (cert.to_string_lossy(), key.to_string_lossy());
    with.extend(["--cert", &cert, "--key", &key]);
    assert_eq!(
        tls_cli(&server, &certs.ca_cert_path(), &with, &["PING"])?,
        "PONG"
    );
    Ok(())
}

#[test]
fn servers_can_share_one_authority_and_survive_a_restart() -> TestResult {
    let certs = TlsCerts::generate()?;
    let a = TlsServer::builder().certs(certs.clone()).start()?;
    let b = TlsServer::builder().certs(certs.clone()).start()?;
    drop(certs);
    assert_ne!(a.tls_port(), b.tls_port());
    for server in [&a, &b] {
        assert_eq!(
            tls_cli(server, &a.ca_cert_path(), &as_user(server), &["PING"])?,
            "PONG"
        );
    }
    let port = a.tls_port();
    a.restart()?;
    assert_eq!(a.tls_port(), port);
    assert_eq!(
        tls_cli(&a, &a.ca_cert_path(), &as_user(&a), &["PING"])?,
        "PONG"
    );
    a.kill()?;
    assert!(!a.is_running());

    // Dropping a server kills it and removes its directory; the certificates stay while
    // another server uses them.
    let (pid, dir, certs_dir) = (
        b.pid().ok_or("b runs")?,
        b.dir().to_path_buf(),
        b.certs().dir().to_path_buf(),
    );
    drop(a);
    assert!(certs_dir.is_dir());
    drop(b);
    assert!(!process_exists(pid), "pid {pid} must be killed and reaped");
    assert!(!dir.exists() && !certs_dir.exists());
    Ok(())
}

#[test]
fn invalid_users_are_rejected_before_anything_starts() {
    let err = TlsServer::builder().user("two words", "pw").start();
    assert!(
        matches!(err, Err(TestkitError::InvalidOption { .. })),
        "{err:?}"
    );
    let err = TlsServer::builder().user("alice", "").start();
    assert!(
        matches!(err, Err(TestkitError::InvalidOption { .. })),
        "{err:?}"
    );
}
