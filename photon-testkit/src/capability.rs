//! The capabilities a scenario can require, and what a port that lacks one must do instead:
//! refuse the corresponding calls with `PhotonError::Unsupported` (or, for replay, start
//! every subscription at the tail).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use photon_core::{
    CheckpointKey, EventStore, GroupRequest, PhotonError, ReplayWindow, Result, StartAt,
    StoragePort, TransportCrypto,
};
use serde_json::json;

use crate::context::{assert_quiet, take_exact, Context};

/// How long a refusing stream may take to yield its refusal.
const REFUSAL_WAIT: Duration = Duration::from_secs(5);

/// What a scenario needs beyond the contract every port meets, named after the
/// [`photon_core::StorageCapabilities`] field that claims it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Capability {
    /// `get_event`: `get_record` finds records by id.
    GetEvent,
    /// `list`: `list_by_topic` and `list_recent`.
    List,
    /// `head_seq`: `head_seq`.
    HeadSeq,
    /// `catalog`: `list_topics` and `list_checkpoints`.
    Catalog,
    /// `truncate`: `truncate_before`.
    Truncate,
    /// `checkpoint_reset`: `reset_checkpoint`.
    CheckpointReset,
    /// `consumer_groups`: `subscribe_group`, and the group primitive (`group_coordination`)
    /// that every Photon port with groups provides.
    ConsumerGroups,
    /// `replay` other than `TailOnly`: subscriptions start where they ask.
    Replay,
}

impl Capability {
    /// Whether `port` claims the capability.
    pub fn claimed(self, port: &dyn StoragePort) -> bool {
        let claims = port.capabilities();
        match self {
            Self::GetEvent => claims.get_event,
            Self::List => claims.list,
            Self::HeadSeq => claims.head_seq,
            Self::Catalog => claims.catalog,
            Self::Truncate => claims.truncate,
            Self::CheckpointReset => claims.checkpoint_reset,
            Self::ConsumerGroups => claims.consumer_groups,
            Self::Replay => claims.replay != ReplayWindow::TailOnly,
        }
    }

    /// `true` when `port` claims the capability; otherwise asserts that it refuses every
    /// call of the capability (see [`Capability::assert_refused`]) and returns `false`.
    ///
    /// # Panics
    /// When the port lacks the capability but a call of it does not refuse.
    pub async fn offered(self, ctx: &Context, port: &Arc<dyn StoragePort>) -> bool {
        if self.claimed(port.as_ref()) {
            return true;
        }
        self.assert_refused(ctx, port).await;
        false
    }

    /// Asserts what a port without the capability does: each of its calls fails with
    /// [`PhotonError::Unsupported`] naming the port's label; without replay, a subscription
    /// from the beginning gets only events appended after it started.
    ///
    /// # Panics
    /// When a call succeeds or fails otherwise.
    pub async fn assert_refused(self, ctx: &Context, port: &Arc<dyn StoragePort>) {
        let topic = ctx.topic("unsupported");
        let label = port.label();
        let check = |call: &str, result: Result<()>| {
            match result {
            Err(PhotonError::Unsupported { backend, .. }) if backend == label => {}
            other => panic!(
                "{label} does not claim {self:?}, so {call} must fail with Unsupported, got {other:?}"
            ),
        }
        };
        match self {
            Self::GetEvent => check("get_record", port.get_record("ck-0").await.map(drop)),
            Self::List => {
                check(
                    "list_by_topic",
                    port.list_by_topic(&topic, 0, 10).await.map(drop),
                );
                check("list_recent", port.list_recent(&topic, 10).await.map(drop));
            }
            Self::HeadSeq => check("head_seq", port.head_seq(&topic, None).await.map(drop)),
            Self::Catalog => {
                check("list_topics", port.list_topics().await.map(drop));
                check("list_checkpoints", port.list_checkpoints().await.map(drop));
            }
            Self::Truncate => check(
                "truncate_before",
                port.truncate_before(&topic, 1).await.map(drop),
            ),
            Self::CheckpointReset => {
                let key = CheckpointKey::new(ctx.subscription("unsupported"), &topic, None);
                check(
                    "reset_checkpoint",
                    port.reset_checkpoint(&key, Some(1)).await,
                );
            }
            Self::ConsumerGroups => {
                let mut deliveries = port.subscribe_group(GroupRequest {
                    group: ctx.subscription("unsupported"),
                    member: "member-0".into(),
                    topic: topic.clone(),
                    start: StartAt::Beginning,
                });
                // A refusal is the stream's first item, at once; a group that works hands
                // nothing out on an empty topic.
                match tokio::time::timeout(REFUSAL_WAIT, deliveries.next()).await {
                    Ok(first) => check(
                        "subscribe_group",
                        first.map_or(Ok(()), |item| item.map(drop)),
                    ),
                    Err(_) => panic!(
                        "{label} does not claim {self:?}, so subscribe_group must fail with \
                         Unsupported, got no item within {REFUSAL_WAIT:?}"
                    ),
                }
                assert!(
                    port.group_coordination().is_none(),
                    "{label} does not claim consumer_groups but offers group_coordination"
                );
            }
            Self::Replay => assert_tail_only(port, &topic).await,
        }
    }
}

/// A subscription from the beginning skips what was appended before it: an event published
/// before it never arrives, one published after it does.
async fn assert_tail_only(port: &Arc<dyn StoragePort>, topic: &str) {
    let store = EventStore::new(port.clone(), TransportCrypto::plaintext());
    store
        .publish(topic, None, json!(null), json!({"i": 0}))
        .await
        .unwrap();
    let mut stream = store.subscribe(topic, None, StartAt::Beginning);
    assert_quiet(&mut stream, Duration::from_millis(500)).await;
    store
        .publish(topic, None, json!(null), json!({"i": 1}))
        .await
        .unwrap();
    let items = take_exact(&mut stream, 1).await;
    match &items[..] {
        [Ok(event)] => assert_eq!(event.payload, json!({"i": 1})),
        other => panic!("a tail-only port must deliver only the later event, got {other:?}"),
    }
}
