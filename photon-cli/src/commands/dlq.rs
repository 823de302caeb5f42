//! `dlq list|show|replay`: a topic's dead letters, and publishing them again.

use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use photon::{DeadLetter, Photon, PhotonError};
use serde_json::json;

use super::backend::Backend;
use super::output::Output;

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

/// Runs a `dlq` command.
///
/// # Errors
/// `NotFound` for an unknown letter id; the port's errors; for a bulk replay, how many
/// letters could not be replayed (the others are published).
pub async fn run(backend: Backend, output: Output, command: DlqCommand) -> Result<(), PhotonError> {
    let photon = backend.photon().await?;
    match command {
        DlqCommand::List(args) => {
            for letter in photon.dead_letters(&args.topic).await? {
                output.emit(&letter_json(&letter)?, || summary(&letter));
            }
            Ok(())
        }
        DlqCommand::Show(args) => {
            let letter = find(&photon, &args.topic, &args.id).await?;
            let value = letter_json(&letter)?;
            output.emit(&value, || {
                serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string())
            });
            Ok(())
        }
        DlqCommand::Replay(args) => {
            let letters = match &args.id {
                Some(id) => vec![find(&photon, &args.topic, id).await?],
                None => photon.dead_letters(&args.topic).await?,
            };
            replay(&photon, output, &letters).await?;
            photon.shutdown().await
        }
    }
}

fn letter_json(letter: &DeadLetter) -> Result<serde_json::Value, PhotonError> {
    serde_json::to_value(letter).map_err(|e| PhotonError::codec("dead letter", e))
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

async fn find(photon: &Photon, topic: &str, id: &str) -> Result<DeadLetter, PhotonError> {
    photon
        .dead_letters(topic)
        .await?
        .into_iter()
        .find(|letter| letter.dead_letter_id == id || letter.original.event_id == id)
        .ok_or_else(|| PhotonError::NotFound(format!("dead letter {id} of topic {topic}")))
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
        match photon.replay_dead_letter(letter).await {
            Ok(appended) => bar.suspend(|| {
                output.emit(
                    &json!({
                        "dead_letter_id": letter.dead_letter_id,
                        "event_id": appended.event_id,
                        "seq": appended.seq,
                    }),
                    || {
                        format!(
                            "replayed {} as seq {} id {}",
                            letter.dead_letter_id, appended.seq, appended.event_id
                        )
                    },
                );
            }),
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
