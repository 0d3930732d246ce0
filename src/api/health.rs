//! `Redlock::health`: what each master looks like, and every configuration that breaks
//! Redlock's assumptions, with what to change.

mod clock;

use std::time::Duration;

use tokio::time::Instant;

use crate::api::client::Redlock;
use crate::error::Error;
use crate::member::node::{Info, Node};
use crate::member::restart_guard::RestartGuard;
use crate::report::{GuardStatus, HealthReport, NodeHealth, PollingNote, Problem};
use clock::sample_clock;

/// Default time over which `health()` samples each master's clock.
pub const DEFAULT_CLOCK_WINDOW: Duration = Duration::from_millis(500);

// Health checks; the rest of `Redlock` is in `client.rs` (and `with_lock` in `scope.rs`).
impl Redlock {
    /// Checks every master: reachability, version, role, persistence, eviction policy,
    /// duplicates, and clock behaviour (sampled over [`DEFAULT_CLOCK_WINDOW`]); and whether
    /// this client's renewals keep up with the locks it keeps alive
    /// ([`HealthReport::renewal`], [`Problem::RenewalOverloaded`]). See
    /// [`health_with`](Redlock::health_with).
    pub async fn health(&self) -> Result<HealthReport, Error> {
        self.health_with(DEFAULT_CLOCK_WINDOW).await
    }

    /// Masters where this client's waiters poll instead of being woken by a release's
    /// announcement: they refused `SUBSCRIBE` within the last 30 s (then they are asked
    /// again). Empty when every master takes subscriptions, or when neither a waiting call
    /// nor [`health`](Self::health) (which tries) has subscribed yet.
    pub fn waiting_notes(&self) -> Vec<PollingNote> {
        self.core()
            .announcements
            .refused()
            .into_iter()
            .map(|(node, reason)| PollingNote { node, reason })
            .collect()
    }

    /// Checks every master, sampling clocks over `clock_window`, concurrently.
    ///
    /// With [`strict`](crate::RedlockBuilder::strict) on, a master whose clock misbehaves
    /// is quarantined (its grants stop counting until a later check finds it sane) and any
    /// problem makes this return [`Error::Unhealthy`]; call it at start-up. Otherwise the
    /// report is returned whatever it holds.
    pub async fn health_with(&self, clock_window: Duration) -> Result<HealthReport, Error> {
        let config = &self.core().config;
        let settings = Settings {
            window: clock_window,
            drift_factor: config.drift_factor,
            guard_on: config.restart_guard,
            fencing: config.fencing,
        };
        let guard = &self.core().guard;
        let checks = self
            .core()
            .nodes
            .iter()
            .map(|node| check(node, guard, settings));
        // Whether each master takes the subscriptions waiters use (a probe channel, left at
        // once): refusals show in `polling`.
        let subscriptions = async {
            let probe = self
                .core()
                .announcements
                .join(&[format!("{}probe", config.keys.prefix())]);
            probe.subscribe().await;
        };
        let (mut nodes, ()) =
            futures::future::join(futures::future::join_all(checks), subscriptions).await;
        for i in 0..nodes.len() {
            let Some(id) = nodes[i].run_id.clone() else {
                continue;
            };
            if let Some(first) = nodes[..i]
                .iter()
                .position(|n| n.run_id.as_deref() == Some(&*id))
            {
                nodes[i].problems.push(Problem::Duplicate { first });
            }
        }
        let mut problems = Vec::new();
        if nodes.len() % 2 == 0 {
            problems.push(Problem::EvenCount { nodes: nodes.len() });
        }
        let strict = config.strict;
        if strict {
            for health in &mut nodes {
                let clock = health
                    .problems
                    .iter()
                    .find(|p| matches!(p, Problem::ClockRate { .. } | Problem::ClockStep { .. }));
                guard.set_strict(health.node, clock.map(ToString::to_string));
                health.guard = guard.status(health.node);
                health.quarantined = quarantined_for(&health.guard);
            }
        }
        // This client's own renewals: whether they keep up with the locks it keeps alive.
        let renewal = self.core().renewer.load();
        if renewal.is_overloaded() {
            problems.push(Problem::RenewalOverloaded(renewal));
        }
        let report = HealthReport {
            nodes,
            problems,
            renewal,
            polling: self.waiting_notes(),
        };
        for (node, p) in report.all_problems() {
            tracing::warn!(node, problem = %p, "master health");
        }
        if strict && !report.is_healthy() {
            return Err(Error::Unhealthy(Box::new(report)));
        }
        Ok(report)
    }
}

/// What a health check needs to know of the client's configuration.
#[derive(Debug, Clone, Copy)]
struct Settings {
    window: Duration,
    drift_factor: f64,
    guard_on: bool,
    fencing: bool,
}

/// How long the guard's view keeps a master out, if it does.
fn quarantined_for(status: &GuardStatus) -> Option<Duration> {
    match status {
        GuardStatus::Off | GuardStatus::Counted { .. } => None,
        GuardStatus::Quarantined { remaining, .. } => Some(*remaining),
        GuardStatus::Unverified { .. } | GuardStatus::Unhealthy { .. } => Some(Duration::MAX),
    }
}

async fn check(
    node: &Node,
    guard: &std::sync::Arc<RestartGuard>,
    settings: Settings,
) -> NodeHealth {
    let index = node.index();
    let timeout = Duration::from_secs(2).max(settings.window);
    let mut health = NodeHealth {
        node: index,
        url: node.name().to_owned(),
        rtt: None,
        version: None,
        role: None,
        primary: None,
        replicas: None,
        run_id: None,
        uptime: None,
        persistence: None,
        maxmemory_policy: None,
        clock_offset_ms: None,
        clock_rate: None,
        quarantined: None,
        guard: guard.status(index),
        problems: Vec::new(),
    };
    let sent = Instant::now();
    if let Err(e) = node.query(&redis::cmd("PING"), timeout).await {
        health.problems.push(Problem::Unreachable(e));
        return health;
    }
    health.rtt = Some(sent.elapsed());
    if let Ok(reply) = node
        .query(redis::cmd("INFO").arg("server").arg("replication"), timeout)
        .await
        && let Ok(info) = Info::from_reply(&reply)
    {
        // Valkey pins `redis_version` at 7.2.4 and says what it is in `valkey_version`.
        health.version = match info.field("valkey_version") {
            Some(v) => Some(format!("valkey {v}")),
            None => info.field("redis_version").map(str::to_owned),
        };
        health.role = info.field("role").map(str::to_owned);
        health.replicas = info.number("connected_slaves");
        health.run_id = info.field("run_id").map(str::to_owned);
        health.uptime = info.number("uptime_in_seconds").map(Duration::from_secs);
    }
    health.primary = node
        .connection()
        .current()
        .map(|live| live.addr.to_string());
    if health.role.as_deref().is_some_and(|r| r != "master") {
        health.problems.push(Problem::Replica);
    }
    let config = |name: &'static str| async move {
        let live = tokio::time::timeout(timeout, node.live())
            .await
            .ok()?
            .ok()?;
        tokio::time::timeout(timeout, node.config_on(&live, name))
            .await
            .ok()?
    };
    let (aof, fsync, save, policy) = (
        config("appendonly").await,
        config("appendfsync").await,
        config("save").await,
        config("maxmemory-policy").await,
    );
    if let (Some(aof), Some(fsync), Some(save)) = (aof, fsync, save) {
        if let Some(p) = persistence_problem(&aof, &fsync, &save, settings.guard_on) {
            health.problems.push(p);
        }
        if settings.fencing && !(aof == "yes" && fsync == "always") {
            health.problems.push(Problem::VolatileFenceCounters);
        }
        health.persistence = Some((aof, fsync, save));
    }
    if let Some(policy) = &policy
        && policy != "noeviction"
    {
        health.problems.push(Problem::Evicting {
            policy: policy.clone(),
        });
    }
    health.maxmemory_policy = policy;
    match sample_clock(node, settings.window, timeout).await {
        Ok(clock) => {
            health.clock_offset_ms = Some(clock.offset_ms);
            health.clock_rate = Some(clock.rate);
            if (clock.rate - 1.0).abs() > settings.drift_factor + clock.uncertainty {
                health.problems.push(Problem::ClockRate {
                    rate: clock.rate,
                    allowed: settings.drift_factor,
                });
            }
            if let Some(jump) = clock.step {
                health.problems.push(Problem::ClockStep { jump });
            }
        }
        Err(e) => health.problems.push(Problem::Unreachable(e)),
    }
    if settings.guard_on {
        // Say what the guard will do before it does it: verify now, then report.
        if let Ok(live) = tokio::time::timeout(timeout, node.live()).await
            && let Ok(live) = live
        {
            let _ = tokio::time::timeout(timeout, guard.ensure(index, live.generation)).await;
            // A durable epoch whose master no longer persists every write loses that status
            // now, not at its next restart.
            let _ = tokio::time::timeout(timeout, guard.observe_durability(index)).await;
        }
        health.guard = guard.status(index);
        match &health.guard {
            GuardStatus::Quarantined { cause, remaining } => {
                health.problems.push(Problem::Quarantined {
                    cause: *cause,
                    remaining: *remaining,
                });
            }
            GuardStatus::Unverified { reason } => health.problems.push(Problem::Unverified {
                reason: reason
                    .clone()
                    .unwrap_or_else(|| "no verification finished in time".to_owned()),
            }),
            _ => {}
        }
    }
    health.quarantined = quarantined_for(&health.guard);
    health
}

fn persistence_problem(aof: &str, fsync: &str, save: &str, guard_on: bool) -> Option<Problem> {
    let detail = match (aof, fsync, save.trim()) {
        ("yes", "always", _) => return None,
        ("yes", other, _) => format!("appendonly yes with appendfsync {other}"),
        (_, _, "") if guard_on => "no persistence".to_owned(),
        (_, _, "") => return Some(Problem::UnguardedRestarts),
        (_, _, rdb) => format!("RDB snapshots (save \"{rdb}\") without AOF"),
    };
    Some(if guard_on {
        Problem::RestartsQuarantine { detail }
    } else {
        Problem::LossyPersistence { detail }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn persistence_is_judged_with_the_guard_in_mind() {
        assert_eq!(persistence_problem("yes", "always", "", false), None);
        assert_eq!(persistence_problem("yes", "always", "", true), None);
        assert!(matches!(
            persistence_problem("yes", "everysec", "", true),
            Some(Problem::RestartsQuarantine { .. })
        ));
        assert!(matches!(
            persistence_problem("yes", "everysec", "", false),
            Some(Problem::LossyPersistence { .. })
        ));
        assert!(matches!(
            persistence_problem("no", "everysec", "", true),
            Some(Problem::RestartsQuarantine { .. })
        ));
        assert_eq!(
            persistence_problem("no", "everysec", "", false),
            Some(Problem::UnguardedRestarts)
        );
        assert!(matches!(
            persistence_problem("no", "everysec", "3600 1", true),
            Some(Problem::RestartsQuarantine { .. })
        ));
    }

    #[test]
    fn problems_say_what_to_change() {
        let p = Problem::Evicting {
            policy: "allkeys-lru".into(),
        };
        assert!(p.to_string().contains("noeviction"));
        let p = Problem::ClockRate {
            rate: 1.05,
            allowed: 0.01,
        };
        assert!(p.to_string().contains("+5.000%"), "{p}");
    }
}
