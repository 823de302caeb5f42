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

use photon_core::{Record, RecordDraft, Result};

/// The message payload of a draft.
///
/// # Errors
/// [`PhotonError::Codec`] (not expected: a draft holds only JSON values and strings).
pub(crate) fn encode(draft: &RecordDraft) -> Result<Bytes> {
    photon_core::wire::encode_draft(draft).map(Bytes::from)
}

/// The record of a stored message.
///
/// # Errors
/// [`PhotonError::Codec`] naming the event when the payload is not a Photon record.
pub(crate) fn decode(payload: &[u8], event_id: String, seq: i64) -> Result<Record> {
    photon_core::wire::decode_record("NATS", payload, event_id, seq)
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
