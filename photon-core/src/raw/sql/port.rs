//! The traits a SQL port implements, and the [`StoragePort`] the kit implements over them.
//!
//! A port implements [`SqlPort`] (its writer, checkpoint loads), [`SqlQueries`],
//! [`SqlCatalog`] and [`SqlPages`] (its page reads); every [`StoragePort`] method is then
//! this module's, so that no two SQL ports write one of them twice.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::command::{Command, Reply, Write};
use super::error::writer_gone;
use crate::capabilities::StorageCapabilities;
use crate::error::Result;
use crate::event::{Appended, Record, RecordDraft};
use crate::group::GroupCoordination;
use crate::port::{
    CheckpointKey, DeliveryStream, GroupRequest, RecordStream, StoragePort, StoredCheckpoint,
    SubscribeRequest, TopicInfo,
};
use crate::raw::cursor::PageRead;
use crate::raw::row::PendingRow;
use crate::raw::wake::CommitWakers;

/// The settings of a SQL port that the kit reads.
#[derive(Debug, Clone, Copy)]
pub struct SqlSettings {
    /// The largest stored body the port accepts (its capability).
    pub max_payload_bytes: usize,
    /// Records per page a subscription reads.
    pub page_size: usize,
    /// Longest wait of a caught-up subscription for a commit signal before it reads again
    /// (appends the port is not told about).
    pub recheck: Duration,
    /// Pause of a subscription after a failed read before the next one.
    pub retry_pause: Duration,
}

/// A SQL port's writer and connections: what the kit's [`StoragePort`] needs of it.
#[async_trait]
pub trait SqlPort: SqlQueries + SqlCatalog + SqlPages + Clone + Send + Sync + 'static {
    /// The port's label in logs, metrics and errors.
    const LABEL: &'static str;
    /// What a caller's batch carries for the port's writer (see [`Command`]).
    type Across: Default + Debug + Send + 'static;
    /// The port's own commands (see [`Command::Own`]).
    type Own: Debug + Send + 'static;
    /// A handle that does not keep the port (and its writer) alive.
    type Weak: Send + Sync + 'static;

    /// The settings the kit reads.
    fn settings(&self) -> SqlSettings;

    /// Hands a command to the port's writer.
    ///
    /// # Errors
    /// [`crate::PhotonError::Closed`] when the writer is gone.
    fn send(&self, command: Command<Self::Across, Self::Own>) -> Result<()>;

    /// The commit signals of this port's writer.
    fn heads(&self) -> &CommitWakers;

    /// The group primitive over the port's database.
    fn coordination(&self) -> Arc<dyn GroupCoordination>;

    /// A handle that does not keep the port alive: a subscription holds only this.
    fn downgrade(&self) -> Self::Weak;

    /// The port of a weak handle, while any clone of it lives.
    fn upgrade(weak: &Self::Weak) -> Option<Self>;

    /// The stored seq of a checkpoint.
    ///
    /// # Errors
    /// The read's error.
    async fn stored_checkpoint(&self, key: &CheckpointKey) -> Result<Option<i64>>;

    /// Marks `topic` as a dead-letter topic (idempotent); by default through the writer.
    ///
    /// # Errors
    /// The write's error.
    async fn mark_dead_letters(&self, topic: &str) -> Result<()> {
        ask(self, |reply| Command::DeclareDeadLetters {
            topic: topic.to_owned(),
            reply,
        })
        .await
    }
}

/// Reading stored records back: by id, by topic, newest first, and a topic's head.
#[async_trait]
pub trait SqlQueries {
    /// The record of an event id.
    ///
    /// # Errors
    /// The read's error.
    async fn find(&self, event_id: &str) -> Result<Option<Record>>;

    /// Up to `limit` records of `topic` after `after_seq`, in seq order.
    ///
    /// # Errors
    /// The read's error.
    async fn list_after(&self, topic: &str, after_seq: i64, limit: usize) -> Result<Vec<Record>>;

    /// The newest `limit` records of `topic`, newest first.
    ///
    /// # Errors
    /// The read's error.
    async fn newest(&self, topic: &str, limit: usize) -> Result<Vec<Record>>;

    /// The last seq of `topic` (and `key`), `None` when it has no record.
    ///
    /// # Errors
    /// The read's error.
    async fn head(&self, topic: &str, key: Option<&str>) -> Result<Option<i64>>;
}

/// A subscription's page reads, on a handle that does not keep the port alive.
#[async_trait]
pub trait SqlPages {
    /// What a subscription reads pages with (a pool of connections).
    type Reader: Send + Sync + 'static;

    /// What a subscription reads pages with.
    fn reader(&self) -> Self::Reader;

    /// The next page of `topic` (and `key`) after `after`, at most `limit` records, or the
    /// gap in front of it (see [`super::gap`]).
    ///
    /// # Errors
    /// The read's error; the subscription yields it and reads again after a pause.
    async fn read_page(
        reader: &Self::Reader,
        topic: &str,
        key: Option<&str>,
        after: i64,
        limit: usize,
    ) -> Result<PageRead>;
}

/// Listings: the topics and the stored checkpoints.
#[async_trait]
pub trait SqlCatalog {
    /// Every topic with its counts.
    ///
    /// # Errors
    /// The read's error.
    async fn topics(&self) -> Result<Vec<TopicInfo>>;

    /// Every stored checkpoint.
    ///
    /// # Errors
    /// The read's error.
    async fn checkpoints(&self) -> Result<Vec<StoredCheckpoint>>;
}

/// Sends the command `make` builds around a reply to the port's writer and waits for the
/// answer, which comes after the commit.
///
/// # Errors
/// [`crate::PhotonError::Closed`] when the writer is gone, else the command's own error.
pub async fn ask<P: SqlPort, T>(
    port: &P,
    make: impl FnOnce(Reply<T>) -> Command<P::Across, P::Own>,
) -> Result<T> {
    let (reply, answer) = tokio::sync::oneshot::channel();
    port.send(make(reply))?;
    answer.await.map_err(|_| writer_gone(P::LABEL))?
}

#[async_trait]
impl<P: SqlPort> StoragePort for P {
    fn label(&self) -> &'static str {
        P::LABEL
    }

    fn capabilities(&self) -> StorageCapabilities {
        StorageCapabilities {
            atomic_batches: true,
            durable: true,
            max_payload_bytes: self.settings().max_payload_bytes,
            ..StorageCapabilities::queryable()
        }
    }

    async fn append(&self, draft: RecordDraft) -> Result<Appended> {
        let row = PendingRow::encode(draft, P::LABEL)?;
        ask(self, |reply| Command::Append { row, reply }).await
    }

    async fn append_batch(&self, drafts: Vec<RecordDraft>) -> Result<Vec<Appended>> {
        if drafts.is_empty() {
            return Ok(Vec::new());
        }
        let rows = drafts
            .into_iter()
            .map(|draft| PendingRow::encode(draft, P::LABEL))
            .collect::<Result<Vec<_>>>()?;
        ask(self, |reply| Command::AppendBatch {
            rows,
            reply,
            across: P::Across::default(),
        })
        .await
    }

    fn subscribe(&self, request: SubscribeRequest) -> RecordStream {
        super::subscription::open(self, request)
    }

    async fn get_record(&self, event_id: &str) -> Result<Option<Record>> {
        self.find(event_id).await
    }

    async fn list_by_topic(&self, topic: &str, after: i64, limit: usize) -> Result<Vec<Record>> {
        self.list_after(topic, after, limit).await
    }

    async fn list_recent(&self, topic: &str, limit: usize) -> Result<Vec<Record>> {
        self.newest(topic, limit).await
    }

    async fn list_topics(&self) -> Result<Vec<TopicInfo>> {
        self.topics().await
    }

    async fn list_checkpoints(&self) -> Result<Vec<StoredCheckpoint>> {
        self.checkpoints().await
    }

    async fn head_seq(&self, topic: &str, key: Option<&str>) -> Result<Option<i64>> {
        self.head(topic, key).await
    }

    async fn truncate_before(&self, topic: &str, before_seq: i64) -> Result<u64> {
        ask(self, |reply| Command::Truncate {
            topic: topic.to_owned(),
            before_seq,
            reply,
        })
        .await
    }

    async fn declare_dead_letter_topic(&self, topic: &str) -> Result<()> {
        self.mark_dead_letters(topic).await
    }

    async fn load_checkpoint(&self, key: &CheckpointKey) -> Result<Option<i64>> {
        self.stored_checkpoint(key).await
    }

    async fn commit_checkpoint(&self, key: &CheckpointKey, seq: i64) -> Result<()> {
        write_checkpoint(self, key, Write::Raise(seq)).await
    }

    async fn reset_checkpoint(&self, key: &CheckpointKey, seq: Option<i64>) -> Result<()> {
        write_checkpoint(self, key, Write::Replace(seq)).await
    }

    fn subscribe_group(&self, request: GroupRequest) -> DeliveryStream {
        crate::group::member::subscribe_group(self, request)
    }

    fn group_coordination(&self) -> Option<Arc<dyn GroupCoordination>> {
        Some(self.coordination())
    }

    fn transactional_port(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

/// Writes a checkpoint through the writer and waits for the commit.
async fn write_checkpoint<P: SqlPort>(port: &P, key: &CheckpointKey, write: Write) -> Result<()> {
    ask(port, |reply| Command::Checkpoint {
        key: key.clone(),
        write,
        reply,
    })
    .await
}
