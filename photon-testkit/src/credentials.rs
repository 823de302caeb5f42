//! What every port's refused-credentials test checks of the error it got.

use photon_core::PhotonError;

/// Checks that `error` is [`PhotonError::Unauthorized`] from `backend`, naming `server` and
/// `identity`, not retryable, and showing `secret` nowhere (neither its message nor its
/// debug form); returns the server's reason for further checks.
///
/// # Panics
/// When any of that does not hold, saying which.
pub fn assert_refused_credentials(
    error: &PhotonError,
    backend: &str,
    server: &str,
    identity: &str,
    secret: &str,
) -> String {
    let PhotonError::Unauthorized {
        backend: refused_by,
        server: named_server,
        identity: named_identity,
        message,
        ..
    } = error
    else {
        panic!("expected refused credentials, got {error:?}");
    };
    assert_eq!(*refused_by, backend);
    assert_eq!(named_server, server);
    assert_eq!(named_identity, identity);
    assert!(!error.is_retryable(), "{error}");
    let shown = format!("{error} {error:?}");
    assert!(!shown.contains(secret), "the secret is shown: {shown}");
    message.clone()
}
