//! `doctor`: checks that a backend answers and shows what it supports.

use photon::PhotonError;
use serde_json::json;

use super::backend::Backend;
use super::output::Output;

/// Opens the backend, publishes and reads back one probe event, and prints capabilities
/// and the transport key status.
///
/// # Errors
/// The first failing step, with the port's error.
pub async fn run(backend: Backend, output: Output) -> Result<(), PhotonError> {
    let photon = backend.photon().await?;
    let port = photon.store().port().clone();
    let sealing = photon.store().crypto().sealing_key_id().map(str::to_owned);
    let appended = photon
        .publish(
            "photon.doctor",
            None,
            json!("photon-doctor"),
            json!({"probe": true}),
        )
        .await?;
    let found = if port.capabilities().get_event {
        let found = photon.get_event(&appended.event_id).await?.is_some();
        if !found {
            return Err(PhotonError::NotFound(format!(
                "probe event {} (published, then not found by id)",
                appended.event_id
            )));
        }
        Some(found)
    } else {
        None
    };
    let capabilities = port.capabilities();
    output.emit(
        &json!({
            "backend": port.label(),
            "capabilities": format!("{capabilities:?}"),
            "sealing_key_id": sealing,
            "probe_seq": appended.seq,
            "probe_found_by_id": found,
        }),
        || {
            let key = sealing.as_deref().map_or_else(
                || "none (events stored in plaintext)".to_owned(),
                |id| format!("sealing with key id {id:?}"),
            );
            let by_id = match found {
                Some(_) => "ok",
                None => "not supported by this backend",
            };
            format!(
                "backend: {}\ncapabilities: {capabilities:?}\ntransport key: {key}\npublish: ok (seq {})\nget_event: {by_id}\ndoctor: {} answers",
                port.label(),
                appended.seq,
                port.label()
            )
        },
    );
    photon.shutdown().await
}
