//! `Executor::wait_idle` on a NATS topic spread over several stream shards, whose seqs
//! interleave: it returns once every event stored at the call is handled, exactly.

use std::sync::Arc;
use std::time::Duration;

use photon::nats::{NatsStoragePort, DEFAULT_URL, URL_ENV};
use photon::prelude::*;
use photon::testing::{self, Recorder};
use serde_json::json;

async fn sharded_port(prefix: &str) -> Option<NatsStoragePort> {
    let url = std::env::var(URL_ENV).unwrap_or_else(|_| DEFAULT_URL.to_owned());
    let connecting = NatsStoragePort::builder()
        .url(url.clone())
        .prefix(prefix)
        .shards(4)
        .build();
    match tokio::time::timeout(Duration::from_secs(10), connecting).await {
        Ok(Ok(port)) => Some(port),
        Ok(Err(err)) => {
            photon_testkit::skip_or_fail("nats", &format!("NATS at {url} is unreachable: {err}"));
            None
        }
        Err(_) => {
            photon_testkit::skip_or_fail("nats", &format!("NATS at {url} did not answer"));
            None
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn wait_idle_covers_every_shard_of_a_nats_topic() {
    let unique = uuid::Uuid::new_v4().simple().to_string();
    let prefix = format!("idle{}", &unique[..12]);
    let Some(port) = sharded_port(&prefix).await else {
        return;
    };
    let port = Arc::new(port);
    let photon = testing::builder()
        .shared_storage_port(port.clone())
        .build()
        .unwrap();
    let mut published: Vec<(String, i64)> = Vec::new();
    for n in 0..120 {
        let key = format!("k{}", n % 12);
        let appended = photon
            .publish("orders", Some(&key), json!(null), json!({ "n": n }))
            .await
            .unwrap();
        published.push((key, appended.seq));
    }
    let billed = Recorder::new();
    let executor = photon
        .executor()
        .handler(
            "billing",
            "orders",
            billed.wrap(|_event: Event| async {
                tokio::task::yield_now().await;
                Ok::<(), PhotonError>(())
            }),
        )
        .start()
        .unwrap();
    executor.wait_idle().await.unwrap();

    assert_eq!(billed.len(), 120);
    for k in 0..12 {
        let key = format!("k{k}");
        let expected: Vec<i64> = published
            .iter()
            .filter(|(published_key, _)| *published_key == key)
            .map(|(_, seq)| *seq)
            .collect();
        assert_eq!(billed.seqs_of_key(&key), expected, "key {key}");
    }
    executor.shutdown().await.unwrap();
    photon.shutdown().await.unwrap();
    port.delete_all_streams().await.unwrap();
}
