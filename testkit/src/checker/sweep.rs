//! The sort-and-sweep over recorded holds: overlaps, hand-overs, overruns.

use std::collections::BTreeMap;
use std::time::Duration;

use super::holds::Hold;

/// Two holds of the same resource whose intervals intersect: mutual exclusion failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    /// The resource both held.
    pub resource: String,
    /// The hold that began first.
    pub first: Hold,
    /// The hold that began while `first` was still held.
    pub second: Hold,
    /// How long both held it at once.
    pub duration: Duration,
}

/// What the sweep found in a set of holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Analysis {
    /// Holds recorded.
    pub acquisitions: usize,
    /// Consecutive holds of a resource by different clients.
    pub hand_overs: usize,
    /// Every overlapping pair, ordered by resource then start.
    pub overlaps: Vec<Overlap>,
    /// The longest overlap (zero without overlaps).
    pub worst_overlap: Duration,
    /// The furthest a release came after its lock's deadline.
    pub max_overrun: Duration,
    /// Holds whose lock was already expired when the acquire call returned it.
    pub expired_on_arrival: usize,
    /// The shortest time from the end of one hold to the start of the next hold of the same
    /// resource by another client (`None` without hand-overs, zero when they overlap): how
    /// closely the scenario pressed on the boundary it tests.
    pub closest_hand_over: Option<Duration>,
}

/// Sweeps `holds`: every overlap, the hand-overs, the worst overlap and overrun.
pub fn analyse(holds: &[Hold]) -> Analysis {
    let overlaps = find_overlaps(holds);
    Analysis {
        acquisitions: holds.len(),
        hand_overs: hand_overs(holds),
        worst_overlap: overlaps
            .iter()
            .map(|o| o.duration)
            .max()
            .unwrap_or_default(),
        overlaps,
        max_overrun: holds.iter().map(Hold::overrun).max().unwrap_or_default(),
        expired_on_arrival: holds.iter().filter(|h| h.expired_on_arrival()).count(),
        closest_hand_over: closest_hand_over(holds),
    }
}

/// See [`Analysis::closest_hand_over`].
fn closest_hand_over(holds: &[Hold]) -> Option<Duration> {
    by_resource(holds)
        .into_values()
        .filter_map(|mut group| {
            group.sort_by_key(|h| h.acquired);
            group
                .windows(2)
                .filter(|pair| pair[0].client != pair[1].client)
                .map(|pair| pair[1].acquired.saturating_duration_since(pair[0].end()))
                .min()
        })
        .min()
}

/// Every pair of holds of the same resource whose intervals `[acquired, end)` intersect.
///
/// Per resource, holds are sorted by start and swept once, keeping the holds still active
/// at the current start. Intervals are half-open: a hold that begins exactly when another
/// ends (a hand-over at the same instant) does not overlap it; an empty interval (a lock
/// that was expired on arrival) overlaps nothing.
pub fn find_overlaps(holds: &[Hold]) -> Vec<Overlap> {
    let mut found = Vec::new();
    for (resource, mut group) in by_resource(holds) {
        group.sort_by_key(|h| (h.acquired, h.end()));
        let mut active: Vec<&Hold> = Vec::new();
        for hold in group {
            active.retain(|a| a.end() > hold.acquired);
            for earlier in &active {
                let duration = earlier
                    .end()
                    .min(hold.end())
                    .saturating_duration_since(hold.acquired);
                if !duration.is_zero() {
                    found.push(Overlap {
                        resource: resource.to_owned(),
                        first: (*earlier).clone(),
                        second: hold.clone(),
                        duration,
                    });
                }
            }
            if hold.end() > hold.acquired {
                active.push(hold);
            }
        }
    }
    found
}

/// Consecutive holds of a resource (ordered by start) that belong to different clients.
///
/// A scenario with few hand-overs did not test mutual exclusion: one client holding a
/// resource again and again cannot overlap anybody.
pub fn hand_overs(holds: &[Hold]) -> usize {
    by_resource(holds)
        .into_values()
        .map(|mut group| {
            group.sort_by_key(|h| h.acquired);
            group
                .windows(2)
                .filter(|pair| pair[0].client != pair[1].client)
                .count()
        })
        .sum()
}

fn by_resource(holds: &[Hold]) -> BTreeMap<&str, Vec<&Hold>> {
    let mut groups: BTreeMap<&str, Vec<&Hold>> = BTreeMap::new();
    for hold in holds {
        groups.entry(hold.resource.as_str()).or_default().push(hold);
    }
    groups
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    /// A hold of `resource` by `client` from `start` to `end` ms after `t0`, released at
    /// `end` with the deadline at `deadline`.
    fn hold(t0: Instant, client: usize, resource: &str, start: u64, end: u64) -> Hold {
        let at = |ms| t0 + Duration::from_millis(ms);
        Hold::new(client, resource, at(start), at(end + 1000), at(end))
    }

    #[test]
    fn disjoint_and_adjacent_holds_do_not_overlap() {
        let t0 = Instant::now();
        let holds = [
            hold(t0, 0, "r", 0, 10),
            hold(t0, 1, "r", 10, 20), // starts exactly when the first ends
            hold(t0, 0, "r", 25, 30),
        ];
        let a = analyse(&holds);
        assert!(a.overlaps.is_empty(), "{:?}", a.overlaps);
        assert_eq!(a.acquisitions, 3);
        assert_eq!(a.hand_overs, 2);
        assert_eq!(a.worst_overlap, Duration::ZERO);
        assert_eq!(
            a.closest_hand_over,
            Some(Duration::ZERO),
            "0 ms between 10 and 10"
        );
    }

    #[test]
    fn overlapping_holds_are_reported_with_their_duration() {
        let t0 = Instant::now();
        let holds = [hold(t0, 1, "r", 5, 20), hold(t0, 0, "r", 0, 10)];
        let overlaps = find_overlaps(&holds);
        assert_eq!(overlaps.len(), 1);
        assert_eq!(overlaps[0].first.client, 0, "sorted by start");
        assert_eq!(overlaps[0].second.client, 1);
        assert_eq!(overlaps[0].duration, Duration::from_millis(5));
    }

    #[test]
    fn a_nested_hold_overlaps_for_its_whole_length_and_every_pair_is_found() {
        let t0 = Instant::now();
        let holds = [
            hold(t0, 0, "r", 0, 100),
            hold(t0, 1, "r", 10, 20),
            hold(t0, 2, "r", 15, 30),
            hold(t0, 3, "r", 50, 60),
        ];
        let a = analyse(&holds);
        let pairs: Vec<(usize, usize, u64)> = a
            .overlaps
            .iter()
            .map(|o| {
                let ms = u64::try_from(o.duration.as_millis()).unwrap_or(u64::MAX);
                (o.first.client, o.second.client, ms)
            })
            .collect();
        assert_eq!(pairs, [(0, 1, 10), (0, 2, 15), (1, 2, 5), (0, 3, 10)]);
        assert_eq!(a.worst_overlap, Duration::from_millis(15));
    }

    #[test]
    fn resources_are_independent() {
        let t0 = Instant::now();
        let holds = [hold(t0, 0, "a", 0, 10), hold(t0, 1, "b", 0, 10)];
        let a = analyse(&holds);
        assert!(a.overlaps.is_empty());
        assert_eq!(a.hand_overs, 0, "each resource had one holder");
        assert_eq!(a.closest_hand_over, None);
    }

    #[test]
    fn the_interval_ends_at_the_deadline_and_overruns_are_measured() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        // Released 300 ms after its deadline at 100: the interval ends at 100.
        let late = Hold::new(0, "r", at(0), at(100), at(400));
        let next = Hold::new(1, "r", at(150), at(1000), at(200));
        let a = analyse(&[late.clone(), next]);
        assert!(a.overlaps.is_empty(), "{:?}", a.overlaps);
        assert_eq!(a.max_overrun, Duration::from_millis(300));
        assert_eq!(late.end(), at(100));
        // A hold starting before that deadline does overlap.
        let early = Hold::new(1, "r", at(90), at(1000), at(200));
        assert_eq!(
            find_overlaps(&[late, early])[0].duration,
            Duration::from_millis(10)
        );
    }

    #[test]
    fn a_lock_expired_on_arrival_is_counted_and_overlaps_nothing() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let stale = Hold::new(0, "r", at(50), at(40), at(60));
        let other = hold(t0, 1, "r", 0, 100);
        let a = analyse(&[stale, other]);
        assert_eq!(a.expired_on_arrival, 1);
        assert!(a.overlaps.is_empty());
    }

    #[test]
    fn the_same_client_holding_twice_at_once_is_an_overlap_too() {
        let t0 = Instant::now();
        let holds = [hold(t0, 0, "r", 0, 10), hold(t0, 0, "r", 5, 15)];
        assert_eq!(find_overlaps(&holds).len(), 1);
        assert_eq!(hand_overs(&holds), 0);
    }
}
