//! `checkpoints`: read or move a durable subscription's checkpoint.

use clap::Args;
use photon::PhotonError;

use super::backend::Backend;

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

/// Prints (and optionally raises) a checkpoint.
///
/// # Errors
/// The port's errors.
pub async fn run(backend: Backend, args: CheckpointArgs) -> Result<(), PhotonError> {
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
    let shown = stored.map_or_else(|| "none".to_owned(), |seq| seq.to_string());
    println!(
        "{} {} {}: {shown}",
        args.subscription,
        args.topic,
        key.unwrap_or("*")
    );
    Ok(())
}
