//! The masters a benchmark runs against: given by the user, or started locally by the test
//! kit, with fault proxies in front of them for simulated distance, and SIGSTOP of one.

#[cfg(feature = "spawn")]
use std::sync::Arc;

#[cfg(feature = "spawn")]
use redquorum_testkit::{LinkSet, LocalCluster};

#[cfg(feature = "spawn")]
use super::profile;
use super::profile::Profile;
use crate::exit::Failure;

/// Where the masters come from.
pub(crate) enum Masters {
    /// `--node` URLs: used as they are.
    Given(Vec<String>),
    /// Started by the benchmark; stopped (and their files removed) when dropped.
    #[cfg(feature = "spawn")]
    Spawned {
        cluster: Arc<LocalCluster>,
        /// The proxies of every profile run so far; they live as long as the masters.
        links: Vec<LinkSet>,
    },
}

impl Masters {
    /// Starts `n` local masters.
    #[cfg(not(feature = "spawn"))]
    pub(crate) async fn spawn(_: usize) -> Result<Self, Failure> {
        Err(Failure::usage(
            "this redquorum was built without local masters: pass --node URL for each master, or build it with `--features spawn` (make demo does).",
        ))
    }

    /// Starts `n` local masters.
    #[cfg(feature = "spawn")]
    pub(crate) async fn spawn(n: usize) -> Result<Self, Failure> {
        let cluster = tokio::task::spawn_blocking(move || LocalCluster::start(n))
            .await
            .map_err(|e| Failure::os(format!("starting the local masters failed: {e}.")))?
            .map_err(|e| {
                Failure::os(format!(
                    "could not start {n} local redis-server masters ({e}); install redis-server or pass --node URL."
                ))
            })?;
        Ok(Self::Spawned {
            cluster: Arc::new(cluster),
            links: Vec::new(),
        })
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            Self::Given(urls) => urls.len(),
            #[cfg(feature = "spawn")]
            Self::Spawned { cluster, .. } => cluster.len(),
        }
    }

    pub(crate) fn is_spawned(&self) -> bool {
        !matches!(self, Self::Given(_))
    }

    /// The masters' own URLs.
    pub(crate) fn urls(&self) -> Vec<String> {
        match self {
            Self::Given(urls) => urls.clone(),
            #[cfg(feature = "spawn")]
            Self::Spawned { cluster, .. } => cluster.urls(),
        }
    }

    /// The URLs a client uses under `profile`: direct on loopback, else through a new set of
    /// proxies delaying each master as the profile says.
    pub(crate) fn urls_for(&mut self, profile: &Profile) -> Result<Vec<String>, Failure> {
        let n = self.len();
        let links = profile.links(n).map_err(Failure::usage)?;
        match (self, links) {
            (this, None) => Ok(this.urls()),
            (Self::Given(_), Some(_)) => Err(Failure::usage(
                "--profile and --link simulate distance with proxies in front of spawned masters: leave out --node.",
            )),
            #[cfg(feature = "spawn")]
            (
                Self::Spawned {
                    cluster,
                    links: sets,
                },
                Some(links),
            ) => {
                let set = cluster
                    .links()
                    .map_err(|e| Failure::os(format!("could not start the delay proxies: {e}.")))?;
                profile::apply(&set, &links);
                let urls = set.urls();
                sets.push(set);
                Ok(urls)
            }
        }
    }

    /// What pauses (`true`) and resumes (`false`) master `node` around each measurement.
    pub(crate) fn hold(&self, node: Option<usize>) -> Box<dyn Fn(bool) + Send + Sync> {
        match (self, node) {
            #[cfg(feature = "spawn")]
            (Self::Spawned { cluster, .. }, Some(i)) => {
                let cluster = cluster.clone();
                Box::new(move |pause| {
                    let done = if pause {
                        cluster.pause(i)
                    } else {
                        cluster.resume(i)
                    };
                    if let Err(e) = done {
                        eprintln!("redquorum: warning: could not pause or resume master {i}: {e}.");
                    }
                })
            }
            _ => Box::new(|_| {}),
        }
    }

    /// Stops spawned masters off the async threads (killing and reaping blocks).
    pub(crate) async fn stop(self) {
        let _ = tokio::task::spawn_blocking(move || drop(self)).await;
    }
}
