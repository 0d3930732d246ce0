//! TLS against a real `redis-server` with `--tls-port`, a certificate made at test time and
//! an ACL user with a password: locking through `rediss://` with our CA (given with
//! `node_client`), and a typed connection failure with the wrong CA. Needs the `tls-rustls`
//! feature (`make test` runs it).

use std::time::Duration;

use redis::{Client, TlsCertificates};
use redquorum::{NodeFailure, Redlock, RetryPolicy};
use redquorum_testkit::{TlsCerts, TlsServer};

fn tls_client(url: &str, ca: &[u8]) -> Client {
    Client::build_with_tls(
        url,
        TlsCertificates {
            client_tls: None,
            root_cert: Some(ca.to_vec()),
        },
    )
    .expect("a valid rediss URL")
}

fn redlock(clients: Vec<Client>) -> Redlock {
    clients
        .into_iter()
        .fold(Redlock::builder(), |b, c| b.node_client(c))
        .ttl(Duration::from_secs(5))
        .node_timeout(Duration::from_millis(500))
        .connect_timeout(Duration::from_secs(5))
        .retry(RetryPolicy::once())
        .restart_guard(false)
        .build()
        .expect("valid")
}

#[tokio::test]
async fn locks_over_tls_with_our_ca_and_an_acl_user() {
    let certs = TlsCerts::generate().expect("certificates");
    let servers: Vec<TlsServer> = (0..3)
        .map(|_| {
            TlsServer::builder()
                .certs(certs.clone())
                .start()
                .expect("a TLS server")
        })
        .collect();
    let clients = servers
        .iter()
        .map(|s| tls_client(&s.url(), s.ca_cert_pem()))
        .collect();
    let redlock = redlock(clients);
    // The first attempt also makes the TLS connections (in the background): retry briefly.
    let lock = crate::common::eventually(Duration::from_secs(10), "a lock over TLS", || async {
        redlock.try_lock("over-tls").await.ok()
    })
    .await;
    lock.extend().await.expect("extended over TLS");
    let outcome = lock.release().await.expect("released over TLS");
    assert!(outcome.released() >= 2, "{outcome:?}");
    // Debug output names the masters without their passwords.
    let shown = format!("{redlock:?}");
    assert!(!shown.contains(servers[0].password()), "{shown}");
}

#[tokio::test]
async fn the_wrong_ca_is_a_typed_connection_failure() {
    let server = TlsServer::start().expect("a TLS server");
    let other = server.certs().other_ca_cert_pem().to_vec();
    let redlock = redlock(vec![tls_client(&server.url(), &other)]);
    let failure = crate::common::eventually(
        Duration::from_secs(10),
        "the TLS handshake to fail",
        || async {
            let err = redlock
                .try_lock("untrusted")
                .await
                .expect_err("untrusted server");
            err.node_failures().first().map(|(_, f)| (*f).clone())
        },
    )
    .await;
    match &failure {
        NodeFailure::Connection(cause) => {
            assert!(cause.redis_error().is_some(), "{failure}");
        }
        other => panic!("a connection failure, not {other:?}"),
    }
    assert!(failure.kind().is_some(), "{failure}");
}
