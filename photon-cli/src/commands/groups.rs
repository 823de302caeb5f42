//! `groups`: a consumer group's members, partition owners and positions.

use clap::Args;
use photon::PhotonError;

use super::backend::Backend;

/// Which group.
#[derive(Debug, Args)]
pub struct GroupArgs {
    /// Group name.
    group: String,
    /// Topic name.
    topic: String,
}

/// Prints the group's live members, then one line per partition: owner, epoch,
/// checkpoint, and the distance from the checkpoint to the topic's head.
///
/// # Errors
/// `Unsupported` on backends whose groups do not run the lease protocol; the port's errors.
pub async fn run(backend: Backend, args: GroupArgs) -> Result<(), PhotonError> {
    let photon = backend.photon().await?;
    let status = photon.group_status(&args.group, &args.topic).await?;
    println!(
        "group {} on {}: members {}",
        status.group,
        status.topic,
        if status.members.is_empty() {
            "none".to_owned()
        } else {
            status.members.join(", ")
        }
    );
    for partition in &status.partitions {
        let show = |value: Option<i64>| value.map_or_else(|| "none".to_owned(), |v| v.to_string());
        println!(
            "partition {} owner {} epoch {} checkpoint {} behind-head {}",
            partition.partition,
            partition.owner.as_deref().unwrap_or("none"),
            partition.epoch,
            show(partition.checkpoint),
            show(partition.behind_head)
        );
    }
    Ok(())
}
