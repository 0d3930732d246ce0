//! What each master answered in one round, and how long it took.

use std::time::Duration;

use crate::error::node_failure::NodeFailure;
use crate::kind::Holder;

/// One master's answer in one round.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Vote {
    /// The master did what we asked: set the keys (acquire), extended them (extend).
    Granted,
    /// The master refused: the keys exist (acquire), or they are missing or hold another
    /// value (extend).
    Taken,
    /// The request failed.
    Failed(NodeFailure),
    /// No answer yet: the round was decided without this master.
    Pending,
}

/// One master's vote with its latency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeVote {
    /// Position of the master in the configured list.
    pub node: usize,
    /// What it answered.
    pub vote: Vote,
    /// How long the answer took; `None` while pending.
    pub latency: Option<Duration>,
    /// Who kept the master from granting, when it refused and said.
    pub held_by: Option<Holder>,
    /// How long the holder's keys had left on this master when it refused, when the
    /// attempt asked (a waiting call's attempts after its first) and the master said.
    pub expires_in: Option<Duration>,
}

/// The outcome of one round (an acquire attempt or an extension) across all masters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptStats {
    pub(crate) attempt: u32,
    pub(crate) quorum: usize,
    pub(crate) elapsed: Duration,
    pub(crate) votes: Vec<NodeVote>,
}

impl AttemptStats {
    pub(crate) fn pending(nodes: usize, quorum: usize, attempt: u32) -> Self {
        Self {
            attempt,
            quorum,
            elapsed: Duration::ZERO,
            votes: (0..nodes)
                .map(|node| NodeVote {
                    node,
                    vote: Vote::Pending,
                    latency: None,
                    held_by: None,
                    expires_in: None,
                })
                .collect(),
        }
    }

    /// Which attempt this was, counting from 1.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Number of masters.
    pub fn nodes(&self) -> usize {
        self.votes.len()
    }

    /// Votes the attempt needed: its kind's quorum (see
    /// [`Redlock::quorum`](crate::Redlock::quorum)).
    pub fn quorum(&self) -> usize {
        self.quorum
    }

    /// Time from the start of the round to its decision.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }

    /// Every master's vote, indexed by node.
    pub fn votes(&self) -> &[NodeVote] {
        &self.votes
    }

    /// Masters that granted.
    pub fn granted(&self) -> usize {
        self.count(|v| matches!(v, Vote::Granted))
    }

    /// Masters that refused because the keys were taken (or not ours, for an extension).
    pub fn taken(&self) -> usize {
        self.count(|v| matches!(v, Vote::Taken))
    }

    /// Masters whose request failed.
    pub fn failed(&self) -> usize {
        self.count(|v| matches!(v, Vote::Failed(_)))
    }

    /// Masters that had not answered when the round was decided.
    pub fn pending_count(&self) -> usize {
        self.count(|v| matches!(v, Vote::Pending))
    }

    /// Each failed master with its failure.
    pub fn failures(&self) -> Vec<(usize, &NodeFailure)> {
        self.votes
            .iter()
            .filter_map(|v| match &v.vote {
                Vote::Failed(f) => Some((v.node, f)),
                _ => None,
            })
            .collect()
    }

    /// Who kept the refusing masters from granting: the holder most of them named.
    pub fn held_by(&self) -> Option<Holder> {
        let mut counts: Vec<(Holder, usize)> = Vec::new();
        for by in self.votes.iter().filter_map(|v| v.held_by) {
            match counts.iter_mut().find(|(h, _)| *h == by) {
                Some((_, n)) => *n += 1,
                None => counts.push((by, 1)),
            }
        }
        counts.into_iter().max_by_key(|(_, n)| *n).map(|(h, _)| h)
    }

    pub(crate) fn first_failure(&self) -> Option<(usize, &NodeFailure)> {
        self.failures().into_iter().next()
    }

    fn count(&self, pred: impl Fn(&Vote) -> bool) -> usize {
        self.votes.iter().filter(|v| pred(&v.vote)).count()
    }
}
