//! Simulated distance: a one-way delay (and jitter) per master, applied in both directions
//! by the test kit's fault proxy, so a round trip to a master costs twice its delay.

use std::fmt;
use std::time::Duration;

#[cfg(feature = "spawn")]
use redquorum_testkit::{Direction, Fault, LinkSet};
use serde::Serialize;

use crate::args::parse_duration;

/// One master's simulated link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub(crate) struct Link {
    /// One-way delay.
    #[serde(rename = "one_way_ms", serialize_with = "millis")]
    pub(crate) delay: Duration,
    /// Extra random one-way delay, uniform in `[0, jitter]`.
    #[serde(rename = "jitter_ms", serialize_with = "millis")]
    pub(crate) jitter: Duration,
}

fn millis<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

impl Link {
    const fn ms(delay: u64, jitter_us: u64) -> Self {
        Self {
            delay: Duration::from_millis(delay),
            jitter: Duration::from_micros(jitter_us),
        }
    }
}

impl fmt::Display for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", crate::args::human(self.delay))?;
        if !self.jitter.is_zero() {
            write!(f, "~{}", crate::args::human(self.jitter))?;
        }
        Ok(())
    }
}

/// Where the masters are, as seen from the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Profile {
    /// Straight to the masters, no proxy.
    Loopback,
    /// Every master 1 ms away (one way), with up to 0.5 ms of jitter: a spread-out LAN or
    /// a metro network.
    Lan,
    /// Four masters 1 ms away, the last one 15 ms away: a quorum never needs the far one.
    OneFarDc,
    /// Masters spread over three regions seen from the first: 1 ms, 10 ms ± 1 ms and
    /// 40 ms ± 2 ms one way (for five masters: 1, 1, 10, 10, 40 ms), so a quorum needs the
    /// nearer remote region.
    ThreeRegions,
    /// An explicit list, one link per master.
    Links(Vec<Link>),
}

impl Profile {
    /// The profile's name as shown in reports.
    pub(crate) fn name(&self) -> String {
        match self {
            Self::Loopback => "loopback".into(),
            Self::Lan => "lan".into(),
            Self::OneFarDc => "one-far-dc".into(),
            Self::ThreeRegions => "three-regions".into(),
            Self::Links(links) => links
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(","),
        }
    }

    /// One link per master for `n` masters; `None` for loopback (no proxy at all).
    pub(crate) fn links(&self, n: usize) -> Result<Option<Vec<Link>>, String> {
        let near = Link::ms(1, 0);
        Ok(Some(match self {
            Self::Loopback => return Ok(None),
            Self::Lan => vec![Link::ms(1, 500); n],
            Self::OneFarDc => (0..n)
                .map(|i| {
                    if i + 1 == n && n > 1 {
                        Link::ms(15, 0)
                    } else {
                        near
                    }
                })
                .collect(),
            Self::ThreeRegions => (0..n)
                .map(|i| match i * 3 / n.max(1) {
                    0 => near,
                    1 => Link::ms(10, 1_000),
                    _ => Link::ms(40, 2_000),
                })
                .collect(),
            Self::Links(links) if links.len() == n => links.clone(),
            Self::Links(links) => {
                return Err(format!(
                    "the link list `{}` has {} entries for {n} masters: give one per master (or --spawn {})",
                    self.name(),
                    links.len(),
                    links.len()
                ));
            }
        }))
    }
}

/// Parses a profile name or a link list such as `1ms,1ms,1ms,1ms,15ms~2ms`.
pub(crate) fn parse(text: &str) -> Result<Profile, String> {
    match text.trim() {
        "loopback" => Ok(Profile::Loopback),
        "lan" => Ok(Profile::Lan),
        "one-far-dc" => Ok(Profile::OneFarDc),
        "three-regions" => Ok(Profile::ThreeRegions),
        list if list.starts_with(|c: char| c.is_ascii_digit()) => list
            .split(',')
            .map(|item| {
                let (delay, jitter) = item.split_once('~').unwrap_or((item, "0"));
                Ok(Link {
                    delay: parse_duration(delay)?,
                    jitter: parse_duration(jitter)?,
                })
            })
            .collect::<Result<Vec<_>, String>>()
            .map(Profile::Links),
        other => Err(format!(
            "unknown profile `{other}`: use loopback, lan, one-far-dc, three-regions, or a list of one-way delays such as 1ms,1ms,1ms,1ms,15ms~2ms"
        )),
    }
}

/// Sets each link's delay on both directions of its proxy.
#[cfg(feature = "spawn")]
pub(crate) fn apply(links: &LinkSet, profile: &[Link]) {
    for (proxy, link) in links.links().iter().zip(profile) {
        let fault = if link.delay.is_zero() && link.jitter.is_zero() {
            Fault::Pass
        } else {
            Fault::Delay {
                base: link.delay,
                jitter: link.jitter,
            }
        };
        proxy.set(Direction::Both, fault);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_profiles_fit_any_count() {
        let far = parse("one-far-dc").and_then(|p| p.links(5)).expect("valid");
        let far = far.expect("proxied");
        assert_eq!(far[4].delay, Duration::from_millis(15));
        assert!(far[..4].iter().all(|l| l.delay == Duration::from_millis(1)));
        let regions = Profile::ThreeRegions
            .links(5)
            .expect("valid")
            .expect("proxied");
        let delays: Vec<u128> = regions.iter().map(|l| l.delay.as_millis()).collect();
        assert_eq!(delays, [1, 1, 10, 10, 40]);
        assert_eq!(Profile::Loopback.links(5), Ok(None));
    }

    #[test]
    fn link_lists_take_jitter_and_must_match_the_masters() {
        let p = parse("1ms,15ms~2ms").expect("valid");
        let links = p.links(2).expect("two masters").expect("proxied");
        assert_eq!(links[1].jitter, Duration::from_millis(2));
        assert!(p.links(3).is_err());
        assert!(parse("far-away").is_err());
        assert!(parse("1ms,fast").is_err());
    }
}
