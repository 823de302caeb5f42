//! `topics`: every topic the backend holds, with head, size and shards.

use photon::core::TopicInfo;
use photon::{Photon, PhotonError};

use super::backend::Backend;
use super::output::{show, to_json, Output};

/// Every topic the backend holds (dead-letter topics included), sorted by name.
///
/// # Errors
/// `Unsupported` on backends that cannot list their topics; the port's errors.
pub async fn list(photon: &Photon) -> Result<Vec<TopicInfo>, PhotonError> {
    photon.store().port().list_topics().await
}

/// Prints one line per topic: name, head seq, stored events, bytes and shards (`-` where
/// the backend cannot tell).
///
/// # Errors
/// As [`list`].
pub async fn run(backend: Backend, output: Output) -> Result<(), PhotonError> {
    let photon = backend.photon().await?;
    let unknown = |value: Option<u64>| value.map_or_else(|| "-".to_owned(), |v| v.to_string());
    for topic in list(&photon).await? {
        output.emit(&to_json("topic", &topic)?, || {
            format!(
                "{} head {} events {} bytes {} shards {}",
                topic.name,
                show(topic.head_seq),
                unknown(topic.events),
                unknown(topic.bytes),
                topic.shards
            )
        });
    }
    Ok(())
}
