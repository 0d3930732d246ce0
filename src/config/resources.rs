//! Resource names to Redis keys: validated, namespaced, sorted and de-duplicated.
//!
//! Every key of a lock is named here, by [`Namespace`], and nowhere else.

use std::sync::Arc;

use crate::error::ConfigError;
use crate::kind::{LockKind, RwKeys};
use crate::slot::{key_slot, tag_for};

/// How a deployment names its keys: the prefix, and whether each key carries its
/// resource's hash slot as a tag.
///
/// Plain keys are `{prefix}{role}:{resource}` (`redquorum:lock:stock-42`). Slotted keys,
/// for a member that is a Redis Cluster, put every key of a resource in the resource's
/// slot — the slot `CLUSTER KEYSLOT resource` names, honouring a `{tag}` in the name — by
/// a tag that hashes to that slot: `{prefix}{role}:{T}:{resource}`, with `T` =
/// [`tag_for`]`(key_slot(resource))`. So a lock's keys, its fencing counter, its
/// announcement channel and the member's epoch marker for that slot can meet in one
/// script, and resources that share a tag (`{order-7}:lines`, `{order-7}:total`) share a
/// slot. Every client of a deployment names keys the same way: the layout follows from the
/// member list, which they share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Namespace {
    prefix: String,
    slotted: bool,
}

impl Namespace {
    /// Plain keys under `prefix` (any string, empty included).
    pub(crate) fn plain(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
            slotted: false,
        }
    }

    /// Slotted keys under `prefix`, which must not contain a brace: Redis Cluster hashes a
    /// key by its first `{…}`, which must be the slot tag.
    // Chosen by a member that is a Redis Cluster (issue 22's voter, not built yet).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn slotted(prefix: impl Into<String>) -> Result<Self, ConfigError> {
        let prefix = prefix.into();
        if prefix.contains(['{', '}']) {
            return Err(ConfigError::BraceInKeyPrefix { prefix });
        }
        Ok(Self {
            prefix,
            slotted: true,
        })
    }

    /// The prefix of every key.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The key of `role` (`lock`, `fence`, `rw-readers`, …) for `resource`.
    fn key(&self, role: &str, resource: &str) -> String {
        let prefix = &self.prefix;
        if self.slotted {
            let tag = tag_for(key_slot(resource));
            format!("{prefix}{role}:{{{tag}}}:{resource}")
        } else {
            format!("{prefix}{role}:{resource}")
        }
    }

    /// A mutex's key on `resource`: `lock`.
    pub(crate) fn lock(&self, resource: &str) -> String {
        self.key("lock", resource)
    }

    /// The fencing counter of `resource` (it never expires): `fence`.
    pub(crate) fn fence(&self, resource: &str) -> String {
        self.key("fence", resource)
    }

    /// A read-write lock's keys on `resource`: `rw-readers`, `rw-writer`, `rw-pending`.
    pub(crate) fn rw(&self, resource: &str) -> RwKeys {
        RwKeys {
            readers: self.key("rw-readers", resource),
            writer: self.key("rw-writer", resource),
            pending: self.key("rw-pending", resource),
        }
    }

    /// A semaphore's key on `resource`, the permit holders: `permits`.
    pub(crate) fn holders(&self, resource: &str) -> String {
        self.key("permits", resource)
    }
}

/// The resources of one lock and the keys that hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Keys {
    /// The names as the caller gave them (sorted, without duplicates).
    pub(crate) resources: Arc<[String]>,
    /// Each resource's key ([`Namespace::lock`]; for the other kinds, their keys), in the
    /// same order.
    pub(crate) keys: Arc<[String]>,
}

impl Keys {
    /// Each resource becomes its own key: names are never concatenated into one key, and
    /// sorting makes two clients locking the same set send identical scripts.
    pub(crate) fn new<I, S>(ns: &Namespace, resources: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut names = Vec::new();
        for (index, r) in resources.into_iter().enumerate() {
            let r = r.as_ref();
            if r.is_empty() {
                return Err(ConfigError::EmptyResource { index });
            }
            names.push(r.to_owned());
        }
        if names.is_empty() {
            return Err(ConfigError::NoResources);
        }
        names.sort_unstable();
        names.dedup();
        let keys = names.iter().map(|r| ns.lock(r)).collect();
        Ok(Self {
            resources: names.into(),
            keys,
        })
    }

    /// The keys of a lock of `kind` on `resources`: a mutex may span several resources; a
    /// read-write lock and a semaphore cover exactly one, whose keys are the readers, the
    /// writer and the pending writer (`{prefix}rw-readers:{r}`, `{prefix}rw-writer:{r}`,
    /// `{prefix}rw-pending:{r}`), or the permit holders (`{prefix}permits:{r}`).
    pub(crate) fn of_kind<I, S>(
        ns: &Namespace,
        resources: I,
        kind: LockKind,
    ) -> Result<Self, ConfigError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let keys = Self::new(ns, resources)?;
        if kind == LockKind::Mutex {
            return Ok(keys);
        }
        let [resource] = &*keys.resources else {
            return Err(ConfigError::OneResourceOnly {
                kind,
                resources: keys.resources.len(),
            });
        };
        let names: Vec<String> = match kind {
            LockKind::Permit { k: 0 } => return Err(ConfigError::ZeroPermits),
            LockKind::Permit { .. } => vec![ns.holders(resource)],
            _ => ns.rw(resource).all().into(),
        };
        Ok(Self {
            resources: keys.resources,
            keys: names.into(),
        })
    }

    /// `{prefix}fence:{resource}` for each resource: the fencing counters, which never
    /// expire.
    pub(crate) fn fences(&self, ns: &Namespace) -> Arc<[String]> {
        self.resources.iter().map(|r| ns.fence(r)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_namespaced_sorted_and_unique() {
        let k = Keys::new(&Namespace::plain("p:"), ["b", "a", "b"]).expect("valid");
        assert_eq!(&*k.resources, ["a", "b"]);
        assert_eq!(&*k.keys, ["p:lock:a", "p:lock:b"]);
    }

    #[test]
    fn kinds_have_their_own_keys_and_cover_one_resource() {
        let k = Keys::of_kind(&Namespace::plain("p:"), ["doc"], LockKind::Read).expect("valid");
        assert_eq!(
            &*k.keys,
            ["p:rw-readers:doc", "p:rw-writer:doc", "p:rw-pending:doc"]
        );
        let k = Keys::of_kind(&Namespace::plain("p:"), ["pool"], LockKind::Permit { k: 3 })
            .expect("valid");
        assert_eq!(&*k.keys, ["p:permits:pool"]);
        assert_eq!(
            Keys::of_kind(&Namespace::plain("p:"), ["a", "b"], LockKind::Write),
            Err(ConfigError::OneResourceOnly {
                kind: LockKind::Write,
                resources: 2
            })
        );
        assert_eq!(
            Keys::of_kind(&Namespace::plain("p:"), ["a"], LockKind::Permit { k: 0 }),
            Err(ConfigError::ZeroPermits)
        );
    }

    #[test]
    fn empty_names_and_empty_lists_are_refused() {
        assert_eq!(
            Keys::new(&Namespace::plain("p:"), ["a", ""]),
            Err(ConfigError::EmptyResource { index: 1 })
        );
        assert_eq!(
            Keys::new(&Namespace::plain("p:"), Vec::<String>::new()),
            Err(ConfigError::NoResources)
        );
    }

    #[test]
    fn plain_names_never_change() {
        // Clients of two versions must name the same keys, or both could hold one lock:
        // these names are a contract with every deployed client.
        let ns = Namespace::plain("redquorum:");
        assert_eq!(ns.lock("stock-42"), "redquorum:lock:stock-42");
        assert_eq!(ns.fence("stock-42"), "redquorum:fence:stock-42");
        assert_eq!(ns.holders("pool"), "redquorum:permits:pool");
        assert_eq!(
            ns.rw("doc").all(),
            [
                "redquorum:rw-readers:doc",
                "redquorum:rw-writer:doc",
                "redquorum:rw-pending:doc"
            ]
        );
    }

    #[test]
    fn slotted_keys_of_a_resource_share_its_slot() {
        let ns = Namespace::slotted("p:").expect("no brace");
        let names = [
            "stock-42",
            "{order-7}:lines",
            "{order-7}:total",
            "a}b",
            "}x",
            "{}",
            "x{",
            "ü",
        ];
        for r in names {
            let slot = key_slot(r);
            let mut keys = vec![ns.lock(r), ns.fence(r), ns.holders(r)];
            keys.extend(ns.rw(r).all());
            for kind in [LockKind::Mutex, LockKind::Read, LockKind::Permit { k: 2 }] {
                keys.extend(Keys::of_kind(&ns, [r], kind).expect("valid").keys.to_vec());
            }
            for key in &keys {
                assert_eq!(key_slot(key), slot, "{key} for {r}");
                assert!(key.starts_with("p:") && key.ends_with(r), "{key}");
            }
        }
        assert_eq!(
            key_slot(&ns.lock("{order-7}:lines")),
            key_slot(&ns.lock("{order-7}:total"))
        );
        assert_eq!(ns.lock("foo"), format!("p:lock:{{{}}}:foo", tag_for(12182)));
    }

    #[test]
    fn a_slotted_prefix_may_not_hold_a_brace() {
        for prefix in ["{app}:", "app}:", "a{"] {
            assert_eq!(
                Namespace::slotted(prefix),
                Err(ConfigError::BraceInKeyPrefix {
                    prefix: prefix.to_owned()
                })
            );
        }
        assert!(Namespace::slotted("").is_ok());
    }
}
