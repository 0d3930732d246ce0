//! Mutual exclusion with skewed master clocks inside the drift allowance: every master's
//! clock runs 0.3 % fast (drift factor 0.01), and holders keep each lock until just before
//! its deadline while rivals poll, so keys that expired before the deadline would be taken
//! over while still held. 0 overlaps, 0 lost updates. `negative_controls.rs` runs the same
//! workload with a quorum 5 % fast and finds the overlap.

use std::time::Duration;

use crate::common::inspect::*;
use crate::common::scenario::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_master_clock_0_3_percent_fast_within_the_drift_allowance() {
    let masters = clock_cluster(&[1.003; 5]);
    let run = Scenario::holding_to_the_deadline(
        "all clocks 0.3 % fast, holds to the deadline",
        Duration::from_secs(1),
    )
    .start(masters)
    .await;
    let out = run.run().await;
    out.report.assert_safe();
}
