//! Dead letters: events whose handler failed for good, stored records that cannot be
//! opened (no key of the ring opens them) and stored records that cannot be decoded are
//! stored on the dead-letter topic (`<topic>.dlq` by default) through the same port, listed
//! and re-published.
//!
//! # Layout
//! A dead letter is one event on the dead-letter topic: its payload is the original payload
//! as it was (never nested deeper, so whatever passed the publish limits still does), and
//! its actor is the rest of the [`DeadLetter`]. When even that cannot be stored (the letter's
//! metadata pushes it over the port's size or depth limit), the letter is stored without
//! the original actor and payload: [`DeadEvent::omitted`] says why, and the original event
//! stays where it is (topic, seq and event id are kept) until retention removes it.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use chrono::{DateTime, Utc};
use photon_core::{
    Appended, Body, CheckpointKey, Event, EventStore, Headers, PhotonError, Record, Result,
    Unopened,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::executor::config::RetryPolicy;
use crate::executor::retry;
use crate::executor::transactional::LetterCommit;
use crate::photon::Photon;
use crate::shutdown::StopSignal;

/// Records listed per page when reading a dead-letter topic.
const PAGE: usize = 1000;

/// Longest error text kept in a letter that left its original out.
const MAX_REFERENCE_ERROR: usize = 4096;

/// The event a handler gave up on, as stored in its dead letter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadEvent {
    /// Id of the original event.
    pub event_id: String,
    /// Its topic.
    pub topic: String,
    /// Its partition key.
    pub key: Option<String>,
    /// Its seq.
    pub seq: i64,
    /// Its actor (`null` when it could not be opened or decoded, or was omitted).
    pub actor: Value,
    /// Its payload (`null` when it could not be opened or decoded, or was omitted).
    pub payload: Value,
    /// Its headers (empty when it had none, could not be opened or decoded, or was
    /// omitted; an event that could not be opened keeps them in its stored body).
    #[serde(default, skip_serializing_if = "Headers::is_empty")]
    pub headers: Headers,
    /// When it was published (when the record could not be decoded: when it was
    /// dead-lettered).
    pub created_at: DateTime<Utc>,
    /// The body as stored, when the event could not be opened: kept so that it can be
    /// opened once the key that sealed it is in the ring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored: Option<StoredBody>,
    /// The record's stored bytes, when the port could not decode them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undecodable: Option<UndecodableRecord>,
    /// Set when the original actor and payload (or stored form) were left out because the
    /// letter holding them could not be stored: why. The original stays at `seq` of
    /// `topic` until retention removes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omitted: Option<String>,
}

/// The stored body of an event that could not be opened, with what its seal is bound to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredBody {
    /// The envelope id the seal is bound to.
    pub envelope_id: String,
    /// The body, sealed (or in clear where a key is required).
    pub body: Body,
}

/// A stored record its port could not decode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UndecodableRecord {
    /// The bytes as stored, in standard base64.
    pub stored_base64: String,
    /// Why decoding failed.
    pub reason: String,
}

impl UndecodableRecord {
    /// The bytes as stored.
    ///
    /// # Errors
    /// [`PhotonError::InvalidInput`] when `stored_base64` is not base64 (a letter edited by
    /// hand).
    pub fn stored(&self) -> Result<Vec<u8>> {
        BASE64.decode(&self.stored_base64).map_err(|err| {
            PhotonError::InvalidInput(format!("stored bytes of a dead letter: {err}"))
        })
    }
}

impl DeadEvent {
    /// Actor, payload and headers: as recorded, or opened from the stored body with
    /// `store`'s ring.
    fn open(&self, store: &EventStore) -> Result<(Value, Value, Headers)> {
        if let Some(omitted) = &self.omitted {
            return Err(PhotonError::InvalidInput(format!(
                "dead letter of event {} holds no actor and payload ({omitted})",
                self.event_id
            )));
        }
        if let Some(undecodable) = &self.undecodable {
            return Err(PhotonError::InvalidInput(format!(
                "dead letter of event {} holds a record that could not be decoded ({})",
                self.event_id, undecodable.reason
            )));
        }
        let Some(stored) = &self.stored else {
            return Ok((
                self.actor.clone(),
                self.payload.clone(),
                self.headers.clone(),
            ));
        };
        let event = store.open(Record {
            event_id: self.event_id.clone(),
            envelope_id: stored.envelope_id.clone(),
            topic_name: self.topic.clone(),
            topic_key: self.key.clone(),
            seq: self.seq,
            created_at: self.created_at,
            body: stored.body.clone(),
            extra: serde_json::Map::new(),
        })?;
        Ok((event.actor, event.payload, event.headers))
    }
}

/// One dead letter: the failed event, why, and how often it was tried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeadLetter {
    /// Id of the dead-letter event itself (on the dead-letter topic).
    #[serde(default)]
    pub dead_letter_id: String,
    /// Durable subscription whose handler failed.
    pub subscription: String,
    /// Name of the handler.
    pub handler: String,
    /// Text of the last error.
    pub error: String,
    /// Attempts made, the first included.
    pub attempts: u32,
    /// When the handler gave up.
    pub failed_at: DateTime<Utc>,
    /// The original event.
    pub original: DeadEvent,
}

impl DeadLetter {
    /// The dead letter of `event` after `attempts` attempts ending in `error`.
    pub(crate) fn new(
        subscription: &str,
        handler: &str,
        event: &Event,
        error: &PhotonError,
        attempts: u32,
    ) -> Self {
        Self {
            dead_letter_id: String::new(),
            subscription: subscription.to_owned(),
            handler: handler.to_owned(),
            error: error.to_string(),
            attempts,
            failed_at: Utc::now(),
            original: DeadEvent {
                event_id: event.event_id.clone(),
                topic: event.topic_name.clone(),
                key: event.topic_key.clone(),
                seq: event.seq,
                actor: event.actor.clone(),
                payload: event.payload.clone(),
                headers: event.headers.clone(),
                created_at: event.created_at,
                stored: None,
                undecodable: None,
                omitted: None,
            },
        }
    }

    /// The dead letter of a record that could not be opened (no attempt was made).
    pub(crate) fn unopened(subscription: &str, handler: &str, unopened: &Unopened) -> Self {
        let record = &unopened.record;
        Self {
            dead_letter_id: String::new(),
            subscription: subscription.to_owned(),
            handler: handler.to_owned(),
            error: unopened.error.to_string(),
            attempts: 0,
            failed_at: Utc::now(),
            original: DeadEvent {
                event_id: record.event_id.clone(),
                topic: record.topic_name.clone(),
                key: record.topic_key.clone(),
                seq: record.seq,
                actor: Value::Null,
                payload: Value::Null,
                headers: Headers::new(),
                created_at: record.created_at,
                stored: Some(StoredBody {
                    envelope_id: record.envelope_id.clone(),
                    body: record.body.clone(),
                }),
                undecodable: None,
                omitted: None,
            },
        }
    }

    /// The dead letter of a record its port could not decode; `None` when `error` is not
    /// [`PhotonError::Undecodable`].
    pub(crate) fn undecodable(
        subscription: &str,
        handler: &str,
        error: &PhotonError,
    ) -> Option<Self> {
        let PhotonError::Undecodable {
            topic,
            event_id,
            seq,
            key,
            stored,
            reason,
        } = error
        else {
            return None;
        };
        let now = Utc::now();
        Some(Self {
            dead_letter_id: String::new(),
            subscription: subscription.to_owned(),
            handler: handler.to_owned(),
            error: error.to_string(),
            attempts: 0,
            failed_at: now,
            original: DeadEvent {
                event_id: event_id.clone(),
                topic: topic.clone(),
                key: key.clone(),
                seq: *seq,
                actor: Value::Null,
                payload: Value::Null,
                headers: Headers::new(),
                created_at: now,
                stored: None,
                undecodable: Some(UndecodableRecord {
                    stored_base64: BASE64.encode(stored),
                    reason: reason.to_string(),
                }),
                omitted: None,
            },
        })
    }

    /// The letter without its original's actor, payload and stored form, saying why.
    fn reference(&self, why: &PhotonError) -> Self {
        let mut letter = self.clone();
        if letter.error.len() > MAX_REFERENCE_ERROR {
            let mut cut = MAX_REFERENCE_ERROR;
            while !letter.error.is_char_boundary(cut) {
                cut -= 1;
            }
            letter.error.truncate(cut);
            letter.error.push_str("...");
        }
        let original = &mut letter.original;
        original.actor = Value::Null;
        original.payload = Value::Null;
        original.headers = Headers::new();
        original.stored = None;
        original.undecodable = None;
        original.omitted = Some(format!(
            "the letter with the original could not be stored ({why}); the original stays at seq {} of topic {:?} (event {})",
            original.seq, original.topic, original.event_id
        ));
        letter
    }

    /// The actor and payload of the dead-letter event: the letter without the original
    /// payload, and the original payload as it was.
    fn to_stored(&self) -> Result<(Value, Value)> {
        let mut head = self.clone();
        let payload = std::mem::take(&mut head.original.payload);
        let mut actor =
            serde_json::to_value(&head).map_err(|err| PhotonError::codec("dead letter", err))?;
        if let Value::Object(fields) = &mut actor {
            fields.remove("dead_letter_id");
        }
        Ok((actor, payload))
    }

    fn from_event(event: Event) -> Result<Self> {
        let context = || format!("dead letter {} on {:?}", event.event_id, event.topic_name);
        // Letters stored before the current layout hold everything in the payload, and an
        // actor naming only the executor.
        let current = event.actor.get("original").is_some();
        let mut letter: Self = if current {
            let mut letter: Self = serde_json::from_value(event.actor)
                .map_err(|err| PhotonError::codec(context(), err))?;
            letter.original.payload = event.payload;
            letter
        } else {
            serde_json::from_value(event.payload)
                .map_err(|err| PhotonError::codec(context(), err))?
        };
        letter.dead_letter_id = event.event_id;
        Ok(letter)
    }
}

/// How storing a dead letter ended.
#[derive(Debug)]
pub(crate) enum Stored {
    /// Stored with its original.
    Whole,
    /// Stored without the original's actor and payload (see [`DeadEvent::omitted`]).
    Reference,
    /// Shutdown came while retrying an unavailable port: nothing stored.
    Abandoned,
    /// The port refused even the letter without its original, with an error retrying
    /// cannot fix.
    Refused(PhotonError),
}

/// Stores a dead letter on `dlq_topic`. A letter the port refuses for good is stored
/// again without its original; errors that retrying may fix (an unavailable port) are
/// retried with the handler's backoff while `retry` is given and until it signals stop,
/// and returned at once otherwise.
pub(crate) async fn store_dead_letter(
    store: &EventStore,
    dlq_topic: &str,
    letter: &DeadLetter,
    transaction: Option<Transactional<'_>>,
    mut retry: Option<(&RetryPolicy, &mut StopSignal)>,
) -> Stored {
    let mut current = letter.clone();
    let mut whole = true;
    let mut attempt = 0u32;
    let mut declared = photon_core::is_dead_letter_topic(dlq_topic);
    loop {
        let error = match declare(store, dlq_topic, &mut declared).await {
            Err(error) => error,
            Ok(()) => match current.to_stored() {
                Ok((actor, payload)) => match publish(
                    store,
                    dlq_topic,
                    current.original.key.as_deref(),
                    (actor, payload),
                    transaction,
                    current.original.seq,
                )
                .await
                {
                    Ok(_) if whole => return Stored::Whole,
                    Ok(_) => return Stored::Reference,
                    Err(err) => err,
                },
                Err(err) => err,
            },
        };
        if !error.is_retryable() {
            if !whole {
                tracing::error!(topic = dlq_topic, %error, "a dead letter without its original was refused");
                return Stored::Refused(error);
            }
            tracing::warn!(topic = dlq_topic, %error, "dead letter refused; storing it without the original");
            current = letter.reference(&error);
            whole = false;
            continue;
        }
        let Some((policy, stop)) = retry.as_mut() else {
            return Stored::Refused(error);
        };
        attempt = attempt.saturating_add(1);
        tracing::warn!(topic = dlq_topic, %error, attempt, "storing a dead letter failed; retrying");
        tokio::select! {
            () = tokio::time::sleep(retry::delay(policy, attempt)) => {}
            () = stop.stopped() => return Stored::Abandoned,
        }
    }
}

/// Marks `dlq_topic` as a dead-letter topic once (see
/// [`photon_core::StoragePort::declare_dead_letter_topic`]), so that retention keeps it.
///
/// # Errors
/// The port's retryable errors; one it refuses for good is logged and the letter is stored
/// all the same.
async fn declare(store: &EventStore, dlq_topic: &str, declared: &mut bool) -> Result<()> {
    if *declared {
        return Ok(());
    }
    match store.port().declare_dead_letter_topic(dlq_topic).await {
        Err(error) if error.is_retryable() => return Err(error),
        Err(error) => {
            tracing::warn!(topic = dlq_topic, %error, "cannot mark the dead-letter topic; retention may remove its letters");
        }
        Ok(()) => {}
    }
    *declared = true;
    Ok(())
}

/// Where a transactional subscription's dead letters go: stored with the checkpoint
/// advance past their event in one transaction.
#[derive(Clone, Copy)]
pub(crate) struct Transactional<'a> {
    pub(crate) letters: &'a dyn LetterCommit,
    pub(crate) checkpoint: &'a CheckpointKey,
}

/// Publishes a letter, or appends it with the checkpoint advance past `seq`.
async fn publish(
    store: &EventStore,
    dlq_topic: &str,
    key: Option<&str>,
    (actor, payload): (Value, Value),
    transaction: Option<Transactional<'_>>,
    seq: i64,
) -> Result<()> {
    match transaction {
        None => store
            .publish(dlq_topic, key, actor, payload)
            .await
            .map(drop),
        Some(transaction) => {
            let draft = store.draft(dlq_topic, key, actor, payload)?;
            let stored = transaction
                .letters
                .store(draft, transaction.checkpoint.clone(), seq)
                .await?;
            if stored.is_none() {
                tracing::debug!(
                    topic = dlq_topic,
                    seq,
                    "checkpoint already past the event; its letter was stored before"
                );
            }
            Ok(())
        }
    }
}

impl Photon {
    /// The dead letters of `topic` (stored on its dead-letter topic), oldest first.
    ///
    /// # Errors
    /// [`PhotonError::Unsupported`] when the port cannot list topics; `Crypto` or `Codec`
    /// when a stored dead letter cannot be opened or decoded.
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use photon_runtime::{Event, PhotonError};
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// let executor = photon
    ///     .executor()
    ///     .handler("billing", "orders", |_event: Event| async {
    ///         Err::<(), _>(PhotonError::handler_permanent("card declined"))
    ///     })
    ///     .start()?;
    /// photon.publish("orders", Some("o-1"), serde_json::json!(null), serde_json::json!(12)).await?;
    /// executor.wait_idle().await?;
    /// let letters = photon.dead_letters("orders").await?;
    /// assert_eq!(letters.len(), 1);
    /// assert_eq!(letters[0].error, "handler failed: card declined");
    /// assert_eq!(letters[0].original.payload, serde_json::json!(12));
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub async fn dead_letters(&self, topic: &str) -> Result<Vec<DeadLetter>> {
        photon_core::validate_topic_name(topic)?;
        let dlq_topic = self.executor_config().dead_letter_topic(topic);
        let mut letters = Vec::new();
        let mut after = 0;
        loop {
            let page = self
                .store()
                .port()
                .list_by_topic(&dlq_topic, after, PAGE)
                .await?;
            let full = page.len() == PAGE;
            for record in page {
                after = after.max(record.seq);
                letters.push(DeadLetter::from_event(self.store().open(record)?)?);
            }
            if !full {
                return Ok(letters);
            }
        }
    }

    /// Re-publishes the original event of a dead letter on its topic (same key, actor,
    /// payload and headers; a new event id and seq). The dead letter itself stays stored.
    /// With the `otel` feature the replay's own trace context replaces the original
    /// `traceparent`: the replay is a new publish.
    ///
    /// An event that could not be opened is opened first with the current key ring (add the
    /// key that sealed it), then published sealed with the newest key.
    ///
    /// # Errors
    /// [`PhotonError::Crypto`] when the event still cannot be opened; otherwise as
    /// [`Photon::publish`].
    ///
    /// # Examples
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use photon_runtime::{Event, PhotonError};
    /// let photon = photon_runtime::Photon::builder().build()?;
    /// let executor = photon
    ///     .executor()
    ///     .handler("billing", "orders", |event: Event| async move {
    ///         // Fails the first publication only, as a passing outage would.
    ///         if event.seq == 1 { Err(PhotonError::handler_permanent("outage")) } else { Ok(()) }
    ///     })
    ///     .start()?;
    /// photon.publish("orders", Some("o-1"), serde_json::json!(null), serde_json::json!(12)).await?;
    /// executor.wait_idle().await?;
    /// let letter = photon.dead_letters("orders").await?.remove(0);
    /// let replayed = photon.replay_dead_letter(&letter).await?;
    /// assert_eq!(replayed.seq, 2);
    /// executor.wait_idle().await?;
    /// assert_eq!(photon.admin_snapshot().await?.handlers[0].handled, 1);
    /// # Ok::<_, photon_runtime::PhotonError>(())
    /// # }).unwrap();
    /// ```
    pub async fn replay_dead_letter(&self, letter: &DeadLetter) -> Result<Appended> {
        let original = &letter.original;
        let (actor, payload, headers) = original.open(self.store())?;
        self.publish_with_headers(
            &original.topic,
            original.key.as_deref(),
            actor,
            payload,
            headers,
        )
        .await
    }
}
