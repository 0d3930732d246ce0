//! Issue 23, item 5: the first request after a master restarted is not lost to the broken
//! connection it is sent on. The connection is found broken on use ("broken pipe",
//! "connection reset"); the member reconnects and sends once more, within the node timeout:
//! a release as it is (value-checked), an acquire as "set if absent, or already ours".

use redquorum::Vote;

use crate::common::{client, cluster};

/// Every master restarted between two locks (no persistence: they come back empty): the
/// next acquire and its release are answered by every master, none fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_requests_after_a_restart_succeed() {
    let cluster = cluster(3);
    let redlock = client(&cluster);
    let lock = redlock.try_lock("restarted").await.expect("before");
    lock.release().await.expect("release before");
    for i in 0..cluster.len() {
        cluster.restart(i).expect("restart");
    }
    let lock = redlock
        .try_lock("restarted")
        .await
        .expect("after the restarts");
    let failed: Vec<_> = lock
        .stats()
        .votes()
        .iter()
        .filter(|v| matches!(v.vote, Vote::Failed(_)))
        .map(|v| (v.node, v.vote.clone()))
        .collect();
    assert!(
        failed.is_empty(),
        "failed votes after the restart: {failed:?}"
    );
    assert!(lock.stats().granted() >= 2);
    // And a release on connections broken the same way.
    for i in 0..cluster.len() {
        cluster.restart(i).expect("restart");
    }
    let outcome = lock.release().await.expect("release after the restarts");
    println!("release after restarts: {outcome:?}");
}
