//! With sync ack off, `append` returns once sent; a failed ack is reported by `flush()` and
//! by the next `append`, never lost silently.

mod common;

use std::time::Duration;

use common::NatsFactory;
use futures::StreamExt;
use photon_core::{Body, PhotonError, RecordDraft, StartAt, StoragePort, SubscribeRequest};
use serde_json::json;

const TOPIC: &str = "async.ack";

fn draft(i: i64) -> RecordDraft {
    photon_testkit::plain_draft(TOPIC, Some(&format!("k{}", i % 3)), json!({"i": i}))
}

async fn payloads(port: &dyn StoragePort, count: usize) -> Vec<i64> {
    let request = SubscribeRequest {
        topic: TOPIC.into(),
        key: None,
        start: StartAt::Beginning,
        durable: None,
    };
    let mut stream = port.subscribe(request);
    let mut got = Vec::new();
    for _ in 0..count {
        let record = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let Body::Plain { payload, .. } = record.body else {
            panic!("sealed body")
        };
        got.push(payload["i"].as_i64().unwrap());
    }
    assert!(
        tokio::time::timeout(Duration::from_millis(300), stream.next())
            .await
            .is_err()
    );
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_acks_are_reported_by_flush_and_next_append() {
    let Some(factory) = NatsFactory::from_env(1).await else {
        return;
    };
    let port = factory
        .builder()
        .sync_ack(false)
        .max_in_flight(64)
        .build()
        .await
        .unwrap();
    for i in 0..500 {
        let appended = port.append(draft(i)).await.unwrap();
        assert_eq!(appended.seq, 0, "the seq is not known before the ack");
    }
    port.flush().await.unwrap();
    assert_eq!(payloads(&port, 500).await, (0..500).collect::<Vec<_>>());

    // The stream disappears behind the port's back: the next ack fails.
    let stream = format!("{}_async_dack_0", factory.prefix);
    port.jetstream().delete_stream(&stream).await.unwrap();
    port.append(draft(500)).await.unwrap();
    let err = port.flush().await.unwrap_err();
    assert!(matches!(err, PhotonError::Unavailable { .. }), "{err}");
    port.flush().await.unwrap();

    // A failure not yet collected by flush is returned by the next append, which sends nothing.
    port.append(draft(501)).await.unwrap();
    port.flush().await.unwrap();
    port.jetstream().delete_stream(&stream).await.unwrap();
    let lost = draft(502);
    port.append(lost.clone()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let err = port.append(draft(503)).await.unwrap_err();
    assert!(err.to_string().contains(&lost.envelope_id), "{err}");

    // The port recovers: the stream is opened again and appends are stored.
    port.append(draft(504)).await.unwrap();
    port.flush().await.unwrap();
    assert_eq!(payloads(&port, 1).await, vec![504]);
}
