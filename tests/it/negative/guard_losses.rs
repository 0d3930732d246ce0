//! The restart guard's negative control for two data losses (see `guard::losses`): guard
//! v2's reader rule, every answering reader believed, grants B the lock A holds.

use crate::common::eventually;
use crate::common::inspect::{lock_key, value_of};
use crate::guard::losses::{SHORT, two_losses};

/// The negative control: the same scenario with guard v2's reader rule (every answering
/// reader believed) grants B the lock A holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_control_v2_readers_let_a_short_client_take_a_long_lock() {
    let (masters, _links, lock_a, b) = two_losses(true).await;
    let lock_b = eventually(SHORT * 10, "B granted r while A holds it", || async {
        b.try_lock("r").await.ok()
    })
    .await;
    assert!(
        !lock_a.is_expired(),
        "A's lock is still valid while B holds r"
    );
    assert_eq!(
        value_of(&masters, 2, &lock_key("r")).await.as_deref(),
        Some(lock_a.value()),
        "A's key is still on master 2"
    );
    println!(
        "overlap: B holds r on {:?} while A holds it for {:?} more",
        lock_b
            .stats()
            .votes()
            .iter()
            .filter(|v| matches!(v.vote, redquorum::Vote::Granted))
            .map(|v| v.node)
            .collect::<Vec<_>>(),
        lock_a.remaining()
    );
}
