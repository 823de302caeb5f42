//! Events as users see them and records as storage ports keep them.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::headers::Headers;

/// An event delivered to a subscriber: opened, with actor and payload in clear.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Stable id, unique per store, assigned by the storage port.
    pub event_id: String,
    /// Topic the event was published to.
    pub topic_name: String,
    /// Partition key; events of one key keep their publish order.
    pub topic_key: Option<String>,
    /// Position in its partition: strictly increasing in publish order (gaps allowed).
    pub seq: i64,
    /// Who caused the event.
    pub actor: Value,
    /// What happened.
    pub payload: Value,
    /// The headers it was published with (see [`crate::headers`]); empty for events
    /// published without, and for events stored before headers existed.
    #[serde(default, skip_serializing_if = "Headers::is_empty")]
    pub headers: Headers,
    /// When it was published (publisher's clock, UTC).
    pub created_at: DateTime<Utc>,
    /// Fields written by other versions of Photon; kept through every round trip.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// Actor, payload and headers of a record, in clear or sealed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "form", rename_all = "snake_case")]
pub enum Body {
    /// Stored in clear: only when no transport key is configured.
    Plain {
        /// The actor JSON.
        actor: Value,
        /// The payload JSON.
        payload: Value,
        /// The headers; left out of the encoding when empty, so that a record without
        /// headers is stored as before they existed, and such a record reads as empty.
        #[serde(default, skip_serializing_if = "Headers::is_empty")]
        headers: Headers,
    },
    /// Sealed with an AEAD; see [`crate::TransportCrypto`].
    Sealed(SealedBody),
}

/// An AEAD-sealed actor, payload and headers. Held as bytes; in JSON (the SQL ports' rows,
/// the JSON record form) the nonce and the ciphertext are base64 text, and broker records
/// carry them as bytes ([`crate::raw::wire`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SealedBody {
    /// Id of the key that sealed it.
    pub key_id: String,
    /// The nonce (24 bytes when Photon sealed it).
    #[serde(with = "base64_bytes")]
    pub nonce: Vec<u8>,
    /// The ciphertext of `{"actor":..,"payload":..,"headers":{..}}` with its tag
    /// (`headers` left out when there are none).
    #[serde(with = "base64_bytes")]
    pub ciphertext: Vec<u8>,
}

/// Bytes written as standard base64 text in JSON.
mod base64_bytes {
    use base64::engine::general_purpose::STANDARD as BASE64;
    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&BASE64.encode(bytes))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<u8>, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        BASE64
            .decode(text.as_bytes())
            .map_err(|err| serde::de::Error::custom(format!("base64: {err}")))
    }
}

/// What the runtime hands a storage port to append.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordDraft {
    /// Unique id of this publish, made before the append. Bound into the seal, used by
    /// brokers to deduplicate a retried publish, and the event id where the port has no
    /// better one.
    pub envelope_id: String,
    /// Validated topic name.
    pub topic_name: String,
    /// Validated partition key.
    pub topic_key: Option<String>,
    /// Publisher's clock.
    pub created_at: DateTime<Utc>,
    /// Actor, payload and headers.
    pub body: Body,
}

/// A record as stored: a draft plus the id and seq its port assigned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Stable id assigned by the port.
    pub event_id: String,
    /// The draft's envelope id.
    pub envelope_id: String,
    /// Topic name.
    pub topic_name: String,
    /// Partition key.
    pub topic_key: Option<String>,
    /// Position in its partition.
    pub seq: i64,
    /// Publisher's clock.
    pub created_at: DateTime<Utc>,
    /// Actor, payload and headers.
    pub body: Body,
    /// Fields written by other versions of Photon.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Record {
    /// The stored record of a draft once its port assigned `event_id` and `seq`.
    pub fn from_draft(draft: RecordDraft, event_id: String, seq: i64) -> Self {
        Self {
            event_id,
            envelope_id: draft.envelope_id,
            topic_name: draft.topic_name,
            topic_key: draft.topic_key,
            seq,
            created_at: draft.created_at,
            body: draft.body,
            extra: Map::new(),
        }
    }

    /// The headers of a record stored in clear; `None` when its body is sealed (they are
    /// inside the seal: [`crate::EventStore::open`] reads them).
    pub fn headers(&self) -> Option<&Headers> {
        match &self.body {
            Body::Plain { headers, .. } => Some(headers),
            Body::Sealed(_) => None,
        }
    }

    /// Serialized size of the body, which is what port limits apply to.
    pub fn body_len(&self) -> usize {
        body_len(&self.body)
    }
}

/// Serialized size of a body in bytes.
pub fn body_len(body: &Body) -> usize {
    // Serializing a Body cannot fail: it holds only JSON values and strings.
    serde_json::to_vec(body)
        .map(|v| v.len())
        .unwrap_or(usize::MAX)
}

/// What a port returns for an append.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// The stable event id.
    pub event_id: String,
    /// The seq the event got in its partition.
    pub seq: i64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_survive_a_round_trip() {
        let text = json!({
            "event_id": "e1", "topic_name": "t", "topic_key": null, "seq": 1,
            "actor": {}, "payload": {"a": 1}, "created_at": "2026-01-01T00:00:00Z",
            "trace_id": "abc"
        });
        let event: Event = serde_json::from_value(text.clone()).unwrap();
        assert_eq!(event.extra.get("trace_id"), Some(&json!("abc")));
        assert_eq!(serde_json::to_value(&event).unwrap(), text);
    }

    #[test]
    fn headers_are_left_out_when_empty_and_read_as_empty_when_absent() {
        // A body as the SQLite port stored it before headers existed.
        let stored = r#"{"form":"plain","actor":"u","payload":{"n":1}}"#;
        let body: Body = serde_json::from_str(stored).unwrap();
        assert_eq!(
            body,
            Body::Plain {
                actor: json!("u"),
                payload: json!({"n": 1}),
                headers: Headers::new(),
            }
        );
        assert_eq!(serde_json::to_string(&body).unwrap(), stored);
        let with = Body::Plain {
            actor: json!("u"),
            payload: json!({"n": 1}),
            headers: Headers::from([("traceparent".to_owned(), "00-x".to_owned())]),
        };
        let text = serde_json::to_string(&with).unwrap();
        assert_eq!(
            text,
            r#"{"form":"plain","actor":"u","payload":{"n":1},"headers":{"traceparent":"00-x"}}"#
        );
        assert_eq!(serde_json::from_str::<Body>(&text).unwrap(), with);

        let event = json!({
            "event_id": "e1", "topic_name": "t", "topic_key": null, "seq": 1,
            "actor": {}, "payload": 1, "headers": {"a": "b"},
            "created_at": "2026-01-01T00:00:00Z"
        });
        let decoded: Event = serde_json::from_value(event.clone()).unwrap();
        assert_eq!(decoded.headers["a"], "b");
        assert!(decoded.extra.is_empty());
        assert_eq!(serde_json::to_value(&decoded).unwrap(), event);
    }

    #[test]
    fn record_round_trips_sealed_body() {
        let record = Record {
            event_id: "e".into(),
            envelope_id: "v".into(),
            topic_name: "t".into(),
            topic_key: Some("k".into()),
            seq: 3,
            created_at: Utc::now(),
            body: Body::Sealed(SealedBody {
                key_id: "k1".into(),
                nonce: b"nonce".to_vec(),
                ciphertext: b"ct".to_vec(),
            }),
            extra: Map::new(),
        };
        let text = serde_json::to_string(&record).unwrap();
        assert!(
            text.contains(r#""nonce":"bm9uY2U=","ciphertext":"Y3Q=""#),
            "{text}"
        );
        let back: Record = serde_json::from_str(&text).unwrap();
        assert_eq!(back, record);
    }
}
