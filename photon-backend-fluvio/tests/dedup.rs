//! A retried append that stored the event twice (the same draft appended again after a
//! lost ack) is delivered once: subscriptions drop the second copy by its envelope id.

mod common;

use std::time::Duration;

use common::FluvioFactory;
use futures::StreamExt;
use photon_core::StartAt;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_copy_of_a_retried_append_is_delivered_once() {
    for shards in [1, 4] {
        let Some(factory) = FluvioFactory::from_env(shards).await else {
            return;
        };
        let store = factory.store().await;
        let topic = "dedup.orders";
        let first = store
            .draft(topic, Some("k1"), json!(null), json!({"i": 0}))
            .unwrap();
        let second = store
            .draft(topic, Some("k1"), json!(null), json!({"i": 1}))
            .unwrap();
        let a = store.port().append(first.clone()).await.unwrap();
        // The retry of an append whose ack was lost: the same draft, stored again.
        let again = store.port().append(first).await.unwrap();
        let b = store.port().append(second).await.unwrap();
        assert!(
            a.seq < again.seq && again.seq < b.seq,
            "three stored records"
        );
        // Both copies stay stored and can be looked up.
        for id in [&a.event_id, &again.event_id] {
            let found = store.get_event(id).await.unwrap().expect("stored copy");
            assert_eq!(found.payload, json!({"i": 0}));
        }
        let mut stream = store.subscribe(topic, None, StartAt::Beginning);
        let mut got = Vec::new();
        for _ in 0..2 {
            let event = tokio::time::timeout(Duration::from_secs(20), stream.next())
                .await
                .expect("event")
                .expect("stream ended")
                .expect("error item");
            got.push((event.seq, event.payload["i"].as_i64().unwrap()));
        }
        assert_eq!(got, vec![(a.seq, 0), (b.seq, 1)], "{shards} shards");
        assert!(
            tokio::time::timeout(Duration::from_millis(500), stream.next())
                .await
                .is_err(),
            "{shards} shards: the second copy was delivered"
        );
    }
}
