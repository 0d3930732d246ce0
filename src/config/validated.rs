//! The validated configuration: what a built client runs with, and the time budget of one
//! lock. Everything here has passed the builder's checks.

use std::time::Duration;

use crate::config::resources::Namespace;
use crate::config::retry::RetryPolicy;
use crate::error::ConfigError;
use crate::rules::drift_allowance;

/// Default lock time-to-live.
pub const DEFAULT_TTL: Duration = Duration::from_secs(10);
/// Default clock drift factor: the drift allowance is `ttl * drift_factor + 2 ms`.
pub const DEFAULT_DRIFT_FACTOR: f64 = 0.01;
/// Default per-request timeout; never more than a tenth of the ttl.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_millis(50);
/// Default bound on establishing a connection to one master.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Default key prefix. Lock keys are `{prefix}lock:{resource}`.
pub const DEFAULT_KEY_PREFIX: &str = "redquorum:";
/// The largest ttl accepted.
pub const MAX_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// The validated client-wide configuration.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) ttl: Duration,
    pub(crate) drift_factor: f64,
    pub(crate) node_timeout: Duration,
    pub(crate) min_validity: Option<Duration>,
    pub(crate) connect_timeout: Duration,
    pub(crate) retry: RetryPolicy,
    /// The prefix of every key, and how keys are named under it.
    pub(crate) keys: Namespace,
    pub(crate) fencing: bool,
    pub(crate) fence_counter_ttl: Option<Duration>,
    pub(crate) restart_guard: bool,
    pub(crate) deployment_max_ttl: Option<Duration>,
    pub(crate) strict: bool,
    /// Testing only: guard v2's reader rule (see `RedlockBuilder::guard_trusts_every_reader`).
    pub(crate) guard_trusts_every_reader: bool,
    /// Renewal batches on the connection of acquisitions (benchmarks only).
    pub(crate) renewal_shares_connection: bool,
}

/// The time budget of one lock: what the coordinator needs for its arithmetic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timing {
    pub(crate) ttl: Duration,
    pub(crate) drift: Duration,
    pub(crate) node_timeout: Duration,
    pub(crate) min_validity: Duration,
}

impl Config {
    /// Validates `ttl` (the client's or a per-lock override) against the other options.
    pub(crate) fn timing(&self, ttl: Duration) -> Result<Timing, ConfigError> {
        let ttl = whole_millis(ttl)?;
        if let Some(max) = self.deployment_max_ttl
            && ttl > max
        {
            return Err(ConfigError::TtlAboveDeploymentMax { ttl, max });
        }
        if self.node_timeout >= ttl / 2 {
            return Err(ConfigError::NodeTimeoutTooLong {
                node_timeout: self.node_timeout,
                ttl,
            });
        }
        let drift = drift_allowance(ttl, self.drift_factor);
        let min_validity = self.min_validity.unwrap_or(ttl / 10);
        let budget = drift
            .checked_add(self.node_timeout)
            .and_then(|d| d.checked_add(min_validity));
        if budget.is_none_or(|b| b >= ttl) {
            return Err(ConfigError::TtlLeavesNoValidity {
                ttl,
                drift,
                node_timeout: self.node_timeout,
                min_validity,
            });
        }
        Ok(Timing {
            ttl,
            drift,
            node_timeout: self.node_timeout,
            min_validity,
        })
    }
}

pub(crate) fn whole_millis(ttl: Duration) -> Result<Duration, ConfigError> {
    if ttl > MAX_TTL {
        return Err(ConfigError::TtlTooLarge { ttl, max: MAX_TTL });
    }
    let millis = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
    if millis == 0 {
        return Err(ConfigError::TtlTooSmall(ttl));
    }
    Ok(Duration::from_millis(millis))
}
