//! A master that cannot run Lua scripts (a server built without Lua, `EVAL` renamed away, an
//! ACL that denies scripting) fails its votes with one typed failure naming the master —
//! decided on the server's refusal, never on `redis_version` (Valkey pins it at 7.2.4).

use crate::common::*;
use redquorum::{LockOptions, NodeFailure, RetryPolicy};

#[tokio::test]
async fn a_master_that_denies_scripting_fails_its_vote_with_a_typed_failure_naming_it() {
    let masters = cluster(3);
    // Master 1 refuses every scripting command, as one built without Lua does (an ACL is
    // the only way to take scripting away from a running server).
    masters
        .cmd(
            1,
            &[
                "ACL", "SETUSER", "default", "-eval", "-evalsha", "-script", "-fcall",
            ],
        )
        .expect("ACL SETUSER");
    let redlock = client(&masters);

    // At start-up: the scripts' load says which master cannot run them.
    let loaded = redlock.load_scripts().await;
    assert!(loaded[0].is_ok() && loaded[2].is_ok(), "{loaded:?}");
    let failure = loaded[1].as_ref().expect_err("master 1 denies SCRIPT LOAD");
    assert!(failure.is_scripting_unavailable(), "{failure:?}");
    let NodeFailure::ScriptingUnavailable { command, .. } = failure else {
        unreachable!()
    };
    assert_eq!(command, "script", "{failure}");
    assert!(
        failure.to_string().contains("cannot run Lua scripts"),
        "{failure}"
    );

    // Two masters without scripting: no quorum, and the error names the first of them.
    masters
        .cmd(
            2,
            &[
                "ACL", "SETUSER", "default", "-eval", "-evalsha", "-script", "-fcall",
            ],
        )
        .expect("ACL SETUSER");
    // (A mutex is acquired with SET NX, no script: a read lock needs its script.)
    let error = redlock
        .lock_with(
            ["scripting"],
            LockOptions::new().read().retry(RetryPolicy::once()),
        )
        .await
        .expect_err("no quorum");
    let failed = error.node_failures();
    assert!(
        failed.iter().all(|(_, f)| f.is_scripting_unavailable()) && failed.len() == 2,
        "{error}: {failed:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("node 1") && message.contains("cannot run Lua scripts"),
        "{message}"
    );
}

/// A server whose scripting commands are renamed away, as a server built without Lua
/// answers: `ERR unknown command`.
struct Renamed {
    child: std::process::Child,
    url: String,
    dir: std::path::PathBuf,
}

impl Renamed {
    fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let server = std::env::var_os(redquorum_testkit::REDIS_SERVER_ENV)
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "redis-server".into());
        let dir = std::env::temp_dir().join(format!("redquorum-renamed-{port}"));
        std::fs::create_dir_all(&dir).expect("a directory");
        let mut args = vec![
            "--port".to_owned(),
            port.to_string(),
            "--bind".to_owned(),
            "127.0.0.1".to_owned(),
            "--save".to_owned(),
            String::new(),
            "--appendonly".to_owned(),
            "no".to_owned(),
            "--dir".to_owned(),
            dir.display().to_string(),
        ];
        for command in ["EVAL", "EVALSHA", "SCRIPT", "EVAL_RO", "EVALSHA_RO"] {
            args.extend([
                "--rename-command".to_owned(),
                command.to_owned(),
                String::new(),
            ]);
        }
        let child = std::process::Command::new(server)
            .args(&args)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("start the server");
        Self {
            child,
            url: format!("redis://127.0.0.1:{port}"),
            dir,
        }
    }
}

impl Drop for Renamed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test]
async fn a_master_with_scripting_renamed_away_fails_with_the_same_typed_failure() {
    let renamed = Renamed::start();
    let url = renamed.url.clone();
    eventually(PATIENCE, "the server answers PING", || {
        let url = url.clone();
        async move {
            let client = redis::Client::open(url).ok()?;
            let mut conn = client.get_multiplexed_async_connection().await.ok()?;
            redis::cmd("PING")
                .query_async::<String>(&mut conn)
                .await
                .ok()
        }
    })
    .await;
    let redlock = builder(vec![renamed.url.clone()]).build().expect("valid");
    let loaded = redlock.load_scripts().await;
    let failure = loaded[0].as_ref().expect_err("SCRIPT is unknown");
    let NodeFailure::ScriptingUnavailable { command, message } = failure else {
        panic!("not a scripting failure: {failure:?}");
    };
    assert_eq!(command, "script", "{message}");
    let error = redlock
        .lock_with(
            ["renamed"],
            LockOptions::new().write().retry(RetryPolicy::once()),
        )
        .await
        .expect_err("no scripting, no write lock");
    let failed = error.node_failures();
    assert_eq!(failed.len(), 1, "{error}");
    assert!(failed[0].1.is_scripting_unavailable(), "{error}");
    assert!(error.to_string().contains("node 0"), "{error}");
}
