//! The stateright model: the initial state, every step the clients, the network and the
//! environment may take, and the properties.

use stateright::{Model, Property};

use crate::client;
use crate::config::{Config, GuardMode, Kind, MasterStart, Mode};
use crate::guard;
use crate::log::Log;
use crate::state::{BASE_MS, Budget, Client, History, Marker, Master, Next, Phase, Req, State};

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Real time advances by one tick; open rounds time out.
    Tick,
    /// Client starts an acquisition.
    Acquire(u8),
    /// Client releases its lock.
    Release(u8),
    /// Client extends its lock (`extend_with`, or a keep-alive renewal).
    Extend(u8),
    /// Client's caller drops its acquisition mid-round.
    Cancel(u8),
    /// The oldest request on a connection reaches its master; the reply comes back.
    Deliver(u8, u8),
    /// The same, but the reply is lost.
    LoseReply(u8, u8),
    /// The oldest request on a connection is delivered and stays queued (a duplicate).
    Duplicate(u8, u8),
    /// The oldest request on a connection is lost.
    Drop(u8, u8),
    /// A master restarts at once. A durable one keeps everything; another loses its lock
    /// keys, ttl records and counters, and keeps its epoch marker iff the flag is set
    /// (an RDB or `everysec` file with the marker in it).
    Restart(u8, bool),
    /// `FLUSHALL` on a master that stays up.
    Flush(u8),
    /// A master's clock jumps ahead.
    Gain(u8),
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
        let n = cfg.n();
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
            Action::Acquire(c) => client::acquire(cfg, s, c.into()),
            Action::Release(c) => client::release(cfg, s, c.into()),
            Action::Extend(c) => client::extend(cfg, s, c.into()),
            Action::Cancel(c) => client::cancel(cfg, s, c.into(), log),
            Action::Deliver(c, m) | Action::LoseReply(c, m) | Action::Duplicate(c, m) => {
                let (c, m) = (usize::from(c), usize::from(m));
                let chan = &mut s.chans[c * n + m];
                let req = match action {
                    Action::Duplicate(..) => chan[0],
                    _ => chan.remove(0),
                };
                match action {
                    Action::Duplicate(..) => s.budget.duplicates -= 1,
                    Action::LoseReply(..) => s.budget.losses -= 1,
                    _ => {}
                }
                let now_m = s.masters[m].clock(now);
                let reply =
                    s.masters[m].apply(cfg, m, req, now_m, &mut s.next_epoch, &mut s.history);
                log.note(|| format!("=> {}", crate::trace::reply(&reply)));
                if !matches!(action, Action::LoseReply(..)) {
                    client::on_reply(cfg, s, c, m, req, reply, log);
                }
            }
            Action::Drop(c, m) => {
                s.chans[usize::from(c) * n + usize::from(m)].remove(0);
                s.budget.losses -= 1;
            }
            Action::Restart(m, keep_marker) => {
                let mi = usize::from(m);
                let durable = cfg.masters[mi].durable;
                let master = &mut s.masters[mi];
                if durable {
                    s.budget.durable_restarts -= 1;
                } else {
                    s.budget.data_losses -= 1;
                    master.holders.clear();
                    master.records.clear();
                    master.counter = 0;
                    if !keep_marker {
                        master.marker = None;
                        master.old_marker = None;
                    }
                }
                master.run += 1;
                master.boot = master.clock(now);
                // A restart breaks every connection: what was in flight is lost, and the v2
                // guard verifies each new connection before its grants count.
                for c in 0..s.clients.len() {
                    s.chans[c * n + mi].clear();
                    if let GuardMode::V2 {
                        per_connection: true,
                        ..
                    } = cfg.guard
                    {
                        s.clients[c].views[mi] = guard::unverified();
                        guard::need(cfg, s, c, mi);
                    }
                }
            }
            Action::Flush(m) => {
                s.budget.data_losses -= 1;
                let master = &mut s.masters[usize::from(m)];
                master.holders.clear();
                master.records.clear();
                master.counter = 0;
                master.marker = None;
                master.old_marker = None;
            }
            Action::Gain(m) => {
                s.budget.gains -= 1;
                let master = &mut s.masters[usize::from(m)];
                master.gain += cfg.faults.gain_ms as i64;
                master.expire(master.clock(now));
            }
        }
        self.settle(s, log);
        true
    }

    /// Delivers every release that has reached the head of its connection, and brings the
    /// state to a canonical form (fewer states, same behaviours).
    ///
    /// Releases are delivered as soon as the requests sent before them on the same
    /// connection are (FIFO), never delayed further or lost: a release only deletes the
    /// releaser's own entry, so delaying it only keeps others out longer (a lost release
    /// leaves the key to its ttl, which is the same for safety).
    fn settle(&self, s: &mut State, log: &mut Log) {
        let cfg = &self.cfg;
        let n = cfg.n();
        let now = s.now(cfg.tick_ms);
        for c in 0..s.clients.len() {
            for m in 0..n {
                while let Some(&req @ Req::Release { .. }) = s.chans[c * n + m].first() {
                    s.chans[c * n + m].remove(0);
                    let now_m = s.masters[m].clock(now);
                    let reply =
                        s.masters[m].apply(cfg, m, req, now_m, &mut s.next_epoch, &mut s.history);
                    log.note(|| {
                        format!(
                            "m{m}: {} => {}",
                            crate::trace::req(&req),
                            crate::trace::reply(&reply)
                        )
                    });
                }
            }
        }
        for (ci, c) in s.clients.iter_mut().enumerate() {
            // A client with nothing left to do: its views and caches no longer matter.
            if c.phase == Phase::Idle && c.started >= cfg.clients[ci].acquisitions {
                c.views.iter_mut().for_each(|v| *v = guard::unverified());
                c.recorded.iter_mut().for_each(|r| *r = None);
                c.longest_ms = 0;
            }
        }
        if cfg.v2() {
            canonical_epochs(s);
        }
    }

    /// Clients holding the lock now, with their modes.
    pub fn holders(&self, s: &State) -> Vec<(usize, Mode)> {
        let now = s.now(self.cfg.tick_ms);
        s.clients
            .iter()
            .enumerate()
            .filter(|(_, c)| c.held(now).is_some())
            .map(|(i, _)| (i, self.cfg.clients[i].mode))
            .collect()
    }
}

impl Model for Redlock {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let cfg = &self.cfg;
        let n = cfg.n();
        let masters: Vec<Master> = cfg
            .masters
            .iter()
            .enumerate()
            .map(|(i, spec)| {
                let mut m = Master::new();
                if spec.start == MasterStart::Commissioned {
                    m.marker = Some(Marker {
                        epoch: i as u8,
                        run: 0,
                        since: -(BASE_MS as i64),
                        durable: spec.durable,
                    });
                    m.old_marker = Some(0);
                }
                m
            })
            .collect();
        let clients = cfg
            .clients
            .iter()
            .map(|spec| Client {
                phase: Phase::Idle,
                started: 0,
                views: cfg
                    .masters
                    .iter()
                    .enumerate()
                    .map(|(i, m)| match (m.start, cfg.guard) {
                        (MasterStart::FirstSeen, _) => guard::unverified(),
                        (_, GuardMode::Old) => guard::verified(0),
                        _ => guard::verified(i as u8),
                    })
                    .collect(),
                longest_ms: spec.ttl_ms,
                recorded: vec![None; n],
            })
            .collect();
        let f = cfg.faults;
        let mut s = State {
            tick: 0,
            masters,
            clients,
            chans: vec![Vec::new(); n * cfg.clients.len()],
            budget: Budget {
                data_losses: f.data_losses,
                durable_restarts: f.durable_restarts,
                gains: f.gains,
                losses: cfg.net.losses,
                duplicates: cfg.net.duplicates,
            },
            next_epoch: n as u8,
            history: History::default(),
        };
        for c in 0..cfg.clients.len() {
            for (m, spec) in cfg.masters.iter().enumerate() {
                if spec.start == MasterStart::FirstSeen {
                    guard::need(cfg, &mut s, c, m);
                }
            }
        }
        vec![s]
    }

    fn actions(&self, s: &State, actions: &mut Vec<Action>) {
        let cfg = &self.cfg;
        let n = cfg.n();
        let now = s.now(cfg.tick_ms);
        if s.tick < cfg.horizon {
            actions.push(Action::Tick);
        }
        for (ci, c) in s.clients.iter().enumerate() {
            let id = ci as u8;
            let spec = cfg.clients[ci];
            match &c.phase {
                Phase::Idle if c.started < spec.acquisitions => actions.push(Action::Acquire(id)),
                Phase::Holding(h) if h.live(now) => {
                    actions.push(Action::Release(id));
                    if h.extensions_left > 0 {
                        actions.push(Action::Extend(id));
                    }
                }
                Phase::Acquiring(_)
                | Phase::Fencing { .. }
                | Phase::Recording(_, Next::Acquire)
                    if cfg.cancel =>
                {
                    actions.push(Action::Cancel(id))
                }
                _ => {}
            }
            for m in 0..n {
                let Some(head) = s.chans[ci * n + m].first() else {
                    continue;
                };
                let mi = m as u8;
                actions.push(Action::Deliver(id, mi));
                // Message faults on the requests whose loss or repetition the protocol
                // must survive; a lost verification or read is a timeout, retried later.
                let lock_op = matches!(
                    head,
                    Req::Acquire { .. } | Req::Extend { .. } | Req::Fence { .. }
                );
                if lock_op && s.budget.losses > 0 {
                    actions.push(Action::LoseReply(id, mi));
                    actions.push(Action::Drop(id, mi));
                }
                if lock_op && s.budget.duplicates > 0 {
                    actions.push(Action::Duplicate(id, mi));
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
            Property::always("no entry overwritten", |_, s: &State| {
                s.history.overwrite.is_none()
            }),
            Property::sometimes("a client acquires", |_, s: &State| s.history.acquired > 0),
            Property::sometimes("a second client acquires", |_, s: &State| {
                s.history.holders.count_ones() >= 2
            }),
        ];
        props.push(match self.cfg.kind {
            Kind::Mutex => {
                Property::always(MUTEX, |m: &Redlock, s: &State| m.holders(s).len() <= 1)
            }
            Kind::ReadWrite => Property::always(WRITERS, |m: &Redlock, s: &State| {
                let h = m.holders(s);
                h.len() <= 1 || h.iter().all(|&(_, mode)| mode == Mode::Read)
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
        props
    }
}

/// Property: at most one holder of a mutex at any real time.
pub const MUTEX: &str = "mutual exclusion";
/// Property: a writer holds alone.
pub const WRITERS: &str = "writers never overlap any holder";
/// Property: at most `k` holders of a semaphore.
pub const PERMITS: &str = "at most k permit holders";
/// Property: fencing tokens increase across holders.
pub const TOKENS: &str = "fencing tokens strictly increase";
/// Property: no operation changes an entry holding another holder's value.
pub const OVERWRITE: &str = "no entry overwritten";

/// Renumbers epochs in order of first appearance (markers, then views), so that states
/// that differ only in which fresh id an epoch got are one state. Epochs are only ever
/// compared for equality, and a fresh one is `next_epoch`, above every id in use.
fn canonical_epochs(s: &mut State) {
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
        if let Some(mk) = &mut m.marker {
            id(&mut mk.epoch);
        }
    }
    for c in &mut s.clients {
        for v in &mut c.views {
            if let Some(e) = &mut v.verified {
                id(e);
            }
        }
    }
    s.next_epoch = map.len() as u8;
}
