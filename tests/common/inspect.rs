//! Looking at the masters from outside the library: keys, `INFO` counters, clocks, and
//! bounded waits on them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redquorum_testkit::{LinkProxy, LinkSet, LocalCluster, RawConnection};

/// The lock key of `resource` with the default prefix.
pub fn lock_key(resource: &str) -> String {
    format!("redquorum:lock:{resource}")
}

/// Polls `condition` (synchronous) every 10 ms until it holds; panics after `limit`.
pub fn wait_for(limit: Duration, what: &str, mut condition: impl FnMut() -> bool) {
    let started = Instant::now();
    while !condition() {
        assert!(
            started.elapsed() < limit,
            "timed out after {limit:?} waiting for: {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The lock keys (`redquorum:lock:*`) on node `i`.
pub fn lock_keys(cluster: &LocalCluster, i: usize) -> Vec<String> {
    let reply = cluster.cmd(i, &["KEYS", "redquorum:lock:*"]).expect("KEYS");
    reply
        .as_array()
        .expect("KEYS returns an array")
        .iter()
        .filter_map(|r| r.as_str().map(str::to_owned))
        .collect()
}

/// One numeric field of `INFO <section>` on node `i`.
pub fn info_number(cluster: &LocalCluster, i: usize, section: &str, field: &str) -> u64 {
    let reply = cluster.cmd(i, &["INFO", section]).expect("INFO");
    reply
        .info_field(field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("INFO {section} of node {i} has no numeric {field}"))
}

/// Keys node `i` expired by their ttl since it started.
pub fn expired_keys(cluster: &LocalCluster, i: usize) -> u64 {
    info_number(cluster, i, "stats", "expired_keys")
}

/// Commands node `i` refused with `NOSCRIPT` (an `EVALSHA` of a script it had not cached)
/// since it started.
pub fn noscript_errors(cluster: &LocalCluster, i: usize) -> u64 {
    let reply = cluster.cmd(i, &["INFO", "errorstats"]).expect("INFO");
    reply
        .as_str()
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("errorstat_NOSCRIPT:count="))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// `PTTL` of `key` on node `i` (-2 when missing).
pub fn pttl_of(cluster: &LocalCluster, i: usize, key: &str) -> i64 {
    cluster
        .cmd(i, &["PTTL", key])
        .expect("PTTL")
        .as_int()
        .expect("PTTL is an integer")
}

/// `GET key` on node `i`.
pub fn value_of(cluster: &LocalCluster, i: usize, key: &str) -> Option<String> {
    cluster
        .cmd(i, &["GET", key])
        .expect("GET")
        .as_str()
        .map(str::to_owned)
}

/// Waits until every node has been up for at least `secs` whole seconds (the restart
/// guard counts a master only once it has been up for a ttl).
pub fn wait_uptime(cluster: &LocalCluster, secs: u64) {
    wait_for(
        Duration::from_secs(secs + 10),
        "every master to have been up long enough",
        || {
            (0..cluster.len())
                .all(|i| info_number(cluster, i, "server", "uptime_in_seconds") >= secs)
        },
    );
}

/// Five masters whose clocks (`gettimeofday`, which Redis expires keys by) run at
/// `rates` times real time.
pub fn clock_cluster(rates: &[f64]) -> Arc<LocalCluster> {
    let cluster = LocalCluster::builder()
        .nodes(rates.len())
        .clock_shim(true)
        .start()
        .expect("start masters with the clock shim (needs a C compiler)");
    for (i, &rate) in rates.iter().enumerate() {
        cluster
            .clock(i)
            .expect("clock_shim(true) gives a clock")
            .set_rate(rate)
            .expect("valid rate");
    }
    Arc::new(cluster)
}

/// Makes sure node `i` has executed every command whose bytes reached it before this call
/// (e.g. a delayed request the proxy's tap has seen written): two round trips on a new
/// connection. Redis handles every readable connection of an event-loop iteration before
/// the next, so once the second reply is in, the earlier bytes have been processed.
pub fn settle(cluster: &LocalCluster, i: usize) {
    let mut conn =
        RawConnection::open(&cluster.url(i), Duration::from_secs(2)).expect("connect to settle");
    for _ in 0..2 {
        conn.call(&["PING"]).expect("PING");
    }
}

/// Chunks written to the master since the tap was cleared that contain `needle`
/// (`EVAL`: a release, `EVAL` of the release script, or an extension, `EVALSHA`; `NX`: an
/// acquisition, `SET key value NX PX ttl`).
pub fn count_tapped(link: &LinkProxy, needle: &str) -> usize {
    link.tap()
        .iter()
        .filter(|e| e.text().contains(needle))
        .count()
}

/// Releases (`EVAL`) and extensions (`EVALSHA`) written to the master since the tap was
/// cleared.
pub fn count_scripts(link: &LinkProxy) -> usize {
    count_tapped(link, "EVAL")
}

/// Extensions (`EVALSHA` of the extend script) written since the tap was cleared.
pub fn count_extensions(link: &LinkProxy) -> usize {
    count_tapped(link, "EVALSHA")
}

/// Clears and turns on the tap of every link of `links`; returns how many chunks each had
/// written to its master so far, for [`wait_tapped`].
pub fn start_tap(links: &LinkSet) -> Vec<u64> {
    links
        .links()
        .iter()
        .map(|link| {
            link.set_tap(true);
            link.clear_tap();
            link.stats().to_server.chunks
        })
        .collect()
}

/// Waits until `done` holds for every link of `links` and every chunk its tap recorded has
/// been written out (the tap records a chunk just *before* writing it), then until every
/// master has executed them ([`settle`]). `written` is what [`start_tap`] returned. It
/// polls on the caller's runtime, which keeps running meanwhile: a failed attempt's cleanup
/// and the last answers of a release are tasks on it.
pub async fn wait_tapped(
    masters: &LocalCluster,
    links: &LinkSet,
    written: &[u64],
    what: &str,
    done: impl Fn(&LinkProxy) -> bool,
) {
    super::wait_until(Duration::from_secs(10), what, || async {
        links.links().iter().zip(written).all(|(link, &before)| {
            let tapped = link.tap().len() as u64;
            done(link) && link.stats().to_server.chunks >= before + tapped
        })
    })
    .await;
    for i in 0..masters.len() {
        settle(masters, i);
    }
}

/// [`wait_tapped`] until every link has written at least `n` releases or extensions.
pub async fn wait_written(
    masters: &LocalCluster,
    links: &LinkSet,
    written: &[u64],
    n: usize,
    what: &str,
) {
    wait_tapped(masters, links, written, what, |l| count_scripts(l) >= n).await;
}
