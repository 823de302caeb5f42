//! What a NATS message holds (the JSON of a record's fields), and the encoding of event ids
//! and seqs.
//!
//! - The payload is the JSON of the record without `event_id` and `seq`: topic, key,
//!   envelope id, creation time, body and unknown fields, which survive a round trip.
//! - `seq = stream_seq × shards + shard`: with one shard it is the stream sequence; with
//!   more it still strictly increases per key (a key lives in one shard) and says which
//!   shard it came from.
//! - `event_id = <stream name>:<stream sequence>`: all `get_record` needs for a direct get.

use bytes::Bytes;
use chrono::{DateTime, Utc};
use photon_core::{Body, PhotonError, Record, RecordDraft, Result};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Serialize)]
struct StoredRef<'a> {
    envelope_id: &'a str,
    topic_name: &'a str,
    topic_key: Option<&'a str>,
    created_at: DateTime<Utc>,
    body: &'a Body,
}

#[derive(Deserialize)]
struct Stored {
    envelope_id: String,
    topic_name: String,
    topic_key: Option<String>,
    created_at: DateTime<Utc>,
    body: Body,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

/// The message payload of a draft.
///
/// # Errors
/// [`PhotonError::Codec`] (not expected: a draft holds only JSON values and strings).
pub(crate) fn encode(draft: &RecordDraft) -> Result<Bytes> {
    let stored = StoredRef {
        envelope_id: &draft.envelope_id,
        topic_name: &draft.topic_name,
        topic_key: draft.topic_key.as_deref(),
        created_at: draft.created_at,
        body: &draft.body,
    };
    serde_json::to_vec(&stored)
        .map(Bytes::from)
        .map_err(|err| PhotonError::codec("a NATS record", err))
}

/// Deepest JSON nesting a stored record may have. serde_json's default limit (128) would
/// refuse a payload that is itself nested 128 deep once wrapped in the record; this bound
/// keeps decoding far from the stack's end while leaving room for such payloads.
const MAX_NESTING: usize = 256;

/// The record of a message payload.
///
/// # Errors
/// [`PhotonError::Codec`] naming the event when the payload is not a Photon record (or is
/// nested deeper than [`MAX_NESTING`]).
pub(crate) fn decode(payload: &[u8], event_id: String, seq: i64) -> Result<Record> {
    let context = || format!("NATS record {event_id}");
    if nesting_depth(payload) > MAX_NESTING {
        let err = <serde_json::Error as serde::de::Error>::custom(format!(
            "nested deeper than {MAX_NESTING} levels"
        ));
        return Err(PhotonError::codec(context(), err));
    }
    let mut deserializer = serde_json::Deserializer::from_slice(payload);
    deserializer.disable_recursion_limit();
    let stored = Stored::deserialize(&mut deserializer)
        .and_then(|stored| deserializer.end().map(|()| stored))
        .map_err(|err| PhotonError::codec(context(), err))?;
    Ok(Record {
        event_id,
        envelope_id: stored.envelope_id,
        topic_name: stored.topic_name,
        topic_key: stored.topic_key,
        seq,
        created_at: stored.created_at,
        body: stored.body,
        extra: stored.extra,
    })
}

/// Deepest nesting of arrays and objects in a JSON text (strings skipped).
fn nesting_depth(json: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &byte in json {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// The event id of a stored message.
pub(crate) fn event_id(stream: &str, stream_seq: u64) -> String {
    format!("{stream}:{stream_seq}")
}

/// Stream name and sequence of an event id; `None` when it is not one.
pub(crate) fn parse_event_id(event_id: &str) -> Option<(&str, u64)> {
    let (stream, seq) = event_id.rsplit_once(':')?;
    let valid_stream = !stream.is_empty()
        && stream
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    let seq: u64 = seq.parse().ok().filter(|s| *s > 0)?;
    valid_stream.then_some((stream, seq))
}

/// The Photon seq of a stream sequence in a shard.
pub(crate) fn photon_seq(stream_seq: u64, shard: u32, shards: u32) -> i64 {
    let seq = i128::from(stream_seq) * i128::from(shards) + i128::from(shard);
    i64::try_from(seq).unwrap_or(i64::MAX)
}

/// Stream sequence and shard of a Photon seq (`seq >= 0`).
pub(crate) fn split_seq(seq: i64, shards: u32) -> (u64, u32) {
    let seq = seq.max(0) as u64;
    let shards = u64::from(shards.max(1));
    (seq / shards, (seq % shards) as u32)
}

/// The first stream sequence of `shard` whose Photon seq is above `after`.
pub(crate) fn first_stream_seq_after(after: i64, shard: u32, shards: u32) -> u64 {
    if after < i64::from(shard) {
        return 1;
    }
    let (stream_seq, after_shard) = split_seq(after, shards);
    // seq = q × shards + shard > after  ⇔  q > stream_seq, or q = stream_seq when this
    // shard sorts after the one `after` names.
    if shard > after_shard {
        stream_seq.max(1)
    } else {
        stream_seq + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn payload_round_trip_keeps_unknown_fields() {
        let draft = RecordDraft {
            envelope_id: "env".into(),
            topic_name: "a.b".into(),
            topic_key: Some("k.*>".into()),
            created_at: Utc::now(),
            body: Body::Plain {
                actor: json!({"u": 1}),
                payload: json!({"x": [1, 2]}),
            },
        };
        let bytes = encode(&draft).unwrap();
        let record = decode(&bytes, "s:1".into(), 1).unwrap();
        assert_eq!(record, Record::from_draft(draft.clone(), "s:1".into(), 1));
        let mut value: Value = serde_json::from_slice(&bytes).unwrap();
        value["trace_id"] = json!("t");
        let record = decode(&serde_json::to_vec(&value).unwrap(), "s:1".into(), 1).unwrap();
        assert_eq!(record.extra.get("trace_id"), Some(&json!("t")));
        assert!(decode(b"not json", "s:2".into(), 2).is_err());
    }

    #[test]
    fn deep_payloads_decode_and_too_deep_ones_are_refused() {
        let nested = |depth: usize| {
            (0..depth).fold(
                json!("[{\\\"x"),
                |inner, level| json!({ "level": level, "inner": [inner] }),
            )
        };
        let draft = |payload: Value| RecordDraft {
            envelope_id: "env".into(),
            topic_name: "t".into(),
            topic_key: None,
            created_at: Utc::now(),
            body: Body::Plain {
                actor: Value::Null,
                payload,
            },
        };
        let deep = draft(nested(64));
        let record = decode(&encode(&deep).unwrap(), "s:1".into(), 1).unwrap();
        assert_eq!(record.body, deep.body);
        assert_eq!(nesting_depth(br#"{"a":"[[[{{","b":[1]}"#), 2);
        assert!(decode(&encode(&draft(nested(200))).unwrap(), "s:2".into(), 2).is_err());
    }

    #[test]
    fn event_ids() {
        assert_eq!(parse_event_id(&event_id("p_t_0", 42)), Some(("p_t_0", 42)));
        for bad in [
            "",
            "no-such-event",
            "0",
            "-1",
            "😀",
            "x:y:z:1",
            "s:0",
            "s:-3",
            "s:99999999999999999999999",
            ":5",
        ] {
            assert!(parse_event_id(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn seqs_encode_the_shard() {
        assert_eq!(photon_seq(7, 0, 1), 7);
        assert_eq!(photon_seq(7, 3, 4), 31);
        assert_eq!(split_seq(31, 4), (7, 3));
        assert_eq!(split_seq(7, 1), (7, 0));
    }

    #[test]
    fn after_seq_per_shard_is_exact() {
        let shards = 4;
        for after in 0..60 {
            for shard in 0..shards {
                let start = first_stream_seq_after(after, shard, shards);
                assert!(photon_seq(start, shard, shards) > after);
                if start > 1 {
                    assert!(
                        photon_seq(start - 1, shard, shards) <= after,
                        "after {after} shard {shard}"
                    );
                }
            }
        }
        assert_eq!(first_stream_seq_after(0, 0, 1), 1);
        assert_eq!(first_stream_seq_after(5, 0, 1), 6);
    }
}
