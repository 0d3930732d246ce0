//! Options shared by the subcommands: the masters, durations, and URL redaction.

use std::time::Duration;

use clap::Args;
use redquorum::{Redlock, RedlockBuilder};

use crate::exit::Failure;

/// The masters and the lock client's timing.
#[derive(Debug, Clone, Args)]
pub(crate) struct MasterArgs {
    /// A Redis master, `redis://[user:password@]host[:port][/db]`; repeat for each master
    /// (five independent masters are usual). REDQUORUM_NODES takes a comma-separated list.
    #[arg(
        long = "node",
        value_name = "URL",
        env = "REDQUORUM_NODES",
        value_delimiter = ',',
        hide_env_values = true
    )]
    pub(crate) nodes: Vec<String>,

    /// Bound on each request to one master [default: 50 ms, at most a tenth of the ttl].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) node_timeout: Option<Duration>,

    /// Count masters that restarted less than a ttl ago (turns the restart guard off). Only
    /// safe if every master persists with `appendfsync always` or stays down a ttl after a
    /// crash.
    #[arg(long)]
    pub(crate) no_restart_guard: bool,
}

impl MasterArgs {
    /// The node URLs, or a usage error when none was given.
    pub(crate) fn urls(&self) -> Result<Vec<String>, Failure> {
        let urls: Vec<String> = self
            .nodes
            .iter()
            .map(|u| u.trim().to_owned())
            .filter(|u| !u.is_empty())
            .collect();
        if urls.is_empty() {
            return Err(Failure::usage(
                "no Redis master was given: pass --node URL once per master, or set REDQUORUM_NODES to a comma-separated list.",
            ));
        }
        Ok(urls)
    }

    /// A client builder over the given masters, with the restart guard as asked.
    pub(crate) fn builder(&self, urls: Vec<String>, ttl: Duration) -> RedlockBuilder {
        let mut builder = Redlock::builder()
            .nodes(urls)
            .ttl(ttl)
            .restart_guard(!self.no_restart_guard);
        if let Some(timeout) = self.node_timeout {
            builder = builder.node_timeout(timeout);
        }
        builder
    }
}

/// Builds the client, mapping configuration errors to their exit codes.
pub(crate) fn build(builder: RedlockBuilder) -> Result<Redlock, Failure> {
    builder.build().map_err(|e| Failure::from_config(&e))
}

/// Parses `250ms`, `1.5s`, `2m`, `500us`, `1h`, or `0`.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("`{text}` needs a unit: ms, s, m, h, us (e.g. 250ms, 1.5s)"))?;
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (e.g. 250ms, 1.5s)"))?;
    let seconds = match unit.trim() {
        "ns" => value / 1e9,
        "us" | "µs" => value / 1e6,
        "ms" => value / 1e3,
        "s" => value,
        "m" | "min" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{text}`: use ms, s, m, h or us"
            ));
        }
    };
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("`{text}` is out of range"))
}

/// `url` with the password of its user info replaced by `***`, for output (the library's
/// redaction, so the CLI never shows a URL differently).
pub(crate) fn redact(url: &str) -> String {
    redquorum::redact_url(url)
}

/// A duration for humans: `85.2µs`, `1.27ms`, `15.0ms`, `2.50s`.
pub(crate) fn human(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1_000.0 {
        format!("{us:.1}µs")
    } else if us < 10_000.0 {
        format!("{:.2}ms", us / 1e3)
    } else if us < 1_000_000.0 {
        format!("{:.1}ms", us / 1e3)
    } else {
        format!("{:.2}s", us / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("500us"), Ok(Duration::from_micros(500)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("15").is_err());
        assert!(parse_duration("fast").is_err());
        assert!(parse_duration("3 weeks").is_err());
    }

    #[test]
    fn passwords_never_show() {
        assert_eq!(redact("redis://:pw@h:1/0"), "redis://:***@h:1/0");
        assert_eq!(redact("redis://u:pw@h:1"), "redis://u:***@h:1");
        assert_eq!(redact("redis://pw@h"), "redis://***@h");
        assert_eq!(redact("redis://h:1"), "redis://h:1");
    }

    #[test]
    fn durations_print_for_humans() {
        assert_eq!(human(Duration::from_micros(85)), "85.0µs");
        assert_eq!(human(Duration::from_micros(1270)), "1.27ms");
        assert_eq!(human(Duration::from_millis(2500)), "2.50s");
    }
}
