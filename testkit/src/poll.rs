//! The one bounded polling loop of the groups (Redis Cluster, Sentinel): "wait until the
//! servers say so", with the last reason they did not, for the error message.

use std::time::{Duration, Instant};

use crate::TestkitError;

/// Pause between two checks. Each check asks several servers, so polling faster would
/// mostly add load to a machine that is already busy running the servers.
const INTERVAL: Duration = Duration::from_millis(50);

/// Calls `check` until it returns `Ok`, at most for `timeout` (and at least once).
///
/// `check` returns why the state is not reached yet; the last reason ends up in the
/// [`TestkitError::Timeout`], so that a failing test says what it was waiting for.
pub(crate) fn until<T>(
    timeout: Duration,
    what: impl FnOnce() -> String,
    mut check: impl FnMut() -> Result<T, String>,
) -> Result<T, TestkitError> {
    let started = Instant::now();
    loop {
        let reason = match check() {
            Ok(value) => return Ok(value),
            Err(reason) => reason,
        };
        let elapsed = started.elapsed();
        if elapsed >= timeout {
            return Err(TestkitError::Timeout {
                what: format!("{} (last seen: {reason})", what()),
                after: timeout,
            });
        }
        std::thread::sleep(INTERVAL.min(timeout - elapsed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_the_first_success_and_times_out_with_the_last_reason() {
        let mut calls = 0;
        let value = until(Duration::from_secs(5), String::new, || {
            calls += 1;
            if calls < 3 {
                Err(format!("call {calls}"))
            } else {
                Ok(calls)
            }
        });
        assert_eq!(value.ok(), Some(3));

        let err = until(
            Duration::from_millis(1),
            || "waiting".to_owned(),
            || Err::<(), _>("never".to_owned()),
        );
        match err {
            Err(TestkitError::Timeout { what, .. }) => {
                assert_eq!(what, "waiting (last seen: never)");
            }
            other => panic!("expected a time-out, got {other:?}"),
        }
    }
}
