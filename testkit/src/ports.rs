//! Picking free loopback ports.

use std::net::{Ipv4Addr, TcpListener};

use crate::TestkitError;

/// A port that was free a moment ago: bind `127.0.0.1:0`, read the port, release it.
///
/// Another process can take the port before `redis-server` binds it; the caller detects
/// that (the server exits with "Address already in use", or answers with another pid) and
/// retries with a new port.
pub(crate) fn free_port() -> Result<u16, TestkitError> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .map_err(|e| TestkitError::os("binding 127.0.0.1:0 to find a free port", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| TestkitError::os("reading the address of a bound socket", e))?
        .port();
    Ok(port)
}

/// `n` distinct ports that were free a moment ago: all are bound at once before any is
/// released, so two calls of [`free_port`] in a row cannot hand out the same port twice.
pub(crate) fn free_ports<const N: usize>() -> Result<[u16; N], TestkitError> {
    let mut listeners = Vec::with_capacity(N);
    let mut ports = [0; N];
    for port in &mut ports {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| TestkitError::os("binding 127.0.0.1:0 to find a free port", e))?;
        *port = listener
            .local_addr()
            .map_err(|e| TestkitError::os("reading the address of a bound socket", e))?
            .port();
        listeners.push(listener);
    }
    Ok(ports)
}
