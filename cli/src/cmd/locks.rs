//! `redquorum locks`: the locks held across the quorum, read from every master with `SCAN`
//! under the key prefix (never `KEYS`, which blocks a master), as a table, JSON, or a
//! refreshing table (`--watch`).
//!
//! Each lock key is read where it is: a mutex's and a writer's value and `PTTL`, the readers'
//! and the permits' sorted sets (one member per holder, scored by its expiry on the master's
//! clock). A holder is shown with the masters that hold it and their remaining ttls, and the
//! quorum's view: held (on a quorum of masters, until the latest expiry at most) or on a
//! minority only (no one holds that lock; the keys are leftovers that expire by ttl).

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use clap::Args;
use redis::AsyncCommands;
use redis::aio::MultiplexedConnection;
use redquorum::{DEFAULT_KEY_PREFIX, GuardStatus, LockKind, Redlock, redact_url};
use serde::Serialize;

use crate::args::{self, MasterArgs, human, parse_duration};
use crate::exit::{self, Failure};

/// Show the locks held across the masters: resource, kind, holders, each master's ttl.
///
/// Read-only: `SCAN` under the key prefix, then `GET`/`PTTL` or `ZRANGE` per lock key; no
/// key is written. (The restart guard's view of each master comes from the library's own
/// verification, which any client runs on first contact; `--no-restart-guard` skips it.)
///
/// A holder on a quorum of masters holds the lock until its latest expiry at most; one on
/// fewer holds nothing (leftover keys, expiring by ttl), and is shown as `minority`. Masters
/// that are down or quarantined are listed above the table.
///
/// Exits 0, or 69 when fewer masters than a majority could be read.
#[derive(Debug, Args)]
#[command(after_long_help = exit::HELP)]
pub(crate) struct LocksArgs {
    #[command(flatten)]
    masters: MasterArgs,

    /// Only resources matching this glob (`*` any run, `?` one character).
    #[arg(long, value_name = "GLOB", default_value = "*")]
    resource: String,

    /// The key prefix the clients use.
    #[arg(long, value_name = "PREFIX", default_value = DEFAULT_KEY_PREFIX)]
    key_prefix: String,

    /// Print JSON on stdout instead of the table.
    #[arg(long)]
    json: bool,

    /// Refresh the table every `--interval` until interrupted (a refreshing screen on a
    /// terminal; one table after the other otherwise).
    #[arg(long)]
    watch: bool,

    /// Time between refreshes with `--watch`.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    interval: Duration,
}

/// One master as read for this view.
#[derive(Debug, Serialize)]
struct MasterView {
    node: usize,
    url: String,
    /// `up` or `down`.
    state: &'static str,
    /// Why it could not be read, when down.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// The restart guard's view (`counted`, `quarantined for …`, `guard off`, …).
    guard: String,
    quarantined: bool,
}

/// One holder of one lock.
#[derive(Debug, Serialize)]
struct LockView {
    resource: String,
    /// `mutex`, `read`, `write`, `permits`.
    kind: &'static str,
    /// The first characters of the holder's lock value.
    holder: String,
    /// Remaining ttl in ms on each master, `null` where it does not hold the lock.
    masters: Vec<Option<u64>>,
    held_on: usize,
    quorum: usize,
    /// `held` (on a quorum of masters) or `minority`.
    quorum_view: &'static str,
    /// The latest expiry among the masters that hold it, in ms from now.
    until_ms: u64,
}

#[derive(Debug, Serialize)]
struct View {
    masters: Vec<MasterView>,
    locks: Vec<LockView>,
}

/// A lock: its resource and kind.
type LockId = (String, &'static str);

/// What one master holds: `(resource, kind) -> holder -> ttl ms`, and permit counts.
#[derive(Debug, Default)]
struct Read {
    holders: BTreeMap<LockId, BTreeMap<String, u64>>,
    permits: BTreeMap<String, usize>,
}

pub(crate) async fn main(args: LocksArgs) -> Result<u8, Failure> {
    let urls = args.masters.urls()?;
    let guard = if args.masters.no_restart_guard {
        None
    } else {
        Some(args::build(
            args.masters.builder(urls.clone(), redquorum::DEFAULT_TTL),
        )?)
    };
    let timeout = args
        .masters
        .node_timeout
        .unwrap_or(Duration::from_millis(500))
        .max(Duration::from_millis(200));
    if !args.watch {
        let view = look(&urls, &args, guard.as_ref(), timeout).await;
        print(&view, &args)?;
        return Ok(verdict(&view));
    }
    let tty = std::io::stdout().is_terminal();
    loop {
        let view = look(&urls, &args, guard.as_ref(), timeout).await;
        if tty && !args.json {
            // Clear the screen and go home: a refreshing table.
            print!("\x1b[2J\x1b[H");
        }
        print(&view, &args)?;
        if !tty {
            println!();
        }
        tokio::select! {
            _ = tokio::time::sleep(args.interval) => {}
            _ = tokio::signal::ctrl_c() => return Ok(exit::OK),
        }
    }
}

fn verdict(view: &View) -> u8 {
    let up = view.masters.iter().filter(|m| m.state == "up").count();
    if up < view.masters.len() / 2 + 1 {
        exit::UNAVAILABLE
    } else {
        exit::OK
    }
}

async fn look(
    urls: &[String],
    args: &LocksArgs,
    guard: Option<&Redlock>,
    timeout: Duration,
) -> View {
    let reads = futures::future::join_all(
        urls.iter()
            .map(|url| read_master(url, &args.key_prefix, &args.resource, timeout)),
    );
    let health = async {
        match guard {
            Some(client) => client.health_with(Duration::from_millis(50)).await.ok(),
            None => None,
        }
    };
    let (reads, health) = tokio::join!(reads, health);
    let n = urls.len();
    let masters = urls
        .iter()
        .enumerate()
        .map(|(node, url)| {
            let status = health
                .as_ref()
                .and_then(|h| h.nodes.get(node))
                .map(|h| h.guard.clone());
            MasterView {
                node,
                url: redact_url(url),
                state: if reads[node].is_ok() { "up" } else { "down" },
                error: reads[node].as_ref().err().cloned(),
                quarantined: matches!(status, Some(GuardStatus::Quarantined { .. })),
                guard: status.map_or_else(|| "not checked".to_owned(), |s| s.to_string()),
            }
        })
        .collect();
    let mut all: BTreeMap<LockId, BTreeMap<String, Vec<Option<u64>>>> = BTreeMap::new();
    let mut permits: BTreeMap<String, usize> = BTreeMap::new();
    for (node, read) in reads.iter().enumerate() {
        let Ok(read) = read else { continue };
        for (lock, holders) in &read.holders {
            let entry = all.entry(lock.clone()).or_default();
            for (holder, ttl) in holders {
                entry.entry(holder.clone()).or_insert_with(|| vec![None; n])[node] = Some(*ttl);
            }
        }
        for (resource, k) in &read.permits {
            permits.entry(resource.clone()).or_insert(*k);
        }
    }
    let mut locks = Vec::new();
    for ((resource, kind), holders) in all {
        let lock_kind = match kind {
            "read" => LockKind::Read,
            "write" => LockKind::Write,
            "permits" => LockKind::Permit {
                k: permits.get(&resource).copied().unwrap_or(1),
            },
            _ => LockKind::Mutex,
        };
        let quorum = match lock_kind {
            LockKind::Permit { k } => redquorum::rules::permit_quorum(n, k),
            _ => n / 2 + 1,
        };
        for (holder, ttls) in holders {
            let held_on = ttls.iter().flatten().count();
            locks.push(LockView {
                resource: resource.clone(),
                kind,
                holder: holder.chars().take(8).collect(),
                until_ms: ttls.iter().flatten().copied().max().unwrap_or(0),
                masters: ttls,
                held_on,
                quorum,
                quorum_view: if held_on >= quorum {
                    "held"
                } else {
                    "minority"
                },
            });
        }
    }
    View { masters, locks }
}

/// Reads every lock key of one master matching the resource glob.
async fn read_master(
    url: &str,
    prefix: &str,
    glob: &str,
    timeout: Duration,
) -> Result<Read, String> {
    let run = async {
        let client = redis::Client::open(url).map_err(|e| e.to_string())?;
        let mut conn = client
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| e.to_string())?;
        read_keys(&mut conn, prefix, glob)
            .await
            .map_err(|e| e.to_string())
    };
    match tokio::time::timeout(timeout * 4, run).await {
        Ok(read) => read,
        Err(_) => Err(format!("no answer within {}", human(timeout * 4))),
    }
}

async fn read_keys(
    conn: &mut MultiplexedConnection,
    prefix: &str,
    glob: &str,
) -> redis::RedisResult<Read> {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(conn).await?;
    let now_ms = secs * 1000 + micros / 1000;
    let pattern = format!("{}*", escape_glob(prefix));
    let mut keys = Vec::new();
    let mut cursor: u64 = 0;
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(&pattern)
            .arg("COUNT")
            .arg(1000)
            .query_async(conn)
            .await?;
        keys.extend(batch);
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    let mut read = Read::default();
    for key in keys {
        let Some(rest) = key.strip_prefix(prefix) else {
            continue;
        };
        let Some((kind, resource)) = classify(rest) else {
            continue;
        };
        if !glob_match(glob, resource) {
            continue;
        }
        let resource = resource.to_owned();
        match kind {
            "mutex" | "write" => {
                let value: Option<String> = conn.get(&key).await.unwrap_or(None);
                let ttl: i64 = conn.pttl(&key).await.unwrap_or(-2);
                if let (Some(value), Ok(ttl)) = (value, u64::try_from(ttl)) {
                    read.holders
                        .entry((resource, kind))
                        .or_default()
                        .insert(value, ttl);
                }
            }
            _ => {
                let members: Vec<(String, f64)> = conn
                    .zrange_withscores(&key, 0, -1)
                    .await
                    .unwrap_or_default();
                for (member, score) in members {
                    if member == "redquorum:k" {
                        read.permits.insert(resource.clone(), (-score) as usize);
                        continue;
                    }
                    if member.starts_with("redquorum") || !score.is_finite() {
                        continue;
                    }
                    let left = (score as u64).saturating_sub(now_ms);
                    if left > 0 {
                        read.holders
                            .entry((resource.clone(), kind))
                            .or_default()
                            .insert(member, left);
                    }
                }
            }
        }
    }
    Ok(read)
}

/// The kind and resource of a key under the prefix; `None` for the keys that are not locks
/// (the guard's marker and records, fence counters, a waiting writer's marker).
fn classify(rest: &str) -> Option<(&'static str, &str)> {
    [
        ("lock:", "mutex"),
        ("rw-writer:", "write"),
        ("rw-readers:", "read"),
        ("permits:", "permits"),
    ]
    .into_iter()
    .find_map(|(tag, kind)| rest.strip_prefix(tag).map(|r| (kind, r)))
}

fn escape_glob(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `*` matches any run of characters, `?` one; everything else itself.
fn glob_match(glob: &str, text: &str) -> bool {
    let (g, t): (Vec<char>, Vec<char>) = (glob.chars().collect(), text.chars().collect());
    let (mut gi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if gi < g.len() && (g[gi] == '?' || g[gi] == t[ti]) {
            gi += 1;
            ti += 1;
        } else if gi < g.len() && g[gi] == '*' {
            star = Some(gi);
            mark = ti;
            gi += 1;
        } else if let Some(s) = star {
            gi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    g[gi..].iter().all(|&c| c == '*')
}

fn print(view: &View, args: &LocksArgs) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    let text = if args.json {
        serde_json::to_string_pretty(view)
            .map_err(|e| Failure::io(format!("could not encode the view as JSON: {e}.")))?
    } else {
        table(view)
    };
    writeln!(out, "{text}").map_err(|e| Failure::io(format!("could not write: {e}.")))
}

fn table(view: &View) -> String {
    let mut s = String::new();
    for m in &view.masters {
        let state = match &m.error {
            Some(e) => format!("down ({e})"),
            None => "up".to_owned(),
        };
        s.push_str(&format!(
            "master {} {}: {state}; guard: {}\n",
            m.node, m.url, m.guard
        ));
    }
    let n = view.masters.len();
    let mut rows = vec![{
        let mut h: Vec<String> = ["resource", "kind", "holder", "quorum view"]
            .map(str::to_owned)
            .to_vec();
        h.extend((0..n).map(|i| format!("m{i}")));
        h
    }];
    for lock in &view.locks {
        let quorum_view = if lock.quorum_view == "held" {
            format!(
                "held on {}/{n} (≥{}), ≤{}",
                lock.held_on,
                lock.quorum,
                human(Duration::from_millis(lock.until_ms))
            )
        } else {
            format!("minority {}/{n} (needs {})", lock.held_on, lock.quorum)
        };
        let mut row = vec![
            lock.resource.clone(),
            lock.kind.to_owned(),
            lock.holder.clone(),
            quorum_view,
        ];
        row.extend(lock.masters.iter().enumerate().map(|(i, ttl)| {
            match (ttl, view.masters[i].state) {
                (_, "down") => "down".to_owned(),
                (Some(ms), _) => human(Duration::from_millis(*ms)),
                (None, _) => "-".to_owned(),
            }
        }));
        rows.push(row);
    }
    if view.locks.is_empty() {
        s.push_str("no locks held\n");
        return s;
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
        .collect();
    for row in rows {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        s.push_str(line.join("  ").trim_end());
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_runs_and_single_characters() {
        assert!(glob_match("*", "orders"));
        assert!(glob_match("ord*", "orders"));
        assert!(glob_match("o?ders", "orders"));
        assert!(glob_match("*ers", "orders"));
        assert!(!glob_match("ord", "orders"));
        assert!(!glob_match("x*", "orders"));
    }

    #[test]
    fn only_lock_keys_are_classified() {
        assert_eq!(classify("lock:a"), Some(("mutex", "a")));
        assert_eq!(classify("rw-readers:a:b"), Some(("read", "a:b")));
        assert_eq!(classify("rw-writer:a"), Some(("write", "a")));
        assert_eq!(classify("permits:a"), Some(("permits", "a")));
        assert_eq!(classify("guard"), None);
        assert_eq!(classify("fence:a"), None);
        assert_eq!(classify("rw-pending:a"), None);
    }
}
