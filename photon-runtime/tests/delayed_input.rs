//! Bad input to `publish_after` and `publish_at` gets a typed error naming its cause, and
//! stores nothing: an invalid topic, a delay past the last time there is, an event whose
//! schedule entry is over the store's payload limit.

use std::time::Duration;

use photon_runtime::{Photon, PhotonError, SchedulerConfig};
use serde_json::json;

/// The records of the schedule topic.
async fn entries(photon: &Photon) -> usize {
    let topic = &photon.scheduler_config().topic;
    photon
        .store()
        .port()
        .list_by_topic(topic, 0, 100)
        .await
        .unwrap()
        .len()
}

#[tokio::test]
async fn bad_input_is_refused_by_name_and_stores_nothing() {
    let photon = Photon::builder().build().unwrap();
    let soon = Duration::from_millis(10);

    let topic = photon
        .publish_after("Reminders!", None, json!(null), json!(1), soon)
        .await;
    assert!(
        matches!(&topic, Err(PhotonError::InvalidTopic { topic, .. }) if topic == "Reminders!"),
        "{topic:?}"
    );

    let forever = photon
        .publish_after("reminders", None, json!(null), json!(1), Duration::MAX)
        .await;
    match forever {
        Err(PhotonError::InvalidInput(message)) => assert!(
            message.contains("for topic \"reminders\": too long to be a time"),
            "{message}"
        ),
        other => panic!("expected InvalidInput, got {other:?}"),
    }

    // Under the store's limit as an event, over it once held in its schedule entry.
    let limit = photon.store().port().capabilities().max_payload_bytes;
    let text = "x".repeat(limit - 64);
    let large = photon
        .publish_after("reminders", None, json!(null), json!(text), soon)
        .await;
    match large {
        Err(PhotonError::PayloadTooLarge {
            topic,
            size,
            limit: named,
        }) => {
            assert_eq!((topic.as_str(), named), ("reminders", limit));
            assert!(size > limit, "{size}");
        }
        other => panic!("expected PayloadTooLarge, got {other:?}"),
    }
    assert_eq!(entries(&photon).await, 0, "nothing refused was stored");
    photon.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_bad_scheduler_setting_is_refused_when_the_instance_is_built() {
    let refused = Photon::builder()
        .scheduler(SchedulerConfig::default().topic("Schedule!"))
        .build();
    match refused {
        Err(PhotonError::Config {
            variable, value, ..
        }) => {
            assert_eq!(
                (variable.as_str(), value.as_str()),
                ("scheduler topic", "Schedule!")
            );
        }
        other => panic!("expected a config error, got {:?}", other.map(|_| ())),
    }
}
