//! Checks over the logs of group member processes, shared by the fixed multi-process
//! tests and the multi-process composition mode: each returns what broke, one line per
//! finding, so a caller can assert that nothing did or report every finding at once.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use crate::group_processes::Handling;

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

/// Pairs of handlings of one key by different runs at overlapping times. A handling ends at
/// its `end`, or at its run's kill. An attempt in progress when its process was frozen is
/// left out: it resumes after the freeze by design (its acknowledgement is refused).
pub(crate) fn overlapping(
    handled: &[Handling],
    killed_at: &HashMap<(String, u32), i64>,
    freezes: &[((String, u32), i64, i64)],
) -> Vec<String> {
    let frozen_mid_attempt = |h: &Handling| {
        freezes.iter().any(|(run, from, _)| {
            *run == h.run && h.start < *from && h.end.is_none_or(|end| end > *from)
        })
    };
    let mut by_key: HashMap<&str, Vec<(i64, i64, &Handling)>> = HashMap::new();
    for h in handled.iter().filter(|h| !frozen_mid_attempt(h)) {
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

/// The longest time from losing a member (kill or freeze) to another run's first start of
/// each partition the lost run handled, over the partitions that had work left.
pub(crate) fn worst_takeover(handled: &[Handling], lost: &[((String, u32), i64)]) -> Duration {
    let mut worst = 0;
    for (run, at) in lost {
        let partitions: BTreeSet<u32> = handled
            .iter()
            .filter(|h| &h.run == run && h.start < *at)
            .map(|h| h.partition)
            .collect();
        for partition in partitions {
            let next = handled
                .iter()
                .filter(|h| h.partition == partition && h.start > *at && &h.run != run)
                .map(|h| h.start)
                .min();
            if let Some(next) = next {
                worst = worst.max(next - at);
            }
        }
    }
    Duration::from_nanos(u64::try_from(worst).unwrap_or(0))
}
