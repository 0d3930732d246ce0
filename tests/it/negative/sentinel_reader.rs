//! The negative control of the group believed as a reader (see
//! `members::sentinel_reader`): without `WAIT` after the read, a primary cut off from its
//! replicas is believed, and a quarantine is worked out from its records.

use crate::members::sentinel_reader::cut_off_reader;
use redquorum::NodeFailure;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_without_confirmed_readers_a_cut_off_primary_is_believed() {
    let (_, failure) = cut_off_reader(false).await;
    assert!(
        matches!(
            &failure,
            NodeFailure::Quarantined {
                remaining: Some(_),
                ..
            }
        ),
        "m1's quarantine was worked out from the cut-off primary's records: {failure:?}"
    );
}
