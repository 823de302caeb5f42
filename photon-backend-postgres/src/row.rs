//! Records as rows: encoding a draft for the writer, decoding a row into a record.
//!
//! The `body` column holds the body's JSON bytes: `{"form":"plain","actor":..,"payload":..}`
//! with `"headers":{..}` when the event has headers, or the sealed form (headers inside
//! the seal). `created_at` is nanoseconds since the Unix epoch.

use chrono::DateTime;
use photon_core::{PhotonError, Record, RecordDraft, Result};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use tokio_postgres::Row;

/// The columns every record query selects, in this order.
/// (`envelope_id` is stored only when it differs from `event_id`.)
pub(crate) const RECORD_COLUMNS: &str =
    "seq, event_id, coalesce(envelope_id, event_id), topic_key, created_at, body, extra";

/// A draft encoded on the caller's task, ready for the writer to insert.
#[derive(Debug)]
pub(crate) struct PendingRow {
    pub(crate) event_id: String,
    pub(crate) envelope_id: String,
    pub(crate) topic: String,
    pub(crate) topic_key: Option<String>,
    /// Nanoseconds since the Unix epoch.
    pub(crate) created_at: i64,
    pub(crate) body: Vec<u8>,
}

impl PendingRow {
    /// Encodes a draft; its envelope id becomes its event id.
    ///
    /// # Errors
    /// [`PhotonError::InvalidInput`] for a timestamp outside 1677..2262,
    /// [`PhotonError::Codec`] when the body cannot be encoded.
    pub(crate) fn encode(draft: RecordDraft) -> Result<Self> {
        let created_at = draft.created_at.timestamp_nanos_opt().ok_or_else(|| {
            PhotonError::InvalidInput(format!(
                "created_at {} is outside the range the postgres port stores (years 1677 to 2262)",
                draft.created_at
            ))
        })?;
        let body = serde_json::to_vec(&draft.body)
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

/// The raw columns of one stored record.
#[derive(Debug)]
pub(crate) struct StoredRow {
    seq: i64,
    event_id: String,
    envelope_id: String,
    topic_key: Option<String>,
    created_at: i64,
    body: Vec<u8>,
    extra: Option<String>,
}

impl StoredRow {
    /// Reads the [`RECORD_COLUMNS`] of a row.
    pub(crate) fn read(row: &Row) -> std::result::Result<Self, tokio_postgres::Error> {
        Ok(Self {
            seq: row.try_get(0)?,
            event_id: row.try_get(1)?,
            envelope_id: row.try_get(2)?,
            topic_key: row.try_get(3)?,
            created_at: row.try_get(4)?,
            body: row.try_get(5)?,
            extra: row.try_get(6)?,
        })
    }

    /// Decodes the record of `topic`.
    ///
    /// # Errors
    /// [`PhotonError::Undecodable`] with the stored body when the body or the extra fields
    /// are not valid.
    pub(crate) fn decode(self, topic: &str) -> Result<Record> {
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

/// Decodes rows of `topic` read with [`RECORD_COLUMNS`].
///
/// # Errors
/// A column of an unexpected type (a damaged schema) fails the whole read.
pub(crate) fn decode_rows(
    rows: &[Row],
    topic: &str,
) -> std::result::Result<Vec<Result<Record>>, tokio_postgres::Error> {
    rows.iter()
        .map(|row| StoredRow::read(row).map(|stored| stored.decode(topic)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;
    use photon_core::Body;
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
            headers: photon_core::Headers::new(),
        };
        let text = serde_json::to_string(&body).unwrap();
        assert!(serde_json::from_str::<Body>(&text).is_err());
        assert_eq!(decode_json::<Body>(&text).unwrap(), body);
    }

    #[test]
    fn encoded_rows_decode_to_the_draft() {
        let now = Utc::now();
        let draft = RecordDraft {
            envelope_id: "e1".into(),
            topic_name: "t".into(),
            topic_key: Some("k".into()),
            created_at: now,
            body: Body::Plain {
                actor: json!(1),
                payload: json!({"a": [1, 2]}),
                headers: photon_core::Headers::from([("h".to_owned(), "v".to_owned())]),
            },
        };
        let row = PendingRow::encode(draft.clone()).unwrap();
        let stored = StoredRow {
            seq: 7,
            event_id: row.event_id,
            envelope_id: row.envelope_id,
            topic_key: row.topic_key,
            created_at: row.created_at,
            body: row.body,
            extra: Some(r#"{"trace_id":"x"}"#.into()),
        };
        let record = stored.decode("t").unwrap();
        assert_eq!(record.created_at, now);
        assert_eq!(record.body, draft.body);
        assert_eq!(record.extra.get("trace_id"), Some(&json!("x")));
        assert_eq!((record.seq, record.topic_key.as_deref()), (7, Some("k")));
    }

    #[test]
    fn a_damaged_body_is_undecodable_with_its_bytes() {
        for stored in [&b"{not json"[..], &[0xff, 0xfe, b'{'][..]] {
            let row = StoredRow {
                seq: 9,
                event_id: "e9".into(),
                envelope_id: "e9".into(),
                topic_key: None,
                created_at: 0,
                body: stored.to_vec(),
                extra: None,
            };
            match row.decode("t") {
                Err(PhotonError::Undecodable {
                    seq, stored: bytes, ..
                }) => {
                    assert_eq!(seq, 9);
                    assert_eq!(&*bytes, stored);
                }
                other => panic!("expected Undecodable, got {other:?}"),
            }
        }
    }
}
