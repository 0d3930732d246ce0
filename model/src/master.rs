//! What one server does with a request, atomically (a Lua script, or a pipeline that runs
//! on one connection in order): each arm names the script or command it models.

use crate::config::{Anchor, Config, ExtendMode, Kind, Mode, Observe};
use crate::state::{BASE_MS, Cause, Data, Entry, History, Marker, Master, Req, Value};

/// A server's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// The entries were set; the fencing counter (0 unfenced) and the marker read back
    /// (`HGET guard epoch` pipelined after the `SET`, or inside the script).
    Granted {
        /// The incremented counter.
        token: u64,
        /// Epoch guard: the epoch read back.
        epoch: Option<u8>,
        /// Old guard: the marker read back.
        old_marker: Option<u8>,
        /// The server's identity (`Master::run`), for a grant on a cluster slot.
        id: u8,
    },
    /// Not admitted (`SET NX` found a key, or the kind's rule refused).
    Taken,
    /// `fence.lua`, `record.lua`, `vouch.lua`: 1 or 0.
    Flag(bool),
    /// `extend.lua`, once per lock of the pipeline (the second lock of a batch, if any).
    Extended(bool, Option<bool>),
    /// `release.lua`: whether an entry was deleted.
    Released(bool),
    /// `guard.lua`: `{epoch, since, now, vouched}`.
    Epoch {
        /// The epoch.
        epoch: u8,
        /// Its anchor.
        since: i64,
        /// The master's clock.
        now_m: i64,
        /// v3: the epoch is vouched for.
        vouched: bool,
        /// The server's identity (`Master::run`).
        id: u8,
    },
    /// Old guard: `INFO server` (`run_id`, `uptime_in_seconds`), then the marker written.
    Info {
        /// The `run_id`.
        run: u8,
        /// Whole seconds up.
        uptime_s: u64,
    },
    /// `ttl_read.lua` with the reader's marker, `INFO server` and `CONFIG GET` before it.
    Read(ReaderInfo),
    /// A Sentinel group's or a cluster shard's `WAIT 1` timed out: the write does not
    /// count (`NodeFailure::NotReplicated`).
    NotReplicated,
    /// A cluster node that does not serve the slot: `MOVED slot node` (the slot's node
    /// now). Nothing ran.
    Moved {
        /// The slot.
        slot: u8,
        /// The node serving it.
        node: u8,
    },
}

/// What a reader of ttl records answers (`guard-v3.md`, "Trusted readers").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReaderInfo {
    /// The longest live record.
    pub longest: u64,
    /// Its marker: `(vouched, since, run_id equal to the live server's, durable)`.
    pub marker: Option<(bool, i64, bool, bool)>,
    /// The live server persists every write (`CONFIG GET`), and is not behind a group.
    pub live_durable: bool,
    /// Its clock.
    pub now_m: i64,
}

/// What the server needs to know about the request's circumstances.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ctx<'a> {
    /// The instance.
    pub cfg: &'a Config,
    /// The member the server belongs to.
    pub member: usize,
    /// The client verifying has verified an epoch here before (`known_epoch`).
    pub known: bool,
    /// This data set holds the member's ttl records (always, but on a cluster slot other
    /// than the designated one: `Config::records_at`).
    pub records: bool,
}

impl Master {
    /// A server up since real time zero, with `run` as its first `run_id`.
    pub fn new(run: u8) -> Self {
        Self {
            run,
            boot: 0,
            gain: 0,
            everysec: false,
            data: Data::default(),
            disk: None,
            released: 0,
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
        self.data.expire(now_m);
        if let Some(d) = &mut self.disk {
            d.expire(now_m);
        }
    }

    /// `uptime_in_seconds`: the difference of two whole-second clocks, as Redis computes
    /// it (`unixtime - stat_starttime`).
    pub fn uptime_s(&self, now_m: i64) -> u64 {
        let secs = |ms: i64| (BASE_MS as i64 + ms) / 1000;
        (secs(now_m) - secs(self.boot)).max(0) as u64
    }

    /// `appendonly yes` + `appendfsync always` now (`CONFIG GET`), and not behind a group
    /// or in a cluster (a failover is never durable).
    pub fn durable_now(&self, cfg: &Config, member: usize) -> bool {
        cfg.masters[member].durable
            && !self.everysec
            && !cfg.is_group(member)
            && !cfg.is_cluster(member)
    }

    /// Applies `req` at master clock `now_m` and answers it. Records in `history` any
    /// entry of another value that the request changed (the property "no entry
    /// overwritten" watches every request, not only the ones expected to write).
    pub(crate) fn apply(
        &mut self,
        ctx: Ctx<'_>,
        req: Req,
        now_m: i64,
        next_epoch: &mut u8,
        history: &mut History,
    ) -> Reply {
        self.expire(now_m);
        let before = self.data.holders.clone();
        self.observe(ctx, req);
        let reply = self.run(ctx, req, now_m, next_epoch);
        if let Some(value) = req.value() {
            // A batched renewal carries a second lock of the same client.
            let also = match req {
                Req::Extend { also, .. } => also,
                _ => None,
            };
            let changed = before.iter().find(|e| {
                e.value != value && Some(e.value) != also && !self.data.holders.contains(e)
            });
            if let (Some(e), None) = (changed, history.overwrite) {
                history.overwrite = Some((ctx.member as u8, e.value, value));
            }
        }
        reply
    }

    /// Durability that cannot be stale (`guard-v3.md`): a request that carries an
    /// observation (`CONFIG GET` before it on the same connection) and finds the server
    /// not persisting every write clears `durable` in the marker before its client counts
    /// the server's grants again. Modelled as part of the request: the client acts on the
    /// answer before it counts anything; a crash in between breaks the connection and the
    /// grant never counts.
    fn observe(&mut self, ctx: Ctx<'_>, req: Req) {
        let cfg = ctx.cfg;
        let observes = match (cfg.observe, req) {
            (_, Req::Verify) | (Observe::Verify, _) => false, // guard.lua sees it itself
            (Observe::Note, Req::Record { .. } | Req::Extend { .. }) => true,
            (Observe::Note, Req::Acquire { record, .. }) => record,
            (Observe::EveryWrite { .. }, Req::Record { .. } | Req::Extend { .. }) => true,
            (Observe::EveryWrite { .. }, Req::Acquire { .. }) => true,
            _ => false,
        };
        if !observes || self.durable_now(cfg, ctx.member) {
            return;
        }
        if let Some(m) = &mut self.data.marker
            && m.durable
        {
            m.durable = false;
            if cfg.observe == (Observe::EveryWrite { fsync_clear: true }) {
                // `WAITAOF 1 0` after the clear: everything written so far is on disk.
                self.fsync();
            }
        }
    }

    /// Everything written so far reaches the disk.
    fn fsync(&mut self) {
        if self.disk.is_some() {
            self.disk = Some(Box::new(self.data.clone()));
        }
    }

    fn run(&mut self, ctx: Ctx<'_>, req: Req, now_m: i64, next_epoch: &mut u8) -> Reply {
        let cfg = ctx.cfg;
        match req {
            Req::Acquire {
                value,
                ttl,
                mode,
                res,
                record,
                fenced,
            } => {
                // Hot path: `EVAL record.lua` (when due) + `SET key value NX PX ttl` +
                // `HGET guard epoch`, one pipeline. Otherwise `acquire.lua`, which records,
                // admits every key, increments the counter and reads the marker in one
                // script.
                if record {
                    self.data.record(ttl, now_m);
                }
                let expiry = now_m + ttl as i64;
                let free: Vec<u8> = (0..8)
                    .filter(|r| res & (1 << r) != 0)
                    .filter(|&r| self.data.admits(cfg.kind, mode, value, r))
                    .collect();
                let wanted = res.count_ones() as usize;
                let granted = if cfg.all_or_nothing {
                    free.len() == wanted
                } else {
                    // Control: one `SET NX` per key, a grant if any of them was set.
                    !free.is_empty()
                };
                if !granted {
                    return Reply::Taken;
                }
                for r in free {
                    self.data.holders.push(Entry {
                        res: r,
                        value,
                        mode,
                        expiry,
                    });
                }
                self.data.holders.sort_unstable();
                let token = if fenced {
                    self.data.counter += 1;
                    self.data.counter
                } else {
                    0
                };
                Reply::Granted {
                    token,
                    epoch: self.data.marker.map(|m| m.epoch),
                    old_marker: self.data.old_marker,
                    id: self.run,
                }
            }
            Req::Record { ttl } => {
                self.data.record(ttl, now_m);
                Reply::Flag(true)
            }
            Req::Fence { value, token } => {
                // fence.lua: only while our entry is here.
                let ours = self.data.holders.iter().any(|e| e.value == value);
                if ours {
                    self.data.counter = self.data.counter.max(token);
                }
                Reply::Flag(ours)
            }
            Req::Extend { value, also, ttl } => {
                let first = self.extend(ctx, value, ttl, now_m);
                let second = also.map(|v| self.extend(ctx, v, ttl, now_m));
                Reply::Extended(first, second)
            }
            Req::Release { value } => {
                // release.lua: deletes only entries holding our value.
                let before = self.data.holders.len();
                self.data.holders.retain(|e| e.value != value);
                Reply::Released(self.data.holders.len() != before)
            }
            Req::Verify => match cfg.epochs() {
                Some(g) => self.guard_lua(ctx, g.anchor, now_m, next_epoch),
                None => {
                    // Old guard (`Guard::verify`): `INFO server`, then `SET marker run_id`,
                    // unconditionally.
                    self.data.old_marker = Some(self.run);
                    Reply::Info {
                        run: self.run,
                        uptime_s: self.uptime_s(now_m),
                    }
                }
            },
            Req::Read { .. } => Reply::Read(self.read(cfg, ctx.member, now_m)),
            Req::Vouch { epoch, ttl } => {
                // vouch.lua (the first v3 design): compare-and-set on the epoch.
                match &mut self.data.marker {
                    Some(m) if m.epoch == epoch => {
                        m.vouched = true;
                        self.data.record(ttl, now_m);
                        Reply::Flag(true)
                    }
                    _ => Reply::Flag(false),
                }
            }
        }
    }

    /// `ttl_read.lua` with the marker, `INFO server` and `CONFIG GET` (which change
    /// nothing).
    pub(crate) fn read(&self, cfg: &Config, member: usize, now_m: i64) -> ReaderInfo {
        ReaderInfo {
            longest: self.data.longest(now_m),
            marker: self
                .data
                .marker
                .map(|m| (m.vouched, m.since, m.run == self.run, m.durable)),
            live_durable: self.durable_now(cfg, member),
            now_m,
        }
    }

    /// One lock of an `extend.lua` call (or `SET XX` in control (c)).
    fn extend(&mut self, ctx: Ctx<'_>, value: Value, ttl: u64, now_m: i64) -> bool {
        let cfg = ctx.cfg;
        let until = now_m + ttl as i64;
        match cfg.extend {
            ExtendMode::Script => {
                // Value-checked, never recreates, never shortens; records the ttl
                // atomically with the extension.
                let mut ours = false;
                for e in self.data.holders.iter_mut().filter(|e| e.value == value) {
                    e.expiry = e.expiry.max(until);
                    ours = true;
                }
                if ours && cfg.v2() && ctx.records {
                    self.data.record(ttl, now_m);
                }
                ours
            }
            ExtendMode::SetXx => {
                // Control (c): `SET key value XX PX ttl` on a mutex key: whatever value
                // the key holds becomes ours, with a fresh expiry.
                let Some(entry) = self.data.holders.first_mut() else {
                    return false;
                };
                entry.value = value;
                entry.expiry = until;
                true
            }
        }
    }

    /// `guard.lua`, with `durable_now` from `CONFIG GET` and, behind a Sentinel group or
    /// on a cluster slot, never durable and anchored at now (`RestartGuard::verify`: a new
    /// `run_id` there may be a promoted replica, which lost keys at the promotion, not at a
    /// boot; on a cluster, also a slot moved from another node). On a cluster slot the
    /// marker is the slot's own (`{prefix}{slot tag}guard`).
    fn guard_lua(&mut self, ctx: Ctx<'_>, anchor: Anchor, now_m: i64, next: &mut u8) -> Reply {
        let cluster = ctx.cfg.cluster.filter(|g| g.member == ctx.member);
        let replicated = ctx.cfg.is_group(ctx.member) || cluster.is_some();
        let durable_now = self.durable_now(ctx.cfg, ctx.member);
        let run = self.run;
        let mut begin = |since: i64, cause: Cause, marker: &mut Option<Marker>| {
            let epoch = *next;
            *next += 1;
            *marker = Some(Marker {
                epoch,
                run,
                since,
                durable: durable_now,
                vouched: false,
                cause,
            });
            Reply::Epoch {
                epoch,
                since,
                now_m,
                vouched: false,
                id: run,
            }
        };
        let Some(mut m) = self.data.marker else {
            // Absent: first seen by anyone, or the data was lost. "Lost just now".
            let cause = if ctx.known {
                Cause::Lost
            } else {
                Cause::FirstSeen
            };
            return begin(now_m, cause, &mut self.data.marker);
        };
        // Control (c): a marker confirmed by another node (the slot's shard failed over, or
        // the slot moved) is taken as the same epoch.
        let kept = cluster.is_some_and(|g| !g.node_change_new_epoch);
        if m.run != self.run {
            if kept || redquorum::rules::same_incarnation(false, m.durable, durable_now, replicated)
            {
                // Nothing was lost: keep the epoch, confirm it for this incarnation.
                m.run = self.run;
                self.data.marker = Some(m);
            } else {
                let boot = if replicated {
                    now_m
                } else {
                    restart_anchor_ms(anchor, now_m, self.uptime_s(now_m))
                };
                return begin(boot.max(m.since), Cause::Lost, &mut self.data.marker);
            }
        } else {
            let cleared = m.durable && !durable_now;
            m.durable &= durable_now;
            self.data.marker = Some(m);
            if cleared && ctx.cfg.observe == (Observe::EveryWrite { fsync_clear: true }) {
                self.fsync();
            }
        }
        Reply::Epoch {
            epoch: m.epoch,
            since: m.since,
            now_m,
            vouched: m.vouched,
            id: run,
        }
    }

    /// `commission.lua` with the checks `guard-v3.md` puts before it: refused when the
    /// server holds lock keys or its epoch began for another reason than a first sight;
    /// the memory check is the caller's. Returns whether it was commissioned.
    pub(crate) fn commission(&mut self, cfg: &Config, member: usize, epoch: u8) -> bool {
        if !self.data.holders.is_empty()
            || self
                .data
                .marker
                .is_some_and(|m| m.cause != Cause::FirstSeen)
        {
            return false;
        }
        self.data.marker = Some(Marker {
            epoch,
            run: self.run,
            since: -(BASE_MS as i64),
            durable: self.durable_now(cfg, member),
            vouched: true,
            cause: Cause::Commissioned,
        });
        true
    }

    /// A restart at master clock `now_m`: what survives is what was on disk (everything,
    /// for a durable server not switched to `everysec`); without persistence the lock
    /// keys, records, counters and memory are lost, and the marker too unless
    /// `keep_marker`. The configuration file says `always` again.
    pub(crate) fn restart(&mut self, durable: bool, keep_marker: bool, now_m: i64) {
        if durable {
            if let Some(disk) = self.disk.take() {
                self.data = *disk;
            }
        } else {
            let marker = self.data.marker.filter(|_| keep_marker);
            let old_marker = self.data.old_marker.filter(|_| keep_marker);
            self.data = Data {
                marker,
                old_marker,
                ..Data::default()
            };
        }
        self.everysec = false;
        self.disk = None;
        self.run += 1;
        self.boot = now_m;
    }

    /// `CONFIG SET appendfsync everysec`: from now on writes reach the disk only at an
    /// fsync, and a crash comes back with what was there at the switch (an
    /// over-approximation of "the last second": the runs are a few seconds long).
    pub(crate) fn config_set_everysec(&mut self) {
        self.everysec = true;
        self.disk = Some(Box::new(self.data.clone()));
    }
}

impl Data {
    /// Drops what has expired at clock `now_m`.
    pub fn expire(&mut self, now_m: i64) {
        self.holders.retain(|e| now_m <= e.expiry);
        self.records.retain(|&(_, s)| s > now_m);
    }

    /// `record_ttl` (prelude.lua): `ZADD ttls GT (now + 2·ttl) ttl`.
    pub fn record(&mut self, ttl: u64, now_m: i64) {
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

    /// Whether `value` may take `mode` on resource `res` under `kind`.
    fn admits(&self, kind: Kind, mode: Mode, value: Value, res: u8) -> bool {
        if self.holders.iter().any(|e| e.value == value) {
            // Never re-entered: a duplicate of our own acquire is refused like `SET NX`.
            return false;
        }
        let mut here = self.holders.iter().filter(|e| e.res == res);
        match (kind, mode) {
            (Kind::Mutex, _) | (Kind::ReadWrite, Mode::Write) => here.next().is_none(),
            (Kind::ReadWrite, Mode::Read) => here.all(|e| e.mode == Mode::Read),
            (Kind::Semaphore(k), _) => here.count() < k,
        }
    }

    /// The data lost in a flush or a restart without persistence.
    pub fn wipe(&mut self) {
        *self = Data::default();
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
