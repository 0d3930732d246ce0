//! The negative control of the failback under an idle connection (see
//! `members::sentinel_failback`): without the replication id read back after each grant, a
//! primary that lost a key in a failback counts a grant on the epoch it still shows.

use crate::members::sentinel_failback::{Outcome, failback};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_without_the_identity_per_grant_a_failback_hands_a_held_lock_over() {
    let (outcome, _, report) =
        failback("negative: failback, epoch and connection only", false).await;
    assert!(
        matches!(
            outcome,
            Outcome::Granted {
                while_a_valid: true
            }
        ),
        "C is granted r while A's lock is valid: {outcome:?}"
    );
    report.assert_overlap_found();
}
