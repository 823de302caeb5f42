//! Payload shapes and limits.

use std::time::Duration;

use photon_core::{PhotonError, StartAt};
use serde_json::{json, Value};

use super::ok;
use crate::context::{assert_quiet, take_exact, Context};

fn nested(depth: usize) -> Value {
    (0..depth).fold(
        json!("leaf"),
        |inner, level| json!({ "level": level, "inner": [inner] }),
    )
}

/// Empty object, the largest accepted payload, unicode keys and values, nesting near the
/// depth limit, floats that need every digit: all round-trip equal as JSON values.
pub async fn payload_shapes(ctx: Context) {
    let store = ctx.store().await;
    let topic = ctx.topic("shapes");
    let limit = store.port().capabilities().max_payload_bytes;
    // Encoded as `{"blob":"…"}` plus the actor `null`: 16 bytes of framing.
    let big = json!({ "blob": "x".repeat(limit - 16) });
    let shapes = vec![
        (Some("empty"), json!({})),
        (Some("big"), big),
        (
            Some("ключ-東京-🔑"),
            json!({"名前": "Zoë", "emoji": "🚀", "rtl": "שלום"}),
        ),
        (Some("deep"), nested(49)),
        (None, json!([1, 2.5, null, true, "s", {"a": []}])),
        // Floats whose shortest form needs all 17 digits, a subnormal and the extremes:
        // every digit comes back.
        (
            Some("floats"),
            json!([
                -3.831_211_074_200_723_5e240,
                0.1 + 0.2,
                5e-324,
                f64::MAX,
                i64::MIN,
                u64::MAX
            ]),
        ),
    ];
    for (key, payload) in &shapes {
        store
            .publish(&topic, *key, json!(null), payload.clone())
            .await
            .unwrap();
    }
    let mut stream = store.subscribe(&topic, None, StartAt::Beginning);
    // Each shape has its own key: order is only promised per key.
    let mut events = take_exact(&mut stream, shapes.len()).await;
    for (key, payload) in &shapes {
        let position = events
            .iter()
            .position(|e| e.as_ref().is_ok_and(|e| e.topic_key.as_deref() == *key))
            .unwrap_or_else(|| panic!("no event for key {key:?}"));
        let event = ok(events.remove(position));
        assert_eq!(&event.payload, payload, "payload of key {key:?}");
        assert_eq!(event.actor, json!(null));
    }
    assert_quiet(&mut stream, Duration::from_millis(200)).await;
}

/// A payload over the size or depth limit, an invalid topic and an empty key are refused with typed
/// errors before anything is stored.
pub async fn limits_refused(ctx: Context) {
    let store = ctx.store().await;
    let topic = ctx.topic("limits");
    let limit = store.port().capabilities().max_payload_bytes;
    let too_big = json!({ "blob": "x".repeat(limit) });
    match store.publish(&topic, None, json!(null), too_big).await {
        Err(PhotonError::PayloadTooLarge {
            topic: t,
            limit: l,
            size,
        }) => {
            assert_eq!(t, topic);
            assert_eq!(l, limit);
            assert!(size > limit, "size {size} vs limit {limit}");
        }
        other => panic!("expected PayloadTooLarge, got {other:?}"),
    }
    match store
        .publish("Bad Topic", None, json!(null), json!({}))
        .await
    {
        Err(PhotonError::InvalidTopic { topic: t, .. }) => assert_eq!(t, "Bad Topic"),
        other => panic!("expected InvalidTopic, got {other:?}"),
    }
    match store
        .publish(&topic, Some(""), json!(null), json!({}))
        .await
    {
        Err(PhotonError::InvalidKey { topic: t, .. }) => assert_eq!(t, topic),
        other => panic!("expected InvalidKey, got {other:?}"),
    }
    // Nothing was stored: the first event on the topic is the one published now.
    store
        .publish(&topic, None, json!(null), json!({"after": true}))
        .await
        .unwrap();
    let mut stream = store.subscribe(&topic, None, StartAt::Beginning);
    let first = ok(take_exact(&mut stream, 1).await.remove(0));
    assert_eq!(first.payload, json!({"after": true}));
    assert_quiet(&mut stream, Duration::from_millis(200)).await;
}
