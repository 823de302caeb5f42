//! `PhotonBackend` as a trait object over a port.

use std::sync::Arc;

use futures::StreamExt;
use photon_core::mem::MemStoragePort;
use photon_core::{TopicRegistry, TransportCrypto};
use photon_runtime::{GenericPhotonBackend, PhotonBackend};
use serde_json::json;

#[tokio::test]
async fn generic_backend_is_a_trait_object() {
    let backend: Arc<dyn PhotonBackend> = Arc::new(GenericPhotonBackend::new(
        MemStoragePort::new(),
        TransportCrypto::plaintext()
            .with_key("k1", [4u8; 32])
            .unwrap(),
        TopicRegistry::new(),
    ));
    assert_eq!(backend.telemetry_label(), "mem");
    assert!(backend.capabilities().get_event);
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(
            backend
                .publish("orders", Some("o-1"), json!("alice"), json!({"n": n}))
                .await
                .unwrap(),
        );
    }

    let all: Vec<_> = backend
        .subscribe("orders".into(), None, None)
        .take(3)
        .collect()
        .await;
    let seqs: Vec<i64> = all.iter().map(|e| e.as_ref().unwrap().seq).collect();
    assert_eq!(seqs, vec![1, 2, 3]);
    let after: Vec<_> = backend
        .subscribe("orders".into(), Some("o-1".into()), Some(1))
        .take(2)
        .collect()
        .await;
    let payloads: Vec<_> = after.into_iter().map(|e| e.unwrap().payload).collect();
    assert_eq!(payloads, vec![json!({"n": 1}), json!({"n": 2})]);

    let event = backend.get_event(&ids[2]).await.unwrap().unwrap();
    assert_eq!((event.seq, event.actor), (3, json!("alice")));
    assert!(backend.get_event("nope").await.unwrap().is_none());

    assert_eq!(
        backend
            .get_checkpoint_seq("billing", "orders", None)
            .await
            .unwrap(),
        None
    );
    backend
        .set_checkpoint("billing", "orders", None, 10)
        .await
        .unwrap();
    backend
        .set_checkpoint("billing", "orders", None, 7)
        .await
        .unwrap();
    assert_eq!(
        backend
            .get_checkpoint_seq("billing", "orders", None)
            .await
            .unwrap(),
        Some(10)
    );
    assert_eq!(
        backend
            .get_checkpoint_seq("billing", "orders", Some("o-1"))
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn invalid_subscription_is_an_error_item() {
    let backend = GenericPhotonBackend::new(
        MemStoragePort::new(),
        TransportCrypto::plaintext(),
        TopicRegistry::new(),
    );
    let mut stream = backend.subscribe("Bad Topic".into(), None, None);
    let err = stream.next().await.unwrap().unwrap_err();
    assert!(err.to_string().contains("Bad Topic"), "{err}");
}
