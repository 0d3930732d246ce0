//! How `lock` retries: attempt limit, overall timeout, randomised delay.

use std::time::Duration;

use rand::RngExt;

use crate::error::ConfigError;

/// Default number of attempts made by [`Redlock::lock`](crate::Redlock::lock).
pub const DEFAULT_RETRY_ATTEMPTS: u32 = 10;
/// Default middle of the delay between attempts.
pub const DEFAULT_RETRY_DELAY: Duration = Duration::from_millis(200);
/// Default spread of the delay around [`DEFAULT_RETRY_DELAY`].
pub const DEFAULT_RETRY_JITTER: Duration = Duration::from_millis(100);

/// When and how often [`Redlock::lock`](crate::Redlock::lock) tries again after a failed
/// attempt.
///
/// Between attempts it sleeps a random delay drawn uniformly from
/// `[delay - jitter, delay + jitter]` (clamped at zero), so that clients competing for the
/// same resource fall out of step instead of splitting the votes again and again.
/// Retrying stops at whichever comes first: the attempt limit or the timeout. A timeout
/// bounds when attempts may *start*; an attempt in flight finishes (at most one node
/// timeout later) so that its keys are never left half-acquired.
///
/// ```
/// use std::time::Duration;
/// use redquorum::RetryPolicy;
///
/// // Keep trying for up to two seconds, 50 ms ± 25 ms apart.
/// let policy = RetryPolicy::new()
///     .unlimited_attempts()
///     .timeout(Duration::from_secs(2))
///     .delay(Duration::from_millis(50), Duration::from_millis(25));
/// assert_eq!(policy.max_attempts(), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    max_attempts: Option<u32>,
    timeout: Option<Duration>,
    delay: Duration,
    jitter: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self::new()
    }
}

impl RetryPolicy {
    /// The default: [`DEFAULT_RETRY_ATTEMPTS`] attempts, no timeout, a delay of
    /// [`DEFAULT_RETRY_DELAY`] ± [`DEFAULT_RETRY_JITTER`].
    pub const fn new() -> Self {
        Self {
            max_attempts: Some(DEFAULT_RETRY_ATTEMPTS),
            timeout: None,
            delay: DEFAULT_RETRY_DELAY,
            jitter: DEFAULT_RETRY_JITTER,
        }
    }

    /// A single attempt, no retry.
    pub const fn once() -> Self {
        Self::new().attempts(1)
    }

    /// At most `n` attempts (at least 1; 0 is rejected when the policy is used).
    pub const fn attempts(mut self, n: u32) -> Self {
        self.max_attempts = Some(n);
        self
    }

    /// No attempt limit: a [`timeout`](Self::timeout) must then bound the retries.
    pub const fn unlimited_attempts(mut self) -> Self {
        self.max_attempts = None;
        self
    }

    /// Stop starting new attempts once `timeout` has passed since the first one.
    pub const fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Sleep `delay ± jitter` between attempts. Zero for both is allowed (retry at once).
    pub const fn delay(mut self, delay: Duration, jitter: Duration) -> Self {
        self.delay = delay;
        self.jitter = jitter;
        self
    }

    /// The attempt limit, if any.
    pub const fn max_attempts(&self) -> Option<u32> {
        self.max_attempts
    }

    /// The overall timeout, if any.
    pub const fn max_duration(&self) -> Option<Duration> {
        self.timeout
    }

    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        match (self.max_attempts, self.timeout) {
            (Some(0), _) => Err(ConfigError::ZeroAttempts),
            (None, None) => Err(ConfigError::UnboundedRetry),
            _ => Ok(()),
        }
    }

    /// A random delay in `[delay - jitter, delay + jitter]`, never negative, never a panic
    /// on an empty range.
    pub(crate) fn sample_delay(&self) -> Duration {
        if self.jitter.is_zero() {
            return self.delay;
        }
        let low = self.delay.saturating_sub(self.jitter);
        let high = self.delay.saturating_add(self.jitter);
        let span = u64::try_from((high - low).as_nanos()).unwrap_or(u64::MAX);
        low.saturating_add(Duration::from_nanos(rand::rng().random_range(0..=span)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_delay_and_zero_jitter_never_panic() {
        let p = RetryPolicy::new().delay(Duration::ZERO, Duration::ZERO);
        assert_eq!(p.sample_delay(), Duration::ZERO);
        let p = RetryPolicy::new().delay(Duration::ZERO, Duration::from_millis(5));
        for _ in 0..1000 {
            assert!(p.sample_delay() <= Duration::from_millis(5));
        }
    }

    #[test]
    fn delays_stay_within_the_band() {
        let p = RetryPolicy::new().delay(Duration::from_millis(100), Duration::from_millis(30));
        let (mut lo, mut hi) = (Duration::MAX, Duration::ZERO);
        for _ in 0..2000 {
            let d = p.sample_delay();
            lo = lo.min(d);
            hi = hi.max(d);
        }
        assert!(lo >= Duration::from_millis(70) && hi <= Duration::from_millis(130));
        // 2000 draws spread over the band rather than sticking to the middle.
        assert!(lo < Duration::from_millis(80) && hi > Duration::from_millis(120));
    }

    #[test]
    fn unbounded_and_zero_attempt_policies_are_rejected() {
        assert_eq!(
            RetryPolicy::new().attempts(0).validate(),
            Err(ConfigError::ZeroAttempts)
        );
        assert_eq!(
            RetryPolicy::new().unlimited_attempts().validate(),
            Err(ConfigError::UnboundedRetry)
        );
        assert!(
            RetryPolicy::new()
                .unlimited_attempts()
                .timeout(Duration::from_secs(1))
                .validate()
                .is_ok()
        );
    }
}
