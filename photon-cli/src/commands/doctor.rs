//! `doctor`: checks that a backend answers and shows what it supports.

use photon::PhotonError;
use serde_json::json;

use super::backend::Backend;

/// Opens the backend, publishes and reads back one probe event, and prints capabilities
/// and the transport key status.
///
/// # Errors
/// The first failing step, with the port's error.
pub async fn run(backend: Backend) -> Result<(), PhotonError> {
    let photon = backend.photon().await?;
    let port = photon.store().port().clone();
    println!("backend: {}", port.label());
    println!("capabilities: {:?}", port.capabilities());
    match photon.store().crypto().sealing_key_id() {
        Some(id) => println!("transport key: sealing with key id {id:?}"),
        None => println!("transport key: none (events stored in plaintext)"),
    }
    let appended = photon
        .publish(
            "photon.doctor",
            None,
            json!("photon-doctor"),
            json!({"probe": true}),
        )
        .await?;
    println!("publish: ok (seq {})", appended.seq);
    if port.capabilities().get_event {
        let found = photon.get_event(&appended.event_id).await?;
        let verdict = if found.is_some() { "ok" } else { "MISSING" };
        println!("get_event: {verdict}");
        if found.is_none() {
            return Err(PhotonError::NotFound(format!(
                "probe event {}",
                appended.event_id
            )));
        }
    }
    println!("doctor: {} answers", port.label());
    Ok(())
}
