//! [`EventStore`]: the one place where names are validated, bodies sealed and opened, and
//! limits enforced, in front of any [`StoragePort`].

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures::{Stream, StreamExt};
use serde_json::Value;
use tracing::field::Empty;
use tracing::Instrument;

use crate::checkpoint::CheckpointCommitter;
use crate::crypto::{Opened, TransportCrypto};
use crate::error::{PhotonError, Result};
use crate::event::{Appended, Body, Event, Record, RecordDraft};
use crate::headers::{validate_headers, Headers};
use crate::metrics::PublishMetrics;
use crate::port::{CheckpointKey, RecordStream, StartAt, StoragePort, SubscribeRequest};
use crate::topic::{validate_topic_key, validate_topic_name};

/// A stream of opened events. An event that cannot be opened is an error item; the stream
/// continues with the next event.
pub type EventStream = Pin<Box<dyn Stream<Item = Result<Event>> + Send>>;

/// A stored record that could not be opened (wrong key ring, tampered or moved body), with
/// the reason. The record is kept whole, so that it can be stored aside and opened later.
#[derive(Debug)]
pub struct Unopened {
    /// The record as stored.
    pub record: Record,
    /// Why it could not be opened: a [`PhotonError::Crypto`] naming it.
    pub error: PhotonError,
}

/// Where a durable subscription starts when it has no checkpoint yet. In config files and
/// variables: `beginning` or `tail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartPolicy {
    /// Replay the whole retained history (the default: nothing published is missed).
    #[default]
    Beginning,
    /// Only events published after the subscription starts.
    Tail,
}

impl crate::config::Choices for StartPolicy {
    const CHOICES: &'static [(&'static str, Self)] =
        &[("beginning", Self::Beginning), ("tail", Self::Tail)];
}

/// Deepest nesting of arrays and objects accepted in an actor or payload. Stored records
/// wrap the payload in a few more levels, and every port must decode them with serde_json's
/// default recursion limit (128), so the limit leaves room for that.
pub const MAX_JSON_DEPTH: usize = 100;

static PLAINTEXT_WARNED: AtomicBool = AtomicBool::new(false);

/// Adds headers to an event being published, called inside its `photon.publish` span
/// before the headers are checked (see [`EventStore::with_header_injector`]).
pub type HeaderInjector = fn(&mut Headers);

/// A storage port with Photon's rules in front: validation, limits, sealing.
#[derive(Clone)]
pub struct EventStore {
    port: Arc<dyn StoragePort>,
    crypto: TransportCrypto,
    pub(crate) metrics: Arc<PublishMetrics>,
    pub(crate) inject: Option<HeaderInjector>,
}

impl std::fmt::Debug for EventStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStore")
            .field("port", &self.port.label())
            .field("crypto", &self.crypto)
            .finish()
    }
}

impl EventStore {
    /// Wraps a port. Without a key, events are stored in plaintext and this is logged once
    /// per process.
    pub fn new(port: Arc<dyn StoragePort>, crypto: TransportCrypto) -> Self {
        if !crypto.is_sealing() && !PLAINTEXT_WARNED.swap(true, Ordering::Relaxed) {
            tracing::info!(
                port = port.label(),
                "no transport key configured (PHOTON_TRANSPORT_KEYS): events are stored in plaintext"
            );
        }
        let metrics = Arc::new(PublishMetrics::new(port.label()));
        Self {
            port,
            crypto,
            metrics,
            inject: None,
        }
    }

    /// This store, calling `inject` on the headers of every publish, inside its
    /// `photon.publish` span (so that it can write the span's trace context, as the `otel`
    /// feature of `photon-runtime` does). What it adds is checked like any header.
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use futures::StreamExt;
    /// use photon_core::{mem::MemStoragePort, EventStore, Headers, StartAt, TransportCrypto};
    ///
    /// fn stamp(headers: &mut Headers) {
    ///     headers.insert("origin".into(), "billing".into());
    /// }
    /// let store = EventStore::new(std::sync::Arc::new(MemStoragePort::new()), TransportCrypto::plaintext())
    ///     .with_header_injector(stamp);
    /// store.publish("orders", None, serde_json::json!(null), serde_json::json!(1)).await?;
    /// let event = store.subscribe("orders", None, StartAt::Beginning).next().await.unwrap()?;
    /// assert_eq!(event.headers["origin"], "billing");
    /// # Ok::<_, photon_core::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub fn with_header_injector(mut self, inject: HeaderInjector) -> Self {
        self.inject = Some(inject);
        self
    }

    /// The port behind this store.
    pub fn port(&self) -> &Arc<dyn StoragePort> {
        &self.port
    }

    /// The key ring.
    pub fn crypto(&self) -> &TransportCrypto {
        &self.crypto
    }

    /// Validates, seals and appends an event without headers of its own (the injector's
    /// are added), as [`EventStore::publish_with_headers`] does.
    ///
    /// # Errors
    /// As [`EventStore::publish_with_headers`].
    pub async fn publish(
        &self,
        topic: &str,
        key: Option<&str>,
        actor: Value,
        payload: Value,
    ) -> Result<Appended> {
        self.publish_with_headers(topic, key, actor, payload, Headers::new())
            .await
    }

    /// Validates, seals and appends an event with headers, in a `photon.publish` span (see
    /// [`crate::spans`]), counting it in `photon_published_total` or
    /// `photon_publish_errors_total` (see [`crate::metrics`]). The header injector, when
    /// set, adds its headers first, inside the span.
    ///
    /// # Errors
    /// [`PhotonError::InvalidTopic`], [`PhotonError::InvalidKey`],
    /// [`PhotonError::InvalidHeader`], [`PhotonError::PayloadTooLarge`] or
    /// [`PhotonError::PayloadTooDeep`] before anything is stored; the port's errors after.
    pub async fn publish_with_headers(
        &self,
        topic: &str,
        key: Option<&str>,
        actor: Value,
        payload: Value,
        headers: Headers,
    ) -> Result<Appended> {
        self.append_in_span(topic, key, move || {
            self.draft_injected(topic, key, actor, payload, headers)
        })
        .await
    }

    /// Builds the draft of a publish as [`EventStore::publish_with_headers`] does: the
    /// header injector adds its headers first (the trace context of the caller), then as
    /// [`EventStore::draft_with_headers`]. What an event published for later is stored as
    /// until [`EventStore::publish_drafts`] appends it.
    ///
    /// # Errors
    /// As [`EventStore::draft_with_headers`].
    pub fn draft_injected(
        &self,
        topic: &str,
        key: Option<&str>,
        actor: Value,
        payload: Value,
        mut headers: Headers,
    ) -> Result<RecordDraft> {
        if let Some(inject) = self.inject {
            inject(&mut headers);
        }
        self.draft_with_headers(topic, key, actor, payload, headers)
    }

    /// Makes a draft and appends it inside a `photon.publish` span, counting it in
    /// `photon_published_total` or `photon_publish_errors_total`.
    async fn append_in_span(
        &self,
        topic: &str,
        key: Option<&str>,
        draft: impl FnOnce() -> Result<RecordDraft>,
    ) -> Result<Appended> {
        let span = tracing::debug_span!(
            "photon.publish",
            backend = self.port.label(),
            topic,
            key,
            seq = Empty,
            event_id = Empty,
            error = Empty,
        );
        // Made inside the instrumented future, so the span is entered once for both.
        let stored = async { self.port.append(draft()?).await }
            .instrument(span.clone())
            .await;
        match &stored {
            Ok(appended) => {
                span.record("seq", appended.seq);
                span.record("event_id", appended.event_id.as_str());
                self.metrics.published(topic);
            }
            Err(error) => {
                crate::spans::record_error(&span, "publish", error);
                // An invalid name is no topic: it gets no series of its own.
                if validate_topic_name(topic).is_ok() {
                    self.metrics.publish_error(topic);
                }
            }
        }
        stored
    }

    /// Builds the draft of a publish without headers: validation, size limit and sealing,
    /// nothing stored (the header injector is not called).
    ///
    /// # Errors
    /// As [`EventStore::publish`] before the append.
    pub fn draft(
        &self,
        topic: &str,
        key: Option<&str>,
        actor: Value,
        payload: Value,
    ) -> Result<RecordDraft> {
        self.draft_with_headers(topic, key, actor, payload, Headers::new())
    }

    /// Builds the draft of a publish with headers: validation, limits and sealing, nothing
    /// stored (the header injector is not called).
    ///
    /// # Errors
    /// As [`EventStore::publish_with_headers`] before the append.
    pub fn draft_with_headers(
        &self,
        topic: &str,
        key: Option<&str>,
        actor: Value,
        payload: Value,
        headers: Headers,
    ) -> Result<RecordDraft> {
        validate_topic_name(topic)?;
        if let Some(key) = key {
            validate_topic_key(topic, key)?;
        }
        validate_headers(topic, &headers)?;
        let limit = self.port.capabilities().max_payload_bytes;
        // Headers are stored beside actor and payload (inside the seal too): they count.
        let headers_len = if headers.is_empty() {
            0
        } else {
            counted_len(&headers)
        };
        // One walk measures both values and checks their depth; only a refused publish
        // walks them again, to name the exact figure.
        let measured = encoded_len_within(&actor, MAX_JSON_DEPTH)
            .zip(encoded_len_within(&payload, MAX_JSON_DEPTH));
        let size = match measured {
            Some((actor_len, payload_len)) => actor_len.saturating_add(payload_len),
            None => encoded_len(&actor).saturating_add(encoded_len(&payload)),
        }
        .saturating_add(headers_len);
        if size > limit {
            return Err(PhotonError::PayloadTooLarge {
                topic: topic.to_owned(),
                size,
                limit,
            });
        }
        if measured.is_none() {
            return Err(PhotonError::PayloadTooDeep {
                topic: topic.to_owned(),
                depth: json_depth(&actor).max(json_depth(&payload)),
                limit: MAX_JSON_DEPTH,
            });
        }
        let created_at = Utc::now();
        let envelope_id = new_envelope_id(created_at);
        let body = self
            .crypto
            .seal(&envelope_id, topic, key, actor, payload, headers)?;
        Ok(RecordDraft {
            envelope_id,
            topic_name: topic.to_owned(),
            topic_key: key.map(str::to_owned),
            created_at,
            body,
        })
    }

    /// Opens a stored record into an event.
    ///
    /// # Errors
    /// [`PhotonError::Crypto`] naming the event.
    pub fn open(&self, record: Record) -> Result<Event> {
        self.open_record(record).map_err(|unopened| unopened.error)
    }

    /// Opens a stored record into an event, handing the record back when it cannot be
    /// opened, so that a consumer can keep it (a dead letter) instead of losing it.
    ///
    /// # Errors
    /// [`Unopened`] with the record and the [`PhotonError::Crypto`] naming it.
    pub fn open_record(&self, record: Record) -> std::result::Result<Event, Box<Unopened>> {
        let sealing = self.crypto.is_sealing();
        let opened = match record.body {
            Body::Plain {
                actor,
                payload,
                headers,
            } if !sealing => Opened {
                actor,
                payload,
                headers,
            },
            _ => match self.crypto.open(&record) {
                Ok(opened) => opened,
                Err(error) => return Err(Box::new(Unopened { record, error })),
            },
        };
        Ok(Event {
            event_id: record.event_id,
            topic_name: record.topic_name,
            topic_key: record.topic_key,
            seq: record.seq,
            actor: opened.actor,
            payload: opened.payload,
            headers: opened.headers,
            created_at: record.created_at,
            extra: record.extra,
        })
    }

    /// Streams opened events.
    ///
    /// # Errors
    /// An invalid topic or key is the stream's only item.
    pub fn subscribe(&self, topic: &str, key: Option<&str>, start: StartAt) -> EventStream {
        self.subscribe_request(SubscribeRequest {
            topic: topic.to_owned(),
            key: key.map(str::to_owned),
            start,
            durable: None,
        })
    }

    /// Streams opened events for a full request.
    pub fn subscribe_request(&self, request: SubscribeRequest) -> EventStream {
        self.open_stream(self.subscribe_records(request))
    }

    /// Streams the stored records of a full request, unopened (see
    /// [`EventStore::open_record`]).
    pub fn subscribe_records(&self, request: SubscribeRequest) -> RecordStream {
        if let Err(err) = validate_request(&request.topic, request.key.as_deref()) {
            return Box::pin(futures::stream::once(std::future::ready(Err(err))));
        }
        self.port.subscribe(request)
    }

    /// Streams a durable subscription's events: after its checkpoint, or per `policy` when
    /// it has none.
    pub fn subscribe_after_checkpoint(
        &self,
        checkpoint: CheckpointKey,
        policy: StartPolicy,
    ) -> EventStream {
        self.open_stream(self.records_after_checkpoint(checkpoint, policy))
    }

    /// Streams a durable subscription's stored records, unopened: after its checkpoint, or
    /// per `policy` when it has none.
    pub fn records_after_checkpoint(
        &self,
        checkpoint: CheckpointKey,
        policy: StartPolicy,
    ) -> RecordStream {
        if let Err(err) = validate_request(&checkpoint.topic, checkpoint.key.as_deref()) {
            return Box::pin(futures::stream::once(std::future::ready(Err(err))));
        }
        let store = self.clone();
        let opening = async move {
            // A committer of this checkpoint dropped just before may still be storing it.
            CheckpointCommitter::settled(&checkpoint).await;
            let start = match store.port.load_checkpoint(&checkpoint).await? {
                Some(seq) => StartAt::AfterSeq(seq),
                None if policy == StartPolicy::Tail => StartAt::Tail,
                None => StartAt::Beginning,
            };
            Ok::<_, PhotonError>(store.port.subscribe(SubscribeRequest {
                topic: checkpoint.topic.clone(),
                key: checkpoint.key.clone(),
                start,
                durable: Some(checkpoint),
            }))
        };
        Box::pin(
            futures::stream::once(opening).flat_map(|opened| match opened {
                Ok(stream) => stream,
                Err(err) => Box::pin(futures::stream::once(std::future::ready(Err(err)))),
            }),
        )
    }

    fn open_stream(&self, records: RecordStream) -> EventStream {
        let store = self.clone();
        Box::pin(records.map(move |item| item.and_then(|record| store.open(record))))
    }

    /// Finds an event by id.
    ///
    /// # Errors
    /// [`PhotonError::Unsupported`] when the port cannot, [`PhotonError::Crypto`] when the
    /// event cannot be opened.
    pub async fn get_event(&self, event_id: &str) -> Result<Option<Event>> {
        match self.port.get_record(event_id).await? {
            Some(record) => self.open(record).map(Some),
            None => Ok(None),
        }
    }
}

/// A time-ordered (UUID v7) envelope id for a draft made at `now`: what
/// [`EventStore::draft`] gives, for records a runtime writes itself. The random part comes
/// from the thread-local CSPRNG rather than the OS, which would cost a system call per
/// publish.
pub fn new_envelope_id(now: DateTime<Utc>) -> String {
    let millis = u64::try_from(now.timestamp_millis()).unwrap_or(0);
    let random: [u8; 10] = rand::random();
    let uuid = uuid::Builder::from_unix_timestamp_millis(millis, &random).into_uuid();
    // The hyphenated form written into a stack buffer: cheaper than the `Display` path.
    uuid.hyphenated()
        .encode_lower(&mut uuid::Uuid::encode_buffer())
        .to_owned()
}

fn validate_request(topic: &str, key: Option<&str>) -> Result<()> {
    validate_topic_name(topic)?;
    key.map_or(Ok(()), |key| validate_topic_key(topic, key))
}

/// Whether a value nests arrays and objects more than `limit` levels. Recursion stops at the
/// limit, so a hostile value cannot exhaust the stack; nothing is allocated.
pub fn nests_deeper_than(value: &Value, limit: usize) -> bool {
    let deeper = |child: &Value| limit == 0 || nests_deeper_than(child, limit - 1);
    match value {
        Value::Array(items) => limit == 0 || items.iter().any(deeper),
        Value::Object(fields) => limit == 0 || fields.values().any(deeper),
        _ => false,
    }
}

/// Nesting depth of arrays and objects in a value (a scalar is 0).
pub fn json_depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut pending = vec![(value, 0usize)];
    while let Some((value, depth)) = pending.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(fields) => Box::new(fields.values()),
            _ => continue,
        };
        deepest = deepest.max(depth + 1);
        pending.extend(children.map(|child| (child, depth + 1)));
    }
    deepest
}

/// Length of a value's JSON encoding, without allocating it.
pub fn encoded_len(value: &Value) -> usize {
    counted_len(value)
}

/// Length of a value's JSON encoding when it nests at most `limit` levels of arrays and
/// objects, `None` when it nests deeper. One walk over the value checks both publish
/// limits; recursion stops at `limit`, so a hostile value cannot exhaust the stack.
pub fn encoded_len_within(value: &Value, limit: usize) -> Option<usize> {
    let nested = |limit: usize| limit.checked_sub(1);
    match value {
        Value::Null => Some(4),
        Value::Bool(true) => Some(4),
        Value::Bool(false) => Some(5),
        Value::Number(number) => Some(counted_len(number)),
        Value::String(text) => Some(escaped_len(text)),
        Value::Array(items) => {
            let inner = nested(limit)?;
            let mut len = 2 + items.len().saturating_sub(1);
            for item in items {
                len += encoded_len_within(item, inner)?;
            }
            Some(len)
        }
        Value::Object(fields) => {
            let inner = nested(limit)?;
            // Braces, then `"key":value` per field and commas between them.
            let mut len = 2 + fields.len().saturating_sub(1);
            for (key, field) in fields {
                len += escaped_len(key) + 1 + encoded_len_within(field, inner)?;
            }
            Some(len)
        }
    }
}

/// Length of a string as a JSON string literal: quotes, and the escapes serde_json writes
/// (two bytes for `"`, `\` and the short control escapes, six for other control bytes).
fn escaped_len(text: &str) -> usize {
    let needs_escape = |byte: &u8| *byte < 0x20 || *byte == b'"' || *byte == b'\\';
    // Most strings have nothing to escape. A test without early exit vectorizes; `any`
    // would go byte by byte.
    if !text
        .as_bytes()
        .iter()
        .fold(false, |found, byte| found | needs_escape(byte))
    {
        return text.len() + 2;
    }
    let extra: usize = text
        .bytes()
        .map(|byte| match byte {
            b'"' | b'\\' | 0x08 | b'\t' | b'\n' | 0x0C | b'\r' => 1,
            0x00..=0x1F => 5,
            _ => 0,
        })
        .sum();
    text.len() + 2 + extra
}

/// Length of any value's JSON encoding, counted as it is written.
fn counted_len(value: &impl serde::Serialize) -> usize {
    struct Counter(usize);
    impl io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing JSON values into a counter cannot fail.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn depth_of_values() {
        assert_eq!(json_depth(&json!(1)), 0);
        assert_eq!(json_depth(&json!({})), 1);
        assert_eq!(json_depth(&json!({"a": [1, {"b": []}]})), 4);
        assert!(nests_deeper_than(&json!({"a": [1, {"b": []}]}), 3));
        assert!(!nests_deeper_than(&json!({"a": [1, {"b": []}]}), 4));
        assert!(!nests_deeper_than(&json!("scalar"), 0));
        assert!(nests_deeper_than(&json!([]), 0));
    }

    #[test]
    fn one_walk_measures_exactly_and_stops_at_the_depth_limit() {
        let shapes = [
            json!(null),
            json!(true),
            json!(false),
            json!(-17),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(0.1 + 0.2),
            json!(5e-324),
            json!(-1.5e300),
            json!(""),
            json!("quote \" backslash \\ tab \t nl \n cr \r bs \u{8} ff \u{c} nul \u{0} us \u{1f} del \u{7f}"),
            json!("é ü 😀 \u{2028}"),
            json!([]),
            json!({}),
            json!([1, [2, [3, []]], {"a": {}}]),
            json!({"k\"ey\n": [null, {"x": "y"}], "": 0, "i": 7, "data": "x".repeat(128)}),
        ];
        for value in &shapes {
            let exact = serde_json::to_vec(value).unwrap().len();
            assert_eq!(encoded_len_within(value, 100), Some(exact), "{value}");
            assert_eq!(encoded_len(value), exact, "{value}");
            assert_eq!(
                encoded_len_within(value, json_depth(value)),
                Some(exact),
                "{value}"
            );
            if json_depth(value) > 0 {
                assert_eq!(
                    encoded_len_within(value, json_depth(value) - 1),
                    None,
                    "{value}"
                );
            }
        }
        let hostile = (0..100_000).fold(json!(0), |inner, _| Value::Array(vec![inner]));
        assert_eq!(encoded_len_within(&hostile, MAX_JSON_DEPTH), None);
        // Dropping it recursively would exhaust the test thread's stack.
        std::mem::forget(hostile);
    }

    #[tokio::test]
    async fn headers_count_towards_the_size_limit_and_are_checked_before_storing() {
        let port = crate::mem::MemStoragePort::with_max_payload_bytes(64);
        let store = EventStore::new(Arc::new(port), TransportCrypto::plaintext());
        // Actor `null` and a 50-byte payload fit; 14 bytes of headers more do not.
        let payload = json!("x".repeat(48));
        let headers = Headers::from([("ab".to_owned(), "cd".to_owned())]);
        assert_eq!(counted_len(&headers), r#"{"ab":"cd"}"#.len());
        let appended = store
            .publish("t", None, json!(null), payload.clone())
            .await
            .unwrap();
        assert_eq!(appended.seq, 1);
        match store
            .publish_with_headers("t", None, json!(null), payload, headers)
            .await
        {
            Err(PhotonError::PayloadTooLarge { size, limit, .. }) => {
                assert_eq!((size, limit), (4 + 50 + 11, 64));
            }
            other => panic!("expected PayloadTooLarge, got {other:?}"),
        }
        let bad = Headers::from([("bad name".to_owned(), "v".to_owned())]);
        match store
            .publish_with_headers("t", None, json!(null), json!(1), bad)
            .await
        {
            Err(PhotonError::InvalidHeader { topic, header, .. }) => {
                assert_eq!((topic.as_str(), header.as_str()), ("t", "bad name"));
            }
            other => panic!("expected InvalidHeader, got {other:?}"),
        }
        assert_eq!(store.port().head_seq("t", None).await.unwrap(), Some(1));
    }

    #[test]
    fn envelope_ids_are_hyphenated_lower_case_v7_uuids() {
        let id = new_envelope_id(Utc::now());
        let parsed = uuid::Uuid::try_parse(&id).unwrap();
        assert_eq!(parsed.get_version_num(), 7);
        assert_eq!(parsed.to_string(), id);
    }

    #[test]
    fn encoded_len_matches_serialization() {
        let value = json!({"a": "é\n", "b": [1, 2.5, null]});
        assert_eq!(
            encoded_len(&value),
            serde_json::to_vec(&value).unwrap().len()
        );
    }
}
