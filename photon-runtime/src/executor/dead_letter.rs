//! Dead letters: events whose handler failed for good are stored on the dead-letter topic
//! (`<topic>.dlq` by default) through the same port, listed and re-published.

use chrono::{DateTime, Utc};
use photon_core::{Appended, Event, EventStore, PhotonError, Result};
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
    /// Its actor.
    pub actor: Value,
    /// Its payload.
    pub payload: Value,
    /// When it was published.
    pub created_at: DateTime<Utc>,
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
    /// # Errors
    /// As [`Photon::publish`].
    pub async fn replay_dead_letter(&self, letter: &DeadLetter) -> Result<Appended> {
        let original = &letter.original;
        self.publish(
            &original.topic,
            original.key.as_deref(),
            original.actor.clone(),
            original.payload.clone(),
        )
        .await
    }
}
