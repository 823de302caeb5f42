//! A stream the server refuses reports the server's reason in the message and keeps the
//! client's error as `source`.

mod common;

use async_nats::jetstream::stream;
use common::NatsFactory;
use photon_core::{PhotonError, StoragePort};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_subjects_report_the_servers_reason() {
    let Some(factory) = NatsFactory::from_env(1).await else {
        return;
    };
    let port = factory.port().await.unwrap();
    // A stream outside Photon's names holding the subjects of topic `clash`'s stream.
    let stray = format!("stray-{}", factory.prefix);
    port.jetstream()
        .create_stream(stream::Config {
            name: stray.clone(),
            subjects: vec![format!("photon.{}.ev.clash.>", factory.prefix)],
            ..stream::Config::default()
        })
        .await
        .unwrap();
    let outcome = port
        .append(photon_testkit::plain_draft("clash", None, json!(1)))
        .await;
    port.jetstream().delete_stream(&stray).await.unwrap();
    let error = outcome.unwrap_err();
    assert!(matches!(error, PhotonError::Storage { .. }), "{error:?}");
    let text = error.to_string();
    assert!(
        text.starts_with(&format!(
            "nats storage error: cannot open stream {}_clash_0: ",
            factory.prefix
        )),
        "{text}"
    );
    assert!(
        text.contains("subjects overlap with an existing stream"),
        "{text}"
    );
    assert!(text.contains("10065"), "{text}");
    assert!(std::error::Error::source(&error).is_some());
}
