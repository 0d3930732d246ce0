//! The client builder: every option with its default and valid range, validated at
//! `build()` without any I/O.

use std::fmt;
use std::time::Duration;

use crate::config::group::{Group, GroupPlan};
use crate::config::resources::Namespace;
use crate::config::retry::RetryPolicy;
use crate::config::url;
use crate::config::validated::{
    Config, DEFAULT_CONNECT_TIMEOUT, DEFAULT_DRIFT_FACTOR, DEFAULT_KEY_PREFIX,
    DEFAULT_NODE_TIMEOUT, DEFAULT_TTL, MAX_TTL, whole_millis,
};
use crate::error::ConfigError;

/// Builds a [`Redlock`](crate::Redlock) client. Obtain one with
/// [`Redlock::builder`](crate::Redlock::builder).
///
/// `build()` validates every option and returns a typed [`ConfigError`] naming the one to
/// change; it never panics and does no I/O (connections are made on first use).
///
/// ```
/// use std::time::Duration;
/// use redquorum::Redlock;
///
/// let redlock = Redlock::builder()
///     .nodes(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"])
///     .ttl(Duration::from_secs(30))
///     .build()?;
/// assert_eq!(redlock.quorum(redquorum::LockKind::Mutex), 2);
/// # Ok::<(), redquorum::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct RedlockBuilder {
    nodes: Vec<NodeSpec>,
    ttl: Duration,
    drift_factor: f64,
    node_timeout: Option<Duration>,
    min_validity: Option<Duration>,
    connect_timeout: Duration,
    retry: RetryPolicy,
    key_prefix: String,
    fencing: bool,
    fence_counter_ttl: Option<Duration>,
    restart_guard: bool,
    deployment_max_ttl: Option<Duration>,
    strict: bool,
    /// Testing only: guard v2's reader rule (every answering reader counts).
    guard_trusts_every_reader: bool,
    renewal_shares_connection: bool,
}

impl fmt::Debug for RedlockBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes: Vec<String> = self.nodes.iter().map(NodeSpec::name).collect();
        f.debug_struct("RedlockBuilder")
            .field("nodes", &nodes)
            .field("ttl", &self.ttl)
            .field("drift_factor", &self.drift_factor)
            .field("node_timeout", &self.node_timeout)
            .field("min_validity", &self.min_validity)
            .field("connect_timeout", &self.connect_timeout)
            .field("retry", &self.retry)
            .field("key_prefix", &self.key_prefix)
            .field("fencing", &self.fencing)
            .field("fence_counter_ttl", &self.fence_counter_ttl)
            .field("restart_guard", &self.restart_guard)
            .field("deployment_max_ttl", &self.deployment_max_ttl)
            .field("strict", &self.strict)
            .field("renewal_shares_connection", &self.renewal_shares_connection)
            .finish()
    }
}

impl Default for RedlockBuilder {
    fn default() -> Self {
        Self {
            nodes: Vec::new(),
            ttl: DEFAULT_TTL,
            drift_factor: DEFAULT_DRIFT_FACTOR,
            node_timeout: None,
            min_validity: None,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            retry: RetryPolicy::new(),
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            fencing: false,
            fence_counter_ttl: None,
            restart_guard: true,
            deployment_max_ttl: None,
            strict: false,
            guard_trusts_every_reader: false,
            renewal_shares_connection: false,
        }
    }
}

impl RedlockBuilder {
    /// Adds one master: `redis://[user:password@]host[:port][/db]`, or `rediss://…` with the
    /// `tls-rustls` feature. Masters must be independent servers (no replication between
    /// them). Required: at least one; an odd number is best — four masters tolerate one
    /// failure, exactly as three do.
    ///
    /// A `redis+sentinel://s1:26379,s2:26379/mymaster[/db]` URL adds a [`Group`] member
    /// instead: the primary the sentinels name (`rediss+sentinel://` with TLS). See
    /// [`member`](Self::member).
    pub fn node(mut self, url: impl Into<String>) -> Self {
        self.nodes.push(NodeSpec::Url(url.into()));
        self
    }

    /// Adds one member that is a group of servers — a Sentinel-managed primary — voting once
    /// like a single master; see [`Group`] for how a failover is handled.
    pub fn member(mut self, group: Group) -> Self {
        self.nodes.push(NodeSpec::Group(Box::new(group)));
        self
    }

    /// Adds one master reached through a `redis::Client` you built: custom TLS roots or
    /// client certificates (`redis::Client::build_with_tls`), a Unix socket, RESP3, a
    /// username and password from a secret store. redquorum makes its own multiplexed
    /// connection from it, with its own timeouts (`connect_timeout`, `node_timeout`); the
    /// client's address names the master in messages (without its password).
    ///
    /// ```
    /// let client = redquorum::redis::Client::open("redis://10.0.0.1:6379")?;
    /// let redlock = redquorum::Redlock::builder()
    ///     .node_client(client)
    ///     .nodes(["redis://10.0.0.2:6379", "redis://10.0.0.3:6379"])
    ///     .build()?;
    /// assert_eq!(redlock.nodes(), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn node_client(mut self, client: redis::Client) -> Self {
        self.nodes.push(NodeSpec::Client(Box::new(client)));
        self
    }

    /// Adds several masters; see [`node`](Self::node).
    pub fn nodes<I, S>(mut self, urls: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.nodes
            .extend(urls.into_iter().map(|u| NodeSpec::Url(u.into())));
        self
    }

    /// Lock time-to-live. Default [`DEFAULT_TTL`] (10 s); from 1 ms to [`MAX_TTL`], rounded
    /// down to whole milliseconds, and long enough to leave validity after the drift
    /// allowance, one node timeout and `min_validity`.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Clock drift factor. Default [`DEFAULT_DRIFT_FACTOR`] (0.01); in `[0, 0.5)`. The drift
    /// allowance `ttl * drift_factor + 2 ms` is taken off every lock's validity to cover
    /// masters whose clocks run slightly fast.
    pub fn drift_factor(mut self, factor: f64) -> Self {
        self.drift_factor = factor;
        self
    }

    /// Bound on each request to one master. Default: [`DEFAULT_NODE_TIMEOUT`] (50 ms) or a
    /// tenth of the ttl, whichever is smaller; must be non-zero and below half the ttl. A
    /// master that does not answer in time counts as a "no" vote.
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = Some(timeout);
        self
    }

    /// Smallest validity a newly acquired lock may have; a quorum that took longer to
    /// gather is released and the attempt fails with
    /// [`Error::ValidityExhausted`](crate::Error::ValidityExhausted). Default: a tenth of
    /// the lock's ttl; below `ttl - drift - node_timeout`.
    pub fn min_validity(mut self, min_validity: Duration) -> Self {
        self.min_validity = Some(min_validity);
        self
    }

    /// Bound on establishing a connection to one master (in the background; lock calls are
    /// bounded by `node_timeout` whatever this is). Default [`DEFAULT_CONNECT_TIMEOUT`].
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Retry policy of [`Redlock::lock`](crate::Redlock::lock). Default [`RetryPolicy::new`]: 10 attempts,
    /// 200 ms ± 100 ms apart.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Prefix of every key redquorum writes. Default [`DEFAULT_KEY_PREFIX`]; any string,
    /// including empty. The lock on resource `r` is the key `{prefix}lock:{r}`.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Gives every lock a fencing token ([`Lock::fencing_token`](crate::Lock::fencing_token))
    /// that strictly increases across successive holders of a resource. Default: off (it
    /// costs a second round trip per acquisition); [`LockOptions::fencing`](crate::LockOptions::fencing)
    /// turns it on per lock. See the crate docs, "Fencing tokens".
    pub fn fencing(mut self, on: bool) -> Self {
        self.fencing = on;
        self
    }

    /// How long a fence counter is kept after its last acquisition. Default: forever.
    ///
    /// Counters never expire by default, so a deployment that locks ever new resource names
    /// with fencing grows one small key per name (and under `noeviction` memory is never
    /// reclaimed). With a bound, a counter idle for longer is deleted and the next holder's
    /// token starts again from 1: **tokens then increase strictly only across holders less
    /// than this apart**. Choose it far longer than any pause between two writes to the
    /// protected resource. From one ttl to [`MAX_TTL`] ×  100.
    pub fn fence_counter_ttl(mut self, keep: Duration) -> Self {
        self.fence_counter_ttl = Some(keep);
        self
    }

    /// The restart guard (see the crate docs, "Restart guard"): a master that may have lost
    /// lock keys — restarted without persisting every write, flushed, or never seen by any
    /// client before — does not count toward a quorum until the deployment's longest ttl
    /// has passed since then, for every client. Default: on. Turn it off only if every
    /// master persists with `appendfsync always` or is kept down for a ttl after a crash, and
    /// turn it off on every client of a deployment, or on none.
    pub fn restart_guard(mut self, on: bool) -> Self {
        self.restart_guard = on;
        self
    }

    /// The longest ttl any client of this deployment uses — a contract every client should
    /// be given the same value of. Default: none.
    ///
    /// With it, this client refuses ttls above it ([`ConfigError::TtlAboveDeploymentMax`],
    /// for locks and extensions alike), and the restart guard, when it cannot read the
    /// deployment's ttl records from enough masters (a partition), keeps a master that lost
    /// its data out for this long instead of until it can read them. Without it, such a
    /// master stays out until the records can be read: the guard cannot know how long
    /// another client's lock may still run.
    pub fn deployment_max_ttl(mut self, ttl: Duration) -> Self {
        self.deployment_max_ttl = Some(ttl);
        self
    }

    /// Testing only (`--cfg redquorum_unsafe`): the restart guard believes every master that
    /// answers when it reads the deployment's longest ttl, as guard v2 did — including a
    /// master that lost its own records. Unsafe: the negative control of the trusted-reader
    /// rule.
    #[cfg(redquorum_unsafe)]
    #[doc(hidden)]
    pub fn guard_trusts_every_reader(mut self) -> Self {
        self.guard_trusts_every_reader = true;
        self
    }

    /// Strict health: [`Redlock::health`](crate::Redlock::health) fails with
    /// [`Error::Unhealthy`](crate::Error::Unhealthy) on any problem it finds, and
    /// quarantines a master whose clock misbehaves (its grants stop counting until a later
    /// check finds it sane). Default: off (problems are reported and logged only).
    pub fn strict(mut self, on: bool) -> Self {
        self.strict = on;
        self
    }

    /// Not for users (`--cfg redquorum_unsafe`): send renewal batches on the connection of
    /// acquisitions and releases, through its outbox, instead of a connection of their own,
    /// so that `benches/renewal.rs` can measure both (`RENEWAL_CONNECTION=shared`).
    #[cfg(redquorum_unsafe)]
    #[doc(hidden)]
    pub fn renewal_shares_connection(mut self, shared: bool) -> Self {
        self.renewal_shares_connection = shared;
        self
    }

    /// Validates every option: the configuration, each master's client and its name.
    /// (`build`, which hands them to the client, is in `client.rs`, so that this module stays
    /// below the client.)
    pub(crate) fn validate(self) -> Result<Validated, ConfigError> {
        if self.nodes.is_empty() {
            return Err(ConfigError::NoNodes);
        }
        let mut members = Vec::with_capacity(self.nodes.len());
        let mut names = Vec::with_capacity(self.nodes.len());
        let mut addresses: Vec<(String, usize)> = Vec::new();
        for (index, spec) in self.nodes.iter().enumerate() {
            let member = match spec {
                NodeSpec::Client(client) => Plan::Single((**client).clone()),
                NodeSpec::Group(group) => Plan::Group(group.plan(index)?),
                NodeSpec::Url(node_url) => match Group::from_url(index, node_url) {
                    Some(group) => Plan::Group(group?.plan(index)?),
                    None => Plan::Single(url::parse(index, node_url)?),
                },
            };
            // The same server in two members is not two independent masters.
            for addr in member.addresses() {
                if let Some((_, first)) = addresses.iter().find(|(a, _)| *a == addr) {
                    return Err(ConfigError::DuplicateNode {
                        first: *first,
                        second: index,
                        url: spec.name(),
                    });
                }
                addresses.push((addr, index));
            }
            members.push(member);
            names.push(spec.name());
        }
        if !(0.0..0.5).contains(&self.drift_factor) {
            return Err(ConfigError::DriftFactorOutOfRange(self.drift_factor));
        }
        let ttl = whole_millis(self.ttl)?;
        let node_timeout = self
            .node_timeout
            .unwrap_or_else(|| DEFAULT_NODE_TIMEOUT.min(ttl / 10));
        if node_timeout.is_zero() {
            return Err(ConfigError::ZeroNodeTimeout);
        }
        self.retry.validate()?;
        if let Some(keep) = self.fence_counter_ttl
            && (keep < ttl || keep > MAX_TTL.saturating_mul(100))
        {
            return Err(ConfigError::OutOfRange {
                option: "fence_counter_ttl",
                reason: format!(
                    "{keep:?} must be at least the ttl ({ttl:?}) and at most {:?}",
                    MAX_TTL.saturating_mul(100)
                ),
            });
        }
        let deployment_max_ttl = self.deployment_max_ttl.map(whole_millis).transpose()?;
        let config = Config {
            ttl,
            deployment_max_ttl,
            drift_factor: self.drift_factor,
            node_timeout,
            min_validity: self.min_validity,
            connect_timeout: self.connect_timeout.max(node_timeout),
            retry: self.retry,
            keys: Namespace::plain(self.key_prefix),
            fencing: self.fencing,
            fence_counter_ttl: self.fence_counter_ttl,
            restart_guard: self.restart_guard,
            strict: self.strict,
            guard_trusts_every_reader: self.guard_trusts_every_reader,
            renewal_shares_connection: self.renewal_shares_connection,
        };
        config.timing(ttl)?;
        Ok(Validated {
            config,
            members,
            names,
        })
    }
}

/// One member as given to the builder.
#[derive(Clone)]
enum NodeSpec {
    Url(String),
    Client(Box<redis::Client>),
    Group(Box<Group>),
}

impl NodeSpec {
    /// How the member is named in messages: its URL or address, password redacted.
    fn name(&self) -> String {
        match self {
            Self::Url(u) => url::redact(u),
            Self::Client(c) => url::redact(&c.get_connection_info().addr().to_string()),
            Self::Group(g) => g.name(),
        }
    }
}

/// One member, parsed.
#[derive(Debug, Clone)]
pub(crate) enum Plan {
    /// A single master.
    Single(redis::Client),
    /// A group of servers.
    Group(GroupPlan),
}

impl Plan {
    /// The addresses this member is reached at (for duplicates).
    fn addresses(&self) -> Vec<String> {
        match self {
            Self::Single(c) => vec![c.get_connection_info().addr().to_string()],
            Self::Group(g) => g
                .servers
                .iter()
                .map(|c| c.get_connection_info().addr().to_string())
                .collect(),
        }
    }
}

/// What a valid builder hands to the client.
#[derive(Debug)]
pub(crate) struct Validated {
    pub(crate) config: Config,
    pub(crate) members: Vec<Plan>,
    pub(crate) names: Vec<String>,
}

#[cfg(test)]
mod tests;
