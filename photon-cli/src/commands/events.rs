//! `publish`, `tail`, `replay`, `get`: events in and out, as JSON lines.

use std::time::Duration;

use clap::Args;
use photon::prelude::*;
use photon::{Event, StartAt};
use serde_json::Value;

use super::backend::Backend;

/// Where and what to publish.
#[derive(Debug, Args)]
pub struct PublishArgs {
    /// Topic name (`[a-z0-9._-]`).
    topic: String,
    /// Payload as JSON.
    payload: String,
    /// Partition key.
    #[arg(long)]
    key: Option<String>,
    /// Actor as JSON.
    #[arg(long, default_value = "null")]
    actor: String,
}

/// What to read.
#[derive(Debug, Args)]
pub struct ReadArgs {
    /// Topic name.
    topic: String,
    /// Only this partition key.
    #[arg(long)]
    key: Option<String>,
    /// Start after this seq (default: from the beginning for `replay`, live for `tail`).
    #[arg(long)]
    after_seq: Option<i64>,
    /// Stop after this many events.
    #[arg(long)]
    limit: Option<usize>,
}

/// Which event.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// Event id as printed by `publish`.
    event_id: String,
}

fn json_arg(name: &str, text: &str) -> Result<Value, PhotonError> {
    serde_json::from_str(text)
        .map_err(|e| PhotonError::InvalidInput(format!("{name} is not valid JSON: {e}")))
}

fn print_event(event: &Event) -> Result<(), PhotonError> {
    let line = serde_json::to_string(event).map_err(|e| PhotonError::codec("event", e))?;
    println!("{line}");
    Ok(())
}

/// Publishes one event and prints its id and seq.
///
/// # Errors
/// Invalid JSON, topic or key, or the port's errors.
pub async fn publish(backend: Backend, args: PublishArgs) -> Result<(), PhotonError> {
    let photon = backend.photon().await?;
    let payload = json_arg("payload", &args.payload)?;
    let actor = json_arg("--actor", &args.actor)?;
    let appended = photon
        .publish(&args.topic, args.key.as_deref(), actor, payload)
        .await?;
    println!(
        "{{\"event_id\":{:?},\"seq\":{}}}",
        appended.event_id, appended.seq
    );
    photon.shutdown().await
}

/// Follows a topic and prints events as they arrive (Ctrl-C stops).
///
/// # Errors
/// The port's errors; an event that cannot be opened is reported on stderr and skipped.
pub async fn tail(backend: Backend, args: ReadArgs) -> Result<(), PhotonError> {
    let start = args.after_seq.map_or(StartAt::Tail, StartAt::AfterSeq);
    read(backend, args, start, None).await
}

/// Prints a topic's retained history and exits once it is caught up.
///
/// # Errors
/// As [`tail`].
pub async fn replay(backend: Backend, args: ReadArgs) -> Result<(), PhotonError> {
    let start = args.after_seq.map_or(StartAt::Beginning, StartAt::AfterSeq);
    read(backend, args, start, Some(Duration::from_millis(500))).await
}

async fn read(
    backend: Backend,
    args: ReadArgs,
    start: StartAt,
    idle_exit: Option<Duration>,
) -> Result<(), PhotonError> {
    let photon = backend.photon().await?;
    let mut stream = photon.subscribe_at(&args.topic, args.key.as_deref(), start);
    let mut printed = 0;
    while args.limit.is_none_or(|limit| printed < limit) {
        let item = match idle_exit {
            Some(idle) => match tokio::time::timeout(idle, stream.next()).await {
                Ok(item) => item,
                Err(_) => break,
            },
            None => stream.next().await,
        };
        match item {
            Some(Ok(event)) => {
                print_event(&event)?;
                printed += 1;
            }
            Some(Err(err @ PhotonError::Crypto { .. })) => eprintln!("skipped: {err}"),
            Some(Err(err)) => return Err(err),
            None => break,
        }
    }
    Ok(())
}

/// Prints one event by id.
///
/// # Errors
/// [`PhotonError::NotFound`] for an unknown id; the port's errors.
pub async fn get(backend: Backend, args: GetArgs) -> Result<(), PhotonError> {
    let photon = backend.photon().await?;
    match photon.get_event(&args.event_id).await? {
        Some(event) => print_event(&event),
        None => Err(PhotonError::NotFound(format!("event {}", args.event_id))),
    }
}
