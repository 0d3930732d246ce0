//! Looking at the masters from outside the library: keys, `INFO` counters, clocks, and what
//! the proxies' taps saw written.
//!
//! Every reader is `async`: the call itself is the test kit's blocking [`RawConnection`],
//! run on tokio's blocking pool so that it never stalls a runtime worker (on a
//! current-thread test runtime that would freeze the library's own tasks too). Chaos
//! threads, which are plain threads, call [`LocalCluster::cmd`] directly.

use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use redquorum_testkit::{
    DEFAULT_CMD_TIMEOUT, LinkProxy, LinkSet, LocalCluster, RawConnection, ReplyExt,
};

use super::{PATIENCE, wait_until};

/// The lock key of `resource` with the default prefix.
pub fn lock_key(resource: &str) -> String {
    format!("redquorum:lock:{resource}")
}

/// One command on node `i`, on a fresh connection, off the runtime's workers.
///
/// # Panics
/// If the node cannot be reached or the call fails: tests only inspect live masters.
pub async fn cmd(cluster: &LocalCluster, i: usize, args: &[&str]) -> Value {
    let url = cluster.url(i);
    let args: Vec<String> = args.iter().map(|&a| a.to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        RawConnection::open(&url, DEFAULT_CMD_TIMEOUT)
            .and_then(|mut conn| conn.call(&args))
            .unwrap_or_else(|e| panic!("{} on node {i}: {e}", args.join(" ")))
    })
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// `GET key` on node `i`.
pub async fn value_of(cluster: &LocalCluster, i: usize, key: &str) -> Option<String> {
    cmd(cluster, i, &["GET", key])
        .await
        .as_str()
        .map(str::to_owned)
}

/// `PTTL` of `key` on node `i` (-2 when missing).
pub async fn pttl_of(cluster: &LocalCluster, i: usize, key: &str) -> i64 {
    cmd(cluster, i, &["PTTL", key])
        .await
        .as_int()
        .expect("PTTL is an integer")
}

/// `PTTL` of `key` on every node, in order.
pub async fn pttls(cluster: &LocalCluster, key: &str) -> Vec<i64> {
    let mut out = Vec::with_capacity(cluster.len());
    for i in 0..cluster.len() {
        out.push(pttl_of(cluster, i, key).await);
    }
    out
}

/// The lock keys (`redquorum:lock:*`) on node `i`.
pub async fn lock_keys(cluster: &LocalCluster, i: usize) -> Vec<String> {
    let reply = cmd(cluster, i, &["KEYS", "redquorum:lock:*"]).await;
    reply
        .as_sequence()
        .expect("KEYS returns an array")
        .iter()
        .filter_map(|r| r.as_str().map(str::to_owned))
        .collect()
}

/// `DBSIZE` of node `i`.
pub async fn dbsize(cluster: &LocalCluster, i: usize) -> i64 {
    cmd(cluster, i, &["DBSIZE"])
        .await
        .as_int()
        .expect("DBSIZE is an integer")
}

/// One numeric field of `INFO <section>` on node `i`.
pub async fn info_number(cluster: &LocalCluster, i: usize, section: &str, field: &str) -> u64 {
    let reply = cmd(cluster, i, &["INFO", section]).await;
    reply
        .info_field(field)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("INFO {section} of node {i} has no numeric {field}"))
}

/// Keys node `i` expired by their ttl since it started.
pub async fn expired_keys(cluster: &LocalCluster, i: usize) -> u64 {
    info_number(cluster, i, "stats", "expired_keys").await
}

/// Keys expired by their ttl on every node, summed.
pub async fn expired_everywhere(cluster: &LocalCluster) -> u64 {
    let mut sum = 0;
    for i in 0..cluster.len() {
        sum += expired_keys(cluster, i).await;
    }
    sum
}

/// One `name=value` figure of an `INFO` line such as
/// `cmdstat_evalsha:calls=3,usec=…` or `errorstat_NOSCRIPT:count=2`; 0 when the line is
/// absent (a command never called, an error never raised).
fn info_line_figure(reply: &Value, prefix: &str, figure: &str) -> u64 {
    reply
        .as_str()
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|rest| {
            rest.trim()
                .split(',')
                .find_map(|kv| kv.strip_prefix(figure)?.strip_prefix('='))
        })
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Calls of `command` (lower case, e.g. `evalsha`, `eval`) node `i` executed since it
/// started, from `INFO commandstats`.
pub async fn command_calls(cluster: &LocalCluster, i: usize, command: &str) -> u64 {
    let reply = cmd(cluster, i, &["INFO", "commandstats"]).await;
    info_line_figure(&reply, &format!("cmdstat_{command}:"), "calls")
}

/// Commands node `i` refused with `NOSCRIPT` (an `EVALSHA` of a script it had not cached)
/// since it started.
pub async fn noscript_errors(cluster: &LocalCluster, i: usize) -> u64 {
    let reply = cmd(cluster, i, &["INFO", "errorstats"]).await;
    info_line_figure(&reply, "errorstat_NOSCRIPT:", "count")
}

/// `NOSCRIPT` refusals on every node, summed.
pub async fn noscript_everywhere(cluster: &LocalCluster) -> u64 {
    let mut sum = 0;
    for i in 0..cluster.len() {
        sum += noscript_errors(cluster, i).await;
    }
    sum
}

/// Waits until every node has been up for at least `secs` whole seconds (the restart
/// guard counts a master only once it has been up for a ttl).
pub async fn wait_uptime(cluster: &LocalCluster, secs: u64) {
    wait_until(
        Duration::from_secs(secs) + PATIENCE,
        "every master to have been up long enough",
        || async {
            for i in 0..cluster.len() {
                if info_number(cluster, i, "server", "uptime_in_seconds").await < secs {
                    return false;
                }
            }
            true
        },
    )
    .await;
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
pub async fn settle(cluster: &LocalCluster, i: usize) {
    let url = cluster.url(i);
    tokio::task::spawn_blocking(move || {
        let mut conn = RawConnection::open(&url, DEFAULT_CMD_TIMEOUT).expect("connect to settle");
        for _ in 0..2 {
            conn.call(&["PING"]).expect("PING");
        }
    })
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
}

/// What a release (`EVAL` of the release script, sent without its header comment) starts
/// with on the wire: its body's first line. Extensions are `EVALSHA`s and carry no body.
fn release_marker() -> &'static str {
    include_str!("../../src/scripts/release.lua")
        .lines()
        .find(|l| !l.trim_start().starts_with("--") && !l.trim().is_empty())
        .expect("the release script has a body")
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

/// Releases (the release script's body) written since the tap was cleared, whatever else
/// shared their chunk (a renewal pipeline, say).
pub fn count_releases(link: &LinkProxy) -> usize {
    count_tapped(link, release_marker())
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
    wait_until(PATIENCE, what, || async {
        links.links().iter().zip(written).all(|(link, &before)| {
            let tapped = link.tap().len() as u64;
            done(link) && link.stats().to_server.chunks >= before + tapped
        })
    })
    .await;
    for i in 0..masters.len() {
        settle(masters, i).await;
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
