//! Hash slots: which of the 16384 slots a key belongs to (CRC16, honouring hash tags).

/// Number of hash slots of a Redis Cluster.
pub const SLOT_COUNT: u16 = 16384;

/// The hash slot of `key`, as Redis Cluster computes it (`CLUSTER KEYSLOT`).
///
/// If the key contains a `{…}` with at least one byte between the first `{` and the first
/// `}` after it, only those bytes are hashed (a *hash tag*), so `{user1}.a` and
/// `{user1}.b` share a slot. The hash is CRC16-XMODEM modulo [`SLOT_COUNT`].
///
/// ```
/// use redquorum_testkit::key_slot;
///
/// assert_eq!(key_slot("foo"), 12182);
/// assert_eq!(key_slot("{user1000}.following"), key_slot("{user1000}.followers"));
/// ```
pub fn key_slot(key: impl AsRef<[u8]>) -> u16 {
    crc16(hash_tag(key.as_ref())) % SLOT_COUNT
}

/// How many keys [`key_in`] tries before giving up (a range of one slot of 16384 needs
/// about 16384 tries on average).
const KEY_IN_ATTEMPTS: usize = 1_000_000;

/// The first key `make(0)`, `make(1)`, … whose slot is in one of the inclusive `ranges`.
pub(crate) fn key_in(ranges: &[(u16, u16)], make: impl Fn(usize) -> String) -> Option<String> {
    (0..KEY_IN_ATTEMPTS).map(make).find(|key| {
        let slot = key_slot(key);
        ranges
            .iter()
            .any(|&(start, end)| (start..=end).contains(&slot))
    })
}

/// The part of the key that is hashed.
fn hash_tag(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&b| b == b'{') else {
        return key;
    };
    let rest = &key[open + 1..];
    match rest.iter().position(|&b| b == b'}') {
        Some(len) if len > 0 => &rest[..len],
        _ => key,
    }
}

/// CRC16-CCITT in its XMODEM form (polynomial 0x1021, initial value 0), as in Redis'
/// `crc16.c`. Bit by bit: the test kit hashes a handful of keys, speed does not matter.
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_matches_the_reference_value() {
        // The check value given in the Redis Cluster specification.
        assert_eq!(crc16(b"123456789"), 0x31C3);
    }

    #[test]
    fn slots_match_redis() {
        // Values from `CLUSTER KEYSLOT` on Redis 7.
        assert_eq!(key_slot("foo"), 12182);
        assert_eq!(key_slot("bar"), 5061);
        assert_eq!(key_slot(""), 0);
    }

    #[test]
    fn key_in_finds_a_key_in_the_ranges_or_none() {
        let key = key_in(&[(100, 100)], |n| format!("k{n}"));
        assert_eq!(key.as_deref().map(key_slot), Some(100));
        assert_eq!(key_in(&[], |n| format!("k{n}")), None);
    }

    #[test]
    fn hash_tags_follow_the_specification() {
        assert_eq!(hash_tag(b"{user1000}.following"), b"user1000");
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
        assert_eq!(hash_tag(b"no tag"), b"no tag");
        assert_eq!(hash_tag(b"open{only"), b"open{only");
    }
}
