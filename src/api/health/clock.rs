//! Sampling a master's clock against our monotonic clock.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::Value;
use tokio::time::Instant;

use crate::error::node_failure::NodeFailure;
use crate::error::node_failure::text_of;
use crate::member::node::Node;

/// Clock samples taken per master.
const CLOCK_SAMPLES: u32 = 6;
/// A jump between two clock samples larger than this (beyond the measured rate and the
/// round trips) is reported as a step.
const STEP_TOLERANCE: Duration = Duration::from_millis(20);

pub(super) struct Clock {
    pub(super) offset_ms: f64,
    pub(super) rate: f64,
    pub(super) uncertainty: f64,
    pub(super) step: Option<Duration>,
}

/// Samples `TIME` against our monotonic clock: each sample is placed at the middle of its
/// round trip, so its error is at most half of that round trip.
pub(super) async fn sample_clock(
    node: &Node,
    window: Duration,
    timeout: Duration,
) -> Result<Clock, NodeFailure> {
    let mut samples = Vec::new();
    let gap = window / (CLOCK_SAMPLES - 1);
    let first = Instant::now();
    for j in 0..CLOCK_SAMPLES {
        tokio::time::sleep_until(first + gap * j).await;
        let sent = Instant::now();
        let wall_sent = SystemTime::now();
        let reply = node.query(&redis::cmd("TIME"), timeout).await?;
        let rtt = sent.elapsed();
        let server = match &reply {
            Value::Array(items) => match items.as_slice() {
                [s, us] => text_of(s)
                    .parse::<f64>()
                    .ok()
                    .zip(text_of(us).parse::<f64>().ok()),
                _ => None,
            },
            _ => None,
        }
        .map(|(s, us)| s + us / 1e6)
        .ok_or_else(|| NodeFailure::UnexpectedReply(format!("TIME: {reply:?}")))?;
        let local = (sent - first).as_secs_f64() + rtt.as_secs_f64() / 2.0;
        let wall = wall_sent
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64())
            + rtt.as_secs_f64() / 2.0;
        samples.push((local, server, rtt.as_secs_f64(), wall));
    }
    let (l0, s0, r0, w0) = samples[0];
    let (ln, sn, rn, _) = samples[samples.len() - 1];
    let span = (ln - l0).max(1e-6);
    let rate = (sn - s0) / span;
    let uncertainty = (r0 + rn) / span;
    let mut step = None;
    for pair in samples.windows(2) {
        let ((la, sa, ra, _), (lb, sb, rb, _)) = (pair[0], pair[1]);
        let residual =
            ((sb - sa) - (lb - la)).abs() - (rate - 1.0).abs() * (lb - la) - (ra + rb) / 2.0;
        if residual > STEP_TOLERANCE.as_secs_f64() {
            step = Some(Duration::from_secs_f64(residual));
        }
    }
    Ok(Clock {
        offset_ms: (s0 - w0) * 1e3,
        rate,
        uncertainty,
        step,
    })
}
