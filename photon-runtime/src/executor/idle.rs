//! [`Executor::wait_idle`](super::Executor::wait_idle): waits until every handler has
//! finished the events stored when the wait began.
//!
//! The goal of each handler is fixed at the call: the head seq of its topic (of its key,
//! for a key handler). A handler reaches it when every stored event up to that seq that it
//! is to handle is finished (handled or dead-lettered), which is checked against the stored
//! records themselves (the port's `list`), so that topics spread over several shards, whose
//! seqs interleave, are waited for exactly.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use photon_core::group::{current_view, partition_of, GroupScope};
use photon_core::{CheckpointKey, PhotonError, Result, StartPolicy, StoragePort};
use tokio::time::Instant;

use super::RunningHandler;

/// Records read per page while checking which stored events a handler finished.
const PAGE: usize = 500;
/// Longest pause between two checks.
const MAX_PAUSE: Duration = Duration::from_millis(50);

/// How far one durable handler got, per checkpoint lane, as its executor saw it.
#[derive(Debug, Default)]
pub(crate) struct ReadPosition {
    lanes: Mutex<BTreeMap<u32, Lane>>,
    /// The topic's head read just before the handler opened its stream at the tail
    /// (`StartPolicy::Tail`, no checkpoint): the events up to it are never delivered to it.
    tail_head: Mutex<Option<i64>>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Lane {
    first_read: Option<i64>,
    finished_through: Option<i64>,
}

impl ReadPosition {
    /// Records that `seq` was read on `lane`.
    pub(crate) fn read(&self, lane: u32, seq: i64) {
        let mut lanes = self.lanes();
        let entry = lanes.entry(lane).or_default();
        entry.first_read.get_or_insert(seq);
    }

    /// Records that every event of `lane` up to `seq` is finished.
    pub(crate) fn finished_through(&self, lane: u32, seq: i64) {
        let mut lanes = self.lanes();
        let entry = lanes.entry(lane).or_default();
        entry.finished_through = Some(entry.finished_through.map_or(seq, |s| s.max(seq)));
    }

    /// Records the head read just before a stream was opened at the tail.
    pub(crate) fn opened_at_tail(&self, head: Option<i64>) {
        let mut tail_head = self
            .tail_head
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *tail_head = (*tail_head).max(head);
    }

    /// Whether the event at `seq` of `lane` is finished, or (`tail`) was never the
    /// handler's to handle.
    fn covers(&self, lane: u32, seq: i64, tail: bool) -> bool {
        let state = self.lanes().get(&lane).copied().unwrap_or_default();
        if state.finished_through.is_some_and(|through| through >= seq) {
            return true;
        }
        if !tail {
            return false;
        }
        let tail_head = *self
            .tail_head
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        tail_head.is_some_and(|head| seq <= head)
            || state.first_read.is_some_and(|first| seq < first)
    }

    fn lanes(&self) -> MutexGuard<'_, BTreeMap<u32, Lane>> {
        // Only map inserts and plain field updates happen under this lock.
        self.lanes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Waits until every handler of `running` has no event in flight and has finished every
/// event stored up to its topic's head at the call.
///
/// # Errors
/// - [`PhotonError::Unsupported`] when the port has no `head_seq` or `list`.
/// - [`PhotonError::Closed`] when the executor stops while waiting.
/// - [`PhotonError::Timeout`] naming the first handler that was not idle.
/// - The port's storage errors.
pub(crate) async fn wait(
    port: &Arc<dyn StoragePort>,
    running: &[RunningHandler],
    start_policy: StartPolicy,
    stopped: impl Fn() -> bool,
    timeout: Duration,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    let capabilities = port.capabilities();
    if !capabilities.head_seq || !capabilities.list {
        return Err(port.unsupported("Executor::wait_idle (it reads head_seq and list)"));
    }
    let mut goals = Vec::with_capacity(running.len());
    for handler in running {
        goals.push(Goal::at_call(port.as_ref(), handler, start_policy).await?);
    }
    let mut pause = Duration::from_millis(1);
    loop {
        if stopped() {
            return Err(PhotonError::Closed(
                "the executor (while waiting until idle)".into(),
            ));
        }
        let mut missing = None;
        for goal in &mut goals {
            if let Some(why) = goal.missing(port.as_ref()).await? {
                missing.get_or_insert(why);
            }
        }
        let Some(missing) = missing else {
            return Ok(());
        };
        let now = Instant::now();
        if now >= deadline {
            return Err(PhotonError::Timeout {
                operation: "Executor::wait_idle".into(),
                waited: timeout,
                missing,
            });
        }
        tokio::time::sleep(pause.min(deadline - now)).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

/// One handler's goal, fixed at the call.
struct Goal<'a> {
    handler: &'a RunningHandler,
    /// The head seq at the call; `None`: nothing was stored.
    target: Option<i64>,
    reader: Reader,
    /// Every stored event up to this seq is known to be finished (it only grows).
    checked_through: i64,
}

/// Who finishes a handler's events.
enum Reader {
    /// The handler's own durable subscription: its checkpoint at the call, then what its
    /// executor finished.
    Durable { tail: bool },
    /// A consumer group: the partitions' committed checkpoints.
    Group {
        scope: GroupScope,
        /// The group's partitions when no member stored its layout yet.
        partitions: u32,
    },
}

impl<'a> Goal<'a> {
    async fn at_call(
        port: &dyn StoragePort,
        handler: &'a RunningHandler,
        start_policy: StartPolicy,
    ) -> Result<Goal<'a>> {
        let options = &handler.options;
        let (reader, checked_through) = match options.group_name() {
            Some(group) => {
                let partitions = options.group_options(String::new()).partitions;
                let scope = GroupScope::new(group, options.topic());
                (Reader::Group { scope, partitions }, 0)
            }
            None => {
                let key =
                    CheckpointKey::new(options.durable(), options.topic(), options.topic_key());
                let checkpoint = port.load_checkpoint(&key).await?;
                let tail = start_policy == StartPolicy::Tail && checkpoint.is_none();
                (Reader::Durable { tail }, checkpoint.unwrap_or(0))
            }
        };
        let key = if options.group_name().is_some() {
            None
        } else {
            options.topic_key()
        };
        Ok(Goal {
            handler,
            target: port.head_seq(options.topic(), key).await?,
            reader,
            checked_through,
        })
    }

    /// Why this handler is not idle yet; `None` when it is.
    async fn missing(&mut self, port: &dyn StoragePort) -> Result<Option<String>> {
        let unfinished = self.first_unfinished(port).await?;
        let in_flight = self.handler.progress.outstanding();
        let options = &self.handler.options;
        Ok(match (unfinished, in_flight) {
            (None, 0) => None,
            (Some(seq), _) => Some(format!(
                "handler {} on topic {:?}: the event at seq {seq} (of those up to seq {}, the head at the call) is not finished; {in_flight} in flight",
                options.handler_name(),
                options.topic(),
                self.target.unwrap_or(0),
            )),
            (None, _) => Some(format!(
                "handler {} on topic {:?}: {in_flight} events in flight",
                options.handler_name(),
                options.topic(),
            )),
        })
    }

    /// The seq of the first stored event up to the target that is not finished.
    async fn first_unfinished(&mut self, port: &dyn StoragePort) -> Result<Option<i64>> {
        let Some(target) = self.target else {
            return Ok(None);
        };
        let checkpoints = match &self.reader {
            Reader::Group { scope, partitions } if self.checked_through < target => {
                group_checkpoints(port, scope, *partitions).await?
            }
            _ => GroupCheckpoints::default(),
        };
        // Each page starts after the last record checked, so the scan ends once it passes
        // the target or the stored records run out. A record the port cannot decode fails
        // the whole page: the records are then read one at a time up to it.
        let mut limit = PAGE;
        while self.checked_through < target {
            let topic = self.handler.options.topic();
            let page = match port.list_by_topic(topic, self.checked_through, limit).await {
                Ok(page) => page
                    .into_iter()
                    .map(|record| (record.seq, record.topic_key))
                    .collect(),
                Err(PhotonError::Undecodable { seq, key, .. }) if limit == 1 => vec![(seq, key)],
                Err(PhotonError::Undecodable { .. }) => {
                    limit = 1;
                    continue;
                }
                Err(err) => return Err(err),
            };
            let complete = page.len() < limit;
            limit = PAGE;
            for (seq, key) in page {
                if seq > target {
                    self.checked_through = target;
                    return Ok(None);
                }
                if !self.finished(port, seq, key.as_deref(), &checkpoints) {
                    return Ok(Some(seq));
                }
                self.checked_through = seq;
            }
            if complete {
                self.checked_through = target;
            }
        }
        Ok(None)
    }

    /// Whether the stored event at `seq` under `key` is finished, or not this handler's to
    /// handle.
    fn finished(
        &self,
        port: &dyn StoragePort,
        seq: i64,
        key: Option<&str>,
        checkpoints: &GroupCheckpoints,
    ) -> bool {
        let options = &self.handler.options;
        match &self.reader {
            Reader::Durable { tail } => {
                if options
                    .topic_key()
                    .is_some_and(|wanted| Some(wanted) != key)
                {
                    return true;
                }
                let lane = port.checkpoint_lane(options.topic(), seq);
                self.handler.position.covers(lane, seq, *tail)
            }
            Reader::Group { .. } => {
                let Some(partitions) = checkpoints.partitions else {
                    return false;
                };
                let partition = partition_of(key, seq, partitions);
                checkpoints
                    .by_partition
                    .get(&partition)
                    .is_some_and(|checkpoint| *checkpoint >= seq)
            }
        }
    }
}

/// The committed checkpoints of a group's current layout.
#[derive(Debug, Default)]
struct GroupCheckpoints {
    /// The layout's partition count; `None` when not read.
    partitions: Option<u32>,
    by_partition: HashMap<u32, i64>,
}

/// The committed checkpoint of every partition of a group's current layout that has one.
async fn group_checkpoints(
    port: &dyn StoragePort,
    scope: &GroupScope,
    fallback: u32,
) -> Result<GroupCheckpoints> {
    let Some(coordination) = port.group_coordination() else {
        return Err(port.unsupported("Executor::wait_idle for group handlers (no group leases)"));
    };
    let (layout, leases) = current_view(coordination.as_ref(), scope, fallback).await?;
    Ok(GroupCheckpoints {
        partitions: Some(layout.count),
        by_partition: leases
            .into_iter()
            .filter_map(|(index, lease)| lease.checkpoint.map(|seq| (index, seq)))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_covers_what_it_finished() {
        let position = ReadPosition::default();
        position.read(0, 3);
        position.finished_through(0, 5);
        assert!(position.covers(0, 5, false));
        assert!(!position.covers(0, 6, false));
        assert!(!position.covers(1, 1, false));
    }

    #[test]
    fn a_tail_start_passes_over_what_was_stored_before() {
        let position = ReadPosition::default();
        position.opened_at_tail(Some(10));
        assert!(position.covers(0, 10, true));
        assert!(!position.covers(0, 10, false));
        assert!(!position.covers(0, 11, true));
        position.read(0, 14);
        assert!(position.covers(0, 13, true));
        assert!(!position.covers(0, 14, true));
    }
}
