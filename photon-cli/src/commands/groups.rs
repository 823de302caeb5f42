//! `groups`: a consumer group's members, partition owners and positions.

use clap::Args;
use photon::PhotonError;

use super::backend::Backend;
use super::output::{show, Output};

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
pub async fn run(backend: Backend, output: Output, args: GroupArgs) -> Result<(), PhotonError> {
    let photon = backend.photon().await?;
    let status = photon.group_status(&args.group, &args.topic).await?;
    let value = serde_json::to_value(&status).map_err(|e| PhotonError::codec("group status", e))?;
    output.emit(&value, || {
        let members = if status.members.is_empty() {
            "none".to_owned()
        } else {
            status.members.join(", ")
        };
        let mut text = format!(
            "group {} on {}: members {members}",
            status.group, status.topic
        );
        for partition in &status.partitions {
            text.push_str(&format!(
                "\npartition {} owner {} epoch {} checkpoint {} behind-head {}",
                partition.partition,
                partition.owner.as_deref().unwrap_or("none"),
                partition.epoch,
                show(partition.checkpoint),
                show(partition.behind_head)
            ));
        }
        text
    });
    Ok(())
}
