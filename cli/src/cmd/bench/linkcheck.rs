//! The link self-check: before measuring under a latency profile, each simulated link's raw
//! round trip is measured and held against what the profile says it is.
//!
//! A round trip through a link should cost twice its one-way delay, plus the median of its
//! jitter on the way out and back (two uniform draws in `[0, jitter]` add up to `jitter` at
//! the median), plus the master's own round trip on loopback. Each link gets its own
//! connection through its proxy and one straight to its master, pinged alternately (so that
//! machine noise hits both), and the medians are compared. A link off by more than the
//! tolerance means the figures would describe this machine's proxy rather than the profile
//! — a busy machine, or a delay too short for the proxy to keep — so the benchmark refuses
//! to report them.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use redis::AsyncConnectionConfig;
use redis::aio::MultiplexedConnection;
use serde::Serialize;

use super::profile::Link;
use crate::args::human;
use crate::exit::{self, Failure};

/// PINGs per link and per path (odd, so the median is one of them).
pub(crate) const PINGS: usize = 41;
/// Unmeasured PINGs first on each connection.
const WARMUP_PINGS: usize = 3;
/// Default `--link-tolerance`, in percent.
pub(crate) const DEFAULT_TOLERANCE_PCT: f64 = 10.0;

/// What the check found, for the table and the JSON.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LinkCheck {
    /// PINGs per link and per path.
    pub(crate) pings: usize,
    /// Largest accepted deviation of a link's median from its expected round trip.
    pub(crate) tolerance_pct: f64,
    pub(crate) links: Vec<LinkRtt>,
    /// Every link within the tolerance.
    pub(crate) passed: bool,
}

/// One link's round trips.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LinkRtt {
    pub(crate) node: usize,
    /// The profile's link: one-way delay and jitter.
    #[serde(flatten)]
    pub(crate) link: Link,
    /// Median round trip straight to the master.
    pub(crate) loopback_us: f64,
    /// What the profile makes of it: 2 × one-way + jitter + loopback.
    pub(crate) expected_us: f64,
    /// Median round trip through the proxy.
    pub(crate) measured_us: f64,
    /// The 10th and 90th percentiles through the proxy, for the spread.
    pub(crate) p10_us: f64,
    pub(crate) p90_us: f64,
    /// (measured − expected) / expected, in percent.
    pub(crate) off_pct: f64,
    pub(crate) ok: bool,
}

/// Pings every master straight (`direct`) and through its link (`proxied`), and compares
/// each link's median with its profile.
///
/// The PINGs go one at a time, so that each link is measured alone, and round-robin over
/// the links, so that each link's samples spread over the whole check: a burst of load
/// from elsewhere on the machine then costs every link a sample or two instead of one
/// link all of them.
pub(crate) async fn run(
    direct: &[String],
    proxied: &[String],
    links: &[Link],
    tolerance_pct: f64,
    connect_timeout: Duration,
) -> Result<LinkCheck, Failure> {
    let mut probes = Vec::with_capacity(links.len());
    for (node, ((direct, proxied), link)) in direct.iter().zip(proxied).zip(links).enumerate() {
        probes.push(Probe::connect(node, direct, proxied, *link, connect_timeout).await?);
    }
    for round in 0..WARMUP_PINGS + PINGS {
        for probe in &mut probes {
            probe.sample(round >= WARMUP_PINGS).await?;
        }
    }
    let links: Vec<LinkRtt> = probes
        .into_iter()
        .map(|probe| probe.result(tolerance_pct))
        .collect();
    Ok(LinkCheck {
        pings: PINGS,
        tolerance_pct,
        passed: links.iter().all(|l| l.ok),
        links,
    })
}

/// One link under test: a connection through its proxy, one straight to its master, and
/// the round trips so far.
struct Probe {
    node: usize,
    link: Link,
    /// Bound on one PING: a round trip, the longest jitter, and a busy machine on top.
    bound: Duration,
    straight: MultiplexedConnection,
    through: MultiplexedConnection,
    loopback: Vec<Duration>,
    measured: Vec<Duration>,
}

impl Probe {
    async fn connect(
        node: usize,
        direct: &str,
        proxied: &str,
        link: Link,
        connect_timeout: Duration,
    ) -> Result<Self, Failure> {
        let bound = connect_timeout + 4 * (link.delay + link.jitter);
        let straight = connect(direct, bound)
            .await
            .map_err(|e| failed(node, "could not connect to the master", &e))?;
        let through = connect(proxied, bound)
            .await
            .map_err(|e| failed(node, "could not connect through its proxy", &e))?;
        Ok(Self {
            node,
            link,
            bound,
            straight,
            through,
            loopback: Vec::with_capacity(PINGS),
            measured: Vec::with_capacity(PINGS),
        })
    }

    /// One PING straight, then one through the proxy; kept if `keep`.
    async fn sample(&mut self, keep: bool) -> Result<(), Failure> {
        let a = ping(&mut self.straight, self.bound)
            .await
            .map_err(|e| failed(self.node, "PING to the master failed", &e))?;
        let b = ping(&mut self.through, self.bound)
            .await
            .map_err(|e| failed(self.node, "PING through the proxy failed", &e))?;
        if keep {
            self.loopback.push(a);
            self.measured.push(b);
        }
        Ok(())
    }

    fn result(mut self, tolerance_pct: f64) -> LinkRtt {
        self.loopback.sort_unstable();
        self.measured.sort_unstable();
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let loopback_us = us(quantile(&self.loopback, 0.5));
        let expected_us = us(2 * self.link.delay + self.link.jitter) + loopback_us;
        let measured_us = us(quantile(&self.measured, 0.5));
        let off_pct = 100.0 * (measured_us - expected_us) / expected_us;
        LinkRtt {
            node: self.node,
            link: self.link,
            loopback_us,
            expected_us,
            measured_us,
            p10_us: us(quantile(&self.measured, 0.1)),
            p90_us: us(quantile(&self.measured, 0.9)),
            off_pct,
            ok: off_pct.abs() <= tolerance_pct,
        }
    }
}

fn failed(node: usize, what: &str, e: &dyn std::fmt::Display) -> Failure {
    Failure::unavailable(format!("link check of node {node}: {what}: {e}."))
}

async fn connect(url: &str, timeout: Duration) -> Result<MultiplexedConnection, String> {
    let client = redis::Client::open(url).map_err(|e| e.to_string())?;
    let config = AsyncConnectionConfig::new().set_response_timeout(None);
    tokio::time::timeout(
        timeout,
        client.get_multiplexed_async_connection_with_config(&config),
    )
    .await
    .map_err(|_| format!("no connection within {}", human(timeout)))?
    .map_err(|e| e.to_string())
}

async fn ping(conn: &mut MultiplexedConnection, timeout: Duration) -> Result<Duration, String> {
    let sent = Instant::now();
    tokio::time::timeout(timeout, redis::cmd("PING").query_async::<String>(conn))
        .await
        .map_err(|_| format!("no answer within {}", human(timeout)))?
        .map_err(|e| e.to_string())?;
    Ok(sent.elapsed())
}

/// The `q` quantile of sorted samples (nearest rank); zero for none.
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// The check as a table, ready to print.
pub(crate) fn table(check: &LinkCheck) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "link check: round trip through each link, median of {} PINGs, against 2 × one-way + jitter + the master's own loopback round trip (tolerance ±{}%)",
        check.pings, check.tolerance_pct
    );
    let _ = writeln!(
        out,
        "  {:<6}{:>14}{:>11}{:>11}{:>11}{:>11}{:>11}{:>9}",
        "node", "one-way", "loopback", "expected", "measured", "p10", "p90", "off"
    );
    let t = |us: f64| human(Duration::from_secs_f64(us.max(0.0) / 1e6));
    for l in &check.links {
        let _ = writeln!(
            out,
            "  {:<6}{:>14}{:>11}{:>11}{:>11}{:>11}{:>11}{:>+8.1}%  {}",
            l.node,
            l.link.to_string(),
            t(l.loopback_us),
            t(l.expected_us),
            t(l.measured_us),
            t(l.p10_us),
            t(l.p90_us),
            l.off_pct,
            if l.ok { "ok" } else { "OFF" },
        );
    }
    out
}

/// The refusal for a check that did not pass: which link, by how much, and why that
/// stops the benchmark.
pub(crate) fn refusal(check: &LinkCheck) -> Failure {
    let worst = check
        .links
        .iter()
        .filter(|l| !l.ok)
        .max_by(|a, b| a.off_pct.abs().total_cmp(&b.off_pct.abs()));
    let t = |us: f64| human(Duration::from_secs_f64(us.max(0.0) / 1e6));
    let detail = worst.map_or_else(String::new, |l| {
        format!(
            "node {}'s link ({} one way) took {} for a round trip where the profile makes {} ({:+.1}%), ",
            l.node,
            l.link,
            t(l.measured_us),
            t(l.expected_us),
            l.off_pct
        )
    });
    Failure::new(
        exit::LINK_CHECK,
        format!(
            "the link check failed: {detail}beyond the ±{}% tolerance. Figures measured now would describe this machine's proxy rather than the profile (a busy machine, or a delay too short for the proxy to keep), so nothing was measured; try again on a quieter machine, or pass --link-tolerance to accept more.",
            check.tolerance_pct
        ),
    )
}

/// Parses `--link-tolerance`: a percentage from 0 to 100, with or without `%`.
pub(crate) fn parse_tolerance(text: &str) -> Result<f64, String> {
    let number = text.trim().trim_end_matches('%').trim();
    match number.parse::<f64>() {
        Ok(pct) if (0.0..=100.0).contains(&pct) => Ok(pct),
        _ => Err(format!(
            "`{text}` is not a percentage from 0 to 100 (e.g. 10 or 10%)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_take_the_nearest_rank() {
        let samples: Vec<Duration> = (1..=5).map(Duration::from_millis).collect();
        assert_eq!(quantile(&samples, 0.5), Duration::from_millis(3));
        assert_eq!(quantile(&samples, 0.0), Duration::from_millis(1));
        assert_eq!(quantile(&samples, 1.0), Duration::from_millis(5));
        assert_eq!(quantile(&[], 0.5), Duration::ZERO);
    }

    #[test]
    fn tolerances_are_percentages() {
        assert_eq!(parse_tolerance("10"), Ok(10.0));
        assert_eq!(parse_tolerance("2.5%"), Ok(2.5));
        assert_eq!(parse_tolerance("0"), Ok(0.0));
        assert!(parse_tolerance("101").is_err());
        assert!(parse_tolerance("-1").is_err());
        assert!(parse_tolerance("ten").is_err());
    }

    #[test]
    fn a_refusal_names_the_worst_link_and_exits_with_its_own_code() {
        let rtt = |node, measured_us, ok| LinkRtt {
            node,
            link: Link {
                delay: Duration::from_millis(1),
                jitter: Duration::ZERO,
            },
            loopback_us: 50.0,
            expected_us: 2050.0,
            measured_us,
            p10_us: measured_us,
            p90_us: measured_us,
            off_pct: 100.0 * (measured_us - 2050.0) / 2050.0,
            ok,
        };
        let check = LinkCheck {
            pings: PINGS,
            tolerance_pct: 10.0,
            links: vec![
                rtt(0, 2060.0, true),
                rtt(1, 3000.0, false),
                rtt(2, 4100.0, false),
            ],
            passed: false,
        };
        let message = refusal(&check).to_string();
        assert!(message.contains("node 2's link"), "{message}");
        assert!(message.contains("+100.0%"), "{message}");
        assert!(table(&check).contains("OFF"));
    }
}
