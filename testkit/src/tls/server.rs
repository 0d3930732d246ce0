//! `TlsServer`: one `redis-server` that serves clients over TLS, with an ACL user.

use std::fmt;
use std::path::{Path, PathBuf};

use redis::Value;
use tempfile::TempDir;

use crate::members::Members;
use crate::node::{self, Slot};
use crate::options::{self, ServerOptions, server_setters};
use crate::ports::free_ports;
use crate::{DEFAULT_CMD_TIMEOUT, TestkitError, TlsCerts, url};

/// The ACL user a [`TlsServer`] creates unless told otherwise.
pub const DEFAULT_TLS_USER: &str = "redquorum";

/// Whether the server asks TLS clients for a certificate (`--tls-auth-clients`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum TlsAuthClients {
    /// No client certificate is asked for (`no`).
    #[default]
    No,
    /// A client certificate is checked if the client sends one (`optional`).
    Optional,
    /// Every client must present a certificate signed by the authority (`yes`); use
    /// [`TlsCerts::client_cert_path`] and [`TlsCerts::client_key_path`].
    Yes,
}

impl TlsAuthClients {
    fn as_arg(self) -> &'static str {
        match self {
            Self::No => "no",
            Self::Optional => "optional",
            Self::Yes => "yes",
        }
    }
}

/// Configures and starts a [`TlsServer`]. Obtain one with [`TlsServer::builder`].
///
/// Setters only record values; [`start`](Self::start) validates them and does the I/O.
#[derive(Clone, Debug)]
pub struct TlsServerBuilder {
    certs: Option<TlsCerts>,
    user: String,
    auth_clients: TlsAuthClients,
    /// `server.password` is the ACL user's (and the default user's) password.
    server: ServerOptions,
}

impl Default for TlsServerBuilder {
    fn default() -> Self {
        Self {
            certs: None,
            user: DEFAULT_TLS_USER.to_owned(),
            auth_clients: TlsAuthClients::No,
            server: ServerOptions::default(),
        }
    }
}

impl TlsServerBuilder {
    /// Use these certificates (e.g. to give several servers one authority). Default: a new
    /// [`TlsCerts::generate`] for this server.
    pub fn certs(mut self, certs: TlsCerts) -> Self {
        self.certs = Some(certs);
        self
    }

    /// The ACL user clients log in as, with its password: `user NAME on >PASSWORD ~* &*
    /// +@all`. The default user requires the same password (`--requirepass`), so a client
    /// that does not authenticate is refused. Default: [`DEFAULT_TLS_USER`] with a random
    /// password (see [`TlsServer::password`]). Neither may be empty or contain whitespace.
    pub fn user(mut self, name: impl Into<String>, password: impl Into<String>) -> Self {
        self.user = name.into();
        self.server.password = Some(password.into());
        self
    }

    /// Whether TLS clients must present a certificate. Default [`TlsAuthClients::No`].
    pub fn auth_clients(mut self, mode: TlsAuthClients) -> Self {
        self.auth_clients = mode;
        self
    }

    server_setters!("the server");

    /// Validates the options, generates certificates if none were given, starts the
    /// server and waits until it answers `PING`. On error nothing is left running.
    pub fn start(self) -> Result<TlsServer, TestkitError> {
        let invalid = |message: String| Err(TestkitError::InvalidOption { message });
        if self.user.is_empty() || self.user.contains(char::is_whitespace) {
            return invalid(format!(
                "the TLS user name {:?} is empty or has whitespace; pick a plain word",
                self.user
            ));
        }
        self.server.check(true)?;
        TlsServer::from_builder(self)
    }
}

/// A `redis-server` that serves clients over TLS on [`tls_port`](Self::tls_port), with
/// certificates generated for the test and an ACL user with a password.
///
/// The server also listens on a plain-text port of `127.0.0.1`
/// ([`plain_port`](Self::plain_port)). The test kit uses it to see that the server is up
/// (its `RawConnection` speaks no TLS) and for [`cmd`](Self::cmd); the server binds every
/// port before it answers anything, so a server that answers there also listens for TLS,
/// and a bad certificate stops it from starting at all. Give clients under test
/// [`url`](Self::url) only.
///
/// Dropping the server kills and reaps it and removes its directory (the certificates
/// stay while any clone of its [`TlsCerts`] lives).
///
/// ```no_run
/// use redquorum_testkit::{ReplyExt, TestkitError, TlsAuthClients, TlsServer};
///
/// fn main() -> Result<(), TestkitError> {
///     let server = TlsServer::builder()
///         .user("alice", "s3cret")
///         .auth_clients(TlsAuthClients::No)
///         .start()?;
///     let url = server.url(); // rediss://alice:s3cret@127.0.0.1:PORT
///     let trusted = server.certs().ca_cert_pem(); // the right CA
///     let wrong = server.certs().other_ca_cert_pem(); // a CA that signed nothing here
///     assert_eq!(server.cmd(&["PING"])?.as_str(), Some("PONG")); // over the plain port
///     # let _ = (url, trusted, wrong);
///     Ok(())
/// }
/// ```
pub struct TlsServer {
    members: Members,
    certs: TlsCerts,
    tls_port: u16,
    user: String,
    password: String,
    dir: Option<TempDir>,
    dir_path: PathBuf,
}

impl fmt::Debug for TlsServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsServer")
            .field("tls_port", &self.tls_port)
            .field("plain_port", &self.members.port(0))
            .field("user", &self.user)
            .field("password", &"***")
            .field("certs", &self.certs)
            .finish_non_exhaustive()
    }
}

impl TlsServer {
    /// A builder with the defaults: new certificates, user [`DEFAULT_TLS_USER`] with a
    /// random password, no client certificates required.
    pub fn builder() -> TlsServerBuilder {
        TlsServerBuilder::default()
    }

    /// Starts a server with the defaults; the same as `builder().start()`.
    pub fn start() -> Result<TlsServer, TestkitError> {
        Self::builder().start()
    }

    fn from_builder(b: TlsServerBuilder) -> Result<Self, TestkitError> {
        let binary = b.server.binary()?;
        let certs = match b.certs {
            Some(certs) => certs,
            None => TlsCerts::generate()?,
        };
        let password = b
            .server
            .password
            .clone()
            .unwrap_or_else(|| format!("{:032x}", rand::random::<u128>()));
        let (dir, _) = options::directories("redquorum-testkit-tls-server-", [])?;
        let mut spec = b.server.spec(0, dir.path().to_path_buf(), &binary);
        spec.password = Some(password.clone());
        let mut tls_port = 0;
        let server = node::start_fresh_with(&mut spec, |spec| {
            let [plain, tls] = free_ports()?;
            spec.port = plain;
            tls_port = tls;
            let path = |p: PathBuf| p.to_string_lossy().into_owned();
            let mut args = vec![
                "--tls-port".to_owned(),
                tls.to_string(),
                "--tls-cert-file".to_owned(),
                path(certs.server_cert_path()),
                "--tls-key-file".to_owned(),
                path(certs.server_key_path()),
                "--tls-ca-cert-file".to_owned(),
                path(certs.ca_cert_path()),
                "--tls-auth-clients".to_owned(),
                b.auth_clients.as_arg().to_owned(),
                // One `--user` option with the rule words as separate arguments: Redis
                // joins them into one `user` line (a single argument with spaces is
                // rejected as a user name with spaces).
                "--user".to_owned(),
                b.user.clone(),
                "on".to_owned(),
                format!(">{password}"),
                "~*".to_owned(),
                "&*".to_owned(),
                "+@all".to_owned(),
            ];
            args.extend(b.server.extra_args.iter().cloned());
            spec.extra_args = args;
            Ok(())
        })?;
        let members = Members::new(vec![Slot::new(spec, server)], Some(password.clone()));
        Ok(Self {
            members,
            certs,
            tls_port,
            user: b.user,
            password,
            dir_path: dir.path().to_path_buf(),
            dir: Some(dir),
        })
    }

    /// `rediss://USER:PASSWORD@127.0.0.1:TLS_PORT`, for the client under test.
    pub fn url(&self) -> String {
        url::rediss_url(self.tls_port, Some(&self.user), Some(&self.password))
    }

    /// The TLS port.
    pub fn tls_port(&self) -> u16 {
        self.tls_port
    }

    /// The plain-text port the test kit probes and sends [`cmd`](Self::cmd) to.
    pub fn plain_port(&self) -> u16 {
        self.members.port(0)
    }

    /// `redis://:PASSWORD@127.0.0.1:PLAIN_PORT` (the default user), for test set-up.
    pub fn plain_url(&self) -> String {
        self.members.url(0)
    }

    /// The ACL user's name.
    pub fn username(&self) -> &str {
        &self.user
    }

    /// The ACL user's password (also the default user's).
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The certificates the server uses: trust [`TlsCerts::ca_cert_pem`], and use
    /// [`TlsCerts::other_ca_cert_pem`] for a client that must fail.
    pub fn certs(&self) -> &TlsCerts {
        &self.certs
    }

    /// The authority that signed the server's certificate, as PEM bytes.
    pub fn ca_cert_pem(&self) -> &[u8] {
        self.certs.ca_cert_pem()
    }

    /// The path of that authority's certificate (`--cacert` of `redis-cli --tls`).
    pub fn ca_cert_path(&self) -> PathBuf {
        self.certs.ca_cert_path()
    }

    /// Sends one command over the plain-text port (authenticated as the default user) and
    /// returns the reply, waiting at most 2 s for each step.
    pub fn cmd(&self, args: &[&str]) -> Result<Value, TestkitError> {
        self.members.cmd(0, args, DEFAULT_CMD_TIMEOUT)
    }

    /// Kills the server with SIGKILL and reaps it. Idempotent.
    pub fn kill(&self) -> Result<(), TestkitError> {
        self.members.kill(0)
    }

    /// Kills the server if it runs and starts it again on the same ports with the same
    /// certificates, waiting until it answers `PING`.
    pub fn restart(&self) -> Result<(), TestkitError> {
        self.members.restart(0)
    }

    /// True while the server's process is alive.
    pub fn is_running(&self) -> bool {
        self.members.is_running(0)
    }

    /// The server's process id while it is alive.
    pub fn pid(&self) -> Option<u32> {
        self.members.pid(0)
    }

    /// The server's directory (data and logs).
    pub fn dir(&self) -> &Path {
        &self.dir_path
    }

    /// Redis' log file.
    pub fn log_path(&self) -> PathBuf {
        self.dir().join("redis.log")
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.members.kill_all();
        if let Some(dir) = self.dir.take()
            && let Err(e) = dir.close()
        {
            tracing::warn!(dir = %self.dir_path.display(), error = %e, "could not remove the TLS server's directory");
        }
    }
}

// A server is shared across threads and tasks in an `Arc`.
const _: fn() = || {
    fn is_send_sync<T: Send + Sync>() {}
    is_send_sync::<TlsServer>();
};
