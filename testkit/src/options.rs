//! `ServerOptions`: what every builder of `redis-server` processes shares (the binary, a
//! password, persistence, extra arguments, the ready time-out), written once: defaults,
//! checks, a node's `NodeSpec` and directory, and the setters that `server_setters!`
//! puts on each builder.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tempfile::TempDir;

use crate::server::NodeSpec;
use crate::{DEFAULT_READY_TIMEOUT, Persistence, TestkitError, locate};

/// How the processes of one builder run `redis-server`.
#[derive(Clone)]
pub(crate) struct ServerOptions {
    pub(crate) password: Option<String>,
    pub(crate) persistence: Persistence,
    pub(crate) extra_args: Vec<String>,
    pub(crate) redis_server: Option<PathBuf>,
    pub(crate) ready_timeout: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            password: None,
            persistence: Persistence::None,
            extra_args: Vec::new(),
            redis_server: None,
            ready_timeout: DEFAULT_READY_TIMEOUT,
        }
    }
}

impl fmt::Debug for ServerOptions {
    /// Like a derived `Debug`, without the password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerOptions")
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("persistence", &self.persistence)
            .field("extra_args", &self.extra_args)
            .field("redis_server", &self.redis_server)
            .field("ready_timeout", &self.ready_timeout)
            .finish()
    }
}

impl ServerOptions {
    /// The checks every builder makes: a password, if any, is not empty (and, with
    /// `one_word`, has no whitespace: it goes into a configuration file or an ACL rule,
    /// which split at whitespace); the ready time-out is positive.
    pub(crate) fn check(&self, one_word: bool) -> Result<(), TestkitError> {
        let invalid = |message: &str| {
            Err(TestkitError::InvalidOption {
                message: message.to_owned(),
            })
        };
        match &self.password {
            Some(pw) if pw.is_empty() => {
                return invalid("the password is empty; leave it unset for no password");
            }
            Some(pw) if one_word && pw.contains(char::is_whitespace) => {
                return invalid("the password has whitespace; pick one without");
            }
            _ => {}
        }
        if self.ready_timeout.is_zero() {
            return invalid("ready_timeout is zero; give each server a positive time to start");
        }
        Ok(())
    }

    /// The `redis-server` to run: the one given, else `$REDQUORUM_REDIS_SERVER` or `PATH`.
    pub(crate) fn binary(&self) -> Result<PathBuf, TestkitError> {
        locate::redis_server(self.redis_server.as_deref())
    }

    /// Node `index`'s spec in `dir`, with these options (its port is picked when it starts).
    pub(crate) fn spec(&self, index: usize, dir: PathBuf, binary: &Path) -> NodeSpec {
        NodeSpec {
            index,
            port: 0,
            dir,
            binary: binary.to_path_buf(),
            password: self.password.clone(),
            persistence: self.persistence,
            extra_args: self.extra_args.clone(),
            env: Vec::new(),
            ready_timeout: self.ready_timeout,
            config_file: None,
        }
    }
}

/// A new temporary directory `{prefix}…` and, in it, a directory for each of `names`;
/// dropping the `TempDir` removes them all.
pub(crate) fn directories(
    prefix: &str,
    names: impl IntoIterator<Item = String>,
) -> Result<(TempDir, Vec<PathBuf>), TestkitError> {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| TestkitError::os("creating a temporary directory", e))?;
    let subdirs = names
        .into_iter()
        .map(|name| {
            let path = dir.path().join(name);
            std::fs::create_dir(&path)
                .map_err(|e| TestkitError::os(format!("creating {}", path.display()), e))?;
            Ok(path)
        })
        .collect::<Result<_, TestkitError>>()?;
    Ok((dir, subdirs))
}

/// The setters of [`ServerOptions`] for a builder with a `server: ServerOptions` field;
/// `$nodes` names the processes they apply to, in their docs. With `password`, the
/// `password` setter too, followed by a note of what else is told the password.
macro_rules! server_setters {
    ($nodes:literal, password: $note:literal) => {
        #[doc = concat!(
            "Require this password on ", $nodes, " (`--requirepass`); URLs then carry it as ",
            "`redis://:pw@...`. ", $note, " Default: no password. Must not be empty."
        )]
        pub fn password(mut self, password: impl Into<String>) -> Self {
            self.server.password = Some(password.into());
            self
        }

        server_setters!($nodes);
    };
    ($nodes:literal) => {
        #[doc = concat!(
            "What ", $nodes, " persist across a kill and restart. Default ",
            "[`Persistence::None`](crate::Persistence::None)."
        )]
        pub fn persistence(mut self, persistence: crate::Persistence) -> Self {
            self.server.persistence = persistence;
            self
        }

        #[doc = concat!(
            "More `redis-server` arguments for ", $nodes, ", appended after the test kit's ",
            "own (so they win), e.g. `[\"--maxmemory\", \"10mb\"]`. Default: none."
        )]
        pub fn extra_args(mut self, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
            self.server.extra_args.extend(args.into_iter().map(Into::into));
            self
        }

        /// Run this binary instead of looking up `$REDQUORUM_REDIS_SERVER` or `PATH`.
        pub fn redis_server(mut self, path: std::path::PathBuf) -> Self {
            self.server.redis_server = Some(path);
            self
        }

        /// How long one process may take to answer `PING` after it is spawned. Default
        /// [`DEFAULT_READY_TIMEOUT`](crate::DEFAULT_READY_TIMEOUT) (10 s); must be positive.
        pub fn ready_timeout(mut self, timeout: std::time::Duration) -> Self {
            self.server.ready_timeout = timeout;
            self
        }
    };
}
pub(crate) use server_setters;
