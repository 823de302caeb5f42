//! Fluvio topic shard routing (distinct from Photon virtual shard topic keys).
//!
//! With `shards = n > 1`, every Photon topic is spread over `n` Fluvio topics (one
//! partition each). Keyed events go to shard `fnv1a(key) % n`, so all events of a key live
//! in one shard and keep their order. Unkeyed events all go to shard 0: they keep their
//! publish order too (round-robin would trade that order for spread, which Photon does not
//! do silently).
//!
//! A seq is `(offset + 1) × n + shard`: it strictly increases within a shard (hence within
//! a key) and names its shard (`seq % n`). With `n = 1` it is simply `offset + 1`.

/// Environment variable for the number of Fluvio topics (shards) per Photon topic
/// (`1` to [`MAX_TOPIC_SHARDS`], default `1`).
pub const TOPIC_SHARDS_ENV: &str = "PHOTON_FLUVIO_TOPIC_SHARDS";

/// Largest accepted shard count.
pub const MAX_TOPIC_SHARDS: u32 = 256;

pub use photon_core::raw::shard::{fnv1a, shard_for_key};

/// The Photon seq of the record at `offset` of `shard`.
pub fn seq_of(offset: i64, shard: u32, shards: u32) -> i64 {
    photon_core::raw::shard::sharded_seq(u64::try_from(offset + 1).unwrap_or(0), shard, shards)
}

/// The shard a seq belongs to.
pub fn shard_of_seq(seq: i64, shards: u32) -> u32 {
    photon_core::raw::shard::split_seq(seq, shards).1
}

/// The Fluvio offset a seq was given for (`-1` for seqs below every record).
pub fn offset_of_seq(seq: i64, shards: u32) -> i64 {
    i64::try_from(photon_core::raw::shard::split_seq(seq, shards).0).unwrap_or(i64::MAX) - 1
}

/// The first offset of `shard` whose seq is greater than `after`.
pub fn first_offset_after(after: i64, shard: u32, shards: u32) -> i64 {
    i64::try_from(photon_core::raw::shard::first_position_after(
        after, shard, shards,
    ))
    .unwrap_or(i64::MAX)
        - 1
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
