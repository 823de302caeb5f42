//! Checks over the logs of group member processes, shared by the fixed multi-process
//! tests and the multi-process composition mode: each returns what broke, one line per
//! finding, so a caller can assert that nothing did or report every finding at once.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::Duration;

use photon_core::group::partition_of;

use crate::group_processes::{Handling, LEASE};

/// One owner run: member incarnation, partition, epoch.
type OwnerRun = ((String, u32), u32, u64);

/// Within one owner run, each key goes up: the handlings that break it.
pub(crate) fn order_per_run(handled: &[Handling]) -> Vec<String> {
    let mut last: HashMap<(OwnerRun, &str), i64> = HashMap::new();
    let mut broken = Vec::new();
    for h in handled {
        let id = ((h.run.clone(), h.partition, h.epoch), h.key.as_str());
        if let Some(previous) = last.insert(id, h.seq) {
            if previous >= h.seq {
                broken.push(format!(
                    "{:?} handled key {} seq {} after {previous}",
                    h.run, h.key, h.seq
                ));
            }
        }
    }
    broken
}

/// Attempts started under a lease after a later lease of the same partition was taken: a
/// later epoch's first start comes after the new owner acquired the partition, so no start
/// of an older epoch may follow it.
pub(crate) fn zombie_starts(handled: &[Handling]) -> Vec<String> {
    let mut first_start: HashMap<(u32, u64), i64> = HashMap::new();
    for h in handled {
        let start = first_start.entry((h.partition, h.epoch)).or_insert(h.start);
        *start = (*start).min(h.start);
    }
    handled
        .iter()
        .filter_map(|h| {
            let later = first_start
                .iter()
                .filter(|((partition, epoch), start)| {
                    *partition == h.partition && *epoch > h.epoch && **start < h.start
                })
                .map(|((_, epoch), _)| *epoch)
                .min()?;
            Some(format!(
                "{:?} started seq {} of partition {} at epoch {} after epoch {later} began",
                h.run, h.seq, h.partition, h.epoch
            ))
        })
        .collect()
}

/// How soon after its process was resumed a start is still taken for one whose lease
/// check passed before the freeze.
const RESUME_GRACE_NS: i64 = 250_000_000;

/// `handled` without the attempts a freeze cut in two, which the documented exception
/// covers (they run on after the freeze and their acknowledgements are refused): an
/// attempt in progress when its process was frozen, and the first start its run logged
/// within [`RESUME_GRACE_NS`] of being resumed. A member checks its lease and starts the
/// attempt in one step, but a SIGSTOP between the check and the handler's first line
/// shows that start only after the freeze. The zombie, overlap and repeat checks run on
/// what is left.
pub(crate) fn without_frozen_attempts(
    handled: &[Handling],
    freezes: &[((String, u32), i64, i64)],
) -> Vec<Handling> {
    let mut resumed_first: HashSet<usize> = HashSet::new();
    for (run, from, to) in freezes {
        // After `from`, not `to`: the time of the resume is taken once `kill -CONT`
        // returned, and the resumed process may log its start before that.
        let first = handled
            .iter()
            .enumerate()
            .filter(|(_, h)| h.run == *run && h.start >= *from)
            .min_by_key(|(_, h)| h.start);
        if let Some((index, h)) = first {
            if h.start <= to + RESUME_GRACE_NS {
                resumed_first.insert(index);
            }
        }
    }
    let frozen_mid_attempt = |h: &Handling| {
        freezes.iter().any(|(run, from, _)| {
            *run == h.run && h.start < *from && h.end.is_none_or(|end| end > *from)
        })
    };
    handled
        .iter()
        .enumerate()
        .filter(|(index, h)| !resumed_first.contains(index) && !frozen_mid_attempt(h))
        .map(|(_, h)| h.clone())
        .collect()
}

/// Pairs of handlings of one key by different runs at overlapping times. A handling ends at
/// its `end`, or at its run's kill. (Pass handlings [`without_frozen_attempts`].)
pub(crate) fn overlapping(
    handled: &[Handling],
    killed_at: &HashMap<(String, u32), i64>,
) -> Vec<String> {
    let mut by_key: HashMap<&str, Vec<(i64, i64, &Handling)>> = HashMap::new();
    for h in handled {
        let end = h
            .end
            .or_else(|| killed_at.get(&h.run).copied())
            .unwrap_or(i64::MAX);
        by_key.entry(&h.key).or_default().push((h.start, end, h));
    }
    let mut overlaps = Vec::new();
    for (key, mut intervals) in by_key {
        intervals.sort_by_key(|(start, _, _)| *start);
        for (i, (_, end, a)) in intervals.iter().enumerate() {
            for (start, _, b) in &intervals[i + 1..] {
                if start >= end {
                    break;
                }
                overlaps.push(format!(
                    "key {key}: seq {} by {:?} (epoch {}) overlaps seq {} by {:?} (epoch {}) by {} ms",
                    b.seq,
                    b.run,
                    b.epoch,
                    a.seq,
                    a.run,
                    a.epoch,
                    (end - start) / 1_000_000
                ));
            }
        }
    }
    overlaps
}

/// Events handled again under the same or an earlier epoch of their partition (a repeat
/// comes only from an ownership change).
pub(crate) fn repeats_not_under_later_epochs(handled: &[Handling]) -> Vec<String> {
    let mut by_start: Vec<&Handling> = handled.iter().collect();
    by_start.sort_by_key(|h| h.start);
    let mut first_by: HashMap<i64, &Handling> = HashMap::new();
    let mut broken = Vec::new();
    for h in by_start {
        match first_by.get(&h.seq) {
            Some(first) if first.epoch >= h.epoch => broken.push(format!(
                "seq {} handled again by {:?} at epoch {} after {:?} at epoch {}",
                h.seq, h.run, h.epoch, first.run, first.epoch
            )),
            Some(_) => {}
            None => {
                first_by.insert(h.seq, h);
            }
        }
    }
    broken
}

/// For each lost member (killed, or frozen past its lease, while another member ran) and
/// each partition it handled: the time from when the partition had work and no owner to
/// another run's first start of it, over the bound (the lease + 2 s). Work is the earliest
/// event of the partition not completed before the member was lost; a later kill or freeze
/// of any member (the one about to take over, say) starts the clock again. A member that
/// runs at most `slots` attempts at once (one on the raw stream, the executor's parallelism
/// for a handler) may be busy with the events of its other partitions: the time all its
/// slots were taken is its backlog, not the takeover, and is left out.
pub(crate) fn slow_takeovers(
    handled: &[Handling],
    lost: &[((String, u32), i64)],
    faults: &[i64],
    published: &BTreeMap<i64, (String, i64)>,
    partitions: u32,
    slots: Option<usize>,
) -> Vec<String> {
    let limit = i64::try_from((LEASE + Duration::from_secs(2)).as_nanos()).unwrap_or(i64::MAX);
    let mut slow = Vec::new();
    for (run, at) in lost {
        let owned: BTreeSet<u32> = handled
            .iter()
            .filter(|h| &h.run == run && h.start < *at)
            .map(|h| h.partition)
            .collect();
        for partition in owned {
            let finished: HashSet<i64> = handled
                .iter()
                .filter(|h| h.partition == partition && h.end.is_some_and(|end| end < *at))
                .map(|h| h.seq)
                .collect();
            let work = published
                .iter()
                .filter(|(seq, (key, _))| {
                    partition_of(Some(key), **seq, partitions) == partition
                        && !finished.contains(seq)
                })
                .map(|(_, (_, stored))| *stored)
                .min();
            let Some(work) = work else {
                continue;
            };
            let Some(next) = handled
                .iter()
                .filter(|h| h.partition == partition && h.start > *at && &h.run != run)
                .min_by_key(|h| h.start)
            else {
                continue;
            };
            let later_fault = faults
                .iter()
                .filter(|fault| **fault > *at && **fault < next.start)
                .max()
                .copied();
            let ready = work.max(*at).max(later_fault.unwrap_or(*at));
            let backlog = slots.map_or(0, |slots| {
                saturated(handled, &next.run, slots, ready, next.start)
            });
            let waited = next.start - ready - backlog;
            if waited > limit {
                slow.push(format!(
                    "partition {partition} of {run:?} taken over by {:?} {} ms after it had work and no owner ({} ms more with every slot handling other events)",
                    next.run,
                    waited / 1_000_000,
                    backlog / 1_000_000
                ));
            }
        }
    }
    slow
}

/// How long `run` had at least `slots` attempts running between `from` and `to`.
fn saturated(handled: &[Handling], run: &(String, u32), slots: usize, from: i64, to: i64) -> i64 {
    let mut changes: Vec<(i64, i64)> = handled
        .iter()
        .filter(|h| &h.run == run && h.start < to)
        .map(|h| (h.start.max(from), h.end.unwrap_or(to).min(to)))
        .filter(|(start, end)| start < end)
        .flat_map(|(start, end)| [(start, 1), (end, -1)])
        .collect();
    // At one instant an attempt ending frees its slot before the next one takes it.
    changes.sort_unstable();
    let (mut total, mut running, mut since) = (0, 0_i64, from);
    for (at, change) in changes {
        if running >= slots as i64 {
            total += at - since;
        }
        running += change;
        since = at;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    fn handling(run: &str, partition: u32, seq: i64, start: i64, end: i64) -> Handling {
        Handling {
            run: (run.to_owned(), 0),
            partition,
            epoch: 1,
            key: String::new(),
            seq,
            start: start * MS,
            end: Some(end * MS),
            acked: true,
        }
    }

    #[test]
    fn a_freeze_excuses_the_attempt_it_cut_and_the_first_start_after_it_only() {
        // "a" is frozen from 100 to 2,000 ms; "b" is never frozen.
        let freezes = [(("a".to_owned(), 0), 100 * MS, 2_000 * MS)];
        let handled = [
            handling("a", 0, 1, 0, 50),        // before the freeze: kept
            handling("a", 0, 2, 90, 2_010),    // in progress at the freeze: left out
            handling("a", 0, 3, 1_995, 2_020), // first start, logged before the resume's time: left out
            handling("a", 0, 4, 2_030, 2_040), // a second start after the resume: kept
            handling("b", 0, 5, 1_000, 1_010), // another run: kept
        ];
        let seqs: Vec<i64> = without_frozen_attempts(&handled, &freezes)
            .iter()
            .map(|h| h.seq)
            .collect();
        assert_eq!(seqs, [1, 4, 5]);
        // A first start later than the grace after the resume is kept.
        let late = [handling("a", 0, 6, 2_300, 2_310)];
        assert_eq!(without_frozen_attempts(&late, &freezes).len(), 1);
    }

    #[test]
    fn saturated_counts_only_the_time_every_slot_was_taken() {
        let run = ("b".to_owned(), 0);
        let handled = [
            handling("b", 0, 1, 0, 100),
            handling("b", 0, 2, 50, 150),
            handling("b", 0, 3, 100, 200),
        ];
        assert_eq!(saturated(&handled, &run, 1, 0, 200 * MS), 200 * MS);
        assert_eq!(saturated(&handled, &run, 2, 0, 200 * MS), 100 * MS);
        assert_eq!(saturated(&handled, &run, 3, 0, 200 * MS), 0);
        assert_eq!(saturated(&handled, &run, 1, 120 * MS, 180 * MS), 60 * MS);
    }

    #[test]
    fn slow_takeovers_measure_from_the_last_fault_and_leave_out_the_backlog() {
        let limit = (LEASE + Duration::from_secs(2)).as_millis() as i64;
        let lost = [(("a".to_owned(), 0), 1_000 * MS)];
        let mut published = BTreeMap::new();
        let key = (0..)
            .map(|n| format!("k{n}"))
            .find(|key| partition_of(Some(key), 2, 4) == 3)
            .unwrap();
        published.insert(2, (key.clone(), 0));
        let taken_at = |start: i64| {
            vec![
                handling("a", 3, 1, 0, 10),
                Handling {
                    key: key.clone(),
                    ..handling("b", 3, 2, start, start + 10)
                },
            ]
        };
        let late = 1_000 + limit + 1;
        let slow = slow_takeovers(&taken_at(late), &lost, &[], &published, 4, None);
        assert_eq!(slow.len(), 1, "{slow:?}");
        assert!(slow[0].starts_with("partition 3 of (\"a\", 0)"), "{slow:?}");
        let in_time = 1_000 + limit - 1;
        assert_eq!(
            slow_takeovers(&taken_at(in_time), &lost, &[], &published, 4, None),
            Vec::<String>::new()
        );
        // A kill of the member about to take over starts the clock again.
        let refault = [2_000 * MS];
        assert_eq!(
            slow_takeovers(&taken_at(late), &lost, &refault, &published, 4, None),
            Vec::<String>::new()
        );
        // Time the new owner's only slot was busy elsewhere is its backlog.
        let mut busy = taken_at(late);
        busy.push(handling("b", 1, 9, 1_000, 1_500));
        assert_eq!(
            slow_takeovers(&busy, &lost, &[], &published, 4, Some(1)),
            Vec::<String>::new()
        );
        assert_eq!(
            slow_takeovers(&busy, &lost, &[], &published, 4, Some(2)).len(),
            1
        );
    }
}
