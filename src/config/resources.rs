//! Resource names to Redis keys: validated, namespaced, sorted and de-duplicated.

use std::sync::Arc;

use crate::error::ConfigError;
use crate::kind::{LockKind, RwKeys, holders_key};

/// The resources of one lock and the keys that hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Keys {
    /// The names as the caller gave them (sorted, without duplicates).
    pub(crate) resources: Arc<[String]>,
    /// `{prefix}lock:{resource}` for each resource, in the same order.
    pub(crate) keys: Arc<[String]>,
}

impl Keys {
    /// Each resource becomes its own key: names are never concatenated into one key, and
    /// sorting makes two clients locking the same set send identical scripts.
    pub(crate) fn new<I, S>(prefix: &str, resources: I) -> Result<Self, ConfigError>
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
        let keys = names.iter().map(|r| format!("{prefix}lock:{r}")).collect();
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
        prefix: &str,
        resources: I,
        kind: LockKind,
    ) -> Result<Self, ConfigError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let keys = Self::new(prefix, resources)?;
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
            LockKind::Permit { .. } => vec![holders_key(prefix, resource)],
            _ => RwKeys::of(prefix, resource).all().into(),
        };
        Ok(Self {
            resources: keys.resources,
            keys: names.into(),
        })
    }

    /// `{prefix}fence:{resource}` for each resource: the fencing counters, which never
    /// expire.
    pub(crate) fn fences(&self, prefix: &str) -> Arc<[String]> {
        self.resources
            .iter()
            .map(|r| format!("{prefix}fence:{r}"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_namespaced_sorted_and_unique() {
        let k = Keys::new("p:", ["b", "a", "b"]).expect("valid");
        assert_eq!(&*k.resources, ["a", "b"]);
        assert_eq!(&*k.keys, ["p:lock:a", "p:lock:b"]);
    }

    #[test]
    fn kinds_have_their_own_keys_and_cover_one_resource() {
        let k = Keys::of_kind("p:", ["doc"], LockKind::Read).expect("valid");
        assert_eq!(
            &*k.keys,
            ["p:rw-readers:doc", "p:rw-writer:doc", "p:rw-pending:doc"]
        );
        let k = Keys::of_kind("p:", ["pool"], LockKind::Permit { k: 3 }).expect("valid");
        assert_eq!(&*k.keys, ["p:permits:pool"]);
        assert_eq!(
            Keys::of_kind("p:", ["a", "b"], LockKind::Write),
            Err(ConfigError::OneResourceOnly {
                kind: LockKind::Write,
                resources: 2
            })
        );
        assert_eq!(
            Keys::of_kind("p:", ["a"], LockKind::Permit { k: 0 }),
            Err(ConfigError::ZeroPermits)
        );
    }

    #[test]
    fn empty_names_and_empty_lists_are_refused() {
        assert_eq!(
            Keys::new("p:", ["a", ""]),
            Err(ConfigError::EmptyResource { index: 1 })
        );
        assert_eq!(
            Keys::new("p:", Vec::<String>::new()),
            Err(ConfigError::NoResources)
        );
    }
}
