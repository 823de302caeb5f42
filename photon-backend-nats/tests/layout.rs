//! A topic created with one shard count and opened with another is refused with a
//! configuration error naming both counts, before anything is published or created.

mod common;

use common::NatsFactory;
use futures::StreamExt;
use photon_core::{PhotonError, RecordDraft, StoragePort};
use serde_json::json;

fn draft(topic: &str, key: &str) -> RecordDraft {
    photon_testkit::plain_draft(topic, Some(key), json!({ "key": key }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_shard_count_is_refused_naming_both() {
    let Some(one) = NatsFactory::from_env(1).await else {
        return;
    };
    let topic = "layout.orders";
    let first = one.port().await.unwrap();
    first.append(draft(topic, "k0")).await.unwrap();

    let four = one.builder().shards(4).build().await.unwrap();
    // Keys landing in every shard of the new layout: each is refused.
    for key in ["k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"] {
        let error = four.append(draft(topic, key)).await.unwrap_err();
        match &error {
            PhotonError::Config {
                variable,
                value,
                expected,
            } => {
                assert_eq!(variable, "PHOTON_NATS_SHARDS");
                assert_eq!(value, "4");
                assert!(
                    expected.starts_with(&format!(
                        "1, the shard count stream {}_layout_dorders_0 was created with",
                        one.prefix
                    )),
                    "{expected}"
                );
            }
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }
    // Reads are refused too: they would misread stored seqs.
    assert!(matches!(
        four.list_by_topic(topic, 0, 10).await,
        Err(PhotonError::Config { .. })
    ));

    // Nothing was published and no stream of the new layout was created.
    assert_eq!(first.list_by_topic(topic, 0, 10).await.unwrap().len(), 1);
    let mut names = first.jetstream().stream_names();
    let mut mine = Vec::new();
    while let Some(name) = names.next().await {
        let name = name.unwrap();
        if name.starts_with(&one.prefix) {
            mine.push(name);
        }
    }
    mine.sort();
    assert_eq!(
        mine,
        vec![format!("{}_layout_dorders_0", one.prefix)],
        "streams of the prefix"
    );
}
