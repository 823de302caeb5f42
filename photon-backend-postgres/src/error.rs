//! PostgreSQL errors as Photon errors: a lost connection, a server shutting down, a full
//! server, a deadlock, a serialization failure or a lock wait that outlasted the session's
//! `lock_timeout` are retryable; the rest is not (a refused TLS certificate neither).

use photon_core::PhotonError;
use tokio_postgres::error::SqlState;

/// The port's label in logs, metrics and errors.
pub(crate) const LABEL: &str = "postgres";

/// Whether retrying may succeed.
pub(crate) fn is_transient(error: &tokio_postgres::Error) -> bool {
    if error.is_closed() {
        return true;
    }
    if refused_certificate(error) {
        return false;
    }
    match error.code() {
        // No server error code: the connection itself failed (refused, reset, timed out).
        None => true,
        Some(code) => {
            code.code().starts_with("08")
                || [
                    SqlState::T_R_DEADLOCK_DETECTED,
                    SqlState::T_R_SERIALIZATION_FAILURE,
                    SqlState::LOCK_NOT_AVAILABLE,
                    SqlState::ADMIN_SHUTDOWN,
                    SqlState::CRASH_SHUTDOWN,
                    SqlState::CANNOT_CONNECT_NOW,
                    SqlState::TOO_MANY_CONNECTIONS,
                ]
                .contains(code)
        }
    }
}

/// Whether the server refused the credentials: a wrong password (28P01), or an identity
/// it does not accept, such as an unknown role or a `pg_hba.conf` rule (28000).
pub(crate) fn refused_credentials(error: &tokio_postgres::Error) -> bool {
    error.code().is_some_and(|code| {
        *code == SqlState::INVALID_PASSWORD
            || *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION
    })
}

/// Whether a TLS certificate was refused (by the port, or by the server).
fn refused_certificate(error: &tokio_postgres::Error) -> bool {
    #[cfg(feature = "tls")]
    return crate::tls::is_refused_certificate(error);
    #[cfg(not(feature = "tls"))]
    return {
        let _ = error;
        false
    };
}

/// A Photon error for a failed PostgreSQL call; `what` says what was being done. The
/// server's description is in the message and the error itself is the `source`.
pub(crate) fn pg_error(what: &str, error: tokio_postgres::Error) -> PhotonError {
    let message = format!("cannot {what}: {}", describe(&error));
    if is_transient(&error) {
        PhotonError::unavailable(LABEL, message, error)
    } else {
        PhotonError::storage(LABEL, message, error)
    }
}

/// Whether the statement was cancelled because it waited for a lock longer than the
/// session's `lock_timeout`.
pub(crate) fn is_lock_timeout(error: &tokio_postgres::Error) -> bool {
    error.code() == Some(&SqlState::LOCK_NOT_AVAILABLE)
}

/// The error with its cause (the server's message, or why the connection failed), which
/// the driver's `Display` leaves out.
pub(crate) fn describe(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        let text = format!("{error}: {} ({})", db.message(), db.code().code());
        if is_lock_timeout(error) {
            return format!(
                "{text}: another transaction held a lock it needed longer than the port's \
                 lock_timeout (PHOTON_POSTGRES_LOCK_TIMEOUT)"
            );
        }
        return text;
    }
    let mut text = error.to_string();
    let mut cause = std::error::Error::source(error);
    while let Some(inner) = cause {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        cause = inner.source();
    }
    #[cfg(feature = "tls")]
    if let Some(hint) = crate::tls::hint(error) {
        text.push_str(" (");
        text.push_str(hint);
        text.push(')');
    }
    text
}

/// No pooled connection could be had: retryable when the server could not be reached or
/// was busy, not when it refused the connection (refused credentials, a refused TLS
/// certificate, a missing database: trying again cannot help).
pub(crate) fn pool_error(what: &str, error: deadpool_postgres::PoolError) -> PhotonError {
    let (cause, transient) = match &error {
        deadpool_postgres::PoolError::Backend(backend) => {
            (describe(backend), is_transient(backend))
        }
        other => (other.to_string(), true),
    };
    let message = format!("cannot {what}: {cause}");
    if transient {
        PhotonError::unavailable(LABEL, message, error)
    } else {
        PhotonError::storage(LABEL, message, error)
    }
}

/// Why a writer transaction failed.
#[derive(Debug)]
pub(crate) enum BatchError {
    /// No pooled connection.
    Pool(deadpool_postgres::PoolError),
    /// The server refused a statement or the connection broke.
    Db(tokio_postgres::Error),
    /// Another transaction stored one of the batch's event ids after the batch looked for
    /// them: running the batch again finds it stored.
    Raced,
    /// The connection broke after a `COMMIT` of the batch was sent: the server may have
    /// committed it. Holds the last attempt's error.
    Unknown(Box<BatchError>),
}

impl BatchError {
    /// Whether running the batch again may succeed.
    pub(crate) fn is_transient(&self) -> bool {
        match self {
            Self::Pool(_) | Self::Raced | Self::Unknown(_) => true,
            Self::Db(error) => is_transient(error),
        }
    }

    /// Whether the writer should run the batch again itself: transient, but not a lock
    /// timeout, whose callers get the retryable error at once rather than the same wait
    /// again.
    pub(crate) fn retry_here(&self) -> bool {
        match self {
            Self::Db(error) if is_lock_timeout(error) => false,
            other => other.is_transient(),
        }
    }
}

impl std::fmt::Display for BatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Pool(error) => write!(f, "no connection: {error}"),
            Self::Db(error) => f.write_str(&describe(error)),
            Self::Raced => f.write_str("another transaction stored the same event id"),
            Self::Unknown(last) => write!(
                f,
                "the connection broke after a commit was sent, so it may have been applied \
                 (last attempt: {last})"
            ),
        }
    }
}

impl From<tokio_postgres::Error> for BatchError {
    fn from(error: tokio_postgres::Error) -> Self {
        Self::Db(error)
    }
}
