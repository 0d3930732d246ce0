//! One proxied connection: two pumps (one per direction) applying the link's faults.

use std::io;
use std::net::{Ipv4Addr, Shutdown, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use socket2::SockRef;
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::fault::{Fault, TO_CLIENT, TO_SERVER};
use super::link::{Shared, stopped};
use super::outbound::{Item, Outbound};

/// Bound on connecting to the node; a dead node refuses at once, a paused one accepts.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Size of one read, and so the largest chunk.
const CHUNK: usize = 16 * 1024;

/// How a connection ended.
enum End {
    /// Both sides closed normally.
    Clean,
    /// A reset, a shutdown, or an I/O error: close both sockets with RST.
    Abort,
}

/// Forwards one accepted client connection to the node until either side closes, the
/// link is reset, or the link stops.
pub(crate) async fn serve(
    client: TcpStream,
    shared: Arc<Shared>,
    id: u64,
    mut reset: watch::Receiver<u64>,
    mut close: watch::Receiver<u64>,
) {
    let mut shutdown = shared.shutdown.subscribe();
    let target = SocketAddr::from((Ipv4Addr::LOCALHOST, shared.target_port));
    let connected = tokio::select! {
        r = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(target)) => r.ok().and_then(Result::ok),
        _ = reset.changed() => None,
        _ = stopped(&mut shutdown) => None,
    };
    let Some(server) = connected else {
        // Node down: the client sees a reset, as it would connecting to a dead port.
        let _ = client.set_zero_linger();
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    shared.counters.open.fetch_add(1, Ordering::Relaxed);

    let (client, server) = (Arc::new(client), Arc::new(server));
    let end = {
        let up = pump(&client, &server, TO_SERVER, &shared, id);
        let down = pump(&server, &client, TO_CLIENT, &shared, id);
        let both = async { tokio::try_join!(up, down) };
        tokio::pin!(both);
        let mut closing = true;
        loop {
            tokio::select! {
                r = &mut both => break match r {
                    Ok(_) => End::Clean,
                    Err(_) => End::Abort,
                },
                _ = reset.changed() => break End::Abort,
                _ = stopped(&mut shutdown) => break End::Abort,
                changed = close.changed(), if closing => {
                    // A close towards the client only: it reads EOF now; what the link still
                    // holds for the server keeps going (the client's own close follows it).
                    closing = changed.is_ok();
                    if closing {
                        let _ = SockRef::from(&*client).shutdown(Shutdown::Write);
                    }
                }
            }
        }
    };
    if matches!(end, End::Abort) {
        let _ = client.set_zero_linger();
        let _ = server.set_zero_linger();
    }
    drop(client);
    drop(server);
    shared.counters.open.fetch_sub(1, Ordering::Relaxed);
}

/// Copies one direction: a reader that never blocks on the fault (it stamps each chunk
/// with its due time and hands it to the direction's [`Outbound`], which releases chunks in
/// order when due, from the link's timer thread) and the task that writes what a full
/// socket left over.
async fn pump(
    from: &TcpStream,
    to: &Arc<TcpStream>,
    dir: usize,
    shared: &Arc<Shared>,
    id: u64,
) -> io::Result<()> {
    let out = Arc::new(Outbound::new(Arc::clone(to), dir, id, Arc::clone(shared)));
    let mut rng = StdRng::seed_from_u64(mix(shared.seed, id, dir));

    let reader = async {
        let mut buf = vec![0_u8; CHUNK];
        let mut last_due = Instant::now();
        // A TCP stream never loses bytes and carries on: once this connection has had data
        // discarded, the next data that would get through kills it instead (as a healed
        // partition does to a stale connection). Otherwise a client that multiplexes
        // requests would pair later replies with the wrong requests.
        let mut lost = false;
        loop {
            from.readable().await?;
            let n = match from.try_read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            };
            let now = Instant::now();
            if n == 0 {
                // Closing is forwarded after everything queued before it.
                out.send(Item::Eof, last_due.max(now), now);
                return Ok::<(), io::Error>(());
            }
            let fault = shared.fault(dir);
            if fault.discards() {
                shared.counters.dropped(dir, n);
                lost = true;
                continue;
            }
            if lost {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "bytes were discarded on this connection earlier",
                ));
            }
            let delay = match fault {
                Fault::Delay { base, jitter } => base + sample(&mut rng, jitter),
                _ => Duration::ZERO,
            };
            let due = (now + delay).max(last_due);
            last_due = due;
            out.send(Item::Chunk(buf[..n].to_vec()), due, now);
        }
    };

    tokio::try_join!(reader, out.flush()).map(|_| ())
}

/// A uniform sample in `[0, jitter]`; zero jitter needs no randomness.
fn sample(rng: &mut StdRng, jitter: Duration) -> Duration {
    if jitter.is_zero() {
        return Duration::ZERO;
    }
    let max = u64::try_from(jitter.as_nanos()).unwrap_or(u64::MAX);
    Duration::from_nanos(rng.random_range(0..=max))
}

/// Derives an independent seed per (link, connection, direction) from the set's seed with
/// SplitMix64, so each connection's jitter sequence is reproducible given the seed.
fn mix(seed: u64, connection: u64, dir: usize) -> u64 {
    let mut x = seed ^ connection.rotate_left(17) ^ (dir as u64).rotate_left(41);
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_stay_in_range_and_zero_jitter_is_zero() {
        let mut rng = StdRng::seed_from_u64(7);
        assert_eq!(sample(&mut rng, Duration::ZERO), Duration::ZERO);
        for _ in 0..1000 {
            assert!(sample(&mut rng, Duration::from_millis(3)) <= Duration::from_millis(3));
        }
    }

    #[test]
    fn seeds_differ_per_connection_and_direction() {
        assert_ne!(mix(1, 0, TO_SERVER), mix(1, 0, TO_CLIENT));
        assert_ne!(mix(1, 0, TO_SERVER), mix(1, 1, TO_SERVER));
        assert_eq!(mix(1, 2, TO_CLIENT), mix(1, 2, TO_CLIENT));
    }
}
