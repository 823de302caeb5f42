//! What a NATS message holds, and the encoding of event ids and seqs.
//!
//! - The payload is the record in Photon's wire form ([`photon_core::raw::wire`]) without
//!   `event_id` and `seq`: envelope id, creation time, topic, key and body (actor, payload
//!   and event headers, or their seal).
//! - `seq = stream_seq × shards + shard`: with one shard it is the stream sequence; with
//!   more it still strictly increases per key (a key lives in one shard) and says which
//!   shard it came from.
//! - `event_id = <stream name>:<stream sequence>`: all `get_record` needs for a direct get.
//! - The event headers of a plaintext event are also set as NATS message headers where
//!   NATS allows them (see [`mirrored_headers`]), so that NATS tools show a request id or
//!   `traceparent`; the payload stays what Photon reads back.

use async_nats::{HeaderMap, HeaderName, HeaderValue};
use bytes::Bytes;

use photon_core::{Body, PhotonError, Record, RecordDraft, Result};

/// The NATS message headers mirroring a plaintext draft's event headers, `None` when none
/// fits.
///
/// Every header Photon accepts fits a NATS header (names of ASCII letters, digits, `-`,
/// `_`, `.`; values without control characters); those whose name starts with `Nats-` are
/// left out, as the server gives such headers meanings of its own (`Nats-Msg-Id` is the
/// draft's envelope id). A sealed draft's headers are never mirrored: they would show in
/// clear.
pub(crate) fn mirrored_headers(draft: &RecordDraft) -> Option<HeaderMap> {
    let Body::Plain { headers, .. } = &draft.body else {
        return None;
    };
    let mut mirrored = HeaderMap::new();
    for (name, value) in headers {
        if name.len() >= 5 && name[..5].eq_ignore_ascii_case("nats-") {
            continue;
        }
        if let (Ok(name), Ok(value)) = (name.parse::<HeaderName>(), value.parse::<HeaderValue>()) {
            mirrored.insert(name, value);
        }
    }
    (!mirrored.is_empty()).then_some(mirrored)
}

/// The message payload of a draft.
///
/// # Errors
/// [`PhotonError::Codec`] (not expected: a draft holds only JSON values and strings).
pub(crate) fn encode(draft: &RecordDraft) -> Result<Bytes> {
    photon_core::raw::wire::encode_draft(draft).map(Bytes::from)
}

/// The record of a stored message.
///
/// # Errors
/// [`PhotonError::Codec`] naming the event when the payload is not a Photon record.
pub(crate) fn decode(payload: &[u8], event_id: String, seq: i64) -> Result<Record> {
    photon_core::raw::wire::decode_record("NATS", payload, event_id, seq)
}

/// The record of a message read from `topic`'s stream, for a subscription.
///
/// # Errors
/// [`PhotonError::Undecodable`] with the stored bytes when the payload is not a Photon
/// record of `topic`.
pub(crate) fn decode_in(topic: &str, payload: &[u8], event_id: String, seq: i64) -> Result<Record> {
    let undecodable = |event_id: &str, reason: &dyn std::fmt::Display| {
        PhotonError::undecodable(topic, event_id, seq, None, payload, reason)
    };
    match decode(payload, event_id.clone(), seq) {
        Ok(record) if record.topic_name == topic => Ok(record),
        Ok(record) => Err(undecodable(
            &event_id,
            &format!("the record names topic {:?}", record.topic_name),
        )),
        Err(err) => Err(undecodable(&event_id, &err)),
    }
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

pub(crate) use photon_core::raw::shard::{
    first_position_after as first_stream_seq_after, sharded_seq as photon_seq, split_seq,
};

#[cfg(test)]
mod tests {
    use photon_testkit::assert_undecodable;
    use photon_testkit::scenarios::MALFORMED_EVENT_IDS;

    use super::*;

    #[test]
    fn garbage_is_undecodable_with_its_bytes() {
        let decoded = decode_in("a.b", b"not a record", "s:3".into(), 3);
        assert_undecodable(decoded, ("a.b", "s:3", 3), b"not a record");
    }

    #[test]
    fn event_ids() {
        assert_eq!(parse_event_id(&event_id("p_t_0", 42)), Some(("p_t_0", 42)));
        let own = ["s:0", "s:-3", "s:99999999999999999999999", ":5"];
        for bad in MALFORMED_EVENT_IDS.into_iter().chain(own) {
            assert!(parse_event_id(bad).is_none(), "{bad}");
        }
    }
}
