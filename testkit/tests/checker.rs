//! The checker against a real referee: interleaved read-modify-writes are counted as lost
//! updates, sequential ones are not, and the verdict treats too few hand-overs as
//! inconclusive.

mod common;

use std::time::{Duration, Instant};

use common::TestResult;
use redquorum_testkit::{Checker, Hold, Verdict};

#[tokio::test]
async fn sequential_increments_are_clean_and_interleaved_ones_are_lost() -> TestResult {
    let checker = Checker::with_seed("referee-self-test", 1)?.min_hand_overs(1);
    let mut a = checker.referee().session().await?;
    let mut b = checker.referee().session().await?;
    // Sequential: a, then b.
    let v = a.read("r").await?;
    assert!(a.write("r", v).await?);
    let v = b.read("r").await?;
    assert!(b.write("r", v).await?);
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    checker
        .recorder()
        .record(Hold::new(0, "r", ms(0), ms(100), ms(10)));
    checker
        .recorder()
        .record(Hold::new(1, "r", ms(10), ms(100), ms(20)));
    let report = checker.report()?;
    assert_eq!(report.verdict(), Verdict::Safe, "{report}");
    assert_eq!(report.referee.writes, 2);
    report.assert_safe();

    // Interleaved: both read 2, both write 3; one increment is lost.
    let va = a.read("r").await?;
    let vb = b.read("r").await?;
    assert!(b.write("r", vb).await?);
    assert!(!a.write("r", va).await?, "a's write clobbered b's");
    let report = checker.report()?;
    assert_eq!(report.referee.writes, 4);
    assert_eq!(report.lost_updates(), 1);
    assert_eq!(report.referee.conflicts, 1);
    assert_eq!(report.verdict(), Verdict::Unsafe);
    assert_eq!(report.overlaps(), 0, "the intervals did not show it");
    Ok(())
}

#[test]
fn too_few_hand_overs_are_inconclusive_and_fail_assert_safe() -> TestResult {
    let checker = Checker::with_seed("inconclusive-self-test", 2)?.min_hand_overs(3);
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    for i in 0..5 {
        // One client, five holds: nothing handed over.
        checker.recorder().record(Hold::new(
            0,
            "r",
            ms(i * 10),
            ms(i * 10 + 100),
            ms(i * 10 + 5),
        ));
    }
    let report = checker.report()?;
    assert_eq!(report.verdict(), Verdict::Inconclusive, "{report}");
    let failed = std::panic::catch_unwind(|| report.assert_safe());
    assert!(failed.is_err(), "an inconclusive run must not pass");
    assert!(report.to_string().contains("verdict=INCONCLUSIVE"));
    Ok(())
}

#[test]
fn an_overlap_is_unsafe_and_satisfies_a_negative_control() -> TestResult {
    let checker = Checker::with_seed("overlap-self-test", 3)?.min_hand_overs(1);
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    checker
        .recorder()
        .record(Hold::new(0, "r", ms(0), ms(100), ms(50)));
    checker
        .recorder()
        .record(Hold::new(1, "r", ms(40), ms(140), ms(60)));
    let report = checker.report()?;
    assert_eq!(report.verdict(), Verdict::Unsafe);
    assert_eq!(report.analysis.worst_overlap, Duration::from_millis(10));
    report.assert_overlap_found();
    assert!(
        report.details().contains("overlap for 10.0 ms"),
        "{}",
        report.details()
    );
    Ok(())
}
