//! [`Retry::after`]: a handler asking for its event again later, in place (the key waits)
//! or requeued through the scheduler (the key goes on).

use std::time::Duration;

use photon_core::{Event, Headers, PhotonError, Result};

use super::handler::{HandlerOptions, Registration};

/// The header of a requeued event holding the attempts made so far.
pub const ATTEMPTS_HEADER: &str = "photon-attempts";
/// The header of a requeued event naming where it was first read: `<topic>/<seq>/<event id>`.
pub const REQUEUED_FROM_HEADER: &str = "photon-requeued-from";

/// A handler's answer "not now, again after this long": return it as the handler's error
/// (`Err(Retry::after(..))`, or `Err(Retry::after(..).into_error())` where the error type
/// is [`PhotonError`]; inside another error type, as its source).
///
/// It counts as a failed attempt (a retry, up to the handler's `max_attempts`, then the
/// dead-letter topic), waiting `after` instead of the backoff. By default the event is
/// attempted again in place after `after`: its key's later events wait, so per-key order
/// holds. With [`HandlerOptions::requeue_retries`] the event is instead published for later
/// ([`crate::schedule`]) to the handler's retry topic and acknowledged, so its key's later
/// events go on at once; the handler gets it again from that topic after `after` (per-key
/// order is then not kept for that event: it comes after events of its key published
/// meanwhile).
///
/// # Examples
/// ```
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// use std::time::Duration;
/// use photon_runtime::executor::{Context, Retry};
/// use photon_runtime::{Event, HandlerOptions};
///
/// let photon = photon_runtime::testing::photon()?;
/// let executor = photon
///     .executor()
///     .handler_with(
///         HandlerOptions::new("mailer", "emails").requeue_retries(),
///         |event: Event, context: Context| async move {
///             if context.attempt() == 1 {
///                 // The mail server said "try again in a bit": other keys and this key's
///                 // later emails go on meanwhile.
///                 return Err(Retry::after(Duration::from_millis(20)));
///             }
///             println!("sent {}", event.payload);
///             Ok(())
///         },
///     )
///     .start()?;
/// # executor.shutdown().await?;
/// # Ok::<_, photon_runtime::PhotonError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    after: Duration,
}

impl Retry {
    /// Again after `after`.
    pub fn after(after: Duration) -> Self {
        Self { after }
    }

    /// How long the handler asked to wait.
    pub fn delay(&self) -> Duration {
        self.after
    }
}

impl std::fmt::Display for Retry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the handler asked to be retried after {:?}", self.after)
    }
}

impl std::error::Error for Retry {}

impl Retry {
    /// This answer as a [`PhotonError`], for handlers whose error type is one. (Not a
    /// `From` impl: that would make `?` on a `PhotonError` ambiguous where the error type
    /// is inferred.)
    pub fn into_error(self) -> PhotonError {
        PhotonError::handler_failed(self)
    }
}

/// The wait a failed attempt asked for with [`Retry::after`], if it did: the error's
/// source, or a source of that source.
pub(crate) fn requested_delay(error: &PhotonError) -> Option<Duration> {
    let PhotonError::Handler {
        source: Some(source),
        ..
    } = error
    else {
        return None;
    };
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(source.as_ref());
    while let Some(error) = cause {
        if let Some(retry) = error.downcast_ref::<Retry>() {
            return Some(retry.delay());
        }
        cause = error.source();
    }
    None
}

/// The retry topic of a handler that requeues: `<topic>.retries.<durable>`.
pub(crate) fn retry_topic(options: &HandlerOptions) -> String {
    format!("{}.retries.{}", options.topic(), options.durable())
}

/// The attempts a requeued event had before it was requeued (0 for an event read from the
/// handler's own topic).
pub(crate) fn prior_attempts(options: &HandlerOptions, event: &Event) -> u32 {
    if options.retried_topic().is_none() {
        return 0;
    }
    event
        .headers
        .get(ATTEMPTS_HEADER)
        .and_then(|attempts| attempts.parse().ok())
        .unwrap_or(0)
}

/// The registration reading a requeuing handler's retry topic: the same function, options
/// and middleware on the retry topic, dead letters going to the handler's own topic's.
pub(crate) fn retry_twin(registration: &Registration) -> Registration {
    Registration {
        options: registration
            .options
            .clone()
            .reading_retries_of(retry_topic(&registration.options)),
        handler: registration.handler.clone(),
        layer: registration.layer.clone(),
        transactional: None,
    }
}

/// Publishes `event` for later to the retry topic of the handler reading `options`, with
/// the attempts made so far.
///
/// # Errors
/// As [`crate::Photon::publish_at_with_headers`]; [`PhotonError::Closed`] when every
/// handle of the `Photon` is gone.
pub(crate) async fn requeue(
    photon: Option<crate::Photon>,
    options: &HandlerOptions,
    event: &Event,
    attempts: u32,
    after: Duration,
) -> Result<()> {
    let photon = photon.ok_or_else(|| PhotonError::Closed("the executor's Photon".into()))?;
    let topic = options
        .retried_topic()
        .map_or_else(|| retry_topic(options), |_| options.topic().to_owned());
    let mut headers: Headers = event.headers.clone();
    headers.insert(ATTEMPTS_HEADER.to_owned(), attempts.to_string());
    headers
        .entry(REQUEUED_FROM_HEADER.to_owned())
        .or_insert_with(|| format!("{}/{}/{}", event.topic_name, event.seq, event.event_id));
    let at =
        crate::schedule::due_after(&photon.scheduler_config().clock, after).ok_or_else(|| {
            PhotonError::InvalidInput(format!("Retry::after({after:?}): too long to be a time"))
        })?;
    photon
        .publish_at_with_headers(
            &topic,
            event.topic_key.as_deref(),
            event.actor.clone(),
            event.payload.clone(),
            headers,
            at,
        )
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_request_is_found_in_the_error_it_becomes() {
        let error = Retry::after(Duration::from_secs(30)).into_error();
        assert!(error.is_retryable());
        assert_eq!(requested_delay(&error), Some(Duration::from_secs(30)));
        // What the executor makes of a handler returning `Err(Retry::after(..))`.
        let returned: std::result::Result<(), Retry> = Err(Retry::after(Duration::from_secs(2)));
        let error = super::super::IntoHandlerResult::into_handler_result(returned).unwrap_err();
        assert_eq!(requested_delay(&error), Some(Duration::from_secs(2)));
        assert_eq!(requested_delay(&PhotonError::handler("boom")), None);
        // Inside an error of the application's own, as its source.
        #[derive(Debug)]
        struct Busy(Retry);
        impl std::fmt::Display for Busy {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "mail server busy")
            }
        }
        impl std::error::Error for Busy {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let wrapped = PhotonError::handler_failed(Busy(Retry::after(Duration::from_secs(9))));
        assert_eq!(requested_delay(&wrapped), Some(Duration::from_secs(9)));
    }

    #[test]
    fn retry_topics_are_named_after_the_topic_and_the_durable() {
        let options = HandlerOptions::new("mailer", "emails");
        assert_eq!(retry_topic(&options), "emails.retries.mailer");
    }
}
