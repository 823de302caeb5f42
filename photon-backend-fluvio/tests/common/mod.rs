//! The test factory: one fresh topic prefix per factory on the cluster named by
//! `PHOTON_FLUVIO_ENDPOINT` (start one with `scripts/fluvio-local.sh start`).

#![allow(dead_code)]

pub mod certs;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use photon_backend_fluvio::{
    fluvio_endpoint_from_env, FluvioStoragePort, FluvioStoragePortBuilder,
};
use photon_core::{EventStore, PhotonError, Result, StoragePort, TransportCrypto};
use photon_testkit::{skip_or_fail, PortFactory, UndecodableRecord};

/// Opens ports that share one prefix (one topic namespace).
pub struct FluvioFactory {
    pub endpoint: String,
    pub prefix: String,
    pub shards: u32,
}

impl FluvioFactory {
    /// A factory with a fresh prefix, or `None` (after `skip_or_fail`) without an endpoint.
    pub async fn from_env(shards: u32) -> Option<Self> {
        let Some(endpoint) = fluvio_endpoint_from_env() else {
            skip_or_fail("fluvio", "PHOTON_FLUVIO_ENDPOINT not set");
            return None;
        };
        let unique = uuid::Uuid::new_v4().simple().to_string();
        Some(Self {
            endpoint,
            prefix: format!("t{}", &unique[..12]),
            shards,
        })
    }

    /// A builder for this factory's cluster and prefix.
    pub fn builder(&self) -> FluvioStoragePortBuilder {
        FluvioStoragePortBuilder::new()
            .endpoint(self.endpoint.clone())
            .prefix(self.prefix.clone())
            .shards(self.shards)
    }

    /// A new port (a new connection).
    pub async fn port(&self) -> Result<FluvioStoragePort> {
        self.builder().build().await
    }

    /// A plaintext store on a new port.
    pub async fn store(&self) -> EventStore {
        EventStore::new(
            Arc::new(self.port().await.unwrap()),
            TransportCrypto::plaintext(),
        )
    }

    /// `endpoint#prefix#shards`: what a child process needs to open this factory's ports.
    pub fn location(&self) -> String {
        format!("{}#{}#{}", self.endpoint, self.prefix, self.shards)
    }

    /// The factory of a [`FluvioFactory::location`], in a child process.
    pub fn at(location: &str) -> Self {
        let parts: Vec<&str> = location.split('#').collect();
        Self {
            endpoint: parts[0].to_owned(),
            prefix: parts[1].to_owned(),
            shards: parts[2].parse().unwrap(),
        }
    }
}

/// Creates the Fluvio topic `name` (one partition) with 1 KiB segments and 10 s retention,
/// so that its first records expire within a test; a port that later needs the topic finds
/// it and uses it.
pub async fn create_expiring_topic(factory: &FluvioFactory, name: String) {
    use fluvio::metadata::topic::{
        CleanupPolicy, SegmentBasedPolicy, TopicSpec, TopicStorageConfig,
    };
    let cluster = fluvio::FluvioClusterConfig::new(factory.endpoint.clone());
    let admin = fluvio::FluvioAdmin::connect_with_config(&cluster)
        .await
        .unwrap();
    let mut spec = TopicSpec::new_computed(1, 1, None);
    spec.set_cleanup_policy(CleanupPolicy::Segment(SegmentBasedPolicy {
        time_in_seconds: 10,
    }));
    spec.set_storage(TopicStorageConfig {
        segment_size: Some(1024),
        max_partition_size: None,
    });
    admin.create(name, false, spec).await.unwrap();
}

/// Opens a port onto a [`FluvioFactory::location`], in a group process child.
pub fn open_at(location: String) -> BoxFuture<'static, Arc<dyn StoragePort>> {
    Box::pin(async move { Arc::new(FluvioFactory::at(&location).port().await.unwrap()) as _ })
}

/// The location of a fresh factory with `shards` shard topics, and the factory; `None`
/// without `PHOTON_FLUVIO_ENDPOINT`.
pub async fn location(_dir: &Path, shards: u32) -> Option<(String, FluvioFactory)> {
    let factory = FluvioFactory::from_env(shards).await?;
    Some((factory.location(), factory))
}

#[async_trait]
impl PortFactory for FluvioFactory {
    async fn open(&self) -> Result<Arc<dyn StoragePort>> {
        Ok(Arc::new(self.port().await?))
    }

    /// Produces the bytes as they are to the shard topic of `next_to`, with its key, as
    /// another producer writing to the topic would.
    async fn store_undecodable(&self, record: UndecodableRecord<'_>) -> Result<()> {
        let failed = photon_testkit::injection_failed;
        // `f1:<fluvio topic>:<partition>:<offset>`
        let mut parts = record.next_to.event_id.rsplitn(3, ':');
        let (_offset, _partition, rest) = (parts.next(), parts.next(), parts.next());
        let fluvio_topic = rest
            .and_then(|rest| rest.strip_prefix("f1:"))
            .ok_or_else(|| failed("event id", &record.next_to.event_id))?;
        // Through the port's connector: over TLS when the environment asks for it.
        let connector = self.builder().resolve()?.connector()?;
        let cluster = fluvio::FluvioClusterConfig::new(self.endpoint.clone());
        let client = fluvio::Fluvio::connect_with_connector(connector, &cluster)
            .await
            .map_err(|err| failed("connect", &err))?;
        let producer = client
            .topic_producer(fluvio_topic)
            .await
            .map_err(|err| failed("producer", &err))?;
        let record_key = match record.key {
            Some(key) => fluvio::RecordKey::from(key.as_bytes().to_vec()),
            None => fluvio::RecordKey::NULL,
        };
        let output = producer
            .send(record_key, record.stored.to_vec())
            .await
            .map_err(|err| failed("send", &err))?;
        producer
            .flush()
            .await
            .map_err(|err| failed("flush", &err))?;
        output.wait().await.map_err(|err| failed("ack", &err))?;
        Ok(())
    }

    /// Deletes the Fluvio topics of the namespace's Photon topics: a long composition soak
    /// creates thousands, and a single-SPU cluster provisions new topics ever more slowly
    /// (past 30 s with about 1,200 partitions).
    async fn remove_namespace(&self, namespace: &str) -> Result<()> {
        self.delete_topics_containing(namespace).await
    }
}

impl FluvioFactory {
    /// Deletes this factory's Fluvio topics whose names contain `part` (every shard topic
    /// of the Photon topics named with it).
    ///
    /// # Errors
    /// [`PhotonError::Unavailable`] when the cluster cannot list or delete them.
    pub async fn delete_topics_containing(&self, part: &str) -> Result<()> {
        let failed = |what: &str, err: &dyn std::fmt::Display| {
            PhotonError::unavailable("fluvio", what.to_owned(), err.to_string())
        };
        let connector = self.builder().resolve()?.connector()?;
        let cluster = fluvio::FluvioClusterConfig::new(self.endpoint.clone());
        let client = fluvio::Fluvio::connect_with_connector(connector, &cluster)
            .await
            .map_err(|err| failed("connect", &err))?;
        let admin = client.admin().await;
        let listed = admin
            .all::<fluvio::metadata::topic::TopicSpec>()
            .await
            .map_err(|err| failed("list topics", &err))?;
        let own = format!("{}-", self.prefix);
        for topic in listed {
            if topic.name.starts_with(&own) && topic.name.contains(part) {
                admin
                    .delete::<fluvio::metadata::topic::TopicSpec>(topic.name.clone())
                    .await
                    .map_err(|err| failed(&format!("delete topic {}", topic.name), &err))?;
            }
        }
        Ok(())
    }
}

/// The state directory of `scripts/fluvio-local.sh`.
pub fn state_dir() -> PathBuf {
    PathBuf::from(
        std::env::var("PHOTON_FLUVIO_STATE").unwrap_or_else(|_| "/tmp/photon-fluvio".into()),
    )
}

/// Restarts the SPU the script started (SIGTERM, wait, start its command line again).
pub fn restart_spu(state: &Path) {
    let pid = std::fs::read_to_string(state.join("spu.pid")).unwrap();
    let pid = pid.trim();
    assert!(
        Command::new("kill").arg(pid).status().unwrap().success(),
        "kill spu {pid}"
    );
    while Command::new("kill")
        .args(["-0", pid])
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(1));
    // Started detached, like the script does, so the SPU outlives this test.
    let cmd = state.join("spu.cmd");
    let log = state.join("spu.log");
    let started = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "nohup bash {} >>{} 2>&1 </dev/null & echo $!",
            cmd.display(),
            log.display()
        ))
        .output()
        .unwrap();
    let pid = String::from_utf8(started.stdout).unwrap().trim().to_owned();
    assert!(!pid.is_empty(), "spu not started");
    std::fs::write(state.join("spu.pid"), pid).unwrap();
}

/// The state directory of a cluster this test may restart the SPU of.
pub fn owned_state() -> Option<PathBuf> {
    let state = state_dir();
    if std::fs::read_to_string(state.join("mode")).is_ok_and(|m| m.trim() == "owned") {
        return Some(state);
    }
    println!(
        "skipped: the cluster was not started by scripts/fluvio-local.sh (no owned SPU in {})",
        state.display()
    );
    None
}
