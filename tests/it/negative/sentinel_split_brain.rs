//! The negative control of the Sentinel split brain (see `members::sentinel_split_brain`):
//! without `WAIT` on renewals, the old primary keeps a lock someone else is granted.

use crate::members::sentinel_split_brain::{Event, split_brain};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_without_wait_on_renewals_the_old_primary_keeps_a_lock_someone_else_gets() {
    let (events, report) =
        split_brain("negative: split brain, no WAIT after renewals", false).await;
    assert_eq!(
        events,
        [Event::BGranted {
            d_lease_lost: false
        }],
        "B is granted r while D's lease still holds it"
    );
    report.assert_overlap_found();
}
