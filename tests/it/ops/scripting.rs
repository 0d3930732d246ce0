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
