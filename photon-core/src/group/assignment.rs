//! Which partition an event belongs to, and which member owns which partition. Every
//! member computes both from the same inputs, so they agree without talking to each other.

use crate::group::coordination::LiveMember;
use crate::shard::fnv1a;

/// The partition of an event on a store without shards: `fnv1a(key) % partitions` for a
/// keyed event (so a key always lives in one partition), `seq % partitions` for an unkeyed
/// one (which has no order to keep).
pub fn partition_of(key: Option<&str>, seq: i64, partitions: u32) -> u32 {
    let partitions = u64::from(partitions.max(1));
    let hash = match key {
        Some(key) => fnv1a(key.as_bytes()),
        None => seq.unsigned_abs(),
    };
    // The remainder is below `partitions`, which fits in u32.
    (hash % partitions) as u32
}

/// The partitions `member` owns when `members` (sorted by name, deduplicated) are live:
/// partition `p` goes to `members[p % members.len()]`. Empty when `member` is not live.
pub fn assigned_to(members: &[LiveMember], member: &str, partitions: u32) -> Vec<u32> {
    let Some(index) = members.iter().position(|m| m.name == member) else {
        return Vec::new();
    };
    (0..partitions)
        .filter(|p| *p as usize % members.len() == index)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(names: &[&str]) -> Vec<LiveMember> {
        names
            .iter()
            .map(|name| LiveMember {
                name: (*name).to_owned(),
                partitions: 8,
            })
            .collect()
    }

    #[test]
    fn every_partition_has_exactly_one_member() {
        let members = live(&["a", "b", "c"]);
        let mut owners = vec![0; 8];
        for member in ["a", "b", "c"] {
            for p in assigned_to(&members, member, 8) {
                owners[p as usize] += 1;
            }
        }
        assert_eq!(owners, vec![1; 8]);
        assert_eq!(assigned_to(&members, "a", 8), vec![0, 3, 6]);
        assert_eq!(assigned_to(&members, "c", 8), vec![2, 5]);
        assert_eq!(assigned_to(&members, "z", 8), Vec::<u32>::new());
    }

    #[test]
    fn keys_stay_in_one_partition() {
        assert_eq!(
            partition_of(Some("k1"), 1, 8),
            partition_of(Some("k1"), 99, 8)
        );
        assert_eq!(partition_of(None, 10, 8), 2);
        assert_eq!(partition_of(Some("k1"), 5, 1), 0);
    }
}
