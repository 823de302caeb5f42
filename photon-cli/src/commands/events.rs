//! `publish`, `tail`, `replay`, `get`: events in and out, as JSON lines.

use std::collections::VecDeque;
use std::io::BufRead;
use std::time::Duration;

use clap::Args;
use photon::prelude::*;
use photon::{Appended, Event, StartAt};
use serde_json::{json, Value};

use super::backend::Backend;
use super::output::Output;

/// How long a read waits for the next event before it counts as caught up.
const CAUGHT_UP: Duration = Duration::from_millis(500);

/// Where and what to publish.
#[derive(Debug, Args)]
pub struct PublishArgs {
    /// Topic name (`[a-z0-9._-]`).
    topic: String,
    /// Payload as JSON; without it (or `-`), one payload per line of standard input.
    payload: Option<String>,
    /// Partition key of every event.
    #[arg(long, conflicts_with = "key_field")]
    key: Option<String>,
    /// Take each event's key from this top-level field of its payload.
    #[arg(long)]
    key_field: Option<String>,
    /// Actor as JSON.
    #[arg(long, default_value = "null")]
    actor: String,
}

/// What to show of a topic's newest events.
#[derive(Debug, Args)]
pub struct TailArgs {
    /// Topic name.
    topic: String,
    /// Only this partition key.
    #[arg(long)]
    key: Option<String>,
    /// How many of the newest events to print first.
    #[arg(long, short = 'n', default_value_t = 10)]
    last: usize,
    /// Keep printing events as they are published (Ctrl-C stops).
    #[arg(long, short = 'f')]
    follow: bool,
}

/// What to replay.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// Topic name.
    topic: String,
    /// Only this partition key.
    #[arg(long)]
    key: Option<String>,
    /// Start after this seq (default: from the beginning).
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

/// Prints an event as one JSON line (the same in both output modes: a JSON line is the
/// readable form of an event).
fn print_event(event: &Event) -> Result<(), PhotonError> {
    let line = serde_json::to_string(event).map_err(|e| PhotonError::codec("event", e))?;
    println!("{line}");
    Ok(())
}

fn print_appended(output: Output, appended: &Appended) {
    output.emit(
        &json!({"event_id": appended.event_id, "seq": appended.seq}),
        || format!("published seq {} id {}", appended.seq, appended.event_id),
    );
}

/// The key of one payload: `--key`, or the `--key-field` of the payload.
fn key_of(args: &PublishArgs, payload: &Value, line: usize) -> Result<Option<String>, PhotonError> {
    let Some(field) = &args.key_field else {
        return Ok(args.key.clone());
    };
    match payload.get(field) {
        Some(Value::String(key)) => Ok(Some(key.clone())),
        Some(Value::Number(key)) => Ok(Some(key.to_string())),
        _ => Err(PhotonError::InvalidInput(format!(
            "line {line}: the payload has no string or number field {field:?} for --key-field"
        ))),
    }
}

/// Publishes one event, or one per line of standard input, and prints each id and seq.
///
/// # Errors
/// Invalid JSON (naming the line), topic or key, or the port's errors. Lines before a bad
/// one stay published; the error says how many.
pub async fn publish(
    backend: Backend,
    output: Output,
    args: PublishArgs,
) -> Result<(), PhotonError> {
    let actor = json_arg("--actor", &args.actor)?;
    let single = match args.payload.as_deref() {
        None | Some("-") => None,
        Some(text) => Some(json_arg("payload", text)?),
    };
    let photon = backend.photon().await?;
    if let Some(payload) = single {
        let key = key_of(&args, &payload, 1)?;
        let appended = photon
            .publish(&args.topic, key.as_deref(), actor, payload)
            .await?;
        print_appended(output, &appended);
        return photon.shutdown().await;
    }
    let mut published = 0usize;
    for (index, line) in std::io::stdin().lock().lines().enumerate() {
        let number = index + 1;
        let line = line.map_err(|e| {
            PhotonError::InvalidInput(format!("standard input, line {number}: {e}"))
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let outcome = async {
            let payload = json_arg(&format!("line {number}"), &line)?;
            let key = key_of(&args, &payload, number)?;
            photon
                .publish(&args.topic, key.as_deref(), actor.clone(), payload)
                .await
        }
        .await;
        match outcome {
            Ok(appended) => {
                print_appended(output, &appended);
                published += 1;
            }
            Err(err) => {
                let _ = photon.shutdown().await;
                return Err(with_context(
                    err,
                    &format!("after {published} published events"),
                ));
            }
        }
    }
    photon.shutdown().await
}

/// Adds where a bulk command stopped to an input error's message.
fn with_context(err: PhotonError, context: &str) -> PhotonError {
    match err {
        PhotonError::InvalidInput(message) => {
            PhotonError::InvalidInput(format!("{message} ({context})"))
        }
        other => other,
    }
}

/// Prints the newest events of a topic and, with `--follow`, every event published after.
///
/// # Errors
/// The port's errors; an event that cannot be opened is reported on stderr and skipped.
pub async fn tail(backend: Backend, args: TailArgs) -> Result<(), PhotonError> {
    let photon = backend.photon().await?;
    let port = photon.store().port().clone();
    let newest: Vec<Event> = if args.key.is_none() && port.capabilities().list {
        let mut records = port.list_recent(&args.topic, args.last).await?;
        records.reverse();
        let mut events = Vec::with_capacity(records.len());
        for record in records {
            match photon.store().open(record) {
                Ok(event) => events.push(event),
                Err(err) => eprintln!("skipped: {err}"),
            }
        }
        events
    } else {
        // Without a listing (or for one key), read the history once and keep its end.
        let mut stream = photon.subscribe_at(&args.topic, args.key.as_deref(), StartAt::Beginning);
        let mut window = VecDeque::with_capacity(args.last.min(10_000));
        while let Ok(Some(item)) = tokio::time::timeout(CAUGHT_UP, stream.next()).await {
            match item {
                Ok(event) => {
                    if window.len() == args.last {
                        window.pop_front();
                    }
                    if args.last > 0 {
                        window.push_back(event);
                    }
                }
                Err(err @ PhotonError::Crypto { .. }) => eprintln!("skipped: {err}"),
                Err(err) => return Err(err),
            }
        }
        window.into()
    };
    for event in &newest {
        print_event(event)?;
    }
    if !args.follow {
        return Ok(());
    }
    let start = match newest.last() {
        Some(event) => StartAt::AfterSeq(event.seq),
        None => StartAt::Tail,
    };
    print_stream(&photon, &args.topic, args.key.as_deref(), start, None, None).await
}

/// Prints a topic's retained history and exits once it is caught up.
///
/// # Errors
/// As [`tail`].
pub async fn replay(backend: Backend, args: ReplayArgs) -> Result<(), PhotonError> {
    let photon = backend.photon().await?;
    let start = args.after_seq.map_or(StartAt::Beginning, StartAt::AfterSeq);
    print_stream(
        &photon,
        &args.topic,
        args.key.as_deref(),
        start,
        Some(CAUGHT_UP),
        args.limit,
    )
    .await
}

async fn print_stream(
    photon: &Photon,
    topic: &str,
    key: Option<&str>,
    start: StartAt,
    idle_exit: Option<Duration>,
    limit: Option<usize>,
) -> Result<(), PhotonError> {
    let mut stream = photon.subscribe_at(topic, key, start);
    let mut printed = 0;
    while limit.is_none_or(|limit| printed < limit) {
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
