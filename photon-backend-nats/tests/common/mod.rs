//! Test support: a port factory with its own stream prefix (streams deleted when the factory
//! is dropped), and a `nats-server` a test can start, stop and restart.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use photon_backend_nats::{NatsStoragePort, NatsStoragePortBuilder, DEFAULT_URL, URL_ENV};
use photon_core::{Result, StoragePort};
use photon_testkit::{PortFactory, UndecodableRecord};

/// Opens ports onto one server under one unique prefix.
pub struct NatsFactory {
    pub url: String,
    pub prefix: String,
    pub shards: u32,
}

impl NatsFactory {
    /// A factory on `PHOTON_NATS_URL` (default the local server), or `None` after
    /// `skip_or_fail` when the server cannot be reached.
    pub async fn from_env(shards: u32) -> Option<Self> {
        let url = std::env::var(URL_ENV).unwrap_or_else(|_| DEFAULT_URL.to_owned());
        Self::on(url, shards).await
    }

    pub async fn on(url: String, shards: u32) -> Option<Self> {
        let unique = uuid::Uuid::new_v4().simple().to_string();
        let factory = Self {
            url,
            prefix: format!("t{}", &unique[..14]),
            shards,
        };
        match tokio::time::timeout(Duration::from_secs(10), factory.port()).await {
            Ok(Ok(_)) => Some(factory),
            Ok(Err(err)) => {
                photon_testkit::skip_or_fail(
                    "nats",
                    &format!("NATS at {} is unreachable: {err}", factory.url),
                );
                None
            }
            Err(_) => {
                photon_testkit::skip_or_fail(
                    "nats",
                    &format!("NATS at {} did not answer", factory.url),
                );
                None
            }
        }
    }

    pub fn builder(&self) -> NatsStoragePortBuilder {
        NatsStoragePortBuilder::new()
            .url(self.url.clone())
            .prefix(self.prefix.clone())
            .shards(self.shards)
    }

    pub async fn port(&self) -> Result<NatsStoragePort> {
        self.builder().build().await
    }

    /// `url#prefix#shards`: what a child process needs to open this factory's ports.
    pub fn location(&self) -> String {
        format!("{}#{}#{}", self.url, self.prefix, self.shards)
    }
}

/// A builder onto a [`NatsFactory::location`]. Not a factory: a child's factory would
/// delete the streams when dropped.
pub fn builder_at(location: &str) -> NatsStoragePortBuilder {
    let parts: Vec<&str> = location.split('#').collect();
    NatsStoragePortBuilder::new()
        .url(parts[0])
        .prefix(parts[1])
        .shards(parts[2].parse().unwrap())
}

/// Opens a port onto a [`NatsFactory::location`], in a group process child.
pub fn open_at(location: String) -> BoxFuture<'static, Arc<dyn StoragePort>> {
    Box::pin(async move { Arc::new(builder_at(&location).build().await.unwrap()) as _ })
}

/// The location of a fresh factory with `shards` stream shards, and the factory (which
/// deletes the streams when the test drops it); `None` when NATS does not answer.
pub async fn location(_dir: &std::path::Path, shards: u32) -> Option<(String, NatsFactory)> {
    let factory = NatsFactory::from_env(shards).await?;
    Some((factory.location(), factory))
}

#[async_trait]
impl PortFactory for NatsFactory {
    async fn open(&self) -> Result<Arc<dyn StoragePort>> {
        Ok(Arc::new(self.port().await?))
    }

    /// Publishes the bytes as they are on the subject of `next_to` (its topic, shard and
    /// key), as another program writing to the stream would.
    async fn store_undecodable(&self, record: UndecodableRecord<'_>) -> Result<()> {
        let failed = photon_testkit::injection_failed;
        let (stream, seq) = record
            .next_to
            .event_id
            .rsplit_once(':')
            .ok_or_else(|| failed("event id", &record.next_to.event_id))?;
        let seq: u64 = seq.parse().map_err(|err| failed("event id", &err))?;
        let client = async_nats::connect(&self.url)
            .await
            .map_err(|err| failed("connect", &err))?;
        let jetstream = async_nats::jetstream::new(client);
        let message = jetstream
            .get_stream(stream)
            .await
            .map_err(|err| failed("stream", &err))?
            .direct_get(seq)
            .await
            .map_err(|err| failed("message", &err))?;
        jetstream
            .publish(
                message.subject.clone(),
                bytes::Bytes::copy_from_slice(record.stored),
            )
            .await
            .map_err(|err| failed("publish", &err))?
            .await
            .map_err(|err| failed("publish ack", &err))?;
        Ok(())
    }
}

impl Drop for NatsFactory {
    /// Deletes this factory's streams, on a thread of its own (the test's runtime may be
    /// shutting down).
    fn drop(&mut self) {
        let builder = self.builder();
        let cleanup = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async move {
                let deleted = tokio::time::timeout(Duration::from_secs(20), async {
                    builder.build().await?.delete_all_streams().await
                })
                .await;
                if let Ok(Err(err)) = deleted {
                    eprintln!("cleanup of test streams failed: {err}");
                }
            });
        });
        let _ = cleanup.join();
    }
}

/// A `nats-server -js` owned by a test, on a free port, with its own store directory.
pub struct OwnServer {
    pub port: u16,
    pub store: PathBuf,
    /// Options after the defaults (e.g. `--user`, `--pass`).
    extra: Vec<String>,
    child: Option<Child>,
}

pub const NATS_SERVER: &str = "/usr/sbin/nats-server";

impl OwnServer {
    /// Starts a server, or `None` when the binary is missing.
    pub fn start() -> Option<Self> {
        Self::start_with(&[])
    }

    /// Starts a server with `extra` options after the defaults, or `None` when the binary
    /// is missing.
    pub fn start_with(extra: &[&str]) -> Option<Self> {
        let mut server = Self::reserve()?;
        server.extra = extra.iter().map(|option| (*option).to_owned()).collect();
        server.restart();
        Some(server)
    }

    /// A free port and store directory for a server that is not started yet (start it
    /// with [`OwnServer::restart`]); `None` when the binary is missing.
    pub fn reserve() -> Option<Self> {
        if !std::path::Path::new(NATS_SERVER).exists() {
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let store =
            std::env::temp_dir().join(format!("photon-nats-{}", uuid::Uuid::new_v4().simple()));
        Some(Self {
            port,
            store,
            extra: Vec::new(),
            child: None,
        })
    }

    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Stops the server (SIGKILL: no graceful shutdown).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port and store, and waits until it listens.
    pub fn restart(&mut self) {
        self.stop();
        let child = Command::new(NATS_SERVER)
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-sd",
            ])
            .arg(&self.store)
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nats-server");
        self.child = Some(child);
        for _ in 0..200 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("nats-server did not listen on {}", self.port);
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.store);
    }
}
