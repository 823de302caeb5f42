//! A topic written with one layout is refused by a port with another shard count, with a
//! config error naming both values, before anything is read or written under the wrong
//! layout.

mod common;

use std::sync::Arc;

use common::FluvioFactory;
use futures::StreamExt;
use photon_core::{CheckpointKey, EventStore, PhotonError, StartAt, StoragePort, TransportCrypto};
use serde_json::json;

fn assert_layout_error(err: &PhotonError, what: &str) {
    let text = err.to_string();
    assert!(
        matches!(err, PhotonError::Config { variable, value, .. } if variable == "shards" && value == "4"),
        "{what}: {err:?}"
    );
    assert!(text.contains("1 as topic \"orders\""), "{what}: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_shard_count_is_refused() {
    let Some(one) = FluvioFactory::from_env(1).await else {
        return;
    };
    let port = one.port().await.unwrap();
    let store = EventStore::new(Arc::new(port.clone()), TransportCrypto::plaintext());
    let mut last = 0;
    for i in 0..20 {
        last = store
            .publish("orders", None, json!(null), json!({"i": i}))
            .await
            .unwrap()
            .seq;
    }
    let key = CheckpointKey::new("billing", "orders", None);
    port.commit_checkpoint(&key, last).await.unwrap();

    // The same prefix with 4 shards: every entry point refuses the topic.
    let four = FluvioFactory {
        endpoint: one.endpoint.clone(),
        prefix: one.prefix.clone(),
        shards: 4,
    };
    let resharded = four.port().await.unwrap();
    let err = resharded.load_checkpoint(&key).await.unwrap_err();
    assert_layout_error(&err, "load_checkpoint");
    let err = resharded.commit_checkpoint(&key, 1000).await.unwrap_err();
    assert_layout_error(&err, "commit_checkpoint");
    let other = EventStore::new(Arc::new(resharded.clone()), TransportCrypto::plaintext());
    let err = other
        .publish("orders", None, json!(null), json!({"i": 20}))
        .await
        .unwrap_err();
    assert_layout_error(&err, "publish");
    let mut stream = other.subscribe("orders", None, StartAt::Beginning);
    let err = tokio::time::timeout(std::time::Duration::from_secs(30), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap_err();
    assert_layout_error(&err, "subscribe");
    // Another topic is free to use the new layout, and the old port goes on as before.
    other
        .publish("users", Some("u1"), json!(null), json!({"u": 1}))
        .await
        .unwrap();
    assert_eq!(port.load_checkpoint(&key).await.unwrap(), Some(last));
    store
        .publish("orders", None, json!(null), json!({"i": 20}))
        .await
        .unwrap();
}
