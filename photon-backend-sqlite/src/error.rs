//! SQLite errors as Photon errors: a busy or locked database is retryable, the rest is not.

use photon_core::PhotonError;
use rusqlite::ErrorCode;

/// The port's label in logs, metrics and errors.
pub(crate) const LABEL: &str = "sqlite";

/// Whether retrying may succeed: another process held the lock past the busy timeout.
pub(crate) fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(
        error.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked)
    )
}

/// A Photon error for a failed SQLite call; `what` says what was being done. SQLite's
/// description is in the message (so that a log line of the error alone says why) and the
/// error itself is the `source`. A busy or locked database is
/// [`PhotonError::Unavailable`] (retryable: a transactional handler's attempt is retried),
/// anything else [`PhotonError::Storage`] (not retried: the event is dead-lettered).
pub fn sqlite_error(what: &str, error: rusqlite::Error) -> PhotonError {
    let message = format!("cannot {what}: {error}");
    if is_busy(&error) {
        PhotonError::unavailable(LABEL, message, error)
    } else {
        PhotonError::storage(LABEL, message, error)
    }
}
