//! Retention limits apply to event topics, and to dead-letter topics only when asked.

mod common;

use std::time::Duration;

use common::NatsFactory;
use photon_core::{RecordDraft, StoragePort};
use serde_json::json;

fn draft(topic: &str) -> RecordDraft {
    photon_testkit::plain_draft(topic, None, json!(1))
}

async fn limits(port: &photon_backend_nats::NatsStoragePort, stream: &str) -> (Duration, i64) {
    let info = port.jetstream().get_stream(stream).await.unwrap();
    let config = &info.cached_info().config;
    (config.max_age, config.max_bytes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letter_topics_keep_everything_unless_asked() {
    let Some(factory) = NatsFactory::from_env(1).await else {
        return;
    };
    let day = Duration::from_secs(86_400);
    let port = factory
        .builder()
        .retention_max_age(day)
        .retention_max_bytes(1 << 30)
        .build()
        .await
        .unwrap();
    port.append(draft("orders")).await.unwrap();
    port.append(draft("orders.dlq")).await.unwrap();
    let prefix = &factory.prefix;
    assert_eq!(
        limits(&port, &format!("{prefix}_orders_0")).await,
        (day, 1 << 30)
    );
    assert_eq!(
        limits(&port, &format!("{prefix}_orders_ddlq_0")).await,
        (Duration::ZERO, -1)
    );

    // Another suffix: a topic marked before its first letter is created kept; one that
    // already exists with the limits loses them.
    port.declare_dead_letter_topic("orders.failed")
        .await
        .unwrap();
    port.append(draft("orders.failed")).await.unwrap();
    assert_eq!(
        limits(&port, &format!("{prefix}_orders_dfailed_0")).await,
        (Duration::ZERO, -1)
    );
    port.append(draft("payments.failed")).await.unwrap();
    let stream = format!("{prefix}_payments_dfailed_0");
    assert_eq!(limits(&port, &stream).await, (day, 1 << 30));
    port.declare_dead_letter_topic("payments.failed")
        .await
        .unwrap();
    assert_eq!(limits(&port, &stream).await, (Duration::ZERO, -1));

    let asked = factory
        .builder()
        .retention_max_age(day)
        .retention_max_bytes(1 << 30)
        .retention_dead_letters(true)
        .build()
        .await
        .unwrap();
    asked.append(draft("billing.dlq")).await.unwrap();
    assert_eq!(
        limits(&asked, &format!("{prefix}_billing_ddlq_0")).await,
        (day, 1 << 30)
    );
}
