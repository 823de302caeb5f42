//! `get_record` on sharded topics, and ids that are not this port's.

mod common;

use common::FluvioFactory;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_find_their_event_on_every_shard() {
    let Some(factory) = FluvioFactory::from_env(4).await else {
        return;
    };
    let store = factory.store().await;
    let mut published = Vec::new();
    for i in 0..24 {
        let key = format!("key-{i}");
        let appended = store
            .publish("get.sharded", Some(&key), json!({"a": i}), json!({"i": i}))
            .await
            .unwrap();
        assert!(
            appended
                .event_id
                .starts_with(&format!("f1:{}-s-", factory.prefix)),
            "{}",
            appended.event_id
        );
        published.push((appended, key, i));
    }
    let reopened = factory.store().await;
    for (appended, key, i) in &published {
        let event = reopened
            .get_event(&appended.event_id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(event.seq, appended.seq);
        assert_eq!(event.topic_key.as_deref(), Some(key.as_str()));
        assert_eq!(event.payload, json!({"i": i}));
    }
    let (first, _, _) = &published[0];
    let beyond = first
        .event_id
        .rsplit_once(':')
        .map(|(head, _)| format!("{head}:999999"))
        .unwrap();
    let missing_topic = format!("f1:{}-nothing-here:0:0", factory.prefix);
    let other_partition = first.event_id.replacen(":0:", ":7:", 1);
    for id in [beyond, missing_topic, other_partition] {
        assert!(reopened.get_event(&id).await.unwrap().is_none(), "{id}");
    }
    // The same id seen through a port with another shard layout is not its event.
    let unsharded = FluvioFactory {
        shards: 1,
        ..factory
    };
    let other = unsharded.port().await.unwrap();
    assert!(
        photon_core::StoragePort::get_record(&other, &first.event_id)
            .await
            .unwrap()
            .is_none()
    );
}
