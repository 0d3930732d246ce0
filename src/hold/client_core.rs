//! What every handle of one client shares: the validated configuration, the masters, the
//! members the coordinator talks to, the restart guard and the renewal task.

use crate::member::announce::Announcements;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::config::builder::{Plan, Validated};
use crate::config::group::PlanKind;
use crate::config::validated::Config;
use crate::hold::renewal::Renewer;
use crate::member::connection::{SentinelTarget, Target};
use crate::member::node::Node;
use crate::member::restart_guard::RestartGuard;
use crate::member::voter::{AfterWrites, Member};

/// One client's shared state; [`Redlock`](crate::Redlock) and every [`Lock`](crate::Lock)
/// hold it in an `Arc`.
pub(crate) struct Core {
    pub(crate) config: Config,
    /// The masters, for direct calls (health checks, the guard's operations).
    pub(crate) nodes: Arc<[Node]>,
    /// The members, as the coordinator sees them.
    pub(crate) members: Arc<[Member]>,
    pub(crate) guard: Arc<RestartGuard>,
    pub(crate) renewer: Renewer<Member>,
    /// Release announcements for waiting callers: one subscription connection per master.
    pub(crate) announcements: Announcements,
    /// Set once the full-quorum warning for semaphores was logged.
    warned_full_quorum: AtomicBool,
}

impl fmt::Debug for Core {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes: Vec<&str> = self.nodes.iter().map(Node::name).collect();
        f.debug_struct("Redlock")
            .field("nodes", &nodes)
            .field("config", &self.config)
            .finish()
    }
}

impl Core {
    pub(crate) fn new(validated: Validated) -> Self {
        let Validated {
            config,
            members: plans,
            names,
        } = validated;
        let connect_timeout = config.connect_timeout;
        let mut waits = Vec::with_capacity(plans.len());
        let nodes: Arc<[Node]> = plans
            .into_iter()
            .zip(names)
            .enumerate()
            .map(|(i, (plan, name))| {
                let (target, wait) = match plan {
                    Plan::Single(client) => (Target::Fixed(client), AfterWrites::SINGLE),
                    Plan::Group(group) => {
                        let target = match group.kind {
                            PlanKind::Sentinel {
                                master,
                                failover_is_restart,
                                readers_confirmed,
                            } => Target::Sentinel(SentinelTarget {
                                sentinels: group.servers,
                                master,
                                data: group.data,
                                failover_is_restart,
                                readers_confirmed,
                                replicas_known: Default::default(),
                            }),
                        };
                        (
                            target,
                            AfterWrites {
                                wait: group.wait,
                                wait_on_extensions: group.wait_on_extensions,
                                confirm_identity: group.identity_per_grant,
                            },
                        )
                    }
                };
                waits.push(wait);
                Node::new(i, name, target, connect_timeout)
            })
            .collect();
        let guard = Arc::new(RestartGuard::new(&config, nodes.clone()));
        let fence_keep_ms = config
            .fence_counter_ttl
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        let members: Arc<[Member]> = waits
            .into_iter()
            .enumerate()
            .map(|(i, after)| {
                Member::new(
                    i,
                    nodes.clone(),
                    guard.clone(),
                    fence_keep_ms,
                    after,
                    &config,
                )
            })
            .collect();
        let renewer = Renewer::new(members.clone(), config.node_timeout);
        let announcements = Announcements::new(
            nodes.iter().map(|node| node.connection().clone()),
            config.connect_timeout.max(config.node_timeout),
        );
        Self {
            config,
            nodes,
            members,
            guard,
            renewer,
            announcements,
            warned_full_quorum: AtomicBool::new(false),
        }
    }

    /// Warns, once per client, that `k` permits need every master.
    pub(crate) fn warn_full_quorum(&self, k: usize) {
        if !self.warned_full_quorum.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                k,
                masters = self.nodes.len(),
                "a semaphore of {k} permits needs every one of the {} masters: one master down blocks every permit; use fewer permits or more masters",
                self.nodes.len()
            );
        }
    }
}
