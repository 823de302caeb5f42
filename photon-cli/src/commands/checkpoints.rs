//! `checkpoints` and `lag`: durable subscriptions' positions, how far behind they are, and
//! moving them.

use std::io::{BufRead, IsTerminal, Write};

use clap::Args;
use photon::{Photon, PhotonError};
use serde::Serialize;

use super::backend::Backend;
use super::output::{show, to_json, Output};

/// Which checkpoint, and optionally where to move it.
#[derive(Debug, Args)]
pub struct CheckpointArgs {
    /// Durable subscription name; without it, every stored checkpoint is listed.
    #[arg(requires = "topic")]
    subscription: Option<String>,
    /// Topic name.
    topic: Option<String>,
    /// Partition key of a keyed subscription.
    #[arg(long)]
    key: Option<String>,
    /// Move the checkpoint to this seq: the subscription resumes with the first event
    /// after it. Forward moves skip events; a move back delivers events again and needs
    /// --yes (or a confirmation on a terminal). Stop the subscription's consumers first.
    #[arg(long, requires = "subscription", conflicts_with = "reset")]
    set: Option<i64>,
    /// Remove the checkpoint: the subscription starts again where its start policy says
    /// (the beginning, by default). Needs --yes (or a confirmation on a terminal).
    #[arg(long, requires = "subscription")]
    reset: bool,
    /// Confirm a move back (or a reset) without asking.
    #[arg(long, short = 'y')]
    yes: bool,
}

/// Which subscription (all of them when left out).
#[derive(Debug, Args)]
pub struct LagArgs {
    /// Durable subscription name.
    #[arg(requires = "topic")]
    subscription: Option<String>,
    /// Topic name.
    topic: Option<String>,
    /// Partition key of a keyed subscription.
    #[arg(long)]
    key: Option<String>,
}

/// One durable checkpoint, as `checkpoints` prints it and `/api/checkpoints` serves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CheckpointRow {
    /// Durable subscription.
    pub subscription: String,
    /// Topic.
    pub topic: String,
    /// Partition key of a keyed subscription.
    pub key: Option<String>,
    /// Committed seq, `None` when never committed (or removed).
    pub checkpoint: Option<i64>,
}

/// One subscription's distance to its topic's head, as `lag` prints it and `/api/lag`
/// serves it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LagRow {
    /// Durable subscription.
    pub subscription: String,
    /// Topic.
    pub topic: String,
    /// Partition key of a keyed subscription.
    pub key: Option<String>,
    /// Committed seq.
    pub checkpoint: Option<i64>,
    /// The topic's (or key's) highest seq.
    pub head: Option<i64>,
    /// `head - checkpoint`, never below 0.
    pub lag: i64,
}

/// Every stored durable checkpoint, sorted by subscription, topic and key.
///
/// # Errors
/// `Unsupported` on backends that cannot list checkpoints; the port's errors.
pub async fn stored(photon: &Photon) -> Result<Vec<CheckpointRow>, PhotonError> {
    Ok(photon
        .store()
        .port()
        .list_checkpoints()
        .await?
        .into_iter()
        .map(|stored| CheckpointRow {
            subscription: stored.subscription,
            topic: stored.topic,
            key: stored.key,
            checkpoint: Some(stored.seq),
        })
        .collect())
}

/// The lag of one subscription, or (with `None`) of every stored checkpoint; `key` keeps
/// only that key's checkpoints.
///
/// # Errors
/// `Unsupported` on backends that cannot tell a topic's head (or, without a subscription,
/// cannot list checkpoints); the port's errors.
pub async fn lag_rows(
    photon: &Photon,
    subscription: Option<(&str, &str)>,
    key: Option<&str>,
) -> Result<Vec<LagRow>, PhotonError> {
    let checkpoints = match subscription {
        Some((subscription, topic)) => vec![CheckpointRow {
            subscription: subscription.to_owned(),
            topic: topic.to_owned(),
            key: key.map(str::to_owned),
            checkpoint: photon.checkpoint(subscription, topic, key).await?,
        }],
        None => stored(photon)
            .await?
            .into_iter()
            .filter(|row| key.is_none() || row.key.as_deref() == key)
            .collect(),
    };
    let mut heads = Heads::default();
    let mut rows = Vec::with_capacity(checkpoints.len());
    for row in checkpoints {
        let head = heads.head(photon, &row.topic, row.key.as_deref()).await?;
        rows.push(LagRow {
            lag: (head.unwrap_or(0) - row.checkpoint.unwrap_or(0)).max(0),
            head,
            subscription: row.subscription,
            topic: row.topic,
            key: row.key,
            checkpoint: row.checkpoint,
        });
    }
    Ok(rows)
}

/// Topic heads for lag: `head_seq` where the port has it; else, for a whole-topic
/// subscription, the head the catalog lists (read once per listing).
#[derive(Default)]
struct Heads {
    listed: Option<Vec<photon::core::TopicInfo>>,
}

impl Heads {
    async fn head(
        &mut self,
        photon: &Photon,
        topic: &str,
        key: Option<&str>,
    ) -> Result<Option<i64>, PhotonError> {
        let port = photon.store().port();
        let capabilities = port.capabilities();
        if capabilities.head_seq {
            return port.head_seq(topic, key).await;
        }
        if !capabilities.catalog || key.is_some() {
            return Err(port.unsupported("head_seq (lag)"));
        }
        if self.listed.is_none() {
            self.listed = Some(port.list_topics().await?);
        }
        Ok(self
            .listed
            .iter()
            .flatten()
            .find(|listed| listed.name == topic)
            .and_then(|listed| listed.head_seq))
    }
}

/// Prints a checkpoint (or every stored one), after moving or removing it when asked.
///
/// # Errors
/// `InvalidInput` for a negative seq, a seq beyond the topic's head, or a move back that
/// was not confirmed; `Unsupported` where the backend cannot list or move checkpoints
/// back; the port's errors.
pub async fn run(
    backend: Backend,
    output: Output,
    args: CheckpointArgs,
) -> Result<(), PhotonError> {
    let photon = backend.photon().await?;
    let (Some(subscription), Some(topic)) = (args.subscription.as_deref(), args.topic.as_deref())
    else {
        for row in stored(&photon).await? {
            print_row(output, &row, None)?;
        }
        return Ok(());
    };
    let key = args.key.as_deref();
    let previous = photon.checkpoint(subscription, topic, key).await?;
    let target = match (args.set, args.reset) {
        (Some(seq), _) => Some(Some(seq)),
        (None, true) => Some(None),
        (None, false) => None,
    };
    if let Some(target) = target {
        let row = CheckpointRow {
            subscription: subscription.to_owned(),
            topic: topic.to_owned(),
            key: key.map(str::to_owned),
            checkpoint: previous,
        };
        move_checkpoint(&photon, &row, target, args.yes).await?;
    }
    let row = CheckpointRow {
        subscription: subscription.to_owned(),
        topic: topic.to_owned(),
        key: key.map(str::to_owned),
        checkpoint: photon.checkpoint(subscription, topic, key).await?,
    };
    print_row(output, &row, target.map(|_| previous))
}

fn print_row(
    output: Output,
    row: &CheckpointRow,
    previous: Option<Option<i64>>,
) -> Result<(), PhotonError> {
    let mut value = to_json("checkpoint", row)?;
    if let (Some(previous), Some(fields)) = (previous, value.as_object_mut()) {
        fields.insert("previous".into(), previous.into());
    }
    output.emit(&value, || {
        let moved = previous.map_or_else(String::new, |p| format!(" (was {})", show(p)));
        format!(
            "{} {} {}: {}{moved}",
            row.subscription,
            row.topic,
            row.key.as_deref().unwrap_or("*"),
            show(row.checkpoint)
        )
    });
    Ok(())
}

/// Moves `row`'s checkpoint to `target` (`None`: removes it), asking first when that is a
/// move back.
async fn move_checkpoint(
    photon: &Photon,
    row: &CheckpointRow,
    target: Option<i64>,
    yes: bool,
) -> Result<(), PhotonError> {
    let (subscription, topic, key) = (&row.subscription, &row.topic, row.key.as_deref());
    let port = photon.store().port();
    if let Some(seq) = target {
        if seq < 0 {
            return Err(PhotonError::InvalidInput(format!(
                "--set {seq}: a checkpoint seq is 0 or more"
            )));
        }
        if port.capabilities().head_seq {
            let head = port.head_seq(topic, key).await?.unwrap_or(0);
            if seq > head {
                return Err(PhotonError::InvalidInput(format!(
                    "--set {seq}: beyond the head of topic {topic:?} ({head}); a checkpoint names an event already stored"
                )));
            }
        }
    }
    let back = match (row.checkpoint, target) {
        (None, _) => false,
        (Some(stored), Some(seq)) => seq < stored,
        (Some(_), None) => true,
    };
    if back {
        let what = match target {
            Some(seq) => format!(
                "move checkpoint {subscription} on {topic} back from {} to {seq}: the events after {seq} are delivered again",
                show(row.checkpoint)
            ),
            None => format!(
                "remove checkpoint {subscription} on {topic} (at {}): the subscription starts again from its start policy (the beginning, by default)",
                show(row.checkpoint)
            ),
        };
        confirm(&what, yes)?;
    }
    if back || port.capabilities().checkpoint_reset {
        // A reset sets every shard of a sharded topic, where a commit would move only the
        // shard of the seq.
        photon
            .reset_checkpoint(subscription, topic, key, target)
            .await
    } else {
        match target {
            Some(seq) => photon.set_checkpoint(subscription, topic, key, seq).await,
            None => Ok(()),
        }
    }
}

/// Passes with `--yes`; on a terminal, asks; otherwise refuses, naming the flag.
fn confirm(what: &str, yes: bool) -> Result<(), PhotonError> {
    if yes {
        return Ok(());
    }
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Err(PhotonError::InvalidInput(format!(
            "{what}; pass --yes to confirm"
        )));
    }
    eprint!("{what}.\nProceed? [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    stdin
        .lock()
        .read_line(&mut answer)
        .map_err(|e| PhotonError::InvalidInput(format!("reading the confirmation: {e}")))?;
    if matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
        Ok(())
    } else {
        Err(PhotonError::InvalidInput(format!(
            "not confirmed, nothing changed ({what})"
        )))
    }
}

/// Prints a subscription's checkpoint, the topic's head and the distance between them;
/// without a subscription, one line per stored durable checkpoint.
///
/// # Errors
/// As [`lag_rows`].
pub async fn lag(backend: Backend, output: Output, args: LagArgs) -> Result<(), PhotonError> {
    let photon = backend.photon().await?;
    let subscription = args.subscription.as_deref().zip(args.topic.as_deref());
    for row in lag_rows(&photon, subscription, args.key.as_deref()).await? {
        output.emit(&to_json("lag", &row)?, || {
            format!(
                "{} on {}{}: checkpoint {}, head {}, lag {}",
                row.subscription,
                row.topic,
                row.key
                    .as_deref()
                    .map(|k| format!(" (key {k})"))
                    .unwrap_or_default(),
                show(row.checkpoint),
                show(row.head),
                row.lag
            )
        });
    }
    Ok(())
}
