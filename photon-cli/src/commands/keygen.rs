//! `keygen`: a new transport key for `PHOTON_TRANSPORT_KEYS`.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use clap::Args;
use photon::{PhotonError, TransportCrypto};
use rand::RngCore;
use serde_json::json;

use super::output::Output;

/// The new key's id, and the ring it joins.
#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Id of the new key (stored with every event it seals).
    #[arg(long, default_value = "k1")]
    id: String,
    /// An existing ring (`id:base64,...`) to append the new key to: it becomes the key that
    /// seals, and the older keys still open what they sealed.
    #[arg(long)]
    ring: Option<String>,
}

/// Prints `id:base64key` (or the whole ring with the new key last).
///
/// # Errors
/// `InvalidInput` when the id is empty, holds `:` or `,`, or is already in the ring;
/// `Config` when the ring is malformed.
pub fn run(output: Output, args: KeygenArgs) -> Result<(), PhotonError> {
    let id = args.id.trim();
    if id.is_empty() || id.contains([':', ',']) {
        return Err(PhotonError::InvalidInput(format!(
            "key id {id:?}: must be non-empty, without ':' or ','"
        )));
    }
    let mut key = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut key);
    let entry = format!("{id}:{}", BASE64.encode(key));
    let ring = match args
        .ring
        .as_deref()
        .map(str::trim)
        .filter(|r| !r.is_empty())
    {
        Some(ring) => {
            let existing = TransportCrypto::parse_key_list("--ring", ring)?;
            if existing.key_ids().any(|known| known == id) {
                return Err(PhotonError::InvalidInput(format!(
                    "key id {id:?} is already in the ring: choose another --id"
                )));
            }
            format!("{ring},{entry}")
        }
        None => entry,
    };
    // The value must be one that Photon accepts.
    TransportCrypto::parse_key_list("PHOTON_TRANSPORT_KEYS", &ring)?;
    output.emit(
        &json!({"PHOTON_TRANSPORT_KEYS": ring, "sealing_key_id": id}),
        || format!("PHOTON_TRANSPORT_KEYS={ring}"),
    );
    Ok(())
}
