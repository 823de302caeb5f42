//! What a Fluvio record holds, and event ids.
//!
//! - Record key: the Photon topic key (none for unkeyed events).
//! - Record value: the record in Photon's wire form ([`photon_core::raw::wire`]) without
//!   `event_id` and `seq`, which come from the record's position. Event headers are in it
//!   (Fluvio records have none of their own), sealed with actor and payload when a
//!   transport key is set. The exact Photon topic is
//!   in the value and is checked on read, so a record can never be delivered under another
//!   topic.
//! - Event id: `f1:<fluvio topic>:<partition>:<offset>`: where the record lives, so that
//!   `get_record` fetches it directly.

use photon_core::{PhotonError, Record, RecordDraft, Result};

use crate::topic::is_fluvio_name;

/// The record value of a draft.
///
/// # Errors
/// [`PhotonError::Codec`] (not expected: a draft holds only JSON values and strings).
pub(crate) fn encode_value(draft: &RecordDraft) -> Result<Vec<u8>> {
    photon_core::raw::wire::encode_draft(draft)
}

/// The Photon record stored in `value` at a position.
///
/// # Errors
/// [`PhotonError::Undecodable`] with the stored bytes for a value that is not a Photon
/// record, or one that names another topic than `topic`.
pub(crate) fn decode_value(
    value: &[u8],
    topic: &str,
    event_id: String,
    seq: i64,
) -> Result<Record> {
    let undecodable = |event_id: &str, reason: &dyn std::fmt::Display| {
        PhotonError::undecodable(topic, event_id, seq, None, value, reason)
    };
    match photon_core::raw::wire::decode_record("fluvio", value, event_id.clone(), seq) {
        Ok(record) if record.topic_name == topic => Ok(record),
        Ok(record) => Err(undecodable(
            &event_id,
            &format!("the record belongs to topic {:?}", record.topic_name),
        )),
        Err(err) => Err(undecodable(&event_id, &err)),
    }
}

/// The event id of the record at `offset` of a Fluvio topic partition.
pub(crate) fn event_id(fluvio_topic: &str, partition: u32, offset: i64) -> String {
    use std::fmt::Write as _;
    // One buffer of the right size: an id is made on every publish.
    let mut id = String::with_capacity(fluvio_topic.len() + 28);
    id.push_str("f1:");
    id.push_str(fluvio_topic);
    // Writing to a String cannot fail.
    let _ = write!(id, ":{partition}:{offset}");
    id
}

/// Where an event id points, `None` when it is not one of this port's ids.
pub(crate) fn parse_event_id(event_id: &str) -> Option<(String, u32, i64)> {
    let mut parts = event_id.strip_prefix("f1:")?.split(':');
    let topic = parts.next()?;
    let partition = parts.next()?.parse().ok()?;
    let offset: i64 = parts.next()?.parse().ok()?;
    if parts.next().is_some() || !is_fluvio_name(topic) || offset < 0 {
        return None;
    }
    Some((topic.to_owned(), partition, offset))
}

#[cfg(test)]
mod tests {
    use photon_testkit::assert_undecodable;
    use photon_testkit::scenarios::MALFORMED_EVENT_IDS;

    use super::*;
    use chrono::Utc;
    use photon_core::Body;
    use serde_json::json;

    fn draft(topic: &str) -> RecordDraft {
        RecordDraft {
            envelope_id: "env-1".into(),
            topic_name: topic.into(),
            topic_key: Some("k".into()),
            created_at: Utc::now(),
            body: Body::Plain {
                actor: json!({"a": 1}),
                payload: json!({"p": "ü"}),
                headers: photon_core::Headers::new(),
            },
        }
    }

    #[test]
    fn value_round_trips_and_checks_the_topic() {
        let draft = draft("a.b");
        let value = encode_value(&draft).unwrap();
        let record = decode_value(&value, "a.b", "f1:photon-x:0:4".into(), 5).unwrap();
        assert_eq!(
            record,
            Record::from_draft(draft, "f1:photon-x:0:4".into(), 5)
        );
        assert_eq!(
            photon_core::raw::wire::topic_of(&value).as_deref(),
            Some("a.b")
        );
        assert!(matches!(
            decode_value(&value, "a-b", "id".into(), 5),
            Err(PhotonError::Undecodable { seq: 5, .. })
        ));
        let decoded = decode_value(b"not json", "a.b", "id".into(), 5);
        assert_undecodable(decoded, ("a.b", "id", 5), b"not json");
    }

    #[test]
    fn event_ids_round_trip_and_refuse_garbage() {
        let id = event_id("photon-s-2-orders", 0, 41);
        assert_eq!(id, "f1:photon-s-2-orders:0:41");
        assert_eq!(
            parse_event_id(&id),
            Some(("photon-s-2-orders".to_owned(), 0, 41))
        );
        let own = ["f1:Bad:0:1", "f1:t:0:-1", "f1:t:0:1:2", "f1:t:x:1"];
        for bad in MALFORMED_EVENT_IDS.into_iter().chain(own) {
            assert_eq!(parse_event_id(bad), None, "{bad}");
        }
    }
}
