//! Failure paths every port must handle the same way: a stored record that cannot be
//! decoded is an error item holding its position and bytes, never skipped.

use std::time::Duration;

use photon_core::{Appended, CheckpointKey, Event, PhotonError, Result, StartAt, StartPolicy};
use serde_json::json;

use super::ok;
use crate::context::{assert_quiet, take_exact, Context, UndecodableRecord};

/// Bytes no port decodes as a record: not JSON, not the binary wire form, valid UTF-8.
const GARBAGE: &[u8] = b"not a photon record {";

fn expect_undecodable(
    item: Result<Event>,
    topic: &str,
    after: &Appended,
    before: &Appended,
) -> i64 {
    match item {
        Err(PhotonError::Undecodable {
            topic: t,
            event_id,
            seq,
            stored,
            reason,
            ..
        }) => {
            assert_eq!(t, topic);
            assert_eq!(&*stored, GARBAGE, "the error keeps the stored bytes");
            assert!(!event_id.is_empty(), "the error names the record");
            assert!(!reason.is_empty(), "the error says why");
            assert!(
                after.seq < seq && seq < before.seq,
                "undecodable seq {seq} lies between {} and {}",
                after.seq,
                before.seq
            );
            seq
        }
        other => panic!("expected an undecodable record, got {other:?}"),
    }
}

/// A record that cannot be decoded between two good ones of the same key: every
/// subscription yields the first event, then `Undecodable` with the record's seq and
/// stored bytes, then the second event. A durable subscription resuming before it gets it
/// again; one resuming at its seq gets only the event after it.
pub async fn undecodable_record(ctx: Context) {
    let store = ctx.store().await;
    let topic = ctx.topic("undecodable");
    let first = store
        .publish(&topic, Some("a"), json!(null), json!({"i": 1}))
        .await
        .unwrap();
    ctx.factory
        .store_undecodable(UndecodableRecord {
            next_to: &first,
            topic: &topic,
            key: Some("a"),
            stored: GARBAGE,
        })
        .await
        .expect("the port's test factory stores an undecodable record");
    let last = store
        .publish(&topic, Some("a"), json!(null), json!({"i": 3}))
        .await
        .unwrap();

    let mut bad_seq = None;
    for key in [Some("a"), None] {
        let mut stream = store.subscribe(&topic, key, StartAt::Beginning);
        let mut items = take_exact(&mut stream, 3).await.into_iter();
        let got = ok(items.next().unwrap());
        assert_eq!((got.seq, got.payload), (first.seq, json!({"i": 1})));
        let seq = expect_undecodable(items.next().unwrap(), &topic, &first, &last);
        assert_eq!(
            *bad_seq.get_or_insert(seq),
            seq,
            "the same seq on every read"
        );
        let got = ok(items.next().unwrap());
        assert_eq!((got.seq, got.payload), (last.seq, json!({"i": 3})));
        assert_quiet(&mut stream, Duration::from_millis(200)).await;
    }
    let bad_seq = bad_seq.unwrap();

    let port = store.port().clone();
    let before = CheckpointKey::new(ctx.subscription("before"), &topic, None);
    port.commit_checkpoint(&before, first.seq).await.unwrap();
    let mut resumed = store.subscribe_after_checkpoint(before, StartPolicy::Beginning);
    let mut items = take_exact(&mut resumed, 2).await.into_iter();
    assert_eq!(
        expect_undecodable(items.next().unwrap(), &topic, &first, &last),
        bad_seq
    );
    assert_eq!(ok(items.next().unwrap()).seq, last.seq);
    assert_quiet(&mut resumed, Duration::from_millis(200)).await;

    let past = CheckpointKey::new(ctx.subscription("past"), &topic, None);
    port.commit_checkpoint(&past, bad_seq).await.unwrap();
    let mut resumed = store.subscribe_after_checkpoint(past, StartPolicy::Beginning);
    assert_eq!(
        ok(take_exact(&mut resumed, 1).await.remove(0)).seq,
        last.seq
    );
    assert_quiet(&mut resumed, Duration::from_millis(200)).await;
}
