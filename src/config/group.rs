//! Quorum members that are groups of servers: a primary managed by a Sentinel group. A
//! group is one member — one vote — however many servers it has.

use std::fmt;

use redis::{Client, ConnectionInfo};

use crate::config::url;
use crate::error::ConfigError;

/// A quorum member made of several servers: a Sentinel group (the current primary,
/// followed across failovers). It votes once, like a single master. Add it with
/// [`RedlockBuilder::member`](crate::RedlockBuilder::member), or give
/// [`node`](crate::RedlockBuilder::node) a `redis+sentinel://` URL.
///
/// **A failover is a restart.** Replication is asynchronous, so a replica promoted in a
/// failover may lack lock keys its primary had granted. The restart guard therefore treats
/// any change of the server behind a group (a new primary: a new `run_id`) as a master that
/// may have lost its data — even if both persist every write — and keeps it out for the
/// deployment's longest ttl. [`wait_replicas`](Group::wait_replicas) adds `WAIT`
/// after each grant; it narrows the window (a failover to a replica that acknowledged keeps
/// the key) but is no consensus, so the guard still applies.
///
/// **A failback is one too.** With the restart guard on (the default; without it no
/// failover or failback is covered), every grant through a group reads the server's role
/// and replication id back (`INFO replication`, on the same connection) and counts only on
/// a primary with the id the guard verified: a primary demoted, resynchronised from another
/// and promoted back keeps its `run_id`, but every promotion draws a new replication id, and
/// a demoted primary that takes writes (`replica-read-only no`) reports `role:slave`. That
/// read shares a round trip with `WAIT` when `wait_replicas` asks for a fixed count; without
/// `WAIT`, an acquisition through a group costs one more round trip. A primary also draws a
/// new id when it creates its replication backlog (its first replica after a boot, or one
/// after `repl-backlog-ttl` without any): the group is then out as after a failover. See the
/// crate's `safety` docs.
///
/// ```
/// use redquorum::{Group, Redlock, Replicas};
///
/// let redlock = Redlock::builder()
///     .member(Group::sentinel(["redis://10.0.2.1:26379", "redis://10.0.2.2:26379"], "locks")
///         .wait_replicas(Replicas::AtLeast(1)))
///     .node("redis+sentinel://10.0.4.1:26379,10.0.4.2:26379/locks")
///     .node("redis://10.0.3.1:6379")
///     .build()?;
/// assert_eq!(redlock.nodes(), 3);
/// # Ok::<(), redquorum::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Group {
    kind: GroupKind,
    data_url: Option<String>,
    wait: Option<Replicas>,
    /// Whether extensions and renewals wait for the replicas too (always, but for the
    /// negative control).
    wait_on_extensions: bool,
    failover_is_restart: bool,
    /// Whether a grant counts only once the primary's replication id, read back after it,
    /// is the one the restart guard verified (always, but for the negative control).
    identity_per_grant: bool,
    /// Whether the group is believed as a reader of ttl records only once its replicas
    /// acknowledged after the read (always, but for the negative control).
    readers_confirmed: bool,
}

#[derive(Clone)]
enum GroupKind {
    Sentinel {
        sentinels: Vec<String>,
        master: String,
    },
}

/// How many replicas must acknowledge a grant ([`Group::wait_replicas`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Replicas {
    /// Every replica: the most this client has seen connected to the primary
    /// (`connected_slaves`), so that a primary cut off from its replicas still needs them.
    All,
    /// At least this many.
    AtLeast(usize),
}

impl fmt::Debug for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Group")
            .field("group", &self.name())
            .field("wait", &self.wait)
            .finish()
    }
}

impl Group {
    /// The primary that `sentinels` name `master_name`, found again after every failover.
    /// The data nodes are reached with the first sentinel URL's credentials, database and
    /// TLS unless [`data_url`](Self::data_url) says otherwise.
    pub fn sentinel<I, S>(sentinels: I, master_name: impl Into<String>) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            kind: GroupKind::Sentinel {
                sentinels: sentinels.into_iter().map(Into::into).collect(),
                master: master_name.into(),
            },
            data_url: None,
            wait: None,
            wait_on_extensions: true,
            failover_is_restart: true,
            identity_per_grant: true,
            readers_confirmed: true,
        }
    }

    /// How to reach the group's data nodes, when it differs from the sentinel URLs:
    /// a URL whose user, password, database and TLS are used (its host is replaced by each
    /// server's address).
    pub fn data_url(mut self, url: impl Into<String>) -> Self {
        self.data_url = Some(url.into());
        self
    }

    /// After each grant, `WAIT` until this many replicas acknowledged it (within the node
    /// timeout), and count the grant only then. Default: no `WAIT`.
    pub fn wait_replicas(mut self, replicas: Replicas) -> Self {
        self.wait = Some(replicas);
        self
    }

    /// **Testing only, and unsafe**: with [`wait_replicas`](Self::wait_replicas), `WAIT`
    /// after grants only, not after extensions and renewals — guard v2's behaviour, the
    /// negative control that shows why a kept-alive lock needs its renewals replicated: a
    /// holder cut off with an old primary keeps renewing there, unreplicated, while a
    /// promoted replica lets the key run out. Only with `--cfg redquorum_unsafe`.
    #[cfg(redquorum_unsafe)]
    #[doc(hidden)]
    pub fn without_wait_on_extensions(mut self) -> Self {
        self.wait_on_extensions = false;
        self
    }

    /// **Testing only, and unsafe**: let the restart guard treat a new primary like a
    /// restart of the same server (kept at once if both persist every write) — the negative
    /// control that shows why a failover must be a restart. Only with `--cfg redquorum_unsafe`.
    #[cfg(redquorum_unsafe)]
    #[doc(hidden)]
    pub fn without_failover_rule(mut self) -> Self {
        self.failover_is_restart = false;
        self
    }

    /// **Testing only, and unsafe**: count a grant on the primary's epoch read back and the
    /// connection alone, without reading back its replication id — the negative control
    /// that shows why: a primary demoted, resynchronised from another (losing keys) and
    /// promoted back under a connection that stayed open keeps its `run_id`, its marker and
    /// the connection. Only with `--cfg redquorum_unsafe`.
    #[cfg(redquorum_unsafe)]
    #[doc(hidden)]
    pub fn without_identity_per_grant(mut self) -> Self {
        self.identity_per_grant = false;
        self
    }

    /// **Testing only, and unsafe**: believe the group's ttl records (when the restart guard
    /// verifies another member) without `WAIT` for its replicas after the read — the
    /// negative control that shows why: a primary cut off after a failover, which a
    /// verifier may still reach, misses the records written on the new one. Only with
    /// `--cfg redquorum_unsafe`.
    #[cfg(redquorum_unsafe)]
    #[doc(hidden)]
    pub fn without_confirmed_readers(mut self) -> Self {
        self.readers_confirmed = false;
        self
    }

    /// How the group is named in messages: its kind and its URLs, passwords redacted.
    pub(crate) fn name(&self) -> String {
        let list = |urls: &[String]| {
            urls.iter()
                .map(|u| url::redact(u))
                .collect::<Vec<_>>()
                .join(",")
        };
        match &self.kind {
            GroupKind::Sentinel { sentinels, master } => {
                format!("sentinel({})/{master}", list(sentinels))
            }
        }
    }

    /// Reads `redis+sentinel://h1:p1,h2:p2/master[/db]` (`rediss+sentinel://` for TLS):
    /// `None` for any other URL.
    pub(crate) fn from_url(index: usize, text: &str) -> Option<Result<Self, ConfigError>> {
        let (scheme, rest) = text.split_once("://")?;
        let base = match scheme {
            "redis+sentinel" => "redis",
            "rediss+sentinel" => "rediss",
            _ => return None,
        };
        let invalid = |reason: &str| ConfigError::InvalidUrl {
            index,
            url: url::redact(text),
            reason: reason.to_owned(),
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((u, h)) => (format!("{u}@"), h),
            None => (String::new(), authority),
        };
        let hosts: Vec<&str> = hosts.split(',').filter(|h| !h.is_empty()).collect();
        if hosts.is_empty() {
            return Some(Err(invalid("no host given")));
        }
        let urls: Vec<String> = hosts
            .iter()
            .map(|h| format!("{base}://{userinfo}{h}"))
            .collect();
        let (master, db) = path.split_once('/').unwrap_or((path, ""));
        if master.is_empty() {
            return Some(Err(invalid(
                "name the Sentinel master after the hosts: redis+sentinel://h1:26379,h2:26379/mymaster",
            )));
        }
        let mut group = Self::sentinel(urls.clone(), master);
        if !db.is_empty() {
            group = group.data_url(format!("{}/{db}", urls[0]));
        }
        Some(Ok(group))
    }

    /// Parses every URL of the group (no I/O).
    pub(crate) fn plan(&self, index: usize) -> Result<GroupPlan, ConfigError> {
        let parse_all = |urls: &[String]| -> Result<Vec<Client>, ConfigError> {
            if urls.is_empty() {
                return Err(ConfigError::InvalidUrl {
                    index,
                    url: self.name(),
                    reason: "a group needs at least one server URL".to_owned(),
                });
            }
            urls.iter().map(|u| url::parse(index, u)).collect()
        };
        let servers = match &self.kind {
            GroupKind::Sentinel { sentinels, .. } => parse_all(sentinels)?,
        };
        let data = match &self.data_url {
            Some(u) => url::parse(index, u)?.get_connection_info().clone(),
            None => servers[0].get_connection_info().clone(),
        };
        let kind = match &self.kind {
            GroupKind::Sentinel { master, .. } => {
                if master.is_empty() {
                    return Err(ConfigError::InvalidUrl {
                        index,
                        url: self.name(),
                        reason: "the Sentinel master name is empty".to_owned(),
                    });
                }
                PlanKind::Sentinel {
                    master: master.clone(),
                    failover_is_restart: self.failover_is_restart,
                    readers_confirmed: self.readers_confirmed,
                }
            }
        };
        Ok(GroupPlan {
            kind,
            servers,
            data,
            wait: self.wait,
            wait_on_extensions: self.wait_on_extensions,
            // The replication id is part of the identity the guard verifies only when a
            // failover counts as a restart.
            identity_per_grant: self.identity_per_grant && self.failover_is_restart,
        })
    }
}

/// A group as the client runs it: parsed, not yet connected.
#[derive(Debug, Clone)]
pub(crate) struct GroupPlan {
    pub(crate) kind: PlanKind,
    /// The sentinels.
    pub(crate) servers: Vec<Client>,
    /// Credentials, database and TLS for the data nodes.
    pub(crate) data: ConnectionInfo,
    pub(crate) wait: Option<Replicas>,
    /// Whether extensions and renewals `WAIT` too (only the negative control says no).
    pub(crate) wait_on_extensions: bool,
    /// Whether every grant reads the primary's replication id back (only the negative
    /// control says no).
    pub(crate) identity_per_grant: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PlanKind {
    Sentinel {
        master: String,
        failover_is_restart: bool,
        readers_confirmed: bool,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_urls_parse() {
        let g = Group::from_url(1, "redis+sentinel://:pw@s1:26379,s2:26379/locks/2")
            .expect("a group URL")
            .expect("valid");
        assert_eq!(
            g.name(),
            "sentinel(redis://:***@s1:26379,redis://:***@s2:26379)/locks"
        );
        let plan = g.plan(1).expect("valid");
        assert_eq!(plan.servers.len(), 2);
        assert_eq!(
            plan.kind,
            PlanKind::Sentinel {
                master: "locks".into(),
                failover_is_restart: true,
                readers_confirmed: true,
            }
        );
        assert_eq!(plan.data.redis_settings().db(), 2);
        assert!(Group::from_url(0, "redis://a:1").is_none());
        assert!(matches!(
            Group::from_url(2, "redis+sentinel://s1:26379"),
            Some(Err(ConfigError::InvalidUrl { index: 2, .. }))
        ));
    }
}
