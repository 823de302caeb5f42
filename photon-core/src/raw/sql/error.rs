//! The errors every SQL writer reports the same way, named by the port's label.

use crate::error::PhotonError;

/// The failure of a batch, reported to each of its callers: retryable
/// ([`PhotonError::Unavailable`]) when `transient`, else [`PhotonError::Storage`]. The
/// driver's error is in `cause` only: one error value cannot go to several callers.
pub fn shared_failure(
    label: &'static str,
    what: &str,
    transient: bool,
    cause: &str,
) -> PhotonError {
    let message = format!("cannot {what}: {cause}");
    if transient {
        PhotonError::Unavailable {
            backend: label,
            message,
            source: None,
        }
    } else {
        PhotonError::Storage {
            backend: label,
            message,
            source: None,
        }
    }
}

/// The port's writer is gone (the port is shutting down, or its writer failed).
pub fn writer_gone(label: &'static str) -> PhotonError {
    PhotonError::Closed(format!("{label} writer"))
}

/// The message a panic carried (a handler's or a transaction's, caught so that it rolls
/// back instead of taking the writer down).
pub fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-text panic".to_owned())
}
