//! Mapping of the `fluvio` client's errors onto [`PhotonError`], and the port's label.

use photon_core::PhotonError;

/// The port's label in logs, metrics and errors.
pub(crate) const LABEL: &str = "fluvio";

/// A retryable error: the cluster did not answer or is not ready. The client's description
/// goes into the message (its error types do not all implement `std::error::Error`).
pub(crate) fn unavailable(message: String, err: impl std::fmt::Display) -> PhotonError {
    PhotonError::Unavailable {
        backend: LABEL,
        message: format!("{message}: {err}"),
        source: None,
    }
}

/// Whether a client error's text says a partition has no leader yet: what a topic created
/// moments ago answers until the cluster settles it.
pub(crate) fn is_leaderless(text: &str) -> bool {
    text.contains("not the leader")
}
