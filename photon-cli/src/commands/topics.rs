//! `topics`: every topic the backend holds, with head, size and shards.

use photon::PhotonError;

use super::backend::Backend;
use super::output::{show, Output};

/// Prints one line per topic: name, head seq, stored events, bytes and shards (`-` where
/// the backend cannot tell).
///
/// # Errors
/// `Unsupported` on backends that cannot list their topics; the port's errors.
pub async fn run(backend: Backend, output: Output) -> Result<(), PhotonError> {
    let photon = backend.photon().await?;
    let topics = photon.store().port().list_topics().await?;
    let unknown = |value: Option<u64>| value.map_or_else(|| "-".to_owned(), |v| v.to_string());
    for topic in &topics {
        let value = serde_json::to_value(topic).map_err(|e| PhotonError::codec("topic", e))?;
        output.emit(&value, || {
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
