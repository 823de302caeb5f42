//! Fluvio topic shard routing (distinct from Photon virtual shard topic keys).
//!
//! With `topic_shards = n > 1`, every Photon topic is spread over `n` Fluvio topics (one
//! partition each). Keyed events go to shard `fnv1a(key) % n`, so all events of a key live
//! in one shard and keep their order. Unkeyed events all go to shard 0: they keep their
//! publish order too (round-robin would trade that order for spread, which Photon does not
//! do silently).
//!
//! A seq is `(offset + 1) × n + shard`: it strictly increases within a shard (hence within
//! a key) and names its shard (`seq % n`). With `n = 1` it is simply `offset + 1`.

use photon_core::{PhotonError, Result};

/// Environment variable for the number of Fluvio topics (shards) per Photon topic
/// (`1` to [`MAX_TOPIC_SHARDS`], default `1`).
pub const TOPIC_SHARDS_ENV: &str = "PHOTON_FLUVIO_TOPIC_SHARDS";

/// Largest accepted shard count.
pub const MAX_TOPIC_SHARDS: u32 = 256;

/// FNV-1a (64 bit): a stable hash, identical in every process and release.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The shard of an event: `fnv1a(key) % shards` for keyed events, 0 for unkeyed ones.
pub fn shard_for_key(key: Option<&str>, shards: u32) -> u32 {
    match key {
        Some(key) if shards > 1 => (fnv1a(key.as_bytes()) % u64::from(shards)) as u32,
        _ => 0,
    }
}

/// The Photon seq of the record at `offset` of `shard`.
pub fn seq_of(offset: i64, shard: u32, shards: u32) -> i64 {
    (offset + 1) * i64::from(shards) + i64::from(shard)
}

/// The shard a seq belongs to.
pub fn shard_of_seq(seq: i64, shards: u32) -> u32 {
    // rem_euclid of a positive modulus is in 0..shards, which fits in u32.
    seq.rem_euclid(i64::from(shards.max(1))) as u32
}

/// The Fluvio offset a seq was given for.
pub fn offset_of_seq(seq: i64, shards: u32) -> i64 {
    seq.div_euclid(i64::from(shards.max(1))) - 1
}

/// The first offset of `shard` whose seq is greater than `after`.
pub fn first_offset_after(after: i64, shard: u32, shards: u32) -> i64 {
    // Smallest q >= 1 with q * shards + shard > after; the offset is q - 1.
    let q = (after - i64::from(shard)).div_euclid(i64::from(shards.max(1))) + 1;
    q.max(1) - 1
}

/// Parses a shard count.
///
/// # Errors
/// [`PhotonError::Config`] naming `variable` when the value is not an integer in
/// `1..=MAX_TOPIC_SHARDS`.
pub fn parse_topic_shards(variable: &str, value: &str) -> Result<u32> {
    match value.trim().parse::<u32>() {
        Ok(n) if (1..=MAX_TOPIC_SHARDS).contains(&n) => Ok(n),
        _ => Err(PhotonError::config(
            variable,
            value,
            format!("an integer from 1 to {MAX_TOPIC_SHARDS}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_is_the_published_function() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn keys_route_stably_and_unkeyed_to_shard_zero() {
        assert_eq!(shard_for_key(None, 4), 0);
        assert_eq!(shard_for_key(Some("k"), 1), 0);
        let shard = shard_for_key(Some("order-17"), 4);
        assert_eq!(shard, shard_for_key(Some("order-17"), 4));
        assert!(shard < 4);
        let used: std::collections::BTreeSet<u32> = (0..40)
            .map(|i| shard_for_key(Some(&format!("k{i}")), 4))
            .collect();
        assert_eq!(used.len(), 4);
    }

    #[test]
    fn seq_round_trips_and_increases_per_shard() {
        for shards in [1, 2, 4, 7] {
            for shard in 0..shards {
                let mut last = 0;
                for offset in 0..50 {
                    let seq = seq_of(offset, shard, shards);
                    assert!(seq > last);
                    last = seq;
                    assert_eq!(shard_of_seq(seq, shards), shard);
                    assert_eq!(offset_of_seq(seq, shards), offset);
                }
            }
        }
        assert_eq!(seq_of(0, 0, 1), 1);
        assert_eq!(seq_of(41, 0, 1), 42);
    }

    #[test]
    fn first_offset_after_is_exact() {
        for shards in [1u32, 3, 4] {
            for shard in 0..shards {
                for after in -3..60 {
                    let first = first_offset_after(after, shard, shards);
                    assert!(seq_of(first, shard, shards) > after);
                    if first > 0 {
                        assert!(seq_of(first - 1, shard, shards) <= after);
                    }
                }
            }
        }
    }

    #[test]
    fn shard_counts_are_checked() {
        assert_eq!(parse_topic_shards(TOPIC_SHARDS_ENV, "4").unwrap(), 4);
        for bad in ["0", "x", "-1", "257"] {
            let err = parse_topic_shards(TOPIC_SHARDS_ENV, bad).unwrap_err();
            assert!(err.to_string().contains(TOPIC_SHARDS_ENV), "{err}");
        }
    }
}
