//! The negative control of two losses within a ttl, randomized (see `guard::two_losses`):
//! guard v2's reader rule hands a long lock to a short client.

use crate::guard::two_losses::run;

/// The negative control: guard v2's reader rule. Finding 1's pattern is struck once per set
/// of masters (A cannot lock again after it), so the control starts over on fresh masters
/// until it has the overlap, within a bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_v2_readers_hand_a_long_lock_to_a_short_client() {
    const TRIES: usize = 4;
    let mut seen = Vec::new();
    for attempt in 1..=TRIES {
        let (report, faults, shared) = run(
            "negative: guard v2 readers, two losses under a 20 s lock",
            true,
            1,
        )
        .await;
        if report.overlaps() > 0 {
            println!("overlap found on attempt {attempt} of {TRIES}");
            report.assert_overlap_found();
            return;
        }
        seen.push(format!("{report} ({})", faults.summary(&shared)));
    }
    panic!(
        "inconclusive: no overlap with guard v2's readers in {TRIES} runs:\n{}",
        seen.join("\n")
    );
}
