//! `TlsCerts`: a throw-away certificate authority and the certificates it signs, made with
//! the `openssl` command-line program.
//!
//! The `openssl` program rather than a crate such as `rcgen`: it is installed wherever
//! Debian's `redis-server` is (which links the same library for its own TLS), it adds no
//! dependency to build, and every file it writes is one a person can inspect with
//! `openssl x509 -text`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use tempfile::TempDir;

use crate::{TestkitError, locate};

/// How many days the generated certificates are valid; they start being valid when they
/// are generated.
pub const CERT_VALIDITY_DAYS: u32 = 30;

/// Extensions of the server certificate: usable by a server (clients check the
/// `subjectAltName` against `127.0.0.1` or `localhost`) and, for Redis' own outgoing
/// links (cluster bus, replication), as a client certificate.
const SERVER_EXT: &str = "basicConstraints=critical,CA:FALSE\n\
    keyUsage=critical,digitalSignature\n\
    extendedKeyUsage=serverAuth,clientAuth\n\
    subjectAltName=IP:127.0.0.1,DNS:localhost\n";
/// Extensions of the client certificate.
const CLIENT_EXT: &str = "basicConstraints=critical,CA:FALSE\n\
    keyUsage=critical,digitalSignature\n\
    extendedKeyUsage=clientAuth\n";

/// A certificate authority made for one test, the certificates it signs, and a second,
/// unrelated authority, all as PEM files in a temporary directory.
///
/// - `ca.crt` / `ca.key`: the authority clients should trust.
/// - `server.crt` / `server.key`: signed by it, for `127.0.0.1` and `localhost`.
/// - `client.crt` / `client.key`: signed by it, for servers that check client
///   certificates ([`TlsAuthClients::Yes`](crate::TlsAuthClients::Yes)).
/// - `other-ca.crt`: an authority that signed nothing here; a client that trusts only it
///   must fail to connect (the "wrong CA" test).
///
/// Keys are ECDSA P-256, signatures SHA-256, valid for [`CERT_VALIDITY_DAYS`] days.
/// Clones share the files, which are removed when the last clone (and every
/// [`TlsServer`](crate::TlsServer) using them) is dropped.
///
/// ```no_run
/// use redquorum_testkit::{TestkitError, TlsCerts, TlsServer};
///
/// fn main() -> Result<(), TestkitError> {
///     // Three TLS masters that one client can trust with one CA.
///     let certs = TlsCerts::generate()?;
///     let servers = (0..3)
///         .map(|_| TlsServer::builder().certs(certs.clone()).start())
///         .collect::<Result<Vec<_>, _>>()?;
///     let ca_pem: &[u8] = certs.ca_cert_pem(); // hand this to the client's root store
///     # let _ = (servers, ca_pem);
///     Ok(())
/// }
/// ```
#[derive(Clone)]
pub struct TlsCerts {
    inner: Arc<Inner>,
}

struct Inner {
    dir: TempDir,
    ca_pem: Vec<u8>,
    other_ca_pem: Vec<u8>,
    client_cert_pem: Vec<u8>,
    client_key_pem: Vec<u8>,
}

impl fmt::Debug for TlsCerts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsCerts")
            .field("dir", &self.inner.dir.path())
            .finish_non_exhaustive()
    }
}

impl TlsCerts {
    /// Generates a new authority, a server and a client certificate, and an unrelated
    /// authority, with the `openssl` program (`$REDQUORUM_OPENSSL`, else `openssl` on
    /// `PATH`). Takes a few tens of milliseconds.
    pub fn generate() -> Result<Self, TestkitError> {
        let openssl = locate::openssl()?;
        let dir = tempfile::Builder::new()
            .prefix("redquorum-testkit-tls-")
            .tempdir()
            .map_err(|e| TestkitError::os("creating a directory for TLS certificates", e))?;
        let generator = Generator {
            openssl: &openssl,
            dir: dir.path(),
        };
        generator.authority("ca", "redquorum-testkit CA")?;
        generator.authority("other-ca", "redquorum-testkit unrelated CA")?;
        generator.signed("server", "localhost", SERVER_EXT)?;
        generator.signed("client", "redquorum-testkit client", CLIENT_EXT)?;
        let read = |name: &str| {
            let path = dir.path().join(name);
            std::fs::read(&path)
                .map_err(|e| TestkitError::os(format!("reading {}", path.display()), e))
        };
        Ok(Self {
            inner: Arc::new(Inner {
                ca_pem: read("ca.crt")?,
                other_ca_pem: read("other-ca.crt")?,
                client_cert_pem: read("client.crt")?,
                client_key_pem: read("client.key")?,
                dir,
            }),
        })
    }

    /// The directory holding the PEM files.
    pub fn dir(&self) -> &Path {
        self.inner.dir.path()
    }

    /// The authority's certificate (`ca.crt`), for `--tls-ca-cert-file` or a client's
    /// trust store.
    pub fn ca_cert_path(&self) -> PathBuf {
        self.dir().join("ca.crt")
    }

    /// The authority's certificate as PEM bytes.
    pub fn ca_cert_pem(&self) -> &[u8] {
        &self.inner.ca_pem
    }

    /// The server certificate (`server.crt`), valid for `127.0.0.1` and `localhost`.
    pub fn server_cert_path(&self) -> PathBuf {
        self.dir().join("server.crt")
    }

    /// The server certificate's private key (`server.key`, PKCS#8 PEM).
    pub fn server_key_path(&self) -> PathBuf {
        self.dir().join("server.key")
    }

    /// The client certificate (`client.crt`), signed by the same authority.
    pub fn client_cert_path(&self) -> PathBuf {
        self.dir().join("client.crt")
    }

    /// The client certificate as PEM bytes.
    pub fn client_cert_pem(&self) -> &[u8] {
        &self.inner.client_cert_pem
    }

    /// The client certificate's private key (`client.key`, PKCS#8 PEM).
    pub fn client_key_path(&self) -> PathBuf {
        self.dir().join("client.key")
    }

    /// The client key as PEM bytes.
    pub fn client_key_pem(&self) -> &[u8] {
        &self.inner.client_key_pem
    }

    /// The certificate of an authority that signed none of these certificates
    /// (`other-ca.crt`): trusting only it, a client must refuse the server.
    pub fn other_ca_cert_path(&self) -> PathBuf {
        self.dir().join("other-ca.crt")
    }

    /// The unrelated authority's certificate as PEM bytes.
    pub fn other_ca_cert_pem(&self) -> &[u8] {
        &self.inner.other_ca_pem
    }
}

/// Runs `openssl` in the certificates' directory.
struct Generator<'a> {
    openssl: &'a Path,
    dir: &'a Path,
}

impl Generator<'_> {
    /// A self-signed authority `<name>.crt` / `<name>.key`.
    fn authority(&self, name: &str, common_name: &str) -> Result<(), TestkitError> {
        self.run(&[
            "req",
            "-x509",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-sha256",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
            "-days",
            &CERT_VALIDITY_DAYS.to_string(),
            "-subj",
            &format!("/CN={common_name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ])
    }

    /// A key and a certificate `<name>.crt` signed by `ca`, with the extensions `ext`.
    fn signed(&self, name: &str, common_name: &str, ext: &str) -> Result<(), TestkitError> {
        let ext_file = self.dir.join(format!("{name}.ext"));
        std::fs::write(&ext_file, ext)
            .map_err(|e| TestkitError::os(format!("writing {}", ext_file.display()), e))?;
        self.run(&[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            &format!("/CN={common_name}"),
        ])?;
        // A random serial: certificates of different runs must not share one, or a client
        // that cached one could be confused by the next.
        let serial = format!("0x{:016x}", rand::random::<u64>() >> 1);
        self.run(&[
            "x509",
            "-req",
            "-sha256",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-set_serial",
            &serial,
            "-days",
            &CERT_VALIDITY_DAYS.to_string(),
            "-extfile",
            &format!("{name}.ext"),
            "-out",
            &format!("{name}.crt"),
        ])
    }

    fn run(&self, args: &[&str]) -> Result<(), TestkitError> {
        let what = || format!("running {} {}", self.openssl.display(), args.join(" "));
        let output = Command::new(self.openssl)
            .args(args)
            .current_dir(self.dir)
            .output()
            .map_err(|e| TestkitError::os(what(), e))?;
        if output.status.success() {
            return Ok(());
        }
        Err(TestkitError::os(
            what(),
            std::io::Error::other(format!(
                "it exited with {}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            )),
        ))
    }
}
