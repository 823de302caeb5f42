//! `groups`: a consumer group's members, partition owners and positions.

use clap::Args;
use photon::runtime::GroupStatus;
use photon::{Photon, PhotonError};

use super::backend::Backend;
use super::output::{show, to_json, Output};

/// Which group.
#[derive(Debug, Args)]
pub struct GroupArgs {
    /// Group name.
    group: String,
    /// Topic name.
    topic: String,
}

/// A group's live members and partitions.
///
/// # Errors
/// `Unsupported` on backends whose groups do not run the lease protocol; the port's errors.
pub async fn status(photon: &Photon, group: &str, topic: &str) -> Result<GroupStatus, PhotonError> {
    photon.group_status(group, topic).await
}

/// Prints the group's live members, then one line per partition: owner, epoch,
/// checkpoint, and the distance from the checkpoint to the topic's head.
///
/// # Errors
/// `Unsupported` on backends whose groups do not run the lease protocol; the port's errors.
pub async fn run(backend: Backend, output: Output, args: GroupArgs) -> Result<(), PhotonError> {
    let photon = backend.photon().await?;
    let status = status(&photon, &args.group, &args.topic).await?;
    output.emit(&to_json("group status", &status)?, || {
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
