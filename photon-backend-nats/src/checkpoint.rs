//! Checkpoints: a stream used as a compare-and-set key-value store.
//!
//! The stream `<prefix>_checkpoints` keeps one message per subject
//! (`max_messages_per_subject = 1`); each checkpoint and shard is one subject whose payload
//! is the committed seq. A commit reads the current value and its subject sequence and
//! publishes with `Nats-Expected-Last-Subject-Sequence`; when another writer got there
//! first the server refuses (error 10071) and the commit reads again. A lower seq than the
//! stored one is never written, so checkpoints never regress, also with writers racing.
//!
//! With several shards each shard of a topic has its own position (the shard is decoded
//! from the seq, see [`crate::codec`]). `load_checkpoint` returns the lowest of them (0 when
//! a shard has none), from which resuming every shard loses nothing (events of the shards
//! that were further along are delivered again); durable subscriptions read every shard's
//! position and resume each shard from its own.
//!
//! An operator's reset ([`NatsStoragePort::replace_checkpoint`]) writes the new seq to
//! every shard of the checkpoint without comparing (each shard then resumes at its first
//! event above it), or purges their subjects.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::{self, DiscardPolicy, LastRawMessageErrorKind, StorageType};
use photon_core::{CheckpointKey, PhotonError, Result};

use crate::codec::split_seq;
use crate::error::{storage, unavailable};
use crate::port::NatsStoragePort;

/// Compare-and-set attempts before a commit gives up (each lost race means another writer
/// advanced the checkpoint, so this is only reached under pathological contention).
const MAX_ATTEMPTS: usize = 1000;

/// The checkpoint store of one port (its stream is opened on first use and cached with
/// the topic streams).
#[derive(Debug)]
pub(crate) struct Checkpoints {
    replicas: usize,
}

impl Checkpoints {
    pub(crate) fn new(replicas: usize) -> Self {
        Self { replicas }
    }

    fn template(&self) -> stream::Config {
        stream::Config {
            storage: StorageType::File,
            num_replicas: self.replicas,
            max_messages_per_subject: 1,
            discard: DiscardPolicy::Old,
            allow_direct: true,
            allow_rollup: true,
            ..stream::Config::default()
        }
    }
}

impl NatsStoragePort {
    pub(crate) async fn checkpoint_stream(&self) -> Result<Arc<stream::Stream>> {
        let names = &self.inner.names;
        self.inner
            .streams
            .ensure(names.checkpoint_stream(), || stream::Config {
                subjects: vec![names.checkpoint_subjects()],
                ..self.inner.checkpoints.template()
            })
            .await
    }

    /// Stored seq and its subject sequence, `None` when never committed.
    async fn read_position(
        &self,
        stream: &stream::Stream,
        subject: &str,
    ) -> Result<Option<(i64, u64)>> {
        match stream.get_last_raw_message_by_subject(subject).await {
            Ok(message) => {
                let text = std::str::from_utf8(&message.payload).unwrap_or_default();
                let seq = text.parse::<i64>().map_err(|err| {
                    storage(
                        format!("checkpoint {subject} holds {text:?}, not a seq"),
                        err,
                    )
                })?;
                Ok(Some((seq, message.sequence)))
            }
            Err(err) if err.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(err) => Err(unavailable(
                format!("cannot read checkpoint {subject}"),
                err,
            )),
        }
    }

    /// The committed seq of every shard of a checkpoint that has one.
    pub(crate) async fn checkpoint_positions(
        &self,
        key: &CheckpointKey,
    ) -> Result<BTreeMap<u32, i64>> {
        let stream = self.checkpoint_stream().await?;
        let names = &self.inner.names;
        let shards: Vec<u32> = match key.key.as_deref() {
            Some(topic_key) => vec![names.shard_of(Some(topic_key))],
            None => (0..names.shards()).collect(),
        };
        let mut positions = BTreeMap::new();
        for shard in shards {
            let subject = names.checkpoint_subject(key, shard);
            if let Some((seq, _)) = self.read_position(&stream, &subject).await? {
                positions.insert(shard, seq);
            }
        }
        Ok(positions)
    }

    /// Raises the position of the seq's shard to `seq` unless it is already there or above.
    pub(crate) async fn raise_checkpoint(&self, key: &CheckpointKey, seq: i64) -> Result<()> {
        let stream = self.checkpoint_stream().await?;
        let names = &self.inner.names;
        // A key lives in one shard: its checkpoint has one position. A whole-topic
        // checkpoint keeps one position per shard, named by the seq.
        let shard = match key.key.as_deref() {
            Some(topic_key) => names.shard_of(Some(topic_key)),
            None => split_seq(seq, names.shards()).1,
        };
        let subject = names.checkpoint_subject(key, shard);
        for _ in 0..MAX_ATTEMPTS {
            let current = self.read_position(&stream, &subject).await?;
            if current.is_some_and(|(stored, _)| stored >= seq) {
                return Ok(());
            }
            let expected = current.map_or(0, |(_, subject_seq)| subject_seq);
            let message = PublishMessage::build()
                .payload(seq.to_string().into())
                .expected_last_subject_sequence(expected);
            let context = self.inner.streams.context();
            let sent = context.send_publish(subject.clone(), message).await;
            let acked = match sent {
                Ok(pending) => pending.await,
                Err(err) => Err(err),
            };
            match acked {
                Ok(_) => return Ok(()),
                Err(err) if err.kind() == PublishErrorKind::WrongLastSequence => continue,
                Err(err) => {
                    return Err(unavailable(
                        format!("cannot commit checkpoint {subject}"),
                        err,
                    ))
                }
            }
        }
        Err(PhotonError::Storage {
            backend: crate::error::LABEL,
            message: format!("checkpoint {subject}: lost {MAX_ATTEMPTS} compare-and-set races"),
            source: None,
        })
    }

    /// Sets every shard position of a checkpoint to `seq`, or purges them.
    pub(crate) async fn replace_checkpoint(
        &self,
        key: &CheckpointKey,
        seq: Option<i64>,
    ) -> Result<()> {
        let stream = self.checkpoint_stream().await?;
        let names = &self.inner.names;
        let shards: Vec<u32> = match key.key.as_deref() {
            Some(topic_key) => vec![names.shard_of(Some(topic_key))],
            None => (0..names.shards()).collect(),
        };
        for shard in shards {
            let subject = names.checkpoint_subject(key, shard);
            match seq {
                Some(seq) => {
                    let context = self.inner.streams.context();
                    let sent = context
                        .publish(subject.clone(), seq.to_string().into())
                        .await;
                    let acked = match sent {
                        Ok(pending) => pending.await.map(drop),
                        Err(err) => Err(err),
                    };
                    acked.map_err(|err| {
                        unavailable(format!("cannot reset checkpoint {subject}"), err)
                    })?;
                }
                None => {
                    stream
                        .purge()
                        .filter(subject.clone())
                        .await
                        .map_err(|err| {
                            unavailable(format!("cannot remove checkpoint {subject}"), err)
                        })?;
                }
            }
        }
        Ok(())
    }
}
