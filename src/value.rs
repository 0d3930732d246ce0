//! Lock values: unguessable, unique per acquisition, and never printed.

use std::fmt;
use std::sync::Arc;

use rand::Rng;

/// Random bytes in a lock value (the Redlock spec asks for 20 or more).
const VALUE_BYTES: usize = 20;

/// The random value that marks our ownership of a lock's keys.
///
/// Anyone who knows it can extend or release the lock, so `Debug` and `Display` show only
/// a short fingerprint (a hash, not a prefix of the value).
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct LockValue(Arc<str>);

impl LockValue {
    /// 20 bytes from the thread-local CSPRNG (ChaCha-based, seeded from the OS), hex-encoded
    /// (on the stack, so that the value costs one allocation).
    pub(crate) fn random() -> Self {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut bytes = [0u8; VALUE_BYTES];
        rand::rng().fill_bytes(&mut bytes);
        let mut hex = [0u8; VALUE_BYTES * 2];
        for (pair, b) in hex.chunks_exact_mut(2).zip(bytes) {
            pair[0] = HEX[usize::from(b >> 4)];
            pair[1] = HEX[usize::from(b & 0xf)];
        }
        // Hex digits are ASCII.
        Self(String::from_utf8_lossy(&hex).into())
    }

    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// A 32-bit FNV-1a hash of the value, for logs: enough to tell locks apart, useless to
    /// forge one.
    pub(crate) fn fingerprint(&self) -> u32 {
        self.0.bytes().fold(0x811c_9dc5_u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        })
    }
}

impl fmt::Debug for LockValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LockValue(#{:08x})", self.fingerprint())
    }
}

impl fmt::Display for LockValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{:08x}", self.fingerprint())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_long_unique_and_never_printed() {
        let a = LockValue::random();
        let b = LockValue::random();
        assert_eq!(a.as_str().len(), 40);
        assert!(a.as_str().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        for shown in [format!("{a:?}"), a.to_string()] {
            assert!(!shown.contains(&a.as_str()[..8]), "{shown} leaks the value");
        }
    }
}
