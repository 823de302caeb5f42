//! `StartAt::Tail` starts where `subscribe` was called, even when the first append follows
//! at once (before the subscription's readers are open).

mod common;

use std::time::Duration;

use common::NatsFactory;
use futures::StreamExt;
use photon_core::{EventStore, StartAt, TransportCrypto};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_sees_an_append_made_right_after_subscribe() {
    for shards in [1, 4] {
        let Some(factory) = NatsFactory::from_env(shards).await else {
            return;
        };
        let store = EventStore::new(
            std::sync::Arc::new(factory.port().await.unwrap()),
            TransportCrypto::plaintext(),
        );
        let topic = "tail.now";
        for i in 0..10 {
            store
                .publish(
                    topic,
                    Some(&format!("k{i}")),
                    json!(null),
                    json!({"old": i}),
                )
                .await
                .unwrap();
        }
        let mut stream = store.subscribe(topic, None, StartAt::Tail);
        store
            .publish(topic, Some("k1"), json!(null), json!({"new": 0}))
            .await
            .unwrap();
        let event = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(event.payload, json!({"new": 0}), "{shards} shards");
        assert!(
            tokio::time::timeout(Duration::from_millis(300), stream.next())
                .await
                .is_err()
        );
    }
}
