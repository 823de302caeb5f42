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

/// How long one request to the cluster (an admin request, opening a producer or a
/// consumer, a record's ack on the layouts topic) may go unanswered before the port gives
/// it up. The client waits for some answers without a bound: a request whose answer never
/// comes (seen under the composition soak, about one schedule in 100) would otherwise hold
/// a publish, and every publish behind the same lock, for good.
pub(crate) const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Start of the message of a request given up after [`REQUEST_TIMEOUT`].
const UNANSWERED: &str = "no answer to ";

/// Awaits `request`, giving it up after [`REQUEST_TIMEOUT`].
///
/// # Errors
/// [`PhotonError::Unavailable`] naming `what` when no answer came in time (see
/// [`is_unanswered`]).
pub(crate) async fn answered<T>(
    what: impl FnOnce() -> String,
    request: impl std::future::Future<Output = T>,
) -> Result<T, PhotonError> {
    answered_within(REQUEST_TIMEOUT, what, request).await
}

/// [`answered`] with another bound.
async fn answered_within<T>(
    limit: std::time::Duration,
    what: impl FnOnce() -> String,
    request: impl std::future::Future<Output = T>,
) -> Result<T, PhotonError> {
    match tokio::time::timeout(limit, request).await {
        Ok(answer) => Ok(answer),
        Err(_) => Err(unanswered(what(), limit)),
    }
}

/// The error of a request (`what`) given up after `waited` without an answer.
pub(crate) fn unanswered(what: String, waited: std::time::Duration) -> PhotonError {
    let message = format!("{UNANSWERED}{what} within {waited:?}");
    tracing::warn!(port = LABEL, "{message}; the connection will be replaced");
    PhotonError::Unavailable {
        backend: LABEL,
        message,
        source: None,
    }
}

/// Whether `err` is a request given up by [`answered`]: the connection it went out on is
/// to be replaced before the next try.
pub(crate) fn is_unanswered(err: &PhotonError) -> bool {
    matches!(err, PhotonError::Unavailable { backend: LABEL, message, .. } if message.starts_with(UNANSWERED))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_request_without_an_answer_is_given_up_and_named() {
        let limit = Duration::from_millis(20);
        let never = std::future::pending::<()>();
        let err = answered_within(limit, || "listing topic t".into(), never)
            .await
            .unwrap_err();
        assert!(is_unanswered(&err), "{err:?}");
        assert_eq!(
            err.to_string(),
            "fluvio is unavailable: no answer to listing topic t within 20ms"
        );
        assert!(err.is_retryable());
        let answer = answered_within(limit, || unreachable!(), async { 7 }).await;
        assert_eq!(answer.unwrap(), 7);
        // Other unavailability is not a request given up.
        assert!(!is_unanswered(&unavailable(
            "cannot list topic t".into(),
            "refused"
        )));
    }
}
