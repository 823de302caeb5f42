//! Shard routing and seq encoding shared by ports that spread one topic over several
//! broker streams or topics.
//!
//! A key always lives in one shard (`fnv1a(key) % shards`; unkeyed events in shard 0), and
//! a record's seq is `position × shards + shard`, where `position` is its 1-based place in
//! its shard. So seq strictly increases per key, and names the shard it came from.

/// 64-bit FNV-1a: stable across processes, versions and platforms (unlike `DefaultHasher`).
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The shard of an event: `fnv1a(key) % shards` for keyed events, 0 for unkeyed ones.
pub fn shard_for_key(key: Option<&str>, shards: u32) -> u32 {
    match key {
        // The remainder is below `shards`, which fits in u32.
        Some(key) if shards > 1 => (fnv1a(key.as_bytes()) % u64::from(shards)) as u32,
        _ => 0,
    }
}

/// The seq of the record at 1-based `position` of `shard` (saturating at `i64::MAX`).
pub fn sharded_seq(position: u64, shard: u32, shards: u32) -> i64 {
    let seq = i128::from(position) * i128::from(shards.max(1)) + i128::from(shard);
    i64::try_from(seq).unwrap_or(i64::MAX)
}

/// The 1-based position and the shard of a seq (a negative seq is position 0 of shard 0).
pub fn split_seq(seq: i64, shards: u32) -> (u64, u32) {
    let seq = u64::try_from(seq).unwrap_or(0);
    let shards = u64::from(shards.max(1));
    // The remainder is below `shards`, which fits in u32.
    (seq / shards, (seq % shards) as u32)
}

/// The first 1-based position of `shard` whose seq is greater than `after`.
pub fn first_position_after(after: i64, shard: u32, shards: u32) -> u64 {
    let position =
        (i128::from(after) - i128::from(shard)).div_euclid(i128::from(shards.max(1))) + 1;
    u64::try_from(position.max(1)).unwrap_or(u64::MAX)
}

/// The one seq from which resuming every shard of `wanted` loses nothing, given each
/// shard's stored position (the seq of its last acknowledged record).
///
/// `StartAt::AfterSeq(s)` starts every shard at its first record with a seq above `s`, so
/// the lowest position is the only safe single value: every other shard restarts at or
/// before its own position (its records in between are delivered again, never skipped). A
/// wanted shard without a position acknowledged nothing: the result is then 0 (every shard
/// from its beginning). `None` when no wanted shard has a position.
///
/// ```
/// use std::collections::BTreeMap;
/// use photon_core::raw::shard::resume_seq;
/// let positions = BTreeMap::from([(0, 400), (1, 10)]);
/// assert_eq!(resume_seq(&positions, 0..2), Some(10));
/// assert_eq!(resume_seq(&positions, 0..4), Some(0));
/// assert_eq!(resume_seq(&BTreeMap::new(), 0..4), None);
/// ```
pub fn resume_seq(
    positions: &std::collections::BTreeMap<u32, i64>,
    wanted: impl IntoIterator<Item = u32>,
) -> Option<i64> {
    if positions.is_empty() {
        return None;
    }
    let mut lowest: Option<i64> = None;
    for shard in wanted {
        let position = positions.get(&shard).copied().unwrap_or(0);
        lowest = Some(lowest.map_or(position, |l| l.min(position)));
    }
    lowest.map(|l| l.max(0))
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
        assert_eq!(
            shard_for_key(Some("order-17"), 4),
            shard_for_key(Some("order-17"), 4)
        );
        let used: std::collections::BTreeSet<u32> = (0..40)
            .map(|i| shard_for_key(Some(&format!("k{i}")), 4))
            .collect();
        assert_eq!(used.len(), 4);
    }

    #[test]
    fn seqs_round_trip_and_increase_per_shard() {
        for shards in [1, 2, 4, 7] {
            for shard in 0..shards {
                let seqs: Vec<i64> = (1..50).map(|p| sharded_seq(p, shard, shards)).collect();
                assert!(seqs.windows(2).all(|w| w[0] < w[1]));
                for (seq, position) in seqs.iter().zip(1..) {
                    assert_eq!(split_seq(*seq, shards), (position, shard));
                }
            }
        }
        assert_eq!(sharded_seq(42, 0, 1), 42);
    }

    #[test]
    fn first_position_after_is_exact() {
        for shards in [1u32, 3, 4] {
            for shard in 0..shards {
                for after in -3..60 {
                    let first = first_position_after(after, shard, shards);
                    assert!(sharded_seq(first, shard, shards) > after);
                    assert!(first == 1 || sharded_seq(first - 1, shard, shards) <= after);
                }
            }
        }
    }
}
