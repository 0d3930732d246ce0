//! Redis Cluster hash slots: CRC16 of a key (or of its `{hash tag}`) modulo 16384, and for
//! every slot a short tag that hashes to it, so that redquorum's per-slot keys (epoch
//! markers) can be placed in the slot of a lock's keys.

use std::sync::LazyLock;

/// Hash slots in a Redis Cluster.
pub(crate) const SLOTS: usize = 16_384;

/// CRC16/XMODEM (polynomial 0x1021, initial value 0), as Redis Cluster uses.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
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

/// The part of `key` that decides its slot: the first `{…}` with something inside, or the
/// whole key.
fn hashed_part(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{')
        && let Some(len) = key[open + 1..].iter().position(|&b| b == b'}')
        && len > 0
    {
        return &key[open + 1..open + 1 + len];
    }
    key
}

/// The hash slot of `key`.
pub(crate) fn key_slot(key: &str) -> u16 {
    crc16(hashed_part(key.as_bytes())) % SLOTS as u16
}

/// A short string whose slot is `slot` (the same string for every client, every run).
pub(crate) fn tag_for(slot: u16) -> &'static str {
    static TAGS: LazyLock<Vec<String>> = LazyLock::new(|| {
        let mut tags = vec![String::new(); SLOTS];
        let mut missing = SLOTS;
        let mut i: u64 = 0;
        while missing > 0 {
            let candidate = i.to_string();
            let s = usize::from(key_slot(&candidate));
            if tags[s].is_empty() {
                tags[s] = candidate;
                missing -= 1;
            }
            i += 1;
        }
        tags
    });
    &TAGS[usize::from(slot) % SLOTS]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // Values from `CLUSTER KEYSLOT`.
        assert_eq!(key_slot("foo"), 12182);
        assert_eq!(key_slot("bar"), 5061);
        assert_eq!(key_slot("{user1000}.following"), key_slot("user1000"));
        assert_eq!(key_slot("foo{}{bar}"), key_slot("foo{}{bar}"));
        assert_eq!(key_slot("foo{}{bar}"), crc16(b"foo{}{bar}") % 16384);
        assert_eq!(key_slot("foo{{bar}}zap"), key_slot("{bar"));
        assert_eq!(crc16(b"123456789"), 0x31c3);
    }

    #[test]
    fn every_slot_has_a_tag_that_hashes_to_it() {
        for slot in [0, 1, 5061, 12182, 16383] {
            assert_eq!(key_slot(tag_for(slot)), slot);
            assert_eq!(key_slot(&format!("p:guard:{{{}}}", tag_for(slot))), slot);
        }
        assert!((0..16384).all(|s| tag_for(s).len() <= 6));
    }
}
