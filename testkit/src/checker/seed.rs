//! Seeds: one printed number from which every random choice of a scenario derives.

use rand::SeedableRng;
use rand::rngs::StdRng;

/// Environment variable that forces a scenario's seed (decimal, or hex with `0x`), to
/// replay a failure.
pub const SEED_ENV: &str = "REDQUORUM_SEED";
/// Environment variable that turns on the soak tier (see [`soak_factor`]).
pub const SOAK_ENV: &str = "REDQUORUM_SOAK";
/// Environment variable naming a file that every scenario summary line is appended to.
pub const SUMMARY_FILE_ENV: &str = "REDQUORUM_SUMMARY_FILE";
/// The multiplier [`soak_factor`] returns for `REDQUORUM_SOAK=1`.
pub const DEFAULT_SOAK_FACTOR: u32 = 10;

/// The seed forced by [`SEED_ENV`], else a fresh random one.
///
/// # Panics
/// If the variable is set but is not a number: a typo must not silently run another seed.
pub fn seed_from_env() -> u64 {
    match std::env::var(SEED_ENV) {
        Ok(text) => parse_seed(&text)
            .unwrap_or_else(|| panic!("{SEED_ENV}={text:?} is not a decimal or 0x-hex u64")),
        Err(_) => rand::random(),
    }
}

fn parse_seed(text: &str) -> Option<u64> {
    let text = text.trim();
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    }
}

/// An independent seed for `stream` (a client, a fault schedule, a link set), derived from
/// `seed` with SplitMix64: the same seed and stream always give the same sequence.
pub fn derive_seed(seed: u64, stream: u64) -> u64 {
    let mut x = seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03);
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A [`StdRng`] for `stream`, derived from `seed` (see [`derive_seed`]).
pub fn rng_for(seed: u64, stream: u64) -> StdRng {
    StdRng::seed_from_u64(derive_seed(seed, stream))
}

/// How much longer and bigger scenarios run: 1 normally (the CI tier); with
/// `REDQUORUM_SOAK=1`, [`DEFAULT_SOAK_FACTOR`]; with `REDQUORUM_SOAK=<n>` for `n ≥ 2`, `n`.
/// `0`, empty or anything unparsable means 1.
pub fn soak_factor() -> u32 {
    match std::env::var(SOAK_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u32>().ok())
    {
        None | Some(0) => 1,
        Some(1) => DEFAULT_SOAK_FACTOR,
        Some(n) => n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngExt;

    #[test]
    fn seeds_parse_in_decimal_and_hex() {
        assert_eq!(parse_seed("42"), Some(42));
        assert_eq!(parse_seed(" 0x2A "), Some(42));
        assert_eq!(parse_seed("0XfF"), Some(255));
        assert_eq!(parse_seed("forty-two"), None);
    }

    #[test]
    fn derived_streams_are_reproducible_and_distinct() {
        assert_eq!(derive_seed(7, 1), derive_seed(7, 1));
        assert_ne!(derive_seed(7, 1), derive_seed(7, 2));
        assert_ne!(derive_seed(7, 1), derive_seed(8, 1));
        let a: u64 = rng_for(7, 3).random();
        let b: u64 = rng_for(7, 3).random();
        assert_eq!(a, b);
    }
}
