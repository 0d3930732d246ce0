//! The stateright model: the initial state, every step the clients, the network and the
//! environment may take, and the properties.

use stateright::{Model, Property};

use crate::client;
use crate::cluster;
use crate::config::{Config, GuardMode, Kind, MasterStart, Mode, SlotEpochs};
use crate::faults;
use crate::generation;
use crate::group;
use crate::guard;
use crate::log::Log;
use crate::master::{Ctx, Reply};
use crate::state::{
    BASE_MS, Budget, Cause, Client, Cluster, History, Marker, Master, Next, Phase, Req, Slot,
    State, Verify, View,
};

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Real time advances by one tick; open rounds time out.
    Tick,
    /// Client starts an acquisition of one of its locks.
    Acquire(u8, u8),
    /// Client releases one of its locks.
    Release(u8, u8),
    /// Client's renewal tick: every held lock with extensions left, in one batch.
    Extend(u8),
    /// Client's caller drops an acquisition mid-round.
    Cancel(u8, u8),
    /// The oldest request on a connection (client, place) reaches its server; the reply
    /// comes back.
    Deliver(u8, u8),
    /// The same, but the reply is lost.
    LoseReply(u8, u8),
    /// The oldest request on a connection is delivered and stays queued (a duplicate).
    Duplicate(u8, u8),
    /// The oldest request on a connection is lost.
    Drop(u8, u8),
    /// Delivered to a Sentinel group's primary, whose replica does not acknowledge it
    /// within `WAIT`'s timeout (replication lag).
    Lag(u8, u8),
    /// The connection is torn down on an I/O error; the server keeps what was written.
    Teardown(u8, u8),
    /// The server processes the oldest request of a torn-down connection.
    DeliverStale(u8, u8),
    /// The server discards what is left of a torn-down connection.
    DropStale(u8, u8),
    /// A member's server restarts at once. A durable one comes back with its disk;
    /// another loses its lock keys, ttl records and counters, and keeps its epoch marker
    /// iff the flag is set (an RDB or `everysec` file with the marker in it).
    Restart(u8, bool),
    /// `FLUSHALL` on a member that stays up.
    Flush(u8),
    /// A member's clock jumps ahead.
    Gain(u8),
    /// `CONFIG SET appendfsync everysec` on a durable member.
    ConfigSet(u8),
    /// A member's server is replaced by a new, empty one.
    Replace(u8),
    /// An operator commissions a member.
    Commission(u8),
    /// The Sentinel group fails over to its replica.
    Failover,
    /// The group's replica catches up with its primary.
    Sync,
    /// A shard of the cluster member fails over to its replica.
    ShardFailover(u8),
    /// A slot of the cluster member moves to the other shard, keys and all.
    Move(u8),
}

/// A model instance.
#[derive(Debug, Clone)]
pub struct Redlock {
    /// Its configuration.
    pub cfg: Config,
}

impl Redlock {
    /// The model of `cfg`.
    pub fn new(cfg: Config) -> Self {
        Self { cfg }
    }

    /// Applies `action` to `s`, noting what happened in `log`. Returns `false` when the
    /// action is not enabled.
    pub(crate) fn apply(&self, s: &mut State, action: Action, log: &mut Log) -> bool {
        let cfg = &self.cfg;
        let now = s.now(cfg.tick_ms);
        match action {
            Action::Tick => {
                s.tick += 1;
                let now = s.now(cfg.tick_ms);
                for m in &mut s.masters {
                    m.expire(m.clock(now));
                }
                client::tick(cfg, s, log);
            }
            Action::Acquire(c, l) => client::acquire(cfg, s, c.into(), l.into()),
            Action::Release(c, l) => client::release(cfg, s, c.into(), l.into()),
            Action::Extend(c) => client::extend(cfg, s, c.into()),
            Action::Cancel(c, l) => client::cancel(cfg, s, c.into(), l.into(), log),
            Action::Deliver(c, p)
            | Action::LoseReply(c, p)
            | Action::Duplicate(c, p)
            | Action::Lag(c, p) => {
                let (c, p) = (usize::from(c), usize::from(p));
                let chan = &mut s.chans[c * cfg.places() + p];
                let req = match action {
                    Action::Duplicate(..) => chan[0],
                    _ => chan.remove(0),
                };
                match action {
                    Action::Duplicate(..) => s.budget.duplicates -= 1,
                    Action::LoseReply(..) => s.budget.losses -= 1,
                    _ => {}
                }
                let reply = match cluster::route(cfg, s, c, p) {
                    Some(srv) => self.execute(s, c, p, srv, req, action, log),
                    None => cluster::moved(cfg, s, p),
                };
                log.note(|| format!("=> {}", crate::trace::reply(&reply)));
                if !matches!(action, Action::LoseReply(..)) {
                    client::on_reply(cfg, s, c, p, req, reply, log);
                }
            }
            Action::Drop(c, p) => {
                s.chans[usize::from(c) * cfg.places() + usize::from(p)].remove(0);
                s.budget.losses -= 1;
            }
            Action::Teardown(c, m) => generation::teardown(cfg, s, c.into(), m.into(), log),
            Action::DeliverStale(c, m) => {
                generation::deliver_stale(cfg, s, c.into(), m.into(), log)
            }
            Action::DropStale(c, m) => generation::drop_stale(cfg, s, c.into(), m.into()),
            Action::Restart(m, keep_marker) => faults::restart(cfg, s, m.into(), keep_marker),
            Action::Flush(m) => faults::flush(s, m.into()),
            Action::Gain(m) => {
                s.budget.gains -= 1;
                let master = &mut s.masters[usize::from(m)];
                master.gain += cfg.faults.gain_ms as i64;
                master.expire(master.clock(now));
            }
            Action::ConfigSet(m) => faults::config_set(s, m.into()),
            Action::Replace(m) => faults::replace(cfg, s, m.into()),
            Action::Commission(m) => faults::commission(cfg, s, m.into()),
            Action::Failover => group::failover(cfg, s),
            Action::Sync => group::sync(cfg, s),
            Action::ShardFailover(h) => cluster::failover(cfg, s, h),
            Action::Move(hs) => cluster::migrate(cfg, s, hs),
        }
        self.settle(s, log);
        true
    }

    /// Runs `req` from client `c` (on its connection to place `p`) on server `srv`, with
    /// the `WAIT` that follows it on a Sentinel group or a cluster shard; the answer.
    #[allow(clippy::too_many_arguments)]
    fn execute(
        &self,
        s: &mut State,
        c: usize,
        p: usize,
        srv: usize,
        req: Req,
        action: Action,
        log: &mut Log,
    ) -> Reply {
        let cfg = &self.cfg;
        let now = s.now(cfg.tick_ms);
        let m = cfg.member_of(p);
        let now_m = s.masters[srv].clock(now);
        let ctx = Ctx {
            cfg,
            member: m,
            known: s.clients[c].views[cfg.epoch_place(p)].known,
            records: cfg.records_at(p),
        };
        let durable = |s: &State| s.masters[srv].data.marker.is_some_and(|m| m.durable);
        let was_durable = durable(s);
        let mut reply = s.masters[srv].apply(ctx, req, now_m, &mut s.next_epoch, &mut s.history);
        if was_durable && !durable(s) {
            log.note(|| {
                let disk = if s.masters[srv]
                    .disk
                    .as_ref()
                    .is_some_and(|d| d.marker.is_some_and(|m| !m.durable))
                {
                    "on disk (WAITAOF)"
                } else {
                    "not on disk yet"
                };
                format!("CONFIG GET says everysec: durable cleared in the marker, {disk}")
            });
        }
        let acked = !matches!(action, Action::Lag(..));
        if group::waits(cfg, m, &req) {
            reply = group::wait(cfg, s, srv, acked, reply);
        }
        if cluster::waits(cfg, p, &req) {
            reply = cluster::wait(cfg, s, c, p, acked, reply);
        }
        // Control (a): a grant in a slot without a marker of its own is checked against the
        // member's marker, in slot `s0` (a second request: it cannot be read atomically).
        if let (Some(g), Reply::Granted { epoch, .. }) = (cfg.cluster, &mut reply)
            && g.epochs == SlotEpochs::PerMember
            && cfg.in_cluster(p)
            && cfg.slot_at(p) != 0
        {
            let srv0 = cluster::follow(cfg, s, c, cfg.place(m, 0));
            *epoch = s.masters[srv0].data.marker.map(|mk| mk.epoch);
        }
        reply
    }

    /// Delivers every release that has reached the head of its current connection, and
    /// brings the state to a canonical form (fewer states, same behaviours).
    ///
    /// Releases are delivered as soon as the requests sent before them on the same
    /// connection are (FIFO), never delayed further or lost: a release only deletes the
    /// releaser's own entry, so delaying it only keeps others out longer (a lost release
    /// leaves the key to its ttl, which is the same for safety). A release on a torn-down
    /// connection is not: whether it runs is finding 5.
    fn settle(&self, s: &mut State, log: &mut Log) {
        let cfg = &self.cfg;
        let places = cfg.places();
        let now = s.now(cfg.tick_ms);
        for c in 0..s.clients.len() {
            for p in 0..places {
                while let Some(&req @ Req::Release { value }) = s.chans[c * places + p].first() {
                    s.chans[c * places + p].remove(0);
                    // A release follows a `MOVED` (it can only delete our own keys).
                    let srv = cluster::follow(cfg, s, c, p);
                    let m = cfg.member_of(p);
                    let now_m = s.masters[srv].clock(now);
                    let ctx = Ctx {
                        cfg,
                        member: m,
                        known: false,
                        records: cfg.records_at(p),
                    };
                    let reply =
                        s.masters[srv].apply(ctx, req, now_m, &mut s.next_epoch, &mut s.history);
                    if cfg.generations.is_some() {
                        s.masters[srv].released |= 1 << value;
                    }
                    log.note(|| {
                        format!(
                            "{}: {} => {}",
                            crate::trace::place(cfg, p),
                            crate::trace::req(&req),
                            crate::trace::reply(&reply)
                        )
                    });
                }
            }
        }
        for (ci, c) in s.clients.iter_mut().enumerate() {
            // A client with nothing left to do: its views and caches no longer matter.
            let spec = cfg.clients[ci];
            if c.idle() && c.slots.iter().all(|l| l.started >= spec.acquisitions) {
                c.views.iter_mut().for_each(|v| *v = guard::unverified());
                c.recorded.iter_mut().for_each(|r| *r = None);
                c.longest_ms = 0;
                c.route = s.cluster.owner;
            }
        }
        if cfg.v2() {
            canonical_epochs(s);
        }
    }

    /// Locks held now: `(client, lock, mode, resources)`.
    pub fn holders(&self, s: &State) -> Vec<(usize, usize, Mode, u8)> {
        let now = s.now(self.cfg.tick_ms);
        let mut out = Vec::new();
        for (c, client) in s.clients.iter().enumerate() {
            for (l, slot) in client.slots.iter().enumerate() {
                if slot.held(now).is_some() {
                    let spec = self.cfg.clients[c];
                    out.push((c, l, spec.mode, spec.locks[l]));
                }
            }
        }
        out
    }
}

impl Model for Redlock {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let cfg = &self.cfg;
        let n = cfg.n();
        let commissioned = cfg
            .masters
            .iter()
            .enumerate()
            .filter(|(_, m)| m.start == MasterStart::Commissioned)
            .fold(0u8, |set, (i, _)| set | 1 << i);
        let mut masters: Vec<Master> = cfg
            .masters
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let mut m = Master::new(0);
                if spec.start == MasterStart::Commissioned {
                    m.data.marker = Some(Marker {
                        epoch: i as u8,
                        run: 0,
                        since: -(BASE_MS as i64),
                        durable: m.durable_now(cfg, i),
                        vouched: true,
                        cause: Cause::Commissioned,
                    });
                    m.data.old_marker = Some(0);
                    if cfg.tracks_memory() {
                        m.data.members = commissioned & !(1 << i);
                    }
                }
                m
            })
            .collect();
        if let Some(g) = cfg.group {
            // The replica: a copy of the primary's data, its own run_id.
            let mut replica = Master::new(128);
            replica.data = masters[g.member].data.clone();
            masters.push(replica);
        }
        let places = cfg.places();
        if let Some(g) = cfg.cluster {
            assert!(
                cfg.group.is_none() && cfg.generations.is_none() && cfg.faults.commissions == 0,
                "a cluster member beside a Sentinel group, generations or commissioning is not modelled"
            );
            assert!(
                cfg.clients
                    .iter()
                    .flat_map(|c| c.locks)
                    .all(|l| l & 0b0101_0101 == 0 || l & 0b1010_1010 == 0),
                "a lock across two slots of a cluster member is not modelled"
            );
            assert!(
                cfg.epochs().is_some_and(|e| e.atomic_reads)
                    && cfg.faults.on & (1 << g.member) == 0,
                "a cluster member is modelled with atomic reads and no restarts of its own"
            );
            // Every node's data set of each slot, after the members (`cluster::server`):
            // `s0` on `A` (the member's own index, made above), `s1` on `B`, each replica a
            // copy of its primary. Each slot has its own commissioned marker (control (a):
            // only `s0` has one, the member's).
            for node in 0..cluster::NODES {
                for hs in 0..2 {
                    if (node, hs) != (0, 0) {
                        masters.push(Master::new(cluster::run(node)));
                    }
                }
            }
            if g.epochs == SlotEpochs::PerSlot {
                let b1 = cluster::server(cfg, 2, 1);
                masters[b1].data.marker = Some(Marker {
                    epoch: n as u8,
                    run: cluster::run(2),
                    since: -(BASE_MS as i64),
                    durable: false,
                    vouched: true,
                    cause: Cause::Commissioned,
                });
            }
            for h in 0..2 {
                for hs in 0..2 {
                    let data = masters[cluster::server(cfg, 2 * h, hs)].data.clone();
                    masters[cluster::server(cfg, 2 * h + 1, hs)].data = data;
                }
            }
        }
        let clients = cfg
            .clients
            .iter()
            .map(|spec| Client {
                slots: (0..spec.slots()).map(|_| Slot::new()).collect(),
                views: (0..places)
                    .map(|p| match (cfg.masters[cfg.member_of(p)].start, cfg.guard) {
                        (MasterStart::FirstSeen, _) => guard::unverified(),
                        (_, GuardMode::Old) => guard::verified(0),
                        _ if cfg.epoch_place(p) != p => guard::unverified(),
                        _ if cfg.in_cluster(p) => View {
                            // Verified on the slot's first node.
                            id: cluster::run(2 * cfg.slot_at(p)),
                            ..guard::verified(p as u8)
                        },
                        _ => guard::verified(p as u8),
                    })
                    .collect(),
                longest_ms: spec.ttl_ms,
                recorded: vec![None; places],
                on_new_primary: false,
                route: [0, 2],
            })
            .collect();
        let f = cfg.faults;
        let chans = places * cfg.clients.len();
        let mut s = State {
            tick: 0,
            masters,
            clients,
            chans: vec![Vec::new(); chans],
            stale: Vec::new(),
            budget: Budget {
                data_losses: f.data_losses,
                durable_restarts: f.durable_restarts,
                gains: f.gains,
                losses: cfg.net.losses,
                duplicates: cfg.net.duplicates,
                config_sets: f.config_sets,
                replacements: f.replacements,
                commissions: f.commissions,
                failovers: if cfg.group.is_some() || cfg.cluster.is_some() {
                    f.failovers
                } else {
                    0
                },
                moves: if cfg.cluster.is_some() { f.moves } else { 0 },
                teardowns: if cfg.generations.is_some() {
                    f.teardowns
                } else {
                    0
                },
            },
            next_epoch: places as u8,
            failed_over: false,
            cluster: Cluster {
                owner: [0, 2],
                failed: 0,
                back: 0,
                cut: 0,
            },
            history: History::default(),
            classes: crate::symmetry::classes(cfg),
        };
        for c in 0..cfg.clients.len() {
            for (m, spec) in cfg.masters.iter().enumerate() {
                if spec.start == MasterStart::FirstSeen {
                    guard::need(cfg, &mut s, c, m);
                }
            }
        }
        if cfg.v2() {
            canonical_epochs(&mut s);
        }
        vec![s]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        let cfg = &self.cfg;
        let now = s.now(cfg.tick_ms);
        if s.tick < cfg.horizon {
            actions.push(Action::Tick);
        }
        for (ci, c) in s.clients.iter().enumerate() {
            let id = ci as u8;
            let spec = cfg.clients[ci];
            let mut renew = false;
            for (li, slot) in c.slots.iter().enumerate() {
                let l = li as u8;
                match &slot.phase {
                    Phase::Idle if slot.started < spec.acquisitions => {
                        actions.push(Action::Acquire(id, l))
                    }
                    Phase::Holding(h) if h.live(now) => {
                        actions.push(Action::Release(id, l));
                        renew |= h.extensions_left > 0;
                    }
                    Phase::Acquiring(_)
                    | Phase::Fencing { .. }
                    | Phase::Recording(_, Next::Acquire)
                        if cfg.cancel =>
                    {
                        actions.push(Action::Cancel(id, l))
                    }
                    _ => {}
                }
            }
            if renew {
                actions.push(Action::Extend(id));
            }
            let places = cfg.places();
            for p in 0..places {
                let (m, mi) = (cfg.member_of(p), p as u8);
                if s.stale_head(ci * places + p).is_some() {
                    actions.push(Action::DeliverStale(id, mi));
                    actions.push(Action::DropStale(id, mi));
                }
                let Some(head) = s.chans[ci * places + p].first() else {
                    continue;
                };
                actions.push(Action::Deliver(id, mi));
                // Message faults on the requests whose loss or repetition the protocol
                // must survive; a lost verification or read is a timeout, retried later.
                if head.lock_op() && s.budget.losses > 0 {
                    actions.push(Action::LoseReply(id, mi));
                    actions.push(Action::Drop(id, mi));
                }
                if head.lock_op() && s.budget.duplicates > 0 {
                    actions.push(Action::Duplicate(id, mi));
                }
                let lags = (group::waits(cfg, m, head)
                    && group::linked(cfg, s, group::server(cfg, s, ci, m)))
                    || (cluster::waits(cfg, p, head) && cluster::linked(cfg, s, ci, p));
                if lags {
                    actions.push(Action::Lag(id, mi));
                }
                if s.budget.teardowns > 0 && cfg.faults.on & (1 << m) != 0 {
                    actions.push(Action::Teardown(id, mi));
                }
            }
        }
        for (mi, spec) in cfg.masters.iter().enumerate() {
            let m = mi as u8;
            if cfg.faults.on & (1 << mi) == 0 {
                continue;
            }
            if spec.durable && s.budget.durable_restarts > 0 {
                actions.push(Action::Restart(m, true));
            }
            if !spec.durable && s.budget.data_losses > 0 {
                actions.push(Action::Restart(m, false));
                if cfg.guard != GuardMode::Off && cfg.faults.keep_marker {
                    actions.push(Action::Restart(m, true));
                }
            }
            if cfg.faults.flush && s.budget.data_losses > 0 {
                actions.push(Action::Flush(m));
            }
            if s.budget.gains > 0 {
                actions.push(Action::Gain(m));
            }
            if spec.durable && s.budget.config_sets > 0 && !s.masters[mi].everysec {
                actions.push(Action::ConfigSet(m));
            }
            if s.budget.replacements > 0 {
                actions.push(Action::Replace(m));
            }
            if s.budget.commissions > 0 && faults::commission_accepted(cfg, s, mi) {
                actions.push(Action::Commission(m));
            }
        }
        if s.budget.failovers > 0 && cfg.group.is_some() {
            actions.push(Action::Failover);
        }
        if group::behind(cfg, s) {
            actions.push(Action::Sync);
        }
        if let Some(g) = cfg.cluster {
            for h in 0..2 {
                let fails = g.fail_shards & (1 << h) != 0;
                if fails && s.budget.failovers > 0 && cluster::may_fail_over(s, h) {
                    actions.push(Action::ShardFailover(h));
                }
                if g.move_slots & (1 << h) != 0 && s.budget.moves > 0 {
                    actions.push(Action::Move(h));
                }
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = last.clone();
        self.apply(&mut s, action, &mut Log::quiet()).then_some(s)
    }

    fn format_action(&self, action: &Action) -> String {
        format!("{action:?}")
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut props = vec![
            Property::always(OVERWRITE, |_, s: &State| s.history.overwrite.is_none()),
            Property::sometimes("a client acquires", |_, s: &State| s.history.acquired > 0),
            Property::sometimes("a second client acquires", |_, s: &State| {
                s.history.holders.count_ones() >= 2
            }),
        ];
        props.push(match self.cfg.kind {
            Kind::Mutex => Property::always(MUTEX, |m: &Redlock, s: &State| {
                let h = m.holders(s);
                h.iter()
                    .enumerate()
                    .all(|(i, a)| h[i + 1..].iter().all(|b| a.3 & b.3 == 0))
            }),
            Kind::ReadWrite => Property::always(WRITERS, |m: &Redlock, s: &State| {
                let h = m.holders(s);
                h.len() <= 1 || h.iter().all(|&(_, _, mode, _)| mode == Mode::Read)
            }),
            Kind::Semaphore(_) => Property::always(PERMITS, |m: &Redlock, s: &State| {
                let Kind::Semaphore(k) = m.cfg.kind else {
                    return true;
                };
                m.holders(s).len() <= k
            }),
        });
        if self.cfg.clients.iter().any(|c| c.fenced) {
            props.push(Property::always(TOKENS, |_, s: &State| {
                !s.history.token_regressed
            }));
        }
        if self.cfg.generations.is_some() {
            props.push(Property::always(RELEASED, |_, s: &State| {
                s.masters.iter().all(|m| {
                    m.data
                        .holders
                        .iter()
                        .all(|e| m.released & (1 << e.value) == 0)
                })
            }));
        }
        props
    }
}

/// Property: no two holders of a resource at any real time.
pub const MUTEX: &str = "mutual exclusion";
/// Property: a writer holds alone.
pub const WRITERS: &str = "writers never overlap any holder";
/// Property: at most `k` holders of a semaphore.
pub const PERMITS: &str = "at most k permit holders";
/// Property: fencing tokens increase across holders.
pub const TOKENS: &str = "fencing tokens strictly increase";
/// Property: no operation changes an entry holding another holder's value.
pub const OVERWRITE: &str = "no entry overwritten";
/// Property: once a server has answered a release, no key of that lock is on it.
pub const RELEASED: &str = "no key outlives its completed release";

/// Renumbers epochs in order of first appearance (markers, disks, views, requests), so
/// that states that differ only in which fresh id an epoch got are one state. Epochs are
/// only ever compared for equality, and a fresh one is `next_epoch`, above every id in use.
pub(crate) fn canonical_epochs(s: &mut State) {
    let mut map: Vec<u8> = Vec::new();
    let mut id = |e: &mut u8| {
        let i = match map.iter().position(|x| x == e) {
            Some(i) => i,
            None => {
                map.push(*e);
                map.len() - 1
            }
        };
        *e = i as u8;
    };
    for m in &mut s.masters {
        if let Some(mk) = &mut m.data.marker {
            id(&mut mk.epoch);
        }
        if let Some(mk) = m.disk.as_mut().and_then(|d| d.marker.as_mut()) {
            id(&mut mk.epoch);
        }
    }
    for c in &mut s.clients {
        for v in &mut c.views {
            if let Some(e) = &mut v.verified {
                id(e);
            }
            if let Verify::Reading(r) = &mut v.verify {
                id(&mut r.epoch);
            }
        }
    }
    let stale = s.stale.iter_mut().map(|(_, r)| r);
    for r in s.chans.iter_mut().flatten().chain(stale) {
        if let Req::Vouch { epoch, .. } = r {
            id(epoch);
        }
    }
    s.next_epoch = map.len() as u8;
}
