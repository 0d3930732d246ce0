//! `ClockControl`: the Rust side of the clock shim, which writes its control file.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::TestkitError;

/// Environment variable through which `redis-server` (the shim in it) finds its control file.
pub const CLOCK_FILE_ENV: &str = "REDQUORUM_CLOCK_FILE";

/// How long the shim may take to notice a change of the control file.
///
/// The shim re-reads the file inside `gettimeofday`, at most once per 10 ms, so the first
/// call Redis makes more than `APPLY_LATENCY` after a change uses it (unless another
/// thread of Redis is re-reading the file at that very moment; poll `TIME` to be sure).
/// Because the skew is a function of real time (see [`ClockControl`]), a late pick-up does
/// not shift the clock afterwards: the old parameters were only used a little longer.
pub const APPLY_LATENCY: Duration = Duration::from_millis(10);

const PPB: i64 = 1_000_000_000;
const MAX_RATE: f64 = 1000.0;

/// Skews the wall clock (`gettimeofday`) of one node started with
/// [`ClusterBuilder::clock_shim(true)`](crate::ClusterBuilder::clock_shim).
///
/// The node's clock is `fake(t) = anchor_fake + (t − anchor_real) × rate`, where `t` is the
/// real wall-clock time. [`set_rate`](Self::set_rate) re-anchors at the current fake time, so
/// the clock does not jump, it only runs faster or slower from now on;
/// [`set_offset_us`](Self::set_offset_us) re-anchors at `real + offset`, a step.
/// [`reset`](Self::reset) makes the node's clock real time again.
///
/// Redis 7 takes the time for key expiry, `TIME` and `PTTL` from `gettimeofday`, so a rate
/// of 1.05 makes a `PX 2000` key expire after 2000 / 1.05 ≈ 1905 ms of real time. Its
/// timers (`CLOCK_MONOTONIC`) are not affected. Changes reach the node within
/// [`APPLY_LATENCY`]. The skew survives a restart of the node.
///
/// Cheap to clone; all clones control the same node.
///
/// # Control file
/// The shim (`src/clock/shim.c`, preloaded with `LD_PRELOAD`) finds the file through
/// [`CLOCK_FILE_ENV`]. It holds one ASCII line of four decimal integers:
///
/// ```text
/// <generation> <anchor_real_us> <anchor_fake_us> <rate_ppb>
/// ```
///
/// and the shim returns `anchor_fake_us + floor((real_us − anchor_real_us) × rate_ppb / 10⁹)`
/// from `gettimeofday`, where `real_us` is `CLOCK_REALTIME` in microseconds. `generation`
/// increases with every write (for people reading the file; the shim compares the other
/// three values). The file is replaced atomically (write, then rename). A missing or
/// malformed file, or `rate_ppb <= 0`, leaves the clock as it was (real time at first).
/// This type computes the anchors: a rate change anchors at the current fake time
/// (continuous), an offset change at `real + offset` (a step, by the difference from the
/// current fake time, whatever rate ran before).
#[derive(Clone)]
pub struct ClockControl {
    inner: Arc<Inner>,
}

struct Inner {
    node: usize,
    path: PathBuf,
    model: Mutex<Model>,
}

/// The parameters of the formula, exactly as written to the control file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Model {
    generation: u64,
    anchor_real_us: i64,
    anchor_fake_us: i64,
    rate_ppb: i64,
}

impl Model {
    /// The fake time at real time `real_us`, with the shim's floor arithmetic.
    fn fake_at(&self, real_us: i64) -> i64 {
        let delta = i128::from(real_us - self.anchor_real_us) * i128::from(self.rate_ppb);
        let scaled = delta.div_euclid(i128::from(PPB));
        let fake = i128::from(self.anchor_fake_us) + scaled;
        i64::try_from(fake).unwrap_or(if fake < 0 { i64::MIN } else { i64::MAX })
    }

    /// The line the shim parses: `<generation> <anchor_real_us> <anchor_fake_us> <rate_ppb>`.
    fn line(&self) -> String {
        format!(
            "{} {} {} {}\n",
            self.generation, self.anchor_real_us, self.anchor_fake_us, self.rate_ppb
        )
    }
}

impl fmt::Debug for ClockControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClockControl")
            .field("node", &self.inner.node)
            .field("path", &self.inner.path)
            .field("model", &*self.lock())
            .finish()
    }
}

impl ClockControl {
    /// Creates the control file for `node` at `path`, holding real time.
    pub(crate) fn create(node: usize, path: PathBuf) -> Result<Self, TestkitError> {
        let now = real_now_us();
        let control = Self {
            inner: Arc::new(Inner {
                node,
                path,
                model: Mutex::new(Model {
                    generation: 0,
                    anchor_real_us: now,
                    anchor_fake_us: now,
                    rate_ppb: PPB,
                }),
            }),
        };
        control.update(|_, now| (now, now, PPB))?;
        Ok(control)
    }

    /// Makes the node's clock run `rate` times as fast as real time from now on, without
    /// a jump. `1.05` is 5 % fast, `0.95` 5 % slow. Must be finite, > 0 and ≤ 1000.
    pub fn set_rate(&self, rate: f64) -> Result<(), TestkitError> {
        if !rate.is_finite() || rate <= 0.0 || rate > MAX_RATE {
            return Err(TestkitError::InvalidClockRate { rate });
        }
        // In range (0, 1000], so the product fits in an i64 and is at least 1 after max.
        #[allow(clippy::cast_possible_truncation)]
        let rate_ppb = ((rate * 1e9).round() as i64).max(1);
        self.update(|model, now| (now, model.fake_at(now), rate_ppb))
    }

    /// Steps the node's clock to real time plus `offset_us` microseconds (negative:
    /// behind), keeping the current rate.
    pub fn set_offset_us(&self, offset_us: i64) -> Result<(), TestkitError> {
        self.update(|model, now| (now, now.saturating_add(offset_us), model.rate_ppb))
    }

    /// Steps the node's clock `offset` ahead of (`ahead = true`) or behind real time.
    pub fn set_offset(&self, offset: Duration, ahead: bool) -> Result<(), TestkitError> {
        let us = i64::try_from(offset.as_micros()).unwrap_or(i64::MAX);
        self.set_offset_us(if ahead { us } else { -us })
    }

    /// Back to real time: rate 1, offset 0.
    pub fn reset(&self) -> Result<(), TestkitError> {
        self.update(|_, now| (now, now, PPB))
    }

    /// The current rate.
    pub fn rate(&self) -> f64 {
        // Exact for every rate a test would use; the ppb value is what the shim applies.
        #[allow(clippy::cast_precision_loss)]
        let ppb = self.lock().rate_ppb as f64;
        ppb / 1e9
    }

    /// How far (in microseconds) the node's clock is ahead of real time right now,
    /// according to the parameters last written (negative: behind).
    pub fn offset_us(&self) -> i64 {
        let now = real_now_us();
        self.lock().fake_at(now) - now
    }

    /// The node's index.
    pub fn node(&self) -> usize {
        self.inner.node
    }

    /// The control file (see [Control file](Self#control-file)).
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Model> {
        self.inner
            .model
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Computes new anchors from the current model and real time, and writes them. The
    /// file is replaced by a rename, so the shim never reads a half-written line.
    fn update(
        &self,
        next: impl FnOnce(&Model, i64) -> (i64, i64, i64),
    ) -> Result<(), TestkitError> {
        let mut model = self.lock();
        let now = real_now_us();
        let (anchor_real_us, anchor_fake_us, rate_ppb) = next(&model, now);
        let new = Model {
            generation: model.generation + 1,
            anchor_real_us,
            anchor_fake_us,
            rate_ppb,
        };
        let tmp = self.inner.path.with_extension("tmp");
        std::fs::write(&tmp, new.line())
            .and_then(|()| std::fs::rename(&tmp, &self.inner.path))
            .map_err(|e| TestkitError::os(format!("writing {}", self.inner.path.display()), e))?;
        *model = new;
        Ok(())
    }
}

/// Real wall-clock time in microseconds since the epoch (what `CLOCK_REALTIME` reads).
fn real_now_us() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since.as_micros()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(ar: i64, af: i64, rate_ppb: i64) -> Model {
        Model {
            generation: 1,
            anchor_real_us: ar,
            anchor_fake_us: af,
            rate_ppb,
        }
    }

    #[test]
    fn formula_matches_the_shim() {
        let m = model(1_000, 5_000, 1_050_000_000);
        assert_eq!(m.fake_at(1_000), 5_000);
        assert_eq!(m.fake_at(1_001_000), 5_000 + 1_050_000);
        assert_eq!(m.fake_at(1_021), 5_000 + 22); // 21 × 1.05 = 22.05, floored
        // Floor, also before the anchor.
        assert_eq!(model(0, 0, 500_000_000).fake_at(-3), -2);
        assert_eq!(m.line(), "1 1000 5000 1050000000\n");
    }

    #[test]
    fn rate_change_is_continuous_and_offset_is_a_step() -> Result<(), TestkitError> {
        let dir = tempfile::tempdir().map_err(|e| TestkitError::os("tempdir", e))?;
        let clock = ClockControl::create(0, dir.path().join("clock"))?;
        assert_eq!(clock.offset_us(), 0);
        clock.set_offset_us(3_000_000)?;
        let offset = clock.offset_us();
        assert_eq!(offset, 3_000_000);
        clock.set_rate(2.0)?;
        assert!(
            clock.offset_us() >= 3_000_000,
            "a rate change must not jump back"
        );
        assert!((clock.rate() - 2.0).abs() < 1e-12);
        clock.reset()?;
        assert_eq!(clock.offset_us(), 0);
        assert!(clock.set_rate(0.0).is_err());
        assert!(clock.set_rate(f64::NAN).is_err());
        let text =
            std::fs::read_to_string(clock.path()).map_err(|e| TestkitError::os("read", e))?;
        assert_eq!(text.split_whitespace().count(), 4, "{text}");
        Ok(())
    }
}
