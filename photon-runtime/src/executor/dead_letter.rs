//! Dead letters: events whose handler failed for good, and stored records that cannot be
//! opened (no key of the ring opens them), are stored on the dead-letter topic
//! (`<topic>.dlq` by default) through the same port, listed and re-published.

use chrono::{DateTime, Utc};
use photon_core::{Appended, Body, Event, EventStore, PhotonError, Record, Result, Unopened};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::config::RetryPolicy;
use super::retry;
use super::shutdown::StopSignal;
use crate::photon::Photon;

/// Records listed per page when reading a dead-letter topic.
const PAGE: usize = 1000;

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
    /// Its actor (`null` when it could not be opened).
    pub actor: Value,
    /// Its payload (`null` when it could not be opened).
    pub payload: Value,
    /// When it was published.
    pub created_at: DateTime<Utc>,
    /// The body as stored, when the event could not be opened: kept so that it can be
    /// opened once the key that sealed it is in the ring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stored: Option<StoredBody>,
}

/// The stored body of an event that could not be opened, with what its seal is bound to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredBody {
    /// The envelope id the seal is bound to.
    pub envelope_id: String,
    /// The body, sealed (or in clear where a key is required).
    pub body: Body,
}

impl DeadEvent {
    /// Actor and payload: as recorded, or opened from the stored body with `store`'s ring.
    fn open(&self, store: &EventStore) -> Result<(Value, Value)> {
        let Some(stored) = &self.stored else {
            return Ok((self.actor.clone(), self.payload.clone()));
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
        Ok((event.actor, event.payload))
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
                created_at: event.created_at,
                stored: None,
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
                created_at: record.created_at,
                stored: Some(StoredBody {
                    envelope_id: record.envelope_id.clone(),
                    body: record.body.clone(),
                }),
            },
        }
    }

    fn from_event(event: Event) -> Result<Self> {
        let mut letter: Self = serde_json::from_value(event.payload).map_err(|err| {
            PhotonError::codec(
                format!("dead letter {} on {:?}", event.event_id, event.topic_name),
                err,
            )
        })?;
        letter.dead_letter_id = event.event_id;
        Ok(letter)
    }
}

/// Stores a dead letter on `dlq_topic`, retrying storage errors with the handler's backoff
/// until it is stored or shutdown is requested. Returns whether it was stored.
pub(crate) async fn store_dead_letter(
    store: &EventStore,
    dlq_topic: &str,
    letter: &DeadLetter,
    policy: &RetryPolicy,
    stop: &mut StopSignal,
) -> bool {
    let payload = match serde_json::to_value(letter) {
        Ok(Value::Object(mut fields)) => {
            fields.remove("dead_letter_id");
            Value::Object(fields)
        }
        Ok(other) => other,
        Err(err) => {
            tracing::error!(%err, "dead letter does not serialize");
            return false;
        }
    };
    let actor = json!({ "executor": letter.subscription });
    let key = letter.original.key.as_deref();
    let mut attempt = 0u32;
    loop {
        attempt = attempt.saturating_add(1);
        match store
            .publish(dlq_topic, key, actor.clone(), payload.clone())
            .await
        {
            Ok(_) => return true,
            Err(err) => {
                tracing::warn!(topic = dlq_topic, %err, "storing a dead letter failed; retrying")
            }
        }
        tokio::select! {
            () = tokio::time::sleep(retry::delay(policy, attempt)) => {}
            () = stop.stopped() => return false,
        }
    }
}

impl Photon {
    /// The dead letters of `topic` (stored on its dead-letter topic), oldest first.
    ///
    /// # Errors
    /// [`PhotonError::Unsupported`] when the port cannot list topics; `Crypto` or `Codec`
    /// when a stored dead letter cannot be opened or decoded.
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

    /// Re-publishes the original event of a dead letter on its topic (same key, actor and
    /// payload; a new event id and seq). The dead letter itself stays stored.
    ///
    /// An event that could not be opened is opened first with the current key ring (add the
    /// key that sealed it), then published sealed with the newest key.
    ///
    /// # Errors
    /// [`PhotonError::Crypto`] when the event still cannot be opened; otherwise as
    /// [`Photon::publish`].
    pub async fn replay_dead_letter(&self, letter: &DeadLetter) -> Result<Appended> {
        let original = &letter.original;
        let (actor, payload) = original.open(self.store())?;
        self.publish(&original.topic, original.key.as_deref(), actor, payload)
            .await
    }
}
