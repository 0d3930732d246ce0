//! Found by the review of issue 23 item 5 (the resend after a broken connection): the resend
//! of an acquire goes out on a second connection. When the second connection is given up too
//! while the link still holds the resend, the release goes out on a third connection; it
//! must close (CLIENT KILL) both earlier ones first, or the resend (`set_or_mine.lua`: SET NX
//! PX) runs after the release and leaves the key for a whole ttl. (Before the fix only the
//! first connection was named, and the key stayed.)

use std::time::Duration;

use crate::common::inspect::{cmd, count_releases, lock_key, settle};
use crate::common::*;
use redquorum_testkit::{Direction, Fault};

/// How long master 0's link holds the first acquire (gen 1): far longer than the test needs.
const HELD: Duration = Duration::from_secs(8);
/// How long it holds the resend (gen 2): long enough for the release to run first.
const RESEND_HELD: Duration = Duration::from_secs(4);

#[tokio::test]
async fn a_resend_on_a_connection_given_up_too_is_not_overtaken_by_the_release() {
    let masters = cluster(3);
    let links = masters.links().expect("links");
    let ttl = Duration::from_secs(60);
    let redlock = builder(links.urls())
        .ttl(ttl)
        .node_timeout(Duration::from_secs(5))
        .build()
        .expect("valid");
    let warm = redlock.lock("warm-up").await.expect("free");
    warm.release().await.expect("released");
    let link = links.link(0);
    link.set_tap(true);
    link.clear_tap();
    let resource = "resent-twice";
    let key = lock_key(resource);
    let accepted = link.stats().connections_accepted;
    // 1. The first acquire (gen 1) is held by master 0's link.
    link.set(Direction::ToServer, Fault::delay(HELD));
    let attempt = {
        let redlock = redlock.clone();
        tokio::spawn(async move { redlock.try_lock(resource).await })
    };
    wait_until(PATIENCE, "master 0's acquire held by its link", || async {
        link.stats().to_server.held_chunks >= 1
    })
    .await;
    // 2. Gen 1 closed towards the client: found broken on use, the member reconnects. Its
    //    requests pass at once; replies are slowed so that the test can hold the resend.
    link.set(Direction::ToServer, Fault::Pass);
    link.set(
        Direction::ToClient,
        Fault::delay(Duration::from_millis(300)),
    );
    link.close_to_client();
    let gen2 = accepted; // connections are numbered from 0 in accept order
    wait_until(
        PATIENCE,
        "gen 2's CLIENT INFO written to master 0",
        || async {
            link.tap()
                .iter()
                .any(|e| e.connection == gen2 && e.text().contains("$4\r\nINFO\r\n"))
        },
    )
    .await;
    // 3. Its reply is still on its way (300 ms): the resend that follows it is held.
    link.set(Direction::ToServer, Fault::delay(RESEND_HELD));
    link.set(Direction::ToClient, Fault::Pass);
    wait_until(PATIENCE, "the resend held by the link too", || async {
        link.stats().to_server.held_chunks >= 2
    })
    .await;
    // 4. Gen 2 given up as well; from now on everything passes at once.
    link.close_to_client();
    link.set(Direction::ToServer, Fault::Pass);
    // The member's resend (still running after the round was decided by masters 1 and 2)
    // finds gen 2 broken; the connection is made again (gen 3) before the release.
    let gen3 = gen2 + 1;
    wait_until(
        PATIENCE,
        "gen 3's CLIENT INFO written to master 0",
        || async {
            link.tap()
                .iter()
                .any(|e| e.connection == gen3 && e.text().contains("$4\r\nINFO\r\n"))
        },
    )
    .await;
    // Its reply on its way back (nothing holds it now).
    tokio::time::sleep(Duration::from_millis(300)).await;
    let lock = attempt
        .await
        .expect("no panic")
        .expect("granted by masters 1 and 2");
    println!("votes: {:?}", lock.stats().votes());
    lock.release().await.expect("released");
    wait_until(PATIENCE, "the release written to master 0", || async {
        count_releases(link) >= 1
    })
    .await;
    assert!(
        link.stats().to_server.held_chunks >= 2,
        "the release must go out while both acquires are still held"
    );
    wait_until(
        PATIENCE,
        "master 0's held acquires to leave its link",
        || async { link.stats().to_server.held_chunks == 0 },
    )
    .await;
    settle(&masters, 0).await;
    let pttl = cmd(&masters, 0, &["PTTL", &key]).await;
    println!("after the release, master 0 PTTL {key}: {pttl:?}");
    for e in link.tap() {
        println!("conn {} len {}: {:?}", e.connection, e.len, e.text());
    }
    wait_until(
        Duration::from_secs(10),
        "no key of the released lock on master 0",
        || async { !exists_anywhere(&masters, &[0], &key).await },
    )
    .await;
}
