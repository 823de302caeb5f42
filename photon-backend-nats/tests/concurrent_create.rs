//! Several ports (processes, executors, a scheduler) on one prefix publishing the first
//! events of a new topic at the same moment: each publish lands, none fails because another
//! port was creating the same stream.
//!
//! JetStream checks a new stream's name and its subjects in two steps; when two clients
//! create the same stream at once, the second can pass the name check before the first
//! stream is registered and then fail the subject check against it with "subjects overlap
//! with an existing stream" (10065). The port reads such a refusal as "someone else just
//! created it" only when the stream of that name now exists with this topic's subjects.

mod common;

use std::collections::BTreeSet;

use common::NatsFactory;
use futures::StreamExt;
use photon_core::{RecordDraft, StoragePort};
use serde_json::json;

/// Ports racing per topic: each has its own stream cache, as separate processes do.
const PORTS: usize = 6;
/// New topics raced on; one race rarely hits the server's window, dozens do.
const TOPICS: usize = 40;

fn draft(topic: &str, key: &str) -> RecordDraft {
    photon_testkit::plain_draft(topic, Some(key), json!({ "key": key }))
}

async fn race(shards: u32) {
    let Some(factory) = NatsFactory::from_env(shards).await else {
        return;
    };
    let mut ports = Vec::new();
    for _ in 0..PORTS {
        ports.push(factory.port().await.unwrap());
    }
    for topic_index in 0..TOPICS {
        let topic = format!("race.t{topic_index}");
        let publishes = ports.iter().enumerate().map(|(index, port)| {
            let draft = draft(&topic, &format!("k{index}"));
            async move { port.append(draft).await }
        });
        let results = futures::future::join_all(publishes).await;
        for (index, result) in results.into_iter().enumerate() {
            if let Err(err) = result {
                panic!("port {index}: first publish to new topic {topic} failed: {err}");
            }
        }
        let stored = ports[0].list_by_topic(&topic, 0, 100).await.unwrap();
        let keys: BTreeSet<String> = stored.iter().filter_map(|r| r.topic_key.clone()).collect();
        let expected: BTreeSet<String> = (0..PORTS).map(|index| format!("k{index}")).collect();
        assert_eq!(stored.len(), PORTS, "topic {topic}: {stored:?}");
        assert_eq!(keys, expected, "topic {topic}");
    }
    // Exactly the topics' shard streams exist under the prefix: a refusal taken for a
    // concurrent creation never left a stream of another name behind.
    let mut names = ports[0].jetstream().stream_names();
    let mut mine = 0;
    while let Some(name) = names.next().await {
        if name
            .unwrap()
            .starts_with(&format!("{}_race", factory.prefix))
        {
            mine += 1;
        }
    }
    let touched: BTreeSet<u32> = (0..PORTS)
        .map(|index| photon_core::raw::shard::shard_for_key(Some(&format!("k{index}")), shards))
        .chain([0])
        .collect();
    assert_eq!(mine, TOPICS * touched.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_publishes_from_several_ports_one_shard() {
    race(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_publishes_from_several_ports_four_shards() {
    race(4).await;
}
