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
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let span = tracing::debug_span!(
            "photon.publish_batch",
            backend = self.port().label(),
            events = events.len(),
            error = Empty,
        );
        let topics: Vec<String> = events
            .iter()
            .map(|(topic, _)| topic.as_ref().to_owned())
            .collect();
        let stored = self.store_batch(events).instrument(span.clone()).await;
        let counted = match &stored {
            Ok(appended) => appended.len(),
            Err(PhotonError::BatchIncomplete { stored, .. }) => stored.len(),
            Err(_) => 0,
        };
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
        if events.len() > MAX_BATCH_EVENTS {
            return Err(PhotonError::BatchTooLarge {
                events: events.len(),
                limit: MAX_BATCH_EVENTS,
            });
        }
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
