//! The runner by capability: a port that claims none of the optional capabilities passes
//! the whole suite only by refusing their calls with `Unsupported`; a port that claims
//! none but serves them anyway, or claims no replay but replays, fails.

use std::sync::Arc;

use async_trait::async_trait;
use photon_core::mem::MemStoragePort;
use photon_core::{
    Appended, CheckpointKey, DeliveryStream, GroupCoordination, GroupRequest, Record, RecordDraft,
    RecordStream, ReplayWindow, Result, StartAt, StorageCapabilities, StoragePort,
    StoredCheckpoint, SubscribeRequest, TopicInfo,
};
use photon_testkit::{PortFactory, UndecodableRecord};

/// What the wrapped in-process port claims and serves.
#[derive(Clone, Copy, PartialEq)]
enum Shape {
    /// Claims nothing optional and serves only the required methods.
    Bare,
    /// Claims nothing optional but serves every method.
    Lying,
    /// Claims tail-only replay and starts every subscription at the tail.
    TailOnly,
    /// Claims tail-only replay but replays from where it is asked.
    ReplaysAnyway,
}

struct Wrapped {
    inner: MemStoragePort,
    shape: Shape,
}

#[async_trait]
impl StoragePort for Wrapped {
    fn label(&self) -> &'static str {
        "wrapped"
    }

    fn capabilities(&self) -> StorageCapabilities {
        let replay = match self.shape {
            Shape::TailOnly | Shape::ReplaysAnyway => ReplayWindow::TailOnly,
            Shape::Bare | Shape::Lying => ReplayWindow::Full,
        };
        StorageCapabilities {
            replay,
            ..StorageCapabilities::default()
        }
    }

    async fn append(&self, draft: RecordDraft) -> Result<Appended> {
        self.inner.append(draft).await
    }

    fn subscribe(&self, mut request: SubscribeRequest) -> RecordStream {
        if self.shape == Shape::TailOnly {
            request.start = StartAt::Tail;
        }
        self.inner.subscribe(request)
    }

    async fn get_record(&self, event_id: &str) -> Result<Option<Record>> {
        match self.shape {
            Shape::Lying => self.inner.get_record(event_id).await,
            _ => Err(self.unsupported("get_event")),
        }
    }

    async fn list_by_topic(&self, topic: &str, after: i64, limit: usize) -> Result<Vec<Record>> {
        match self.shape {
            Shape::Lying => self.inner.list_by_topic(topic, after, limit).await,
            _ => Err(self.unsupported("list_by_topic")),
        }
    }

    async fn list_recent(&self, topic: &str, limit: usize) -> Result<Vec<Record>> {
        match self.shape {
            Shape::Lying => self.inner.list_recent(topic, limit).await,
            _ => Err(self.unsupported("list_recent")),
        }
    }

    async fn list_topics(&self) -> Result<Vec<TopicInfo>> {
        match self.shape {
            Shape::Lying => self.inner.list_topics().await,
            _ => Err(self.unsupported("list_topics")),
        }
    }

    async fn list_checkpoints(&self) -> Result<Vec<StoredCheckpoint>> {
        match self.shape {
            Shape::Lying => self.inner.list_checkpoints().await,
            _ => Err(self.unsupported("list_checkpoints")),
        }
    }

    async fn head_seq(&self, topic: &str, key: Option<&str>) -> Result<Option<i64>> {
        match self.shape {
            Shape::Lying => self.inner.head_seq(topic, key).await,
            _ => Err(self.unsupported("head_seq")),
        }
    }

    async fn truncate_before(&self, topic: &str, before_seq: i64) -> Result<u64> {
        match self.shape {
            Shape::Lying => self.inner.truncate_before(topic, before_seq).await,
            _ => Err(self.unsupported("truncate_before")),
        }
    }

    async fn load_checkpoint(&self, key: &CheckpointKey) -> Result<Option<i64>> {
        self.inner.load_checkpoint(key).await
    }

    async fn commit_checkpoint(&self, key: &CheckpointKey, seq: i64) -> Result<()> {
        self.inner.commit_checkpoint(key, seq).await
    }

    fn subscribe_group(&self, request: GroupRequest) -> DeliveryStream {
        match self.shape {
            Shape::Lying => self.inner.subscribe_group(request),
            _ => Box::pin(futures::stream::once(std::future::ready(Err(
                self.unsupported("subscribe_group")
            )))),
        }
    }

    fn group_coordination(&self) -> Option<Arc<dyn GroupCoordination>> {
        match self.shape {
            Shape::Lying => self.inner.group_coordination(),
            _ => None,
        }
    }
}

struct WrappedFactory {
    inner: MemStoragePort,
    shape: Shape,
}

impl WrappedFactory {
    fn new(shape: Shape) -> Arc<Self> {
        Arc::new(Self {
            inner: MemStoragePort::new(),
            shape,
        })
    }
}

#[async_trait]
impl PortFactory for WrappedFactory {
    async fn open(&self) -> Result<Arc<dyn StoragePort>> {
        Ok(Arc::new(Wrapped {
            inner: self.inner.clone(),
            shape: self.shape,
        }))
    }

    async fn store_undecodable(&self, record: UndecodableRecord<'_>) -> Result<()> {
        self.inner
            .append_undecodable(record.topic, record.key, record.stored);
        Ok(())
    }
}

/// Every scenario passes on a port that refuses every optional capability: the ones that
/// need a capability check the refusal, the others need none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_without_optional_capabilities_passes_by_refusing() {
    photon_testkit::run_all(WrappedFactory::new(Shape::Bare)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[should_panic(
    expected = "wrapped does not claim GetEvent, so get_record must fail with Unsupported"
)]
async fn serving_an_unclaimed_get_event_fails() {
    photon_testkit::run_scenario("get_event", WrappedFactory::new(Shape::Lying)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[should_panic(
    expected = "wrapped does not claim ConsumerGroups, so subscribe_group must fail with Unsupported, got no item within 5s"
)]
async fn serving_unclaimed_groups_fails() {
    photon_testkit::run_scenario("groups_share_work", WrappedFactory::new(Shape::Lying)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[should_panic(
    expected = "wrapped does not claim Catalog, so list_topics must fail with Unsupported"
)]
async fn serving_an_unclaimed_catalog_fails() {
    photon_testkit::run_scenario("catalog", WrappedFactory::new(Shape::Lying)).await;
}

/// Without replay, the gap scenario checks that a subscription starts at the tail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tail_only_port_starts_at_the_tail() {
    photon_testkit::run_scenario("gap_after_truncate", WrappedFactory::new(Shape::TailOnly)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[should_panic(expected = "expected no more items")]
async fn claiming_tail_only_but_replaying_fails() {
    photon_testkit::run_scenario(
        "gap_after_truncate",
        WrappedFactory::new(Shape::ReplaysAnyway),
    )
    .await;
}

/// The registry names each scenario once and the runner knows every name.
#[test]
fn one_list_of_scenarios() {
    let names: Vec<&str> = photon_testkit::SCENARIOS.iter().map(|s| s.name).collect();
    let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
    assert_eq!(unique.len(), names.len());
    assert_eq!(names.len(), 49);
    let gated: Vec<(&str, Vec<photon_testkit::Capability>)> = photon_testkit::SCENARIOS
        .iter()
        .filter(|s| !s.requires.is_empty())
        .map(|s| (s.name, s.requires.to_vec()))
        .collect();
    use photon_testkit::Capability::*;
    assert_eq!(
        gated,
        vec![
            ("gap_after_truncate", vec![Truncate, Replay]),
            ("gap_while_reading", vec![Truncate]),
            ("checkpoint_reset", vec![CheckpointReset, Replay]),
            ("get_event", vec![GetEvent]),
            ("listing", vec![List]),
            ("catalog", vec![Catalog]),
            ("truncate", vec![Truncate]),
            ("groups_share_work", vec![ConsumerGroups]),
            ("group_member_leaves", vec![ConsumerGroups]),
            ("group_resumes_after_restart", vec![ConsumerGroups]),
            ("group_leave_hands_over_quickly", vec![ConsumerGroups]),
            ("group_lost_lease_is_fenced", vec![ConsumerGroups]),
            ("group_read_ahead_bounded", vec![ConsumerGroups]),
            ("group_member_takes_over_partitions", vec![ConsumerGroups]),
            ("group_partitions_change", vec![ConsumerGroups]),
            ("delayed_never_early", vec![ConsumerGroups]),
            ("delayed_survive_restart", vec![ConsumerGroups]),
            ("delayed_by_virtual_clock", vec![ConsumerGroups]),
            ("scheduled_under_load", vec![ConsumerGroups]),
            ("retry_after_requeues", vec![ConsumerGroups]),
        ]
    );
}
