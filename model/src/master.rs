//! What one master does with a request, atomically (a Lua script, or a pipeline that runs
//! on one connection in order): each arm names the script or command it models.

use crate::config::{Anchor, Config, ExtendMode, GuardMode, Kind, Mode};
use crate::state::{BASE_MS, History, Marker, Master, Req, Value};

/// A master's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// The entry was set; the fencing counter (0 unfenced) and the marker read back
    /// (`HGET guard epoch` pipelined after the `SET`, or inside the script).
    Granted {
        /// The incremented counter.
        token: u64,
        /// v2: the epoch read back.
        epoch: Option<u8>,
        /// Old guard: the marker read back.
        old_marker: Option<u8>,
    },
    /// Not admitted (`SET NX` found a key, or the kind's rule refused).
    Taken,
    /// `fence.lua` / `extend.lua`: 1 or 0.
    Flag(bool),
    /// `release.lua`: whether an entry was deleted.
    Released(bool),
    /// `guard.lua`: `{epoch, since, now}`.
    Epoch {
        /// The epoch.
        epoch: u8,
        /// Its anchor.
        since: i64,
        /// The master's clock.
        now_m: i64,
    },
    /// Old guard: `INFO server` (`run_id`, `uptime_in_seconds`), then the marker written.
    Info {
        /// The `run_id`.
        run: u8,
        /// Whole seconds up.
        uptime_s: u64,
    },
}

impl Master {
    /// A master up since real time zero.
    pub fn new() -> Self {
        Self {
            run: 0,
            boot: 0,
            gain: 0,
            holders: Vec::new(),
            marker: None,
            old_marker: None,
            records: Vec::new(),
            counter: 0,
        }
    }

    /// Its clock at real time `now`.
    pub fn clock(&self, now: i64) -> i64 {
        now + self.gain
    }

    /// Drops what has expired on its own clock: a key with expiry `e` lives while the
    /// clock is at most `e` (Redis); a ttl record with score `s` while the clock is below
    /// `s` (`ZREMRANGEBYSCORE -inf now`).
    pub fn expire(&mut self, now_m: i64) {
        self.holders.retain(|&(_, _, e)| now_m <= e);
        self.records.retain(|&(_, s)| s > now_m);
    }

    /// `uptime_in_seconds`: the difference of two whole-second clocks, as Redis computes
    /// it (`unixtime - stat_starttime`).
    pub fn uptime_s(&self, now_m: i64) -> u64 {
        let secs = |ms: i64| (BASE_MS as i64 + ms) / 1000;
        (secs(now_m) - secs(self.boot)).max(0) as u64
    }

    /// `record_ttl` (prelude.lua): `ZADD ttls GT (now + 2·ttl) ttl`.
    fn record(&mut self, ttl: u64, now_m: i64) {
        let score = now_m + 2 * ttl as i64;
        match self.records.iter_mut().find(|(t, _)| *t == ttl) {
            Some((_, s)) => *s = (*s).max(score),
            None => {
                self.records.push((ttl, score));
                self.records.sort_unstable();
            }
        }
    }

    /// `longest_ttl` (prelude.lua), as `ttl_read.lua` returns it.
    pub fn longest(&self, now_m: i64) -> u64 {
        self.records
            .iter()
            .filter(|&&(_, s)| s > now_m)
            .map(|&(t, _)| t)
            .max()
            .unwrap_or(0)
    }

    /// Whether `value` may take `mode` here under `kind`.
    fn admits(&self, kind: Kind, mode: Mode, value: Value) -> bool {
        if self.holders.iter().any(|&(v, _, _)| v == value) {
            // Never re-entered: a duplicate of our own acquire is refused like `SET NX`.
            return false;
        }
        match (kind, mode) {
            (Kind::Mutex, _) | (Kind::ReadWrite, Mode::Write) => self.holders.is_empty(),
            (Kind::ReadWrite, Mode::Read) => self.holders.iter().all(|&(_, m, _)| m == Mode::Read),
            (Kind::Semaphore(k), _) => self.holders.len() < k,
        }
    }

    /// Applies `req` at master clock `now_m` and answers it. Records in `history` any
    /// entry of another value that the request changed (the property "no entry
    /// overwritten" watches every request, not only the ones expected to write).
    pub fn apply(
        &mut self,
        cfg: &Config,
        index: usize,
        req: Req,
        now_m: i64,
        next_epoch: &mut u8,
        history: &mut History,
    ) -> Reply {
        self.expire(now_m);
        let before = self.holders.clone();
        let reply = self.run(cfg, index, req, now_m, next_epoch);
        if let Some(value) = req.value() {
            let changed = before
                .iter()
                .find(|e| e.0 != value && !self.holders.contains(e));
            if let (Some(&(victim, _, _)), None) = (changed, history.overwrite) {
                history.overwrite = Some((index as u8, victim, value));
            }
        }
        reply
    }

    fn run(
        &mut self,
        cfg: &Config,
        index: usize,
        req: Req,
        now_m: i64,
        next_epoch: &mut u8,
    ) -> Reply {
        match req {
            Req::Acquire {
                value,
                ttl,
                mode,
                record,
                fenced,
            } => {
                // Hot path: `EVAL record.lua` (when due) + `SET key value NX PX ttl` +
                // `HGET guard epoch`, one pipeline. Otherwise `acquire.lua`, which records,
                // admits, increments the counter and reads the marker in one script.
                if record {
                    self.record(ttl, now_m);
                }
                if !self.admits(cfg.kind, mode, value) {
                    return Reply::Taken;
                }
                self.holders.push((value, mode, now_m + ttl as i64));
                self.holders.sort_unstable();
                let token = if fenced {
                    self.counter += 1;
                    self.counter
                } else {
                    0
                };
                Reply::Granted {
                    token,
                    epoch: self.marker.map(|m| m.epoch),
                    old_marker: self.old_marker,
                }
            }
            Req::Record { ttl } => {
                self.record(ttl, now_m);
                Reply::Flag(true)
            }
            Req::Fence { value, token } => {
                // fence.lua: only while our entry is here.
                let ours = self.holders.iter().any(|&(v, _, _)| v == value);
                if ours {
                    self.counter = self.counter.max(token);
                }
                Reply::Flag(ours)
            }
            Req::Extend { value, ttl } => match cfg.extend {
                ExtendMode::Script => {
                    // extend.lua: value-checked, never recreates, never shortens; records
                    // the ttl atomically with the extension.
                    let until = now_m + ttl as i64;
                    let Some(entry) = self.holders.iter_mut().find(|(v, _, _)| *v == value) else {
                        return Reply::Flag(false);
                    };
                    entry.2 = entry.2.max(until);
                    if cfg.v2() {
                        self.record(ttl, now_m);
                    }
                    Reply::Flag(true)
                }
                ExtendMode::SetXx => {
                    // Control (c): `SET key value XX PX ttl` on a mutex key: whatever value
                    // the key holds becomes ours, with a fresh expiry.
                    let Some(entry) = self.holders.first_mut() else {
                        return Reply::Flag(false);
                    };
                    *entry = (value, entry.1, now_m + ttl as i64);
                    Reply::Flag(true)
                }
            },
            Req::Release { value } => {
                // release.lua: deletes only an entry holding our value.
                let before = self.holders.len();
                self.holders.retain(|&(v, _, _)| v != value);
                Reply::Released(self.holders.len() != before)
            }
            Req::Verify => match cfg.guard {
                GuardMode::V2 { anchor, .. } => {
                    self.guard_lua(cfg.masters[index].durable, anchor, now_m, next_epoch)
                }
                _ => {
                    // Old guard (`Guard::verify`): `INFO server`, then `SET marker run_id`,
                    // unconditionally.
                    self.old_marker = Some(self.run);
                    Reply::Info {
                        run: self.run,
                        uptime_s: self.uptime_s(now_m),
                    }
                }
            },
        }
    }

    /// `guard.lua` as `guard-v2.md` specifies it, with `durable_now` from `CONFIG GET`.
    fn guard_lua(&mut self, durable_now: bool, anchor: Anchor, now_m: i64, next: &mut u8) -> Reply {
        let mut begin = |since: i64, marker: &mut Option<Marker>, run: u8| {
            let epoch = *next;
            *next += 1;
            *marker = Some(Marker {
                epoch,
                run,
                since,
                durable: durable_now,
            });
            Reply::Epoch {
                epoch,
                since,
                now_m,
            }
        };
        let Some(mut m) = self.marker else {
            // Absent: first seen by anyone, or the data was lost. "Lost just now".
            return begin(now_m, &mut self.marker, self.run);
        };
        if m.run != self.run {
            if m.durable && durable_now {
                // Nothing was lost: keep the epoch, confirm it for this incarnation.
                m.run = self.run;
                self.marker = Some(m);
            } else {
                let since = restart_anchor_ms(anchor, now_m, self.uptime_s(now_m));
                return begin(since, &mut self.marker, self.run);
            }
        } else {
            m.durable &= durable_now;
            self.marker = Some(m);
        }
        Reply::Epoch {
            epoch: m.epoch,
            since: m.since,
            now_m,
        }
    }
}

impl Default for Master {
    fn default() -> Self {
        Self::new()
    }
}

/// The anchor of a restarted master's new epoch, from its clock and `uptime_in_seconds`.
/// `Anchor::Safe` is the library's (`redquorum::rules::restart_anchor_offset_ms`, which
/// `guard.lua` is given): Redis's uptime is the difference of two whole-second clocks, so
/// the boot lies strictly between `now − (uptime + 1) s` and `now − (uptime − 1) s`, and
/// only the latter bound is never before the boot (the crash that lost the keys is before
/// the boot).
pub fn restart_anchor_ms(anchor: Anchor, now_ms: i64, uptime_s: u64) -> i64 {
    let up = uptime_s as i64 * 1000;
    match anchor {
        Anchor::Note => now_ms - up - 1000,
        Anchor::Uptime => now_ms - up,
        Anchor::Safe => {
            now_ms
                - i64::try_from(redquorum::rules::restart_anchor_offset_ms(uptime_s))
                    .unwrap_or(i64::MAX)
        }
    }
}
