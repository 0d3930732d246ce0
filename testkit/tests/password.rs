//! Clusters with `requirepass`: URLs carry the password, and only the right one works.

mod common;

use std::time::Duration;

use common::TestResult;
use redis::Value;
use redquorum_testkit::{LocalCluster, RawConnection, ReplyExt, TestkitError};

const PASSWORD: &str = "s3cret p@ss";

#[test]
fn urls_carry_the_encoded_password_and_cmd_authenticates() -> TestResult {
    let cluster = LocalCluster::builder()
        .nodes(2)
        .password(PASSWORD)
        .start()?;
    let port = cluster.port(0);
    assert_eq!(
        cluster.url(0),
        format!("redis://:s3cret%20p%40ss@127.0.0.1:{port}")
    );
    assert_eq!(
        cluster.cmd(0, &["PING"])?,
        Value::SimpleString("PONG".into())
    );
    // Proxy URLs carry the password too, and the proxy passes AUTH through.
    let links = cluster.links()?;
    assert!(
        links
            .urls()
            .iter()
            .all(|u| u.starts_with("redis://:s3cret%20p%40ss@127.0.0.1:"))
    );
    let mut through_proxy = RawConnection::open(&links.link(1).url(), Duration::from_secs(2))?;
    assert_eq!(
        through_proxy.call(&["PING"])?,
        Value::SimpleString("PONG".into())
    );
    // Secrets stay out of Debug output.
    assert!(!format!("{cluster:?}").contains("s3cret"));
    Ok(())
}

#[test]
fn a_wrong_or_missing_password_is_refused() -> TestResult {
    let cluster = LocalCluster::builder()
        .nodes(1)
        .password(PASSWORD)
        .start()?;
    let wrong = format!("redis://:wrong@127.0.0.1:{}", cluster.port(0));
    let refused = RawConnection::open(&wrong, Duration::from_secs(2));
    assert!(
        matches!(refused, Err(TestkitError::Auth { .. })),
        "{refused:?}"
    );
    let no_password = format!("redis://127.0.0.1:{}", cluster.port(0));
    let mut conn = RawConnection::open(&no_password, Duration::from_secs(2))?;
    let reply = conn.call(&["GET", "k"])?;
    assert!(
        reply.as_error().is_some_and(|e| e.code() == "NOAUTH"),
        "{reply:?}"
    );
    Ok(())
}

#[tokio::test]
async fn the_redis_crate_accepts_the_url_form() -> TestResult {
    let cluster = LocalCluster::builder()
        .nodes(1)
        .password(PASSWORD)
        .start()?;
    let client = redis::Client::open(cluster.url(0))?;
    let mut conn = client.get_multiplexed_async_connection().await?;
    let pong: String = redis::cmd("PING").query_async(&mut conn).await?;
    assert_eq!(pong, "PONG");
    let wrong = redis::Client::open(format!("redis://:wrong@127.0.0.1:{}", cluster.port(0)))?;
    assert!(wrong.get_multiplexed_async_connection().await.is_err());
    Ok(())
}
