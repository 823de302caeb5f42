//! In-process consumer groups over any record stream: one dispatcher per `(group, topic)`
//! hands each event to one member. Members must share one port instance: two processes
//! (or two port instances) each run their own dispatcher and both receive every event.
//! Used by ports without a [`super::GroupCoordination`] primitive (Fluvio); a port with one
//! uses [`super::join`] instead, whose groups span processes.
//!
//! A port that can stream a topic ([`RecordStream`]) gets consumer groups by keeping one
//! [`GroupDispatchers`] and calling [`GroupDispatchers::join`] from
//! `StoragePort::subscribe_group` with a function that opens the topic's stream.
//!
//! A key sticks to the member that has its events in flight, so a key's events are handled
//! in order by one member at a time. When a member leaves, its unacknowledged events are
//! handed, in seq order, to the members that remain.
//!
//! The group's position is a checkpoint of the port ([`group_checkpoint`]): it moves over
//! the contiguous run of acknowledged events (per checkpoint lane), is committed coalesced
//! by a [`CheckpointCommitter`] and flushed whenever a member leaves. A group started in a
//! new process resumes after it; the request's `start` applies only to a group without a
//! stored position. As with durable subscriptions, a crash can hand out again the events
//! acknowledged within the last flush window.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::StreamExt;
use tokio::sync::mpsc;

use crate::checkpoint::{CheckpointCommitter, FlushPolicy};
use crate::error::{PhotonError, Result};
use crate::event::Record;
use crate::port::{
    Acknowledge, CheckpointKey, Delivery, DeliveryStream, GroupRequest, RecordStream, StartAt,
    StoragePort, SubscribeRequest,
};
use crate::progress::Progress;

/// Events in flight per member before the dispatcher stops reading the topic.
const IN_FLIGHT_PER_MEMBER: usize = 1024;

type MemberSender = mpsc::UnboundedSender<Result<Delivery>>;

enum Control {
    Join(String, MemberSender),
    Leave(String),
    Ack(i64),
}

/// The checkpoint that holds the position of `group` on `topic`: subscription
/// `group:{group}`, whole topic.
pub fn group_checkpoint(group: &str, topic: &str) -> CheckpointKey {
    CheckpointKey::new(format!("group:{group}"), topic, None)
}

/// The group dispatchers of one port, by `(group, topic)`.
#[derive(Debug, Default)]
pub struct GroupDispatchers {
    dispatchers: Mutex<HashMap<(String, String), mpsc::UnboundedSender<Control>>>,
}

impl GroupDispatchers {
    /// Joins a member to its group, starting the group's dispatcher (on the current tokio
    /// runtime) when the group has none yet: it loads the group's position from `port`
    /// ([`group_checkpoint`]) and reads `open`'s stream of the whole topic after it.
    ///
    /// The returned stream ends only when the dispatcher stops; dropping it leaves the
    /// group and hands the member's unacknowledged events to the others.
    ///
    /// # Errors
    /// The stream's only item is [`PhotonError::Closed`] when the dispatcher is gone or no
    /// tokio runtime is running; the port's error when the position cannot be loaded.
    pub fn join(
        &self,
        request: GroupRequest,
        port: Arc<dyn StoragePort>,
        open: impl FnOnce(SubscribeRequest) -> RecordStream + Send + 'static,
    ) -> DeliveryStream {
        let closed = || -> DeliveryStream {
            Box::pin(futures::stream::once(std::future::ready(Err(
                PhotonError::Closed(format!("group {}", request.group)),
            ))))
        };
        let Some(control) =
            self.dispatcher(&request.group, &request.topic, request.start, port, open)
        else {
            return closed();
        };
        let (sender, receiver) = mpsc::unbounded_channel();
        if control
            .send(Control::Join(request.member.clone(), sender))
            .is_err()
        {
            return closed();
        }
        let membership = Membership {
            control,
            member: request.member,
        };
        Box::pin(futures::stream::unfold(
            (receiver, membership),
            |(mut receiver, membership)| async move {
                let item = receiver.recv().await?;
                Some((item, (receiver, membership)))
            },
        ))
    }

    fn dispatcher(
        &self,
        group: &str,
        topic: &str,
        start: StartAt,
        port: Arc<dyn StoragePort>,
        open: impl FnOnce(SubscribeRequest) -> RecordStream + Send + 'static,
    ) -> Option<mpsc::UnboundedSender<Control>> {
        // Only map lookups and inserts happen under this lock: a panic cannot leave it torn.
        let mut dispatchers = self
            .dispatchers
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let id = (group.to_owned(), topic.to_owned());
        if let Some(control) = dispatchers.get(&id).filter(|c| !c.is_closed()) {
            return Some(control.clone());
        }
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (control, inbox) = mpsc::unbounded_channel();
        let checkpoint = group_checkpoint(group, topic);
        let dispatcher = Dispatcher::new(control.clone(), inbox, port, checkpoint);
        runtime.spawn(dispatcher.start(start, open));
        dispatchers.insert(id, control.clone());
        Some(control)
    }
}

/// Leaves the group when the member's stream is dropped.
struct Membership {
    control: mpsc::UnboundedSender<Control>,
    member: String,
}

impl Drop for Membership {
    fn drop(&mut self) {
        let _ = self.control.send(Control::Leave(self.member.clone()));
    }
}

struct GroupAck {
    control: mpsc::UnboundedSender<Control>,
    seq: i64,
}

#[async_trait]
impl Acknowledge for GroupAck {
    async fn ack(&self) -> Result<()> {
        self.control
            .send(Control::Ack(self.seq))
            .map_err(|_| PhotonError::Closed("consumer group".into()))
    }
}

struct InFlight {
    record: Record,
    member: String,
}

struct Dispatcher {
    control: mpsc::UnboundedSender<Control>,
    port: Arc<dyn StoragePort>,
    checkpoint: CheckpointKey,
    committer: Arc<CheckpointCommitter>,
    /// Records read from the topic and not yet part of the committed run.
    progress: Progress,
    /// Seqs that became committable, committed by the run loop.
    committable: Vec<i64>,
    /// Whether a member left since the last flush.
    flush_due: bool,
    inbox: mpsc::UnboundedReceiver<Control>,
    /// Joins and leaves set aside while acknowledgements were drained ahead of them.
    deferred: VecDeque<Control>,
    members: BTreeMap<String, MemberSender>,
    key_owner: HashMap<String, (String, usize)>,
    in_flight: BTreeMap<i64, InFlight>,
    waiting: VecDeque<Record>,
    round_robin: usize,
}

impl Dispatcher {
    fn new(
        control: mpsc::UnboundedSender<Control>,
        inbox: mpsc::UnboundedReceiver<Control>,
        port: Arc<dyn StoragePort>,
        checkpoint: CheckpointKey,
    ) -> Self {
        Self {
            control,
            committer: CheckpointCommitter::new(
                port.clone(),
                checkpoint.clone(),
                FlushPolicy::default(),
            ),
            port,
            checkpoint,
            progress: Progress::default(),
            committable: Vec::new(),
            flush_due: false,
            inbox,
            deferred: VecDeque::new(),
            members: BTreeMap::new(),
            key_owner: HashMap::new(),
            in_flight: BTreeMap::new(),
            waiting: VecDeque::new(),
            round_robin: 0,
        }
    }

    /// Loads the group's position, then runs on the topic's stream after it.
    async fn start(
        self,
        start: StartAt,
        open: impl FnOnce(SubscribeRequest) -> RecordStream + Send + 'static,
    ) {
        let start = match self.port.load_checkpoint(&self.checkpoint).await {
            Ok(Some(seq)) => StartAt::AfterSeq(seq),
            Ok(None) => start,
            Err(err) => {
                tracing::warn!(checkpoint = ?self.checkpoint, %err, "cannot load a group position");
                self.fail(err);
                return;
            }
        };
        let records = open(SubscribeRequest {
            topic: self.checkpoint.topic.clone(),
            key: None,
            start,
            durable: Some(self.checkpoint.clone()),
        });
        self.run(records).await;
    }

    /// Ends the group: members that joined get `err`; a later join starts a new dispatcher.
    fn fail(mut self, err: PhotonError) {
        self.inbox.close();
        let message = err.to_string();
        let mut err = Some(err);
        while let Ok(control) = self.inbox.try_recv() {
            if let Control::Join(_, sender) = control {
                let item = err
                    .take()
                    .unwrap_or_else(|| PhotonError::Closed(message.clone()));
                let _ = sender.send(Err(item));
            }
        }
    }

    async fn run(mut self, mut records: RecordStream) {
        loop {
            self.commit().await;
            if let Some(control) = self.deferred.pop_front() {
                self.apply(control);
                continue;
            }
            let reading = !self.members.is_empty()
                && self.waiting.is_empty()
                && self.in_flight.len() < IN_FLIGHT_PER_MEMBER * self.members.len();
            tokio::select! {
                control = self.inbox.recv() => match control {
                    Some(control) => self.apply(control),
                    None => return,
                },
                Some(item) = records.next(), if reading => match item {
                    Ok(record) => {
                        let lane = self.port.checkpoint_lane(&record.topic_name, record.seq);
                        self.progress.received(lane, record.seq, None);
                        self.dispatch(record);
                    }
                    Err(err) => tracing::warn!(%err, "group dispatcher skipped an unreadable record"),
                },
            }
        }
    }

    fn apply(&mut self, control: Control) {
        match control {
            Control::Join(member, sender) => {
                self.members.insert(member, sender);
                self.redispatch_waiting();
            }
            Control::Leave(member) => self.leave(&member),
            Control::Ack(seq) => self.acknowledge(seq),
        }
    }

    /// Commits the run that became contiguous; flushes after a member left.
    async fn commit(&mut self) {
        for seq in std::mem::take(&mut self.committable) {
            if let Err(err) = self.committer.ack(seq).await {
                tracing::warn!(checkpoint = ?self.checkpoint, %err, "group position commit failed; will retry");
            }
        }
        if std::mem::take(&mut self.flush_due) {
            if let Err(err) = self.committer.flush().await {
                tracing::warn!(checkpoint = ?self.checkpoint, %err, "group position flush failed");
            }
        }
    }

    fn acknowledge(&mut self, seq: i64) {
        let Some(done) = self.in_flight.remove(&seq) else {
            return;
        };
        let lane = self.port.checkpoint_lane(&done.record.topic_name, seq);
        if let Some(last) = self.progress.finished(lane, seq).last() {
            self.committable.push(*last);
        }
        if let Some(key) = done.record.topic_key {
            if let Some((_, count)) = self.key_owner.get_mut(&key) {
                *count -= 1;
                if *count == 0 {
                    self.key_owner.remove(&key);
                }
            }
        }
    }

    /// Applies every queued acknowledgement now; joins and leaves keep their order after.
    fn drain_acknowledgements(&mut self) {
        while let Ok(control) = self.inbox.try_recv() {
            match control {
                Control::Ack(seq) => self.acknowledge(seq),
                other => self.deferred.push_back(other),
            }
        }
    }

    fn leave(&mut self, member: &str) {
        self.members.remove(member);
        self.flush_due = true;
        let orphaned: Vec<i64> = self
            .in_flight
            .iter()
            .filter(|(_, f)| f.member == member)
            .map(|(seq, _)| *seq)
            .collect();
        self.key_owner.retain(|_, (owner, _)| owner != member);
        // Orphans go first, in seq order, ahead of anything still waiting.
        for seq in orphaned.into_iter().rev() {
            if let Some(flight) = self.in_flight.remove(&seq) {
                self.waiting.push_front(flight.record);
            }
        }
        self.redispatch_waiting();
    }

    fn redispatch_waiting(&mut self) {
        while !self.members.is_empty() {
            let Some(record) = self.waiting.pop_front() else {
                return;
            };
            self.dispatch(record);
        }
    }

    fn dispatch(&mut self, record: Record) {
        let Some(member) = self.choose(record.topic_key.as_deref()) else {
            self.waiting.push_back(record);
            return;
        };
        let Some(sender) = self.members.get(&member) else {
            // `choose` only names members; keep the record rather than lose it.
            self.waiting.push_front(record);
            return;
        };
        let ack = GroupAck {
            control: self.control.clone(),
            seq: record.seq,
        };
        let delivery = Delivery {
            record: record.clone(),
            ack: Box::new(ack),
        };
        if sender.send(Ok(delivery)).is_err() {
            // The member is gone and its Leave is still queued: handle the leave now, so its
            // keys and unacknowledged events (all of lower seq, hence queued ahead of this
            // record) go to the others. Its acknowledgements are queued too and must count
            // first, or events it already handled would be handed out again.
            self.drain_acknowledgements();
            self.waiting.push_front(record);
            self.leave(&member);
            return;
        }
        if let Some(key) = &record.topic_key {
            let owner = self
                .key_owner
                .entry(key.clone())
                .or_insert((member.clone(), 0));
            owner.1 += 1;
        }
        self.in_flight
            .insert(record.seq, InFlight { record, member });
    }

    fn choose(&mut self, key: Option<&str>) -> Option<String> {
        if self.members.is_empty() {
            return None;
        }
        if let Some((owner, _)) = key.and_then(|k| self.key_owner.get(k)) {
            if self.members.contains_key(owner) {
                return Some(owner.clone());
            }
        }
        let index = match key {
            Some(key) => {
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                key.hash(&mut hasher);
                (hasher.finish() % self.members.len() as u64) as usize
            }
            None => {
                self.round_robin = self.round_robin.wrapping_add(1);
                self.round_robin % self.members.len()
            }
        };
        self.members.keys().nth(index).cloned()
    }
}
