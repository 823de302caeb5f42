//! `StartAt::Tail` includes every event appended after `subscribe` returns, with no pause
//! between the two, from the subscribing port or another port of the process.

mod common;

use std::time::Duration;

use common::FluvioFactory;
use futures::StreamExt;
use photon_core::StartAt;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_sees_an_append_made_right_after_subscribe() {
    for shards in [1, 4] {
        let Some(factory) = FluvioFactory::from_env(shards).await else {
            return;
        };
        let store = factory.store().await;
        let other = factory.store().await;
        for round in 0..5 {
            let topic = format!("tail.now{round}");
            for i in 0..10 {
                store
                    .publish(
                        &topic,
                        Some(&format!("k{i}")),
                        json!(null),
                        json!({"old": i}),
                    )
                    .await
                    .unwrap();
            }
            let mut stream = store.subscribe(&topic, None, StartAt::Tail);
            // Even rounds publish from the subscribing port, odd ones from another port.
            let publisher = if round % 2 == 0 { &store } else { &other };
            publisher
                .publish(&topic, Some("k1"), json!(null), json!({"new": round}))
                .await
                .unwrap();
            let event = tokio::time::timeout(Duration::from_secs(20), stream.next())
                .await
                .unwrap_or_else(|_| panic!("{shards} shards, round {round}: nothing"))
                .unwrap()
                .unwrap();
            assert_eq!(
                event.payload,
                json!({"new": round}),
                "{shards} shards, round {round}"
            );
            assert!(
                tokio::time::timeout(Duration::from_millis(300), stream.next())
                    .await
                    .is_err(),
                "{shards} shards, round {round}: more than the new event"
            );
        }
    }
}
