//! The port's writer lanes: one writer task per topic, and one for checkpoint writes.
//!
//! An append waits for its topic's row lock, which a caller's open transaction holds after
//! it published to the topic ([`crate::publish_in_tx`]), and so does a transactional
//! handler's transaction. With one lane per topic, such a wait holds up only the later
//! writes to that topic, never those to other topics or the checkpoint commits; and a
//! transactional handler that publishes with `Photon::publish` while its transaction holds
//! its checkpoint row gets its answer from a lane that never locks a checkpoint row.
//!
//! - Appends, truncations and tail reads of a topic go to its lane, in the order they were
//!   sent; a tail read is answered after every write to its topic sent before it.
//! - A caller's batch across several topics (all or nothing) runs on the lane of its first
//!   topic in name order; the lanes of its other topics get a barrier: the batch runs once
//!   each of them committed what was sent to it before the batch, and what is sent to them
//!   after the batch waits for its answer. Messages are sent under one lock, so every lane
//!   sees any two batches in the same order, and a lane only ever waits for messages sent
//!   before the one it holds: barriers cannot wait for each other in a circle.
//! - Checkpoint writes go to the checkpoint lane.
//!
//! Lanes are started on first use, on the runtime that opened the port; a lane idle for a
//! minute stops. Each lane runs one transaction at a time on a pooled connection, so as
//! many lanes can wait for locks at once as the pool has connections; each such wait ends
//! at the sessions' `lock_timeout` at the latest.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use deadpool_postgres::Pool;
use photon_core::raw::wake::CommitWakers;
use photon_core::Result;
use tokio::runtime::Handle;
use tokio::sync::{mpsc, oneshot, watch};

use crate::error::LABEL;
use crate::writer::{Command, Message, Writer};
use photon_core::raw::sql::error::writer_gone;

/// Which lane a write goes to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum LaneKey {
    /// The checkpoint writes.
    Checkpoints,
    /// The writes to one topic.
    Topic(String),
}

/// The running lanes' queues.
pub(crate) type Senders = Mutex<HashMap<LaneKey, mpsc::UnboundedSender<Message>>>;

/// Locks the lanes' queues (only inserts, removals and sends happen under the lock).
pub(crate) fn lock(
    senders: &Senders,
) -> MutexGuard<'_, HashMap<LaneKey, mpsc::UnboundedSender<Message>>> {
    senders
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The lanes of one port; dropping it stops them once they committed what they hold.
pub(crate) struct Lanes {
    senders: Arc<Senders>,
    runtime: Handle,
    pool: Pool,
    heads: Arc<CommitWakers>,
    max_batch: usize,
    /// The `NOTIFY` channel of the schema.
    channel: String,
}

impl Lanes {
    /// No lane yet; lanes are spawned on the calling tokio runtime as writes come.
    pub(crate) fn new(
        pool: Pool,
        heads: Arc<CommitWakers>,
        max_batch: usize,
        channel: String,
    ) -> Self {
        Self {
            senders: Arc::default(),
            runtime: Handle::current(),
            pool,
            heads,
            max_batch,
            channel,
        }
    }

    /// Hands a command to its lane (and barriers to the lanes of a batch's other topics).
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Closed`] when no writer task can run (the runtime that
    /// opened the port is shut down).
    pub(crate) fn send(&self, mut command: Command) -> Result<()> {
        let (lane, others) = route(&command);
        let mut senders = lock(&self.senders);
        if !others.is_empty() {
            let (release, released) = watch::channel(());
            let mut ready = Vec::with_capacity(others.len());
            for topic in others {
                let (reached, waiting) = oneshot::channel();
                ready.push(waiting);
                let barrier = Barrier {
                    reached,
                    released: released.clone(),
                };
                self.deliver(&mut senders, LaneKey::Topic(topic), Message::After(barrier))?;
            }
            if let Command::AppendBatch { across, .. } = &mut command {
                *across = Some(Across {
                    ready,
                    _release: release,
                });
            }
        }
        self.deliver(&mut senders, lane, Message::Command(command))
    }

    /// Sends `message` to the lane `key`, starting the lane when it does not run.
    fn deliver(
        &self,
        senders: &mut HashMap<LaneKey, mpsc::UnboundedSender<Message>>,
        key: LaneKey,
        message: Message,
    ) -> Result<()> {
        let message = match senders.get(&key) {
            Some(sender) => match sender.send(message) {
                Ok(()) => return Ok(()),
                // The lane's task is gone (it panicked): start another.
                Err(refused) => refused.0,
            },
            None => message,
        };
        let sender = self.spawn(key.clone());
        let sent = sender.send(message).map_err(|_| writer_gone(LABEL));
        senders.insert(key, sender);
        sent
    }

    /// Starts the writer task of a lane.
    fn spawn(&self, key: LaneKey) -> mpsc::UnboundedSender<Message> {
        let (sender, inbox) = mpsc::unbounded_channel();
        self.runtime.spawn(
            Writer {
                pool: self.pool.clone(),
                heads: Arc::clone(&self.heads),
                inbox,
                max_batch: self.max_batch,
                channel: self.channel.clone(),
                key,
                lanes: Arc::downgrade(&self.senders),
                held: None,
            }
            .run(),
        );
        sender
    }
}

/// A batch across topics as one of its other topics' lanes holds it.
#[derive(Debug)]
pub(crate) struct Barrier {
    /// Sent once the lane committed everything sent to it before the batch.
    reached: oneshot::Sender<()>,
    /// Changes (closes) when the batch was answered.
    released: watch::Receiver<()>,
}

impl Barrier {
    /// Says that this lane reached the batch, then waits until the batch was answered.
    pub(crate) async fn pass(self) {
        let Self {
            reached,
            mut released,
        } = self;
        // The batch's lane may be gone (its caller's batch failed before it ran).
        let _ = reached.send(());
        while released.changed().await.is_ok() {}
    }
}

/// A batch across topics as the lane that runs it holds it.
#[derive(Debug)]
pub struct Across {
    /// One per barrier: answered when that lane reached the batch.
    ready: Vec<oneshot::Receiver<()>>,
    /// Dropped with the command (answered or failed): releases the barriers.
    _release: watch::Sender<()>,
}

impl Across {
    /// Waits until every other lane of the batch committed what was sent before it (a
    /// lane that is gone counts as there).
    pub(crate) async fn ready(&mut self) {
        for reached in self.ready.drain(..) {
            let _ = reached.await;
        }
    }
}

/// The lane of a command, and the other topics of a batch across topics (which get a
/// barrier).
fn route(command: &Command) -> (LaneKey, Vec<String>) {
    match command {
        Command::Append { row, .. } => (LaneKey::Topic(row.topic.clone()), Vec::new()),
        Command::AppendBatch { rows, .. } => {
            let topics: BTreeSet<&str> = rows.iter().map(|row| row.topic.as_str()).collect();
            let mut topics = topics.into_iter().map(str::to_owned);
            // `append_rows` never sends an empty batch; the checkpoint lane would answer one.
            match topics.next() {
                Some(first) => (LaneKey::Topic(first), topics.collect()),
                None => (LaneKey::Checkpoints, Vec::new()),
            }
        }
        Command::Checkpoint { .. } => (LaneKey::Checkpoints, Vec::new()),
        Command::Truncate { topic, .. }
        | Command::TailSeq { topic, .. }
        | Command::DeclareDeadLetters { topic, .. } => (LaneKey::Topic(topic.clone()), Vec::new()),
        Command::Own(never) => match *never {},
    }
}
