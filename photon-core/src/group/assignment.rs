//! Which partition an event belongs to, and which member owns which partition. Every
//! member computes both from the same inputs, so they agree without talking to each other.

use crate::raw::shard::fnv1a;

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

/// The partitions `member` should own, computed by every member from the same view: the
/// live members (sorted by name, deduplicated; `member` counts as live) and the current
/// holder of each partition (`holders[p]`, a member name, `None` when free or expired).
///
/// Sticky and balanced (as Kafka's cooperative sticky assignor): each live member keeps the
/// partitions it holds, up to `ceil(partitions / members)`; the rest (free ones, those of
/// members that left or stopped heartbeating, and each member's excess) go one by one to
/// the live member with the fewest, ties to the first name, until everyone has
/// `floor(partitions / members)` or one more. So a join moves at most
/// `ceil(partitions / members)` partitions, and a leave or a death moves only the
/// partitions of the member that went.
pub fn sticky(members: &[String], member: &str, holders: &[Option<String>]) -> Vec<u32> {
    let mut names: Vec<&str> = members.iter().map(String::as_str).collect();
    if !names.contains(&member) {
        names.push(member);
    }
    names.sort_unstable();
    names.dedup();
    let count = names.len();
    let partitions = holders.len();
    let ceiling = partitions.div_ceil(count);
    let floor = partitions / count;
    // Members that may take one more than the floor: as many as the remainder.
    let mut above_floor = partitions % count;
    let mut owned: Vec<Vec<usize>> = vec![Vec::new(); count];
    let mut free = Vec::new();
    for (partition, holder) in holders.iter().enumerate() {
        let index = holder
            .as_deref()
            .and_then(|holder| names.binary_search(&holder).ok());
        match index {
            Some(index) if owned[index].len() < ceiling => owned[index].push(partition),
            _ => free.push(partition),
        }
    }
    // A member over its share gives back its highest partitions: at most `floor` each,
    // plus one for as many members as the remainder allows (those holding most first).
    let mut order: Vec<usize> = (0..count).collect();
    order.sort_by_key(|index| std::cmp::Reverse(owned[*index].len()));
    for index in order {
        let mut share = floor;
        if above_floor > 0 && owned[index].len() > floor {
            share += 1;
            above_floor -= 1;
        }
        while owned[index].len() > share {
            free.extend(owned[index].pop());
        }
    }
    free.sort_unstable();
    for partition in free {
        let Some(fewest) = (0..count).min_by_key(|index| (owned[*index].len(), *index)) else {
            break;
        };
        owned[fewest].push(partition);
    }
    let Ok(me) = names.binary_search(&member) else {
        return Vec::new();
    };
    let mut mine: Vec<u32> = owned[me]
        .iter()
        .filter_map(|p| u32::try_from(*p).ok())
        .collect();
    mine.sort_unstable();
    mine
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    fn held(holders: &[Option<&str>]) -> Vec<Option<String>> {
        holders.iter().map(|h| h.map(str::to_owned)).collect()
    }

    /// The whole assignment, as every member computes it.
    fn assignment(members: &[&str], holders: &[Option<&str>]) -> Vec<Option<String>> {
        let mut owners = vec![None; holders.len()];
        for member in members {
            for p in sticky(&names(members), member, &held(holders)) {
                assert!(owners[p as usize].is_none(), "partition {p} assigned twice");
                owners[p as usize] = Some((*member).to_owned());
            }
        }
        owners
    }

    fn moved(before: &[Option<String>], after: &[Option<String>]) -> usize {
        before
            .iter()
            .zip(after)
            .filter(|(b, a)| b.is_some() && b != a)
            .count()
    }

    #[test]
    fn every_partition_has_exactly_one_member_and_shares_are_even() {
        let owners = assignment(&["a", "b", "c"], &[None; 8]);
        assert!(owners.iter().all(Option::is_some));
        for member in ["a", "b", "c"] {
            let count = owners
                .iter()
                .filter(|o| o.as_deref() == Some(member))
                .count();
            assert!((2..=3).contains(&count), "{member}: {count}");
        }
        // A member counts itself live before its own heartbeat is seen.
        assert_eq!(sticky(&names(&["a"]), "z", &held(&[None, None])), vec![1]);
    }

    #[test]
    fn a_join_moves_at_most_the_newcomers_share() {
        for partitions in [1usize, 2, 7, 8, 16, 31] {
            for before in 1..=5usize {
                let all = ["m0", "m1", "m2", "m3", "m4", "m5"];
                let old = &all[..before];
                let start = assignment(old, &vec![None; partitions]);
                let start_refs: Vec<Option<&str>> = start.iter().map(|o| o.as_deref()).collect();
                let after = assignment(&all[..=before], &start_refs);
                let bound = partitions.div_ceil(before + 1);
                assert!(
                    moved(&start, &after) <= bound,
                    "{partitions} partitions, {before} -> {}: moved {} > {bound}",
                    before + 1,
                    moved(&start, &after)
                );
                assert!(after.iter().all(Option::is_some));
            }
        }
    }

    #[test]
    fn a_leave_moves_only_the_leavers_partitions() {
        let start = assignment(&["a", "b", "c"], &[None; 8]);
        let refs: Vec<Option<&str>> = start.iter().map(|o| o.as_deref()).collect();
        let after = assignment(&["a", "c"], &refs);
        for (before, after) in start.iter().zip(&after) {
            if before.as_deref() != Some("b") {
                assert_eq!(before, after);
            }
        }
        assert!(after
            .iter()
            .all(|o| o.is_some() && o.as_deref() != Some("b")));
    }

    #[test]
    fn a_restart_under_its_name_gets_its_partitions_back() {
        let start = assignment(&["a", "b"], &[None; 8]);
        let refs: Vec<Option<&str>> = start.iter().map(|o| o.as_deref()).collect();
        // "b" restarted: its old leases still name it.
        assert_eq!(assignment(&["a", "b"], &refs), start);
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
