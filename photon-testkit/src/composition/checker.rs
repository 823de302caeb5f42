//! The model every history is held to, the same for every port.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::history::{DurableLog, History};

/// What a history broke.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation(pub String);

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Checks a history against the model (see [`super`]).
///
/// # Errors
/// The first [`Violation`] found.
pub fn check(history: &History) -> Result<(), Violation> {
    if let Some(failure) = history.failures.first() {
        return Err(Violation(format!("operation failed or hung: {failure}")));
    }
    for (sub, log) in &history.durable {
        durable_complete(history, *sub, log)?;
        durable_order(*sub, log)?;
        durable_no_silent_skip(history, *sub, log)?;
        durable_no_repeat_after_ack(history, *sub, log)?;
        checkpoints_monotonic(*sub, log)?;
        gaps_explained(history, &log.gaps, &format!("subscription {sub}"))?;
    }
    delayed_on_time_and_once(history)?;
    group_complete(history)?;
    group_no_overlap(history)?;
    group_repeats_under_later_leases(history)?;
    gaps_explained(history, &history.group_gaps, "the group")?;
    if history.handler {
        handlers_fail_for_good_as_designed(history)?;
        handler_complete(history)?;
        handler_repeats_bounded(history)?;
        handler_key_order(history)?;
        batch_key_order(history)?;
    }
    Ok(())
}

/// Every stored event that no retention removed was handled successfully or left a dead
/// letter, never both; only events whose handler fails for good (or, for a batch handler,
/// whose batch failed for good) are dead-lettered, at most one letter per instance that
/// failed on it.
fn handler_complete(history: &History) -> Result<(), Violation> {
    let mut succeeded: HashMap<i64, usize> = HashMap::new();
    let mut failing_runs: HashMap<i64, HashSet<usize>> = HashMap::new();
    for handled in &history.handled {
        if handled.succeeded {
            *succeeded.entry(handled.seq).or_default() += 1;
        } else if handled.for_good {
            failing_runs
                .entry(handled.seq)
                .or_default()
                .insert(handled.run);
        }
    }
    let mut lettered: HashMap<i64, usize> = HashMap::new();
    let listed = history.dead_letters.is_some();
    for seq in history.dead_letters.iter().flatten() {
        *lettered.entry(*seq).or_default() += 1;
    }
    for seq in history.published.keys() {
        let ok = succeeded.get(seq).copied().unwrap_or(0);
        let letters = lettered.get(seq).copied().unwrap_or(0);
        let failed_in = failing_runs.get(seq).map_or(0, HashSet::len);
        let owed = *seq >= history.truncated_before;
        if ok > 0 && letters > 0 {
            return Err(Violation(format!(
                "the handler succeeded on seq {seq} and left {letters} dead letters for it"
            )));
        }
        if letters > failed_in {
            return Err(Violation(format!(
                "seq {seq} has {letters} dead letters but failed for good in {failed_in} instances"
            )));
        }
        // Where letters cannot be listed, failing for good stands for its letter.
        let letters = if listed { letters } else { failed_in.min(1) };
        if ok == 0 && letters == 0 && owed {
            return Err(Violation(format!(
                "the handler neither handled nor dead-lettered seq {seq}"
            )));
        }
    }
    Ok(())
}

/// Once an event was handled successfully, it is attempted again only within the
/// documented bound of a graceful shutdown: in a later instance, and only when an earlier
/// event was still unfinished when the instance that handled it stopped (the checkpoint
/// stays below the first unfinished event; everything after it comes again).
fn handler_repeats_bounded(history: &History) -> Result<(), Violation> {
    // Per seq, the first instance in which it succeeded.
    let mut first_success: BTreeMap<i64, usize> = BTreeMap::new();
    for handled in history.handled.iter().filter(|h| h.succeeded) {
        let run = first_success.entry(handled.seq).or_insert(handled.run);
        *run = (*run).min(handled.run);
    }
    for success in history.handled.iter().filter(|h| h.succeeded) {
        let Some(again) = history
            .handled
            .iter()
            .find(|h| h.seq == success.seq && h.started > success.finished)
        else {
            continue;
        };
        let same_instance = again.run <= success.run;
        let held_back = history.published.keys().any(|earlier| {
            *earlier < success.seq
                && first_success
                    .get(earlier)
                    .is_none_or(|run| *run > success.run)
        });
        if same_instance || !held_back {
            return Err(Violation(format!(
                "the handler ran seq {} again (instance {}) after it succeeded (instance {}) \
                 with nothing unfinished before it",
                success.seq, again.run, success.run
            )));
        }
    }
    Ok(())
}

/// An attempt fails for good exactly when its event fails for good, or (a batch
/// handler) when one event of its batch does.
fn handlers_fail_for_good_as_designed(history: &History) -> Result<(), Violation> {
    let failing_batches: HashSet<u64> = history
        .handled
        .iter()
        .filter(|h| h.behaviour == super::Behaviour::Fails)
        .filter_map(|h| h.batch.map(|(id, _)| id))
        .collect();
    for handled in &history.handled {
        let designed = handled.behaviour == super::Behaviour::Fails
            || handled
                .batch
                .is_some_and(|(id, _)| failing_batches.contains(&id));
        if handled.for_good != designed {
            return Err(Violation(format!(
                "seq {} (instance {}): the attempt failed for good: {}, by design: {designed}",
                handled.seq, handled.run, handled.for_good
            )));
        }
    }
    Ok(())
}

/// Inside one batch, a key's events come in seq order (each batch attempt's positions).
fn batch_key_order(history: &History) -> Result<(), Violation> {
    let mut last: HashMap<(u64, &str), (usize, i64)> = HashMap::new();
    for handled in &history.handled {
        let (Some((id, position)), Some(key)) = (handled.batch, handled.key.as_deref()) else {
            continue;
        };
        if let Some((before, seq)) = last.insert((id, key), (position, handled.seq)) {
            if before > position || seq > handled.seq {
                return Err(Violation(format!(
                    "key {key}, batch {id}: seq {seq} at {before} came before seq {} at {position}",
                    handled.seq
                )));
            }
        }
    }
    Ok(())
}

/// Within one instance, a key's events are handled one after the other in seq order:
/// every attempt on an event starts after every attempt on the key's earlier events
/// finished, except the attempts of one batch, which run together (their order inside the
/// batch is [`batch_key_order`]'s).
fn handler_key_order(history: &History) -> Result<(), Violation> {
    type Spans = BTreeMap<i64, (std::time::Instant, std::time::Instant)>;
    let mut together: HashSet<(i64, i64)> = HashSet::new();
    let mut by_batch: BTreeMap<u64, Vec<i64>> = BTreeMap::new();
    for handled in &history.handled {
        if let Some((id, _)) = handled.batch {
            by_batch.entry(id).or_default().push(handled.seq);
        }
    }
    for seqs in by_batch.values() {
        for a in seqs {
            for b in seqs {
                together.insert((*a, *b));
            }
        }
    }
    let mut by_key: BTreeMap<(usize, &str), Spans> = BTreeMap::new();
    for handled in &history.handled {
        let Some(key) = handled.key.as_deref() else {
            continue;
        };
        let span = by_key
            .entry((handled.run, key))
            .or_default()
            .entry(handled.seq)
            .or_insert((handled.started, handled.finished));
        span.0 = span.0.min(handled.started);
        span.1 = span.1.max(handled.finished);
    }
    for ((run, key), spans) in by_key {
        let spans: Vec<(i64, (std::time::Instant, std::time::Instant))> =
            spans.into_iter().collect();
        for pair in spans.windows(2) {
            let ((earlier, (_, finished)), (later, (started, _))) = (pair[0], pair[1]);
            if started < finished && !together.contains(&(earlier, later)) {
                return Err(Violation(format!(
                    "key {key}, instance {run}: the handler started seq {later} before it was \
                     done with seq {earlier}"
                )));
            }
        }
    }
    Ok(())
}

fn in_gaps(seq: i64, gaps: &[(i64, i64)]) -> bool {
    gaps.iter().any(|(from, to)| (*from..*to).contains(&seq))
}

/// Every stored event that no retention removed reached the subscription or is named by a
/// gap. (An event removed before the subscription had a position past it is not owed: a
/// subscription without a checkpoint starts at the oldest stored event.)
fn durable_complete(history: &History, sub: u8, log: &DurableLog) -> Result<(), Violation> {
    let delivered: HashSet<i64> = log.runs.iter().flatten().map(|d| d.seq).collect();
    let missing: Vec<i64> = history
        .published
        .keys()
        .filter(|seq| **seq >= history.truncated_before)
        .filter(|seq| !delivered.contains(seq) && !in_gaps(**seq, &log.gaps))
        .copied()
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Violation(format!(
        "subscription {sub}: {} stored events neither delivered nor in a gap: {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    )))
}

/// Within one delivery run nothing is skipped silently: between two consecutive
/// deliveries every stored event was delivered earlier in the run or is named by a gap
/// (events are published one operation at a time, so a topic read in seq order, as every
/// port reads a one-shard topic, has no other reason to jump).
fn durable_no_silent_skip(history: &History, sub: u8, log: &DurableLog) -> Result<(), Violation> {
    for (run, deliveries) in log.runs.iter().enumerate() {
        let mut seen = HashSet::new();
        for pair in deliveries.windows(2) {
            seen.insert(pair[0].seq);
            let (a, b) = (pair[0].seq, pair[1].seq);
            if b <= a {
                continue;
            }
            let skipped = history
                .published
                .range(a + 1..b)
                .map(|(seq, _)| *seq)
                .find(|seq| !seen.contains(seq) && !in_gaps(*seq, &log.gaps));
            if let Some(seq) = skipped {
                return Err(Violation(format!(
                    "subscription {sub}, run {run}: went from seq {a} to {b}, skipping stored seq {seq} without a gap"
                )));
            }
        }
    }
    Ok(())
}

/// Within one delivery run each key goes up.
fn durable_order(sub: u8, log: &DurableLog) -> Result<(), Violation> {
    for (run, deliveries) in log.runs.iter().enumerate() {
        let mut last: HashMap<&Option<String>, i64> = HashMap::new();
        for delivered in deliveries {
            if let Some(previous) = last.insert(&delivered.key, delivered.seq) {
                if previous >= delivered.seq {
                    return Err(Violation(format!(
                        "subscription {sub}, run {run}: key {:?} delivered seq {} after {previous}",
                        delivered.key, delivered.seq
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Nothing at or below the subscription's stored position is delivered again. The
/// position moves, within one run, over the contiguous events acknowledged in that run
/// from the position the run started at (acknowledgements past an unacknowledged event
/// are not kept when the run ends; every drop and restart here is graceful, which stores
/// what is kept). Events named by a gap, or removed by retention before being delivered,
/// are passed over.
fn durable_no_repeat_after_ack(
    history: &History,
    sub: u8,
    log: &DurableLog,
) -> Result<(), Violation> {
    let mut position = i64::MIN;
    for (run, deliveries) in log.runs.iter().enumerate() {
        if let Some(repeat) = deliveries.iter().find(|d| d.seq <= position) {
            return Err(Violation(format!(
                "subscription {sub}: seq {} delivered again in run {run}, though the position had passed it ({position})",
                repeat.seq
            )));
        }
        let acked: HashSet<i64> = deliveries
            .iter()
            .filter(|d| d.acked)
            .map(|d| d.seq)
            .collect();
        let delivered: HashSet<i64> = deliveries.iter().map(|d| d.seq).collect();
        let after: Vec<i64> = history
            .published
            .keys()
            .copied()
            .filter(|seq| *seq > position)
            .collect();
        let truncated = log.truncated_by_run.get(run).copied().unwrap_or(0);
        let gaps: Vec<(i64, i64)> = log
            .gaps
            .iter()
            .zip(&log.gap_runs)
            .filter(|(_, gap_run)| **gap_run == run)
            .map(|(gap, _)| *gap)
            .collect();
        for seq in after {
            let removed = seq < truncated && !delivered.contains(&seq);
            if acked.contains(&seq) || in_gaps(seq, &gaps) || removed {
                position = seq;
            } else {
                break;
            }
        }
    }
    Ok(())
}

fn checkpoints_monotonic(sub: u8, log: &DurableLog) -> Result<(), Violation> {
    for pair in log.checkpoints.windows(2) {
        if pair[1] < pair[0] {
            return Err(Violation(format!(
                "subscription {sub}: stored checkpoint went from {:?} to {:?}",
                pair[0], pair[1]
            )));
        }
    }
    Ok(())
}

/// A gap only names events a retention sweep removed.
fn gaps_explained(history: &History, gaps: &[(i64, i64)], whose: &str) -> Result<(), Violation> {
    for (from, to) in gaps {
        let kept = history
            .published
            .range(*from..*to)
            .map(|(seq, _)| *seq)
            .find(|seq| *seq >= history.truncated_before);
        if let Some(seq) = kept {
            return Err(Violation(format!(
                "{whose}: gap {from}..{to} names seq {seq}, which no retention removed (swept before {})",
                history.truncated_before
            )));
        }
    }
    Ok(())
}

/// Every event published for later appeared once, under its key, not before its due
/// time; one that did not appear is excused only by a gap the live subscriber received
/// (a retention sweep removed it before that subscriber read it).
fn delayed_on_time_and_once(history: &History) -> Result<(), Violation> {
    let mut seen: HashSet<usize> = HashSet::new();
    for appeared in &history.appeared {
        let Some((key, due)) = history.scheduled.get(&appeared.op) else {
            return Err(Violation(format!(
                "delayed event of operation {} (seq {}) appeared but was never published for later",
                appeared.op, appeared.seq
            )));
        };
        if !seen.insert(appeared.op) {
            return Err(Violation(format!(
                "delayed event of operation {} appeared twice (again at seq {})",
                appeared.op, appeared.seq
            )));
        }
        if appeared.key != *key {
            return Err(Violation(format!(
                "delayed event of operation {} appeared under key {:?}, published under {key:?}",
                appeared.op, appeared.key
            )));
        }
        if appeared.seen_at < *due {
            return Err(Violation(format!(
                "delayed event of operation {} appeared {} before its time",
                appeared.op,
                *due - appeared.seen_at
            )));
        }
    }
    let missing: Vec<usize> = history
        .scheduled
        .keys()
        .filter(|op| !seen.contains(op))
        .copied()
        .collect();
    if !missing.is_empty() && history.watcher_gaps.is_empty() {
        return Err(Violation(format!(
            "events published for later by operations {missing:?} never appeared"
        )));
    }
    Ok(())
}

/// Every stored event not removed by retention was acknowledged by a member, or named by
/// a gap.
fn group_complete(history: &History) -> Result<(), Violation> {
    if history.group.is_empty() && history.group_gaps.is_empty() {
        return Ok(());
    }
    let acked: HashSet<i64> = history
        .group
        .iter()
        .filter(|d| d.acked_at.is_some())
        .map(|d| d.seq)
        .collect();
    let missing: Vec<i64> = history
        .published
        .keys()
        .filter(|seq| **seq >= history.truncated_before)
        .filter(|seq| !acked.contains(seq) && !in_gaps(**seq, &history.group_gaps))
        .copied()
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Violation(format!(
        "the group: {} stored events never acknowledged: {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    )))
}

/// No key is held by two members at overlapping times with both acknowledgements
/// accepted.
fn group_no_overlap(history: &History) -> Result<(), Violation> {
    let mut by_key: BTreeMap<&str, Vec<_>> = BTreeMap::new();
    for delivery in history.group.iter().filter(|d| d.acked_at.is_some()) {
        if let Some(key) = delivery.key.as_deref() {
            by_key.entry(key).or_default().push(delivery);
        }
    }
    for (key, mut deliveries) in by_key {
        deliveries.sort_by_key(|d| d.delivered_at);
        for pair in deliveries.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let a_end = a.acked_at.unwrap_or(a.delivered_at);
            if (a.member, a.run) != (b.member, b.run) && b.delivered_at < a_end {
                return Err(Violation(format!(
                    "key {key}: seq {} handed to member {} while member {} held seq {}",
                    b.seq, b.member, a.member, a.seq
                )));
            }
        }
    }
    Ok(())
}

/// An event acknowledged in the group is handed out again only under a later lease of
/// its partition (an earlier owner lost it before committing).
fn group_repeats_under_later_leases(history: &History) -> Result<(), Violation> {
    let mut acked: HashMap<i64, (u32, u64)> = HashMap::new();
    let mut in_order: Vec<_> = history.group.iter().collect();
    in_order.sort_by_key(|d| d.delivered_at);
    for delivery in in_order {
        if let Some((partition, epoch)) = acked.get(&delivery.seq) {
            let later = delivery.lease.0 != *partition || delivery.lease.1 > *epoch;
            if !later {
                return Err(Violation(format!(
                    "the group: seq {} acknowledged under partition {partition} epoch {epoch} was handed out again under epoch {}",
                    delivery.seq, delivery.lease.1
                )));
            }
        }
        if delivery.acked_at.is_some() {
            acked.insert(delivery.seq, delivery.lease);
        }
    }
    Ok(())
}
