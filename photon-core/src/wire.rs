//! The wire form of a record for ports that store bytes (brokers): everything but the id and
//! seq, which the broker assigns. Unknown fields survive a round trip.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::{PhotonError, Result};
use crate::event::{Body, Record, RecordDraft};

#[derive(Serialize)]
struct WireRef<'a> {
    envelope_id: &'a str,
    topic_name: &'a str,
    topic_key: Option<&'a str>,
    created_at: DateTime<Utc>,
    body: &'a Body,
}

#[derive(Deserialize)]
struct WireRecord {
    envelope_id: String,
    topic_name: String,
    topic_key: Option<String>,
    created_at: DateTime<Utc>,
    body: Body,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// The bytes a broker stores for a draft.
///
/// # Errors
/// [`PhotonError::Codec`] (not expected: a draft holds only JSON values and strings).
pub fn encode_draft(draft: &RecordDraft) -> Result<Vec<u8>> {
    let wire = WireRef {
        envelope_id: &draft.envelope_id,
        topic_name: &draft.topic_name,
        topic_key: draft.topic_key.as_deref(),
        created_at: draft.created_at,
        body: &draft.body,
    };
    serde_json::to_vec(&wire).map_err(|err| PhotonError::codec("a record", err))
}

/// Decodes stored bytes into the record with the id and seq its broker gave it.
///
/// Photon refuses payloads nested deeper than [`crate::store::MAX_JSON_DEPTH`] at publish,
/// so every record it wrote decodes within serde_json's default recursion limit; anything
/// deeper is refused here rather than risking the stack.
///
/// # Errors
/// [`PhotonError::Codec`] naming `backend` and the event when the bytes are not a record.
pub fn decode_record(backend: &str, bytes: &[u8], event_id: String, seq: i64) -> Result<Record> {
    let wire: WireRecord = serde_json::from_slice(bytes)
        .map_err(|err| PhotonError::codec(format!("{backend} record {event_id}"), err))?;
    Ok(Record {
        event_id,
        envelope_id: wire.envelope_id,
        topic_name: wire.topic_name,
        topic_key: wire.topic_key,
        seq,
        created_at: wire.created_at,
        body: wire.body,
        extra: wire.extra,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn draft(payload: Value) -> RecordDraft {
        RecordDraft {
            envelope_id: "env".into(),
            topic_name: "a.b".into(),
            topic_key: Some("k.*>".into()),
            created_at: Utc::now(),
            body: Body::Plain {
                actor: json!({"u": 1}),
                payload,
            },
        }
    }

    #[test]
    fn round_trip_keeps_unknown_fields() {
        let draft = draft(json!({"x": [1, 2]}));
        let bytes = encode_draft(&draft).unwrap();
        let record = decode_record("test", &bytes, "s:1".into(), 1).unwrap();
        assert_eq!(record, Record::from_draft(draft, "s:1".into(), 1));
        let mut value: Value = serde_json::from_slice(&bytes).unwrap();
        value["trace_id"] = json!("t");
        let again = decode_record(
            "test",
            &serde_json::to_vec(&value).unwrap(),
            "s:1".into(),
            1,
        )
        .unwrap();
        assert_eq!(again.extra.get("trace_id"), Some(&json!("t")));
    }

    #[test]
    fn garbage_and_too_deep_records_are_codec_errors() {
        assert!(matches!(
            decode_record("test", b"not json", "e".into(), 1),
            Err(PhotonError::Codec { .. })
        ));
        let limit = crate::store::MAX_JSON_DEPTH;
        let deepest = (0..limit).fold(json!(0), |inner, _| json!([inner]));
        let bytes = encode_draft(&draft(deepest.clone())).unwrap();
        assert_eq!(
            decode_record("test", &bytes, "e".into(), 1).unwrap().body,
            draft(deepest).body
        );
        let hostile = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(decode_record("test", hostile.as_bytes(), "e".into(), 1).is_err());
    }
}
