//! `checkpoints` and `lag`: a durable subscription's position, and how far behind it is.

use clap::Args;
use photon::{Photon, PhotonError};
use serde_json::json;

use super::backend::Backend;
use super::output::{show, Output};

/// Which checkpoint, and optionally its new value.
#[derive(Debug, Args)]
pub struct CheckpointArgs {
    /// Durable subscription name.
    subscription: String,
    /// Topic name.
    topic: String,
    /// Partition key of a keyed subscription.
    #[arg(long)]
    key: Option<String>,
    /// Commit this seq (ignored when lower than the stored one: checkpoints never regress).
    #[arg(long)]
    set: Option<i64>,
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

/// Prints (and optionally raises) a checkpoint.
///
/// # Errors
/// The port's errors.
pub async fn run(
    backend: Backend,
    output: Output,
    args: CheckpointArgs,
) -> Result<(), PhotonError> {
    let photon = backend.photon().await?;
    let key = args.key.as_deref();
    if let Some(seq) = args.set {
        photon
            .set_checkpoint(&args.subscription, &args.topic, key, seq)
            .await?;
    }
    let stored = photon
        .checkpoint(&args.subscription, &args.topic, key)
        .await?;
    output.emit(
        &json!({"subscription": args.subscription, "topic": args.topic, "key": key, "checkpoint": stored}),
        || format!("{} {} {}: {}", args.subscription, args.topic, key.unwrap_or("*"), show(stored)),
    );
    Ok(())
}

/// Prints a subscription's checkpoint, the topic's head and the distance between them;
/// without a subscription, one line per stored durable checkpoint.
///
/// # Errors
/// `Unsupported` on backends that cannot tell a topic's head (or, without a subscription,
/// cannot list checkpoints); the port's errors.
pub async fn lag(backend: Backend, output: Output, args: LagArgs) -> Result<(), PhotonError> {
    let photon = backend.photon().await?;
    let subscriptions = match (args.subscription, args.topic) {
        (Some(subscription), Some(topic)) => {
            let checkpoint = photon
                .checkpoint(&subscription, &topic, args.key.as_deref())
                .await?;
            vec![(subscription, topic, args.key, checkpoint)]
        }
        _ => photon
            .store()
            .port()
            .list_checkpoints()
            .await?
            .into_iter()
            .filter(|stored| args.key.is_none() || stored.key == args.key)
            .map(|stored| {
                (
                    stored.subscription,
                    stored.topic,
                    stored.key,
                    Some(stored.seq),
                )
            })
            .collect(),
    };
    for (subscription, topic, key, checkpoint) in subscriptions {
        let head = head(&photon, &topic, key.as_deref()).await?;
        let lag = (head.unwrap_or(0) - checkpoint.unwrap_or(0)).max(0);
        output.emit(
            &json!({
                "subscription": subscription,
                "topic": topic,
                "key": key,
                "checkpoint": checkpoint,
                "head": head,
                "lag": lag,
            }),
            || {
                format!(
                    "{subscription} on {topic}{}: checkpoint {}, head {}, lag {lag}",
                    key.as_deref()
                        .map(|k| format!(" (key {k})"))
                        .unwrap_or_default(),
                    show(checkpoint),
                    show(head),
                )
            },
        );
    }
    Ok(())
}

async fn head(photon: &Photon, topic: &str, key: Option<&str>) -> Result<Option<i64>, PhotonError> {
    let port = photon.store().port();
    if !port.capabilities().head_seq {
        return Err(port.unsupported("head_seq (lag)"));
    }
    port.head_seq(topic, key).await
}
