//! TLS for tests: certificates generated at test time with the `openssl` program, and a
//! `redis-server` that serves clients over TLS with an ACL user.

mod certs;
mod server;

pub use certs::{CERT_VALIDITY_DAYS, TlsCerts};
pub use server::{DEFAULT_TLS_USER, TlsAuthClients, TlsServer, TlsServerBuilder};
