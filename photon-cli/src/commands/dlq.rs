//! `dlq list|show|replay`: a topic's dead letters, and publishing them again.

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use photon::{DeadLetter, Photon, PhotonError};
use serde::Serialize;

use super::backend::Backend;
use super::output::{to_json, Output};

/// What to do with dead letters.
#[derive(Debug, Subcommand)]
pub enum DlqCommand {
    /// Lists a topic's dead letters, oldest first.
    List(TopicArg),
    /// Shows one dead letter whole.
    Show(LetterArgs),
    /// Publishes dead letters' original events again on their topic (the letters stay).
    Replay(ReplayArgs),
}

/// Whose dead letters.
#[derive(Debug, Args)]
pub struct TopicArg {
    /// The original topic (its letters are on `<topic>.dlq`).
    topic: String,
}

/// Which dead letter.
#[derive(Debug, Args)]
pub struct LetterArgs {
    /// The original topic.
    topic: String,
    /// The dead letter's id, or the original event's id.
    id: String,
}

/// Which dead letters to replay.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The original topic.
    topic: String,
    /// The dead letter's id, or the original event's id.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    id: Option<String>,
    /// Every dead letter of the topic.
    #[arg(long)]
    all: bool,
}

/// One replayed dead letter: as `dlq replay` prints it and `/api/dlq/.../replay` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplayRow {
    /// The dead letter's id.
    pub dead_letter_id: String,
    /// Id of the event published again.
    pub event_id: String,
    /// Its seq on the original topic.
    pub seq: i64,
}

/// The dead letters of `topic`, oldest first.
///
/// # Errors
/// `Unsupported` where the backend cannot list a topic; the port's errors.
pub async fn letters(photon: &Photon, topic: &str) -> Result<Vec<DeadLetter>, PhotonError> {
    photon.dead_letters(topic).await
}

/// The dead letters of every topic that has a dead-letter topic, by topic, oldest first.
///
/// # Errors
/// `Unsupported` where the backend cannot list its topics or read a topic's events back
/// (even before any dead letter exists, so that an empty answer always means none); as
/// [`letters`].
pub async fn all_letters(photon: &Photon) -> Result<Vec<DeadLetter>, PhotonError> {
    let port = photon.store().port();
    if !port.capabilities().list {
        return Err(port.unsupported("list_by_topic (dead letters)"));
    }
    let suffix = photon.executor_config().dead_letter_topic("");
    let mut all = Vec::new();
    for topic in super::topics::list(photon).await? {
        if let Some(original) = topic.name.strip_suffix(&suffix) {
            all.extend(letters(photon, original).await?);
        }
    }
    Ok(all)
}

/// One dead letter of `topic` by its id or its original event's id.
///
/// # Errors
/// `NotFound` naming the id and topic; as [`letters`].
pub async fn find(photon: &Photon, topic: &str, id: &str) -> Result<DeadLetter, PhotonError> {
    letters(photon, topic)
        .await?
        .into_iter()
        .find(|letter| letter.dead_letter_id == id || letter.original.event_id == id)
        .ok_or_else(|| PhotonError::NotFound(format!("dead letter {id} of topic {topic}")))
}

/// Publishes a dead letter's original event again on its topic (the letter stays).
///
/// # Errors
/// As `Photon::replay_dead_letter`.
pub async fn replay_one(photon: &Photon, letter: &DeadLetter) -> Result<ReplayRow, PhotonError> {
    let appended = photon.replay_dead_letter(letter).await?;
    Ok(ReplayRow {
        dead_letter_id: letter.dead_letter_id.clone(),
        event_id: appended.event_id,
        seq: appended.seq,
    })
}

/// Runs a `dlq` command.
///
/// # Errors
/// `NotFound` for an unknown letter id; the port's errors; for a bulk replay, how many
/// letters could not be replayed (the others are published).
pub async fn run(backend: Backend, output: Output, command: DlqCommand) -> Result<(), PhotonError> {
    let photon = backend.photon().await?;
    match command {
        DlqCommand::List(args) => {
            for letter in letters(&photon, &args.topic).await? {
                output.emit(&to_json("dead letter", &letter)?, || summary(&letter));
            }
            Ok(())
        }
        DlqCommand::Show(args) => {
            let letter = find(&photon, &args.topic, &args.id).await?;
            let value = to_json("dead letter", &letter)?;
            output.emit(&value, || {
                serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string())
            });
            Ok(())
        }
        DlqCommand::Replay(args) => {
            let letters = match &args.id {
                Some(id) => vec![find(&photon, &args.topic, id).await?],
                None => letters(&photon, &args.topic).await?,
            };
            replay(&photon, output, &letters).await?;
            photon.shutdown().await
        }
    }
}

fn summary(letter: &DeadLetter) -> String {
    format!(
        "{} seq {} key {} subscription {} attempts {} at {}: {}",
        letter.dead_letter_id,
        letter.original.seq,
        letter.original.key.as_deref().unwrap_or("-"),
        letter.subscription,
        letter.attempts,
        letter.failed_at.to_rfc3339(),
        letter.error
    )
}

/// Replays each letter, with a progress bar on a terminal; a letter that cannot be
/// replayed is reported and the others go on.
async fn replay(
    photon: &Photon,
    output: Output,
    letters: &[DeadLetter],
) -> Result<(), PhotonError> {
    let bar = ProgressBar::new(letters.len() as u64);
    if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} replayed {msg}") {
        bar.set_style(style);
    }
    let mut failed = 0usize;
    for letter in letters {
        match replay_one(photon, letter).await {
            Ok(row) => {
                let value = to_json("replay", &row)?;
                bar.suspend(|| {
                    output.emit(&value, || {
                        format!(
                            "replayed {} as seq {} id {}",
                            row.dead_letter_id, row.seq, row.event_id
                        )
                    });
                });
            }
            Err(err) => {
                failed += 1;
                bar.suspend(|| eprintln!("not replayed: {}: {err}", letter.dead_letter_id));
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    if failed > 0 {
        return Err(PhotonError::InvalidInput(format!(
            "{failed} of {} dead letters could not be replayed (see above); the others were published",
            letters.len()
        )));
    }
    Ok(())
}
