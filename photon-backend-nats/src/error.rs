//! Mapping of `async-nats` errors onto [`PhotonError`].
//!
//! The client's error is kept as the `source`, and its description (which carries the
//! server's own words, e.g. "subjects overlap with an existing stream (code 400, error
//! code 10065)") is also put in the message: many logs print only the top error.

use photon_core::{BoxError, PhotonError};

/// The port's label in logs, metrics and errors.
pub(crate) const LABEL: &str = "nats";

/// A retryable error: the server did not answer or is not ready.
pub(crate) fn unavailable(message: impl Into<String>, source: impl Into<BoxError>) -> PhotonError {
    let source = source.into();
    PhotonError::Unavailable {
        backend: LABEL,
        message: with_cause(message.into(), &*source),
        source: Some(source),
    }
}

/// An error retrying will not fix.
pub(crate) fn storage(message: impl Into<String>, source: impl Into<BoxError>) -> PhotonError {
    let source = source.into();
    PhotonError::Storage {
        backend: LABEL,
        message: with_cause(message.into(), &*source),
        source: Some(source),
    }
}

fn with_cause(message: String, source: &(dyn std::error::Error + 'static)) -> String {
    let cause = source.to_string();
    if cause.is_empty() {
        message
    } else {
        format!("{message}: {cause}")
    }
}
