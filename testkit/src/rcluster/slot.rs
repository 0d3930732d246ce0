//! Hash slots: which of the 16384 slots a key belongs to, as redis-rs computes it.

use std::collections::HashSet;

use redis::cluster_routing::Slot;

/// Number of hash slots of a Redis Cluster.
pub const SLOT_COUNT: u16 = 16384;

/// The hash slot of `key`, as Redis Cluster computes it (`CLUSTER KEYSLOT`): redis-rs's
/// `Slot::for_key`, CRC16-XMODEM of the key's hash tag (the bytes inside its first
/// non-empty `{…}`, else the whole key) modulo [`SLOT_COUNT`].
///
/// ```
/// use redquorum_testkit::key_slot;
///
/// assert_eq!(key_slot("foo"), 12182);
/// assert_eq!(key_slot("{user1000}.following"), key_slot("{user1000}.followers"));
/// ```
pub fn key_slot(key: impl AsRef<[u8]>) -> u16 {
    let slot = Slot::for_key(key);
    // redis-rs 1.8 keeps a slot's number private but builds any slot from its number: the
    // number is the one whose slot is equal (at most 16,384 comparisons of a `u16`).
    (0..SLOT_COUNT)
        .find(|&n| Slot::new(n) == Some(slot))
        .expect("redis-rs's slots are below SLOT_COUNT")
}

/// How many keys [`key_in`] tries before giving up (a range of one slot of 16384 needs
/// about 16384 tries on average).
const KEY_IN_ATTEMPTS: usize = 1_000_000;

/// The first key `make(0)`, `make(1)`, … whose slot is in one of the inclusive `ranges`.
pub(crate) fn key_in(ranges: &[(u16, u16)], make: impl Fn(usize) -> String) -> Option<String> {
    let wanted: HashSet<Slot> = ranges
        .iter()
        .flat_map(|&(start, end)| start..=end)
        .filter_map(Slot::new)
        .collect();
    if wanted.is_empty() {
        return None;
    }
    (0..KEY_IN_ATTEMPTS)
        .map(make)
        .find(|key| wanted.contains(&Slot::for_key(key)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // Values from `CLUSTER KEYSLOT` on Redis 7.
        assert_eq!(key_slot("foo"), 12182);
        assert_eq!(key_slot("bar"), 5061);
        assert_eq!(key_slot(""), 0);
        assert_eq!(key_slot("{user1000}.following"), key_slot("user1000"));
    }

    #[test]
    fn key_in_finds_a_key_in_the_ranges_or_none() {
        let key = key_in(&[(100, 100)], |n| format!("k{n}"));
        assert_eq!(key.as_deref().map(key_slot), Some(100));
        assert_eq!(key_in(&[], |n| format!("k{n}")), None);
    }
}
