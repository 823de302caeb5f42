//! Batch publishing: many events checked first, then handed to the port in one
//! [`StoragePort::append_batch`](crate::StoragePort::append_batch), which a port with
//! capability `atomic_batches` stores in one transaction (one durable commit for all).

use serde_json::Value;
use tracing::field::Empty;
use tracing::Instrument;

use crate::error::{PhotonError, Result};
use crate::event::{Appended, RecordDraft};
use crate::headers::Headers;
use crate::store::EventStore;
use crate::topic::validate_topic_name;

/// Most events one batch may hold: a batch is one transaction on the SQL ports, and a
/// bounded one keeps a commit (and the memory of its drafts) bounded.
pub const MAX_BATCH_EVENTS: usize = 4096;

/// One event of a batch: its key, actor, payload and headers (the topic is given beside it).
///
/// ```
/// use photon_core::{BatchEvent, Headers};
/// use serde_json::json;
/// let event = BatchEvent::new(json!({"total": 12}))
///     .key("o-1")
///     .actor(json!("alice"))
///     .headers(Headers::from([("request-id".to_owned(), "r-7".to_owned())]));
/// assert_eq!(event.key.as_deref(), Some("o-1"));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct BatchEvent {
    /// Partition key, `None` for none.
    pub key: Option<String>,
    /// Who caused the event (`null` unless set).
    pub actor: Value,
    /// What happened.
    pub payload: Value,
    /// Headers (see [`crate::headers`]); empty unless set.
    pub headers: Headers,
}

impl BatchEvent {
    /// An event with this payload, no key, actor `null` and no headers.
    pub fn new(payload: Value) -> Self {
        Self {
            key: None,
            actor: Value::Null,
            payload,
            headers: Headers::new(),
        }
    }

    /// This event with a partition key.
    #[must_use]
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// This event with an actor.
    #[must_use]
    pub fn actor(mut self, actor: Value) -> Self {
        self.actor = actor;
        self
    }

    /// This event with headers (replacing any set before).
    #[must_use]
    pub fn headers(mut self, headers: Headers) -> Self {
        self.headers = headers;
        self
    }
}

impl EventStore {
    /// Validates and seals every event of a batch, then appends them with one
    /// [`StoragePort::append_batch`](crate::StoragePort::append_batch); returns one
    /// [`Appended`] per event, in order. Events may go to different topics; within a topic
    /// and key they keep batch order. An empty batch returns at once.
    ///
    /// Runs in one `photon.publish_batch` span (see [`crate::spans`]); every event counts
    /// once, in `photon_published_total` when stored and `photon_publish_errors_total`
    /// otherwise. The header injector, when set, adds its headers to each event.
    ///
    /// # Errors
    /// Before anything is stored: [`PhotonError::BatchTooLarge`] over
    /// [`MAX_BATCH_EVENTS`]; [`PhotonError::BatchEventRefused`] naming the index of the
    /// first event that [`EventStore::publish_with_headers`] would refuse, with its error.
    /// After: the port's error (with capability `atomic_batches`, nothing was stored), or
    /// [`PhotonError::BatchIncomplete`] holding the events stored before a failure.
    pub async fn publish_batch<T: AsRef<str>>(
        &self,
        events: impl IntoIterator<Item = (T, BatchEvent)>,
    ) -> Result<Vec<Appended>> {
        let events: Vec<(T, BatchEvent)> = events.into_iter().collect();
        let topics: Vec<String> = events
            .iter()
            .map(|(topic, _)| topic.as_ref().to_owned())
            .collect();
        self.append_counted(topics, self.store_batch(events)).await
    }

    /// Appends drafts made earlier by [`EventStore::draft_injected`] (events published for
    /// later, appended when due), then `trailing` (the caller's own records about them,
    /// such as the scheduler's marks): with one
    /// [`StoragePort::append_batch`](crate::StoragePort::append_batch) on a port with
    /// capability `atomic_batches` (one transaction), otherwise with a second one for the
    /// trailing records once every draft is stored. Either way no trailing record is
    /// stored unless every draft was. One `photon.publish_batch` span; the drafts are
    /// counted as [`EventStore::publish_batch`] counts its events, the trailing records
    /// not at all. Returns one [`Appended`] per record, in order.
    ///
    /// # Errors
    /// [`PhotonError::BatchTooLarge`] over [`MAX_BATCH_EVENTS`] records, before anything is
    /// stored; the port's error (with capability `atomic_batches`, nothing was stored), or
    /// [`PhotonError::BatchIncomplete`] holding the records stored before a failure.
    pub async fn publish_drafts(
        &self,
        drafts: Vec<RecordDraft>,
        trailing: Vec<RecordDraft>,
    ) -> Result<Vec<Appended>> {
        let topics: Vec<String> = drafts
            .iter()
            .map(|draft| draft.topic_name.clone())
            .collect();
        self.append_counted(topics, self.append_then(drafts, trailing))
            .await
    }

    /// Appends `drafts`, then `trailing` once every draft is stored: with one
    /// `append_batch` where batches are atomic, with two otherwise (a port that pipelines a
    /// batch may store a later record of it while an earlier one fails).
    async fn append_then(
        &self,
        drafts: Vec<RecordDraft>,
        trailing: Vec<RecordDraft>,
    ) -> Result<Vec<Appended>> {
        let records = drafts.len() + trailing.len();
        check_batch_len(records)?;
        let port = self.port();
        if trailing.is_empty() || port.capabilities().atomic_batches {
            let mut all = drafts;
            all.extend(trailing);
            return port.append_batch(all).await;
        }
        let incomplete = |stored, error| PhotonError::batch_incomplete(stored, records, error);
        let mut stored = match port.append_batch(drafts).await {
            Ok(stored) => stored,
            Err(PhotonError::BatchIncomplete { stored, source, .. }) => {
                return Err(incomplete(stored, *source));
            }
            Err(error) => return Err(error),
        };
        match port.append_batch(trailing).await {
            Ok(more) => {
                stored.extend(more);
                Ok(stored)
            }
            Err(PhotonError::BatchIncomplete {
                stored: more,
                source,
                ..
            }) => {
                stored.extend(more);
                Err(incomplete(stored, *source))
            }
            Err(error) => Err(incomplete(stored, error)),
        }
    }

    /// Runs `stored`, the append of one event per topic of `topics` (and of records after
    /// them that are not counted), in a `photon.publish_batch` span; every event counts
    /// once, in `photon_published_total` when stored and `photon_publish_errors_total`
    /// otherwise.
    async fn append_counted(
        &self,
        topics: Vec<String>,
        stored: impl std::future::Future<Output = Result<Vec<Appended>>>,
    ) -> Result<Vec<Appended>> {
        if topics.is_empty() {
            return Ok(Vec::new());
        }
        let span = tracing::debug_span!(
            "photon.publish_batch",
            backend = self.port().label(),
            events = topics.len(),
            error = Empty,
        );
        let stored = stored.instrument(span.clone()).await;
        let counted = match &stored {
            Ok(appended) => appended.len(),
            Err(PhotonError::BatchIncomplete { stored, .. }) => stored.len(),
            Err(_) => 0,
        }
        .min(topics.len());
        if let Err(error) = &stored {
            crate::spans::record_error(&span, "publish_batch", error);
        }
        for (index, topic) in topics.iter().enumerate() {
            if index < counted {
                self.metrics.published(topic);
            } else if validate_topic_name(topic).is_ok() {
                // An invalid name is no topic: it gets no series of its own.
                self.metrics.publish_error(topic);
            }
        }
        stored
    }

    async fn store_batch<T: AsRef<str>>(
        &self,
        events: Vec<(T, BatchEvent)>,
    ) -> Result<Vec<Appended>> {
        check_batch_len(events.len())?;
        let drafts = events
            .into_iter()
            .enumerate()
            .map(|(index, (topic, event))| self.batch_draft(topic.as_ref(), event, index))
            .collect::<Result<Vec<RecordDraft>>>()?;
        self.port().append_batch(drafts).await
    }

    /// The draft of the event at `index`, built as a single publish builds it.
    fn batch_draft(&self, topic: &str, event: BatchEvent, index: usize) -> Result<RecordDraft> {
        let BatchEvent {
            key,
            actor,
            payload,
            mut headers,
        } = event;
        if let Some(inject) = self.inject {
            inject(&mut headers);
        }
        self.draft_with_headers(topic, key.as_deref(), actor, payload, headers)
            .map_err(|source| PhotonError::BatchEventRefused {
                index,
                source: Box::new(source),
            })
    }
}

/// [`PhotonError::BatchTooLarge`] for a batch of more than [`MAX_BATCH_EVENTS`] events.
fn check_batch_len(events: usize) -> Result<()> {
    if events > MAX_BATCH_EVENTS {
        return Err(PhotonError::BatchTooLarge {
            events,
            limit: MAX_BATCH_EVENTS,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use futures::StreamExt;
    use serde_json::json;

    use super::*;
    use crate::mem::MemStoragePort;
    use crate::{StartAt, TransportCrypto};

    fn store(limit: usize) -> EventStore {
        let port = MemStoragePort::with_max_payload_bytes(limit);
        EventStore::new(Arc::new(port), TransportCrypto::plaintext())
    }

    #[tokio::test]
    async fn an_empty_batch_stores_nothing_and_an_oversized_one_is_refused() {
        let store = store(1024);
        let none: Vec<(&str, BatchEvent)> = Vec::new();
        assert_eq!(store.publish_batch(none).await.unwrap(), Vec::new());
        let many = (0..=MAX_BATCH_EVENTS).map(|i| ("t", BatchEvent::new(json!(i))));
        match store.publish_batch(many).await {
            Err(PhotonError::BatchTooLarge { events, limit }) => {
                assert_eq!((events, limit), (MAX_BATCH_EVENTS + 1, MAX_BATCH_EVENTS));
            }
            other => panic!("expected BatchTooLarge, got {other:?}"),
        }
        assert_eq!(store.port().head_seq("t", None).await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_refused_event_names_its_index_and_nothing_is_stored() {
        let store = store(64);
        let batch = vec![
            ("t", BatchEvent::new(json!(1))),
            ("t", BatchEvent::new(json!("x".repeat(80)))),
            ("t", BatchEvent::new(json!(3))),
        ];
        let error = store.publish_batch(batch).await.unwrap_err();
        assert_eq!(
            error.to_string(),
            "event 1 of the batch was refused, nothing of the batch was stored: \
             event for topic \"t\" is 86 bytes, over the limit of 64 bytes"
        );
        assert_eq!(store.port().head_seq("t", None).await.unwrap(), None);
    }

    #[tokio::test]
    async fn the_mem_port_stores_a_batch_with_consecutive_seqs_per_topic() {
        let store = store(1024);
        store
            .publish("a", None, json!(null), json!(0))
            .await
            .unwrap();
        let batch = vec![
            ("a", BatchEvent::new(json!(1)).key("k")),
            ("b", BatchEvent::new(json!(2))),
            ("a", BatchEvent::new(json!(3)).actor(json!("u"))),
        ];
        let seqs: Vec<i64> = store
            .publish_batch(batch)
            .await
            .unwrap()
            .iter()
            .map(|appended| appended.seq)
            .collect();
        assert_eq!(seqs, vec![2, 1, 3]);
        let events: Vec<_> = store
            .subscribe("a", None, StartAt::Beginning)
            .take(3)
            .map(|event| {
                let event = event.unwrap();
                (event.seq, event.topic_key, event.actor, event.payload)
            })
            .collect()
            .await;
        assert_eq!(
            events,
            vec![
                (1, None, json!(null), json!(0)),
                (2, Some("k".to_owned()), json!(null), json!(1)),
                (3, None, json!("u"), json!(3)),
            ]
        );
    }

    /// The mem port without atomic batches, refusing appends after the first `accepts`.
    struct FailsAfter {
        inner: MemStoragePort,
        accepts: usize,
        appended: std::sync::atomic::AtomicUsize,
    }

    #[async_trait::async_trait]
    impl crate::StoragePort for FailsAfter {
        fn label(&self) -> &'static str {
            "fails-after"
        }

        fn capabilities(&self) -> crate::StorageCapabilities {
            crate::StorageCapabilities {
                atomic_batches: false,
                ..self.inner.capabilities()
            }
        }

        async fn append(&self, draft: RecordDraft) -> Result<Appended> {
            let n = self
                .appended
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            if n >= self.accepts {
                return Err(PhotonError::Storage {
                    backend: "fails-after",
                    message: format!("append {n} refused"),
                    source: None,
                });
            }
            self.inner.append(draft).await
        }

        fn subscribe(&self, request: crate::SubscribeRequest) -> crate::RecordStream {
            self.inner.subscribe(request)
        }

        async fn head_seq(&self, topic: &str, key: Option<&str>) -> Result<Option<i64>> {
            self.inner.head_seq(topic, key).await
        }

        async fn load_checkpoint(&self, key: &crate::CheckpointKey) -> Result<Option<i64>> {
            self.inner.load_checkpoint(key).await
        }

        async fn commit_checkpoint(&self, key: &crate::CheckpointKey, seq: i64) -> Result<()> {
            self.inner.commit_checkpoint(key, seq).await
        }
    }

    fn failing(accepts: usize) -> EventStore {
        let port = FailsAfter {
            inner: MemStoragePort::new(),
            accepts,
            appended: 0.into(),
        };
        EventStore::new(Arc::new(port), TransportCrypto::plaintext())
    }

    #[tokio::test]
    async fn a_partial_failure_without_atomic_batches_hands_back_the_stored_events() {
        let store = failing(2);
        let batch = (1..=4).map(|n| ("t", BatchEvent::new(json!(n))));
        match store.publish_batch(batch).await {
            Err(error @ PhotonError::BatchIncomplete { .. }) => {
                assert_eq!(
                    error.to_string(),
                    "2 of 4 events of the batch were stored before it failed: \
                     fails-after storage error: append 2 refused"
                );
                let PhotonError::BatchIncomplete { stored, events, .. } = error else {
                    unreachable!()
                };
                assert_eq!(events, 4);
                assert_eq!(stored.iter().map(|a| a.seq).collect::<Vec<_>>(), vec![1, 2]);
            }
            other => panic!("expected BatchIncomplete, got {other:?}"),
        }
        assert_eq!(store.port().head_seq("t", None).await.unwrap(), Some(2));
        // A failure of the first event stored nothing: the plain error.
        let store = failing(0);
        match store
            .publish_batch(vec![("t", BatchEvent::new(json!(1)))])
            .await
        {
            Err(PhotonError::Storage { message, .. }) => assert_eq!(message, "append 0 refused"),
            other => panic!("expected Storage, got {other:?}"),
        }
    }
}

#[cfg(test)]
mod trailing_tests {
    use std::sync::Arc;

    use async_trait::async_trait;
    use serde_json::json;

    use super::*;
    use crate::capabilities::StorageCapabilities;
    use crate::mem::MemStoragePort;
    use crate::port::{CheckpointKey, RecordStream, SubscribeRequest};
    use crate::{StoragePort, TransportCrypto};

    /// The in-process store without atomic batches (a batch is appended record by record,
    /// as a broker's is), refusing every record of the topic `refused`.
    struct OneByOne(MemStoragePort);

    #[async_trait]
    impl StoragePort for OneByOne {
        fn label(&self) -> &'static str {
            "one-by-one"
        }

        fn capabilities(&self) -> StorageCapabilities {
            StorageCapabilities {
                atomic_batches: false,
                ..self.0.capabilities()
            }
        }

        async fn append(&self, draft: RecordDraft) -> Result<Appended> {
            if draft.topic_name == "refused" {
                return Err(PhotonError::InvalidInput("refused by the test".into()));
            }
            self.0.append(draft).await
        }

        fn subscribe(&self, request: SubscribeRequest) -> RecordStream {
            self.0.subscribe(request)
        }

        async fn head_seq(&self, topic: &str, key: Option<&str>) -> Result<Option<i64>> {
            self.0.head_seq(topic, key).await
        }

        async fn load_checkpoint(&self, key: &CheckpointKey) -> Result<Option<i64>> {
            self.0.load_checkpoint(key).await
        }

        async fn commit_checkpoint(&self, key: &CheckpointKey, seq: i64) -> Result<()> {
            self.0.commit_checkpoint(key, seq).await
        }
    }

    fn drafts(store: &EventStore, topics: &[&str]) -> Vec<RecordDraft> {
        topics
            .iter()
            .enumerate()
            .map(|(i, topic)| store.draft(topic, None, json!(null), json!(i)).unwrap())
            .collect()
    }

    #[tokio::test]
    async fn trailing_records_follow_every_draft_or_are_not_stored() {
        for atomic in [false, true] {
            let port: Arc<dyn StoragePort> = if atomic {
                Arc::new(MemStoragePort::new())
            } else {
                Arc::new(OneByOne(MemStoragePort::new()))
            };
            let store = EventStore::new(port, TransportCrypto::plaintext());
            let stored = store
                .publish_drafts(
                    drafts(&store, &["a", "b", "a"]),
                    drafts(&store, &["marks", "marks", "marks"]),
                )
                .await
                .unwrap();
            let seqs: Vec<i64> = stored.iter().map(|appended| appended.seq).collect();
            assert_eq!(seqs, [1, 1, 2, 1, 2, 3], "one per record, in order");

            if !atomic {
                let failed = store
                    .publish_drafts(
                        drafts(&store, &["a", "refused", "a"]),
                        drafts(&store, &["marks"]),
                    )
                    .await;
                match failed {
                    Err(PhotonError::BatchIncomplete { stored, events, .. }) => {
                        assert_eq!((stored.len(), events), (1, 4));
                    }
                    other => panic!("expected BatchIncomplete, got {other:?}"),
                }
                // The mark of the stored draft is not stored either: only whole batches
                // get their trailing records.
                assert_eq!(store.port().head_seq("marks", None).await.unwrap(), Some(3));
                assert_eq!(store.port().head_seq("a", None).await.unwrap(), Some(3));
            }
        }
    }
}
