//! Resource names to Redis keys: validated, namespaced, sorted and de-duplicated.

use std::sync::Arc;

use crate::error::ConfigError;

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
