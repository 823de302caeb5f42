//! The sealed envelope on a real port: nothing in clear, wrong keys, tampering, rotation.

use std::time::Duration;

use photon_core::{Body, CryptoFailure, PhotonError, StartAt, TransportCrypto};
use serde_json::json;

use super::ok;
use crate::context::{assert_quiet, take_exact, Context};

fn ring(keys: &[(&str, u8)]) -> TransportCrypto {
    keys.iter()
        .fold(TransportCrypto::plaintext(), |ring, (id, byte)| {
            ring.with_key(*id, [*byte; 32]).unwrap()
        })
}

fn failure(item: photon_core::Result<photon_core::Event>) -> CryptoFailure {
    match item {
        Err(PhotonError::Crypto { reason, .. }) => reason,
        other => panic!("expected a crypto error, got {other:?}"),
    }
}

/// With a key, the stored record holds neither the payload nor the actor in clear.
pub async fn sealed_at_rest(ctx: Context) {
    let store = ctx.sealed_store(ring(&[("k1", 1)])).await;
    let topic = ctx.topic("sealed");
    let marker = format!("secret-{}", ctx.subscription("m"));
    let appended = store
        .publish(
            &topic,
            Some("k"),
            json!({"actor": format!("{marker}-actor")}),
            json!({"p": marker}),
        )
        .await
        .unwrap();
    let record = super::first_raw_record(&store, &topic).await;
    assert_eq!(record.event_id, appended.event_id);
    assert!(
        matches!(&record.body, Body::Sealed(s) if s.key_id == "k1"),
        "{:?}",
        record.body
    );
    let stored = serde_json::to_string(&record).unwrap();
    assert!(
        !stored.contains(&marker),
        "plaintext reached storage: {stored}"
    );
    let event = store.open(record).unwrap();
    assert_eq!(event.payload, json!({"p": marker}));
}

/// A subscriber with another key gets an error for that event; the stream continues.
pub async fn wrong_key_continues(ctx: Context) {
    let topic = ctx.topic("wrongkey");
    let alice = ctx.sealed_store(ring(&[("alice", 1)])).await;
    let bob = ctx.sealed_store(ring(&[("bob", 2)])).await;
    let impostor = ctx.sealed_store(ring(&[("bob", 3)])).await;
    alice
        .publish(&topic, None, json!(null), json!({"n": 1}))
        .await
        .unwrap();
    impostor
        .publish(&topic, None, json!(null), json!({"n": 2}))
        .await
        .unwrap();
    bob.publish(&topic, None, json!(null), json!({"n": 3}))
        .await
        .unwrap();
    let mut stream = bob.subscribe(&topic, None, StartAt::Beginning);
    let mut items = take_exact(&mut stream, 3).await.into_iter();
    assert_eq!(
        failure(items.next().unwrap()),
        CryptoFailure::UnknownKey("alice".into())
    );
    assert_eq!(failure(items.next().unwrap()), CryptoFailure::Tampered);
    assert_eq!(ok(items.next().unwrap()).payload, json!({"n": 3}));
    assert_quiet(&mut stream, Duration::from_millis(200)).await;
}

/// Tampered ciphertext, ciphertext moved to another event or topic, and a plaintext record
/// injected while a key is configured are each refused; valid events around them open.
pub async fn tampered_records_refused(ctx: Context) {
    let crypto = ring(&[("k1", 1)]);
    let store = ctx.sealed_store(crypto).await;
    let plain = ctx.store().await;
    let port = store.port().clone();
    let topic = ctx.topic("tamper");

    let first = store
        .draft(&topic, Some("k"), json!("a"), json!({"n": 1}))
        .unwrap();
    let mut flipped = store
        .draft(&topic, Some("k"), json!("a"), json!({"n": 2}))
        .unwrap();
    if let Body::Sealed(sealed) = &mut flipped.body {
        sealed.ciphertext[4] ^= 1;
    }
    let mut moved_event = store
        .draft(&topic, Some("k"), json!("a"), json!({"n": 3}))
        .unwrap();
    moved_event.body = first.body.clone();
    let mut moved_topic = store
        .draft(
            &ctx.topic("elsewhere"),
            Some("k"),
            json!("a"),
            json!({"n": 4}),
        )
        .unwrap();
    moved_topic.topic_name = topic.clone();
    let unsealed = plain
        .draft(&topic, Some("k"), json!("a"), json!({"n": 5}))
        .unwrap();
    let last = store
        .draft(&topic, Some("k"), json!("a"), json!({"n": 6}))
        .unwrap();
    for draft in [first, flipped, moved_event, moved_topic, unsealed, last] {
        port.append(draft).await.unwrap();
    }

    let mut stream = store.subscribe(&topic, Some("k"), StartAt::Beginning);
    let mut items = take_exact(&mut stream, 6).await.into_iter();
    assert_eq!(ok(items.next().unwrap()).payload, json!({"n": 1}));
    assert_eq!(failure(items.next().unwrap()), CryptoFailure::Tampered);
    assert_eq!(failure(items.next().unwrap()), CryptoFailure::Tampered);
    assert_eq!(failure(items.next().unwrap()), CryptoFailure::Tampered);
    assert_eq!(
        failure(items.next().unwrap()),
        CryptoFailure::UnsealedRecord
    );
    assert_eq!(ok(items.next().unwrap()).payload, json!({"n": 6}));
    assert_quiet(&mut stream, Duration::from_millis(200)).await;
}

/// Events sealed with the old key open after a new key is added; new events use the new key.
pub async fn key_rotation(ctx: Context) {
    let topic = ctx.topic("rotate");
    let before = ctx.sealed_store(ring(&[("2026-01", 1)])).await;
    for n in 0..5 {
        before
            .publish(&topic, None, json!(null), json!({"n": n}))
            .await
            .unwrap();
    }
    let after = ctx
        .sealed_store(ring(&[("2026-01", 1), ("2026-06", 2)]))
        .await;
    for n in 5..10 {
        after
            .publish(&topic, None, json!(null), json!({"n": n}))
            .await
            .unwrap();
    }
    let mut raw = after.port().subscribe(photon_core::SubscribeRequest {
        topic: topic.clone(),
        key: None,
        start: StartAt::Beginning,
        durable: None,
    });
    let mut opened = Vec::new();
    for (n, record) in take_exact(&mut raw, 10).await.into_iter().enumerate() {
        let record = record.unwrap();
        let expected_key = if n < 5 { "2026-01" } else { "2026-06" };
        assert!(
            matches!(&record.body, Body::Sealed(s) if s.key_id == expected_key),
            "event {n}"
        );
        opened.push(after.open(record).unwrap().payload["n"].as_i64().unwrap());
    }
    assert_eq!(opened, (0..10).collect::<Vec<_>>());
}
