//! For port authors: records as rows of a SQL table, shared by the SQLite and PostgreSQL
//! ports so that both store and read the same columns the same way.
//!
//! The `body` column holds the body's JSON: `{"form":"plain","actor":..,"payload":..}`
//! with `"headers":{..}` when the event has headers, or the sealed form (headers inside
//! the seal). Rows written before headers existed have no `headers` and read as none.
//! `created_at` is nanoseconds since the Unix epoch; `envelope_id` is stored only when it
//! differs from `event_id`; `extra` holds fields of other writers, as a JSON object.

use chrono::DateTime;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::error::{PhotonError, Result};
use crate::event::{Record, RecordDraft};

/// The columns every record query selects, in this order.
pub const RECORD_COLUMNS: &str =
    "seq, event_id, coalesce(envelope_id, event_id), topic_key, created_at, body, extra";

/// A draft encoded on the caller's task, ready for a port's writer to insert.
#[derive(Debug, Clone)]
pub struct PendingRow {
    /// The event id: the draft's envelope id.
    pub event_id: String,
    /// The draft's envelope id.
    pub envelope_id: String,
    /// Topic name.
    pub topic: String,
    /// Partition key.
    pub topic_key: Option<String>,
    /// Nanoseconds since the Unix epoch.
    pub created_at: i64,
    /// The body's JSON.
    pub body: String,
}

impl PendingRow {
    /// Encodes a draft for the port labelled `backend`; its envelope id becomes its event
    /// id.
    ///
    /// # Errors
    /// [`PhotonError::InvalidInput`] for a timestamp outside 1677..2262,
    /// [`PhotonError::Codec`] when the body cannot be encoded.
    pub fn encode(draft: RecordDraft, backend: &str) -> Result<Self> {
        let created_at = draft.created_at.timestamp_nanos_opt().ok_or_else(|| {
            PhotonError::InvalidInput(format!(
                "created_at {} is outside the range the {backend} port stores (years 1677 to 2262)",
                draft.created_at
            ))
        })?;
        let body = serde_json::to_string(&draft.body)
            .map_err(|e| PhotonError::codec(format!("body of event {}", draft.envelope_id), e))?;
        Ok(Self {
            event_id: draft.envelope_id.clone(),
            envelope_id: draft.envelope_id,
            topic: draft.topic_name,
            topic_key: draft.topic_key,
            created_at,
            body,
        })
    }
}

/// The raw [`RECORD_COLUMNS`] of one stored record.
#[derive(Debug, Clone)]
pub struct StoredRow {
    /// `seq`.
    pub seq: i64,
    /// `event_id`.
    pub event_id: String,
    /// `coalesce(envelope_id, event_id)`.
    pub envelope_id: String,
    /// `topic_key`.
    pub topic_key: Option<String>,
    /// `created_at`, nanoseconds since the Unix epoch.
    pub created_at: i64,
    /// `body` as stored: JSON text is expected, but a damaged row may hold anything.
    pub body: Vec<u8>,
    /// `extra`.
    pub extra: Option<String>,
}

impl StoredRow {
    /// Decodes the record of `topic`.
    ///
    /// # Errors
    /// [`PhotonError::Undecodable`] with the stored body when the body or the extra fields
    /// are not valid.
    pub fn decode(self, topic: &str) -> Result<Record> {
        let undecodable = |part: &str, reason: &dyn std::fmt::Display| {
            PhotonError::undecodable(
                topic,
                &self.event_id,
                self.seq,
                self.topic_key.clone(),
                self.body.clone(),
                format!("{part}: {reason}"),
            )
        };
        let text = std::str::from_utf8(&self.body).map_err(|e| undecodable("body", &e))?;
        let body = decode_json(text).map_err(|e| undecodable("body", &e))?;
        let extra = match &self.extra {
            Some(text) => decode_json::<Map<String, Value>>(text)
                .map_err(|e| undecodable("extra fields", &e))?,
            None => Map::new(),
        };
        Ok(Record {
            event_id: self.event_id,
            envelope_id: self.envelope_id,
            topic_name: topic.to_owned(),
            topic_key: self.topic_key,
            seq: self.seq,
            created_at: DateTime::from_timestamp_nanos(self.created_at),
            body,
            extra,
        })
    }
}

/// Decodes JSON of any nesting depth: whatever could be encoded at publish time decodes
/// (serde_json alone stops at 128 levels), growing the stack on the heap when deep.
fn decode_json<T: DeserializeOwned>(text: &str) -> serde_json::Result<T> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    deserializer.disable_recursion_limit();
    let value = T::deserialize(serde_stacker::Deserializer::new(&mut deserializer))?;
    deserializer.end()?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Body;
    use chrono::Utc;
    use serde_json::json;

    #[test]
    fn deep_json_decodes() {
        let deep = (0..300).fold(
            json!("leaf"),
            |inner, level| json!({ "level": level, "inner": [inner] }),
        );
        let body = Body::Plain {
            actor: json!(null),
            payload: deep,
            headers: crate::Headers::new(),
        };
        let text = serde_json::to_string(&body).unwrap();
        assert!(
            serde_json::from_str::<Body>(&text).is_err(),
            "serde_json alone stops at 128 levels"
        );
        assert_eq!(decode_json::<Body>(&text).unwrap(), body);
    }

    #[test]
    fn timestamps_keep_nanoseconds() {
        let now = Utc::now();
        let draft = RecordDraft {
            envelope_id: "e1".into(),
            topic_name: "t".into(),
            topic_key: Some("k".into()),
            created_at: now,
            body: Body::Plain {
                actor: json!(1),
                payload: json!({"a": [1, 2]}),
                headers: crate::Headers::from([("h".to_owned(), "v".to_owned())]),
            },
        };
        let row = PendingRow::encode(draft.clone(), "test").unwrap();
        let stored = StoredRow {
            seq: 7,
            event_id: row.event_id,
            envelope_id: row.envelope_id,
            topic_key: row.topic_key,
            created_at: row.created_at,
            body: row.body.into_bytes(),
            extra: Some(r#"{"trace_id":"x"}"#.into()),
        };
        let record = stored.decode("t").unwrap();
        assert_eq!(record.created_at, now);
        assert_eq!(record.body, draft.body);
        assert_eq!(record.extra.get("trace_id"), Some(&json!("x")));
        assert_eq!(record.seq, 7);
    }

    #[test]
    fn a_damaged_body_is_undecodable_with_its_bytes() {
        for stored in [&b"{not json"[..], &[0xff, 0xfe, b'{'][..]] {
            let row = StoredRow {
                seq: 9,
                event_id: "e9".into(),
                envelope_id: "e9".into(),
                topic_key: Some("k".into()),
                created_at: 0,
                body: stored.to_vec(),
                extra: None,
            };
            match row.decode("t") {
                Err(PhotonError::Undecodable {
                    topic,
                    event_id,
                    seq,
                    key,
                    stored: bytes,
                    ..
                }) => {
                    assert_eq!((topic.as_str(), event_id.as_str(), seq), ("t", "e9", 9));
                    assert_eq!(key.as_deref(), Some("k"));
                    assert_eq!(&*bytes, stored);
                }
                other => panic!("expected Undecodable, got {other:?}"),
            }
        }
    }
}
