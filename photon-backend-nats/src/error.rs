//! Mapping of `async-nats` errors onto [`PhotonError`].

use photon_core::{BoxError, PhotonError};

/// The port's label in logs, metrics and errors.
pub(crate) const LABEL: &str = "nats";

/// A retryable error: the server did not answer or is not ready.
pub(crate) fn unavailable(message: impl Into<String>, source: impl Into<BoxError>) -> PhotonError {
    PhotonError::unavailable(LABEL, message, source)
}

/// An error retrying will not fix.
pub(crate) fn storage(message: impl Into<String>, source: impl Into<BoxError>) -> PhotonError {
    PhotonError::storage(LABEL, message, source)
}
