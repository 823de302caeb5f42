//! Dead-letter topics keep their letters: `*.dlq` topics, and topics of another suffix
//! marked before their first letter, are created with the longest retention Fluvio stores;
//! a marked topic that already exists with a shorter one is a configuration error naming
//! it, since Fluvio cannot change a topic's retention. With `retention_dead_letters` on,
//! they age like every topic.

mod common;

use common::FluvioFactory;
use fluvio::metadata::topic::TopicSpec;
use fluvio::{Fluvio, FluvioClusterConfig};
use photon_backend_fluvio::testing::fluvio_topic_name;
use photon_backend_fluvio::DEAD_LETTER_RETENTION;
use photon_core::{PhotonError, RecordDraft, StoragePort};
use serde_json::json;

fn draft(topic: &str) -> RecordDraft {
    photon_testkit::plain_draft(topic, None, json!(1))
}

async fn retention_secs(client: &Fluvio, name: &str) -> u32 {
    let admin = client.admin().await;
    let listed = admin
        .list::<TopicSpec, String>(vec![name.to_owned()])
        .await
        .unwrap();
    let topic = listed
        .iter()
        .find(|topic| topic.name == name)
        .unwrap_or_else(|| panic!("no Fluvio topic {name}"));
    topic.spec.retention_secs()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letter_topics_are_created_kept() {
    let Some(factory) = FluvioFactory::from_env(2).await else {
        return;
    };
    let port = factory.port().await.unwrap();
    let client = Fluvio::connect_with_config(&FluvioClusterConfig::new(factory.endpoint.clone()))
        .await
        .unwrap();
    let prefix = &factory.prefix;
    let kept = u32::try_from(DEAD_LETTER_RETENTION.as_secs()).unwrap();
    let week = 7 * 24 * 3600;

    port.append(draft("orders")).await.unwrap();
    port.append(draft("orders.dlq")).await.unwrap();
    port.declare_dead_letter_topic("orders.failed")
        .await
        .unwrap();
    port.append(draft("orders.failed")).await.unwrap();
    // The letter's shard topic, created by its append; a marked topic has all of its own.
    let dlq = fluvio_topic_name(prefix, "orders.dlq", 0, 2);
    assert_eq!(retention_secs(&client, &dlq).await, kept);
    for shard in 0..2 {
        let name = fluvio_topic_name(prefix, "orders.failed", shard, 2);
        assert_eq!(retention_secs(&client, &name).await, kept);
    }
    // Unkeyed events land on shard 0: its topic exists, with the configured retention.
    let plain = fluvio_topic_name(prefix, "orders", 0, 2);
    assert_eq!(retention_secs(&client, &plain).await, week);

    // An existing topic cannot become a kept one: the error names it.
    port.append(draft("payments.failed")).await.unwrap();
    let refused = port
        .declare_dead_letter_topic("payments.failed")
        .await
        .unwrap_err();
    let shard0 = fluvio_topic_name(prefix, "payments.failed", 0, 2);
    assert!(
        matches!(&refused, PhotonError::Config { value, .. } if value == "payments.failed"),
        "{refused}"
    );
    assert!(refused.to_string().contains(&shard0), "{refused}");
}

/// With `retention_dead_letters` on, dead-letter topics age like every topic, and marking
/// an existing topic is no longer an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_letters_age_when_the_user_asks() {
    let Some(factory) = FluvioFactory::from_env(1).await else {
        return;
    };
    let hour = 3600;
    let port = factory
        .builder()
        .retention_max_age(std::time::Duration::from_secs(u64::from(hour)))
        .retention_dead_letters(true)
        .build()
        .await
        .unwrap();
    let client = Fluvio::connect_with_config(&FluvioClusterConfig::new(factory.endpoint.clone()))
        .await
        .unwrap();
    let prefix = &factory.prefix;
    port.append(draft("orders.dlq")).await.unwrap();
    port.declare_dead_letter_topic("orders.failed")
        .await
        .unwrap();
    port.append(draft("orders.failed")).await.unwrap();
    port.append(draft("payments.failed")).await.unwrap();
    port.declare_dead_letter_topic("payments.failed")
        .await
        .unwrap();
    for topic in ["orders.dlq", "orders.failed", "payments.failed"] {
        let name = fluvio_topic_name(prefix, topic, 0, 1);
        assert_eq!(retention_secs(&client, &name).await, hour, "{topic}");
    }
}
