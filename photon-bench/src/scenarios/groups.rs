//! Consumer groups beside a durable subscription, through the handler executor, over any
//! port whose capabilities include consumer groups.
//!
//! One topic gets `group_events` events over [`GROUP_KEYS`] keys, published before anything
//! reads. Then, in each round, the same handler (it awaits 1 ms per event, as a handler
//! calling a service would) runs on that topic as a durable handler, then as a group
//! handler with 1, 2 and 4 members; each member is an executor on its own port instance
//! (its own connection, as separate processes would have). A measurement lasts from the
//! first handled event until every event was handled once; its rate is events per second.
//! Each group is new and starts at the beginning of the topic, so each round reads the
//! same events.
//!
//! The executor runs a key's events one at a time and up to `parallelism` keys at once
//! (`PHOTON_EXECUTOR_PARALLELISM`, default 8), per handler: one member's ceiling is about
//! `parallelism` events per millisecond, the same as the durable handler's, and `n`
//! members have `n` times that. The baseline of a group row is the durable handler's rate
//! in the same rounds, so its ratio is the group's fraction of it.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use photon_core::mem::MemStoragePort;
use photon_core::{EventStore, PhotonError, Result, StoragePort, TransportCrypto};
use photon_runtime::{Executor, HandlerOptions, Photon};
use serde_json::json;

use crate::measure::{per_second, BenchOptions};
use crate::report::{AdapterFigures, BaselineKind, ThroughputRow};

/// Keys the group scenario's events are spread over.
pub const GROUP_KEYS: usize = 64;
/// Member counts measured.
const MEMBERS: [usize; 3] = [1, 2, 4];
/// How long one measurement may take before it fails.
const MEASUREMENT_DEADLINE: Duration = Duration::from_secs(300);
/// What the handler awaits per event.
const HANDLER_WORK: Duration = Duration::from_millis(1);

/// Runs the group scenario on one adapter.
///
/// # Errors
/// [`PhotonError::Unsupported`] when the adapter has no consumer groups;
/// [`PhotonError::InvalidInput`] for an unknown adapter; the adapter's errors (for example
/// an unreachable server).
pub async fn run(adapter: &str, options: &BenchOptions) -> Result<AdapterFigures> {
    match adapter {
        "mem" => {
            // Clones share one in-process store: the closest to separate connections.
            let port = MemStoragePort::new();
            run_on(adapter, options, || {
                let port = port.clone();
                async move { Ok(Arc::new(port) as Arc<dyn StoragePort>) }
            })
            .await
        }
        "sqlite" => {
            let directory = super::sqlite::ScratchDir::new()?;
            let path = directory.file("groups.db");
            run_on(adapter, options, || {
                let path = path.clone();
                async move {
                    let port = photon_backend_sqlite::SqliteStoragePort::builder()
                        .path(path)
                        .build()
                        .await?;
                    Ok(Arc::new(port) as Arc<dyn StoragePort>)
                }
            })
            .await
        }
        "nats" => {
            let url = std::env::var(photon_backend_nats::URL_ENV)
                .unwrap_or_else(|_| photon_backend_nats::DEFAULT_URL.to_owned());
            let prefix = format!(
                "benchgroups-{}",
                &uuid::Uuid::new_v4().simple().to_string()[..8]
            );
            let connect = || {
                let (url, prefix) = (url.clone(), prefix.clone());
                async move {
                    photon_backend_nats::NatsStoragePortBuilder::new()
                        .url(url)
                        .prefix(prefix)
                        .build()
                        .await
                }
            };
            let cleanup = connect().await?;
            let measured = run_on(adapter, options, || {
                let connecting = connect();
                async move { Ok(Arc::new(connecting.await?) as Arc<dyn StoragePort>) }
            })
            .await;
            let cleaned = cleanup.delete_all_streams().await;
            let mut measured = measured?;
            cleaned?;
            measured.server_version = Some(super::nats::server_version(cleanup.client()));
            Ok(measured)
        }
        "postgres" => {
            // In clear text, as the `postgres` adapter of the comparison.
            let url = super::postgres::with_sslmode(
                &photon_backend_postgres::PostgresConfig::from_env()?.url,
                "disable",
            );
            let schema = super::postgres::fresh_schema("benchgroups");
            let admin = super::postgres::connect(&url, &schema).await?;
            let measured = run_on(adapter, options, || {
                let (url, schema) = (url.clone(), schema.clone());
                async move {
                    let port = photon_backend_postgres::PostgresStoragePort::builder()
                        .url(url)
                        .schema(schema)
                        .build()
                        .await?;
                    Ok(Arc::new(port) as Arc<dyn StoragePort>)
                }
            })
            .await;
            let dropped = admin
                .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                .await;
            let mut measured = measured?;
            if let Err(err) = dropped {
                return Err(PhotonError::InvalidInput(format!(
                    "cannot drop schema {schema}: {err}"
                )));
            }
            measured.server_version = Some(super::postgres::server_version(&admin).await?);
            Ok(measured)
        }
        "fluvio" => {
            let endpoint = super::fluvio::endpoint();
            let prefix = format!(
                "benchgroups{}",
                &uuid::Uuid::new_v4().simple().to_string()[..8]
            );
            let mut measured = run_on(adapter, options, || {
                let (endpoint, prefix) = (endpoint.clone(), prefix.clone());
                async move {
                    let port = photon_backend_fluvio::FluvioStoragePortBuilder::new()
                        .endpoint(endpoint)
                        .prefix(prefix)
                        .build()
                        .await?;
                    Ok(Arc::new(port) as Arc<dyn StoragePort>)
                }
            })
            .await?;
            measured.server_version = Some(super::fluvio::platform_version(&endpoint).await?);
            Ok(measured)
        }
        other => Err(PhotonError::InvalidInput(format!(
            "unknown adapter {other:?}; known: {}",
            super::ADAPTERS.join(", ")
        ))),
    }
}

/// The scenario over ports made by `connect` (one per member).
///
/// # Errors
/// [`PhotonError::Unsupported`] when the port has no consumer groups; the port's errors; a
/// measurement that does not finish within its deadline.
pub async fn run_on<C, CF>(
    adapter: &str,
    options: &BenchOptions,
    mut connect: C,
) -> Result<AdapterFigures>
where
    C: FnMut() -> CF,
    CF: Future<Output = Result<Arc<dyn StoragePort>>>,
{
    let first = connect().await?;
    if !first.capabilities().consumer_groups {
        return Err(first.unsupported("consumer groups"));
    }
    let mut ports = vec![first];
    while ports.len() < MEMBERS[MEMBERS.len() - 1] {
        ports.push(connect().await?);
    }
    let events = options.group_events;
    let topic = "benchgroups.orders";
    let store = EventStore::new(ports[0].clone(), TransportCrypto::plaintext());
    publish(&store, topic, options).await?;
    let parallelism = photon(&ports[0])?.executor_config().parallelism;
    eprintln!(
        "  {events} events over {GROUP_KEYS} keys published; handler awaits {HANDLER_WORK:?}, executor parallelism {parallelism}"
    );
    let mut durable_rates = Vec::new();
    let mut group_rates: Vec<Vec<f64>> = vec![Vec::new(); MEMBERS.len()];
    for round in 0..options.rounds {
        let durable = HandlerOptions::new(format!("durable{round}"), topic);
        let rate = measure(&ports[..1], |_| durable.clone(), events).await?;
        eprintln!("  round {}: durable {rate:.0}/s", round + 1);
        durable_rates.push(rate);
        for (slot, members) in MEMBERS.iter().enumerate() {
            let name = format!("group{members}x{round}");
            let handler = HandlerOptions::new(name.clone(), topic).group(name);
            let rate = measure(&ports[..*members], |_| handler.clone(), events).await?;
            eprintln!("  round {}: group of {members} {rate:.0}/s", round + 1);
            group_rates[slot].push(rate);
        }
    }
    let throughput = MEMBERS
        .iter()
        .zip(group_rates)
        .map(|(members, rates)| {
            ThroughputRow::new(
                adapter,
                &format!("group_{members}"),
                rates,
                BaselineKind::Durable,
                durable_rates.clone(),
            )
        })
        .collect();
    Ok(AdapterFigures {
        throughput,
        ..AdapterFigures::default()
    })
}

/// A `Photon` over `port`, in plaintext, with the executor settings of the environment.
fn photon(port: &Arc<dyn StoragePort>) -> Result<Photon> {
    Photon::builder()
        .shared_storage_port(port.clone())
        .transport_crypto(TransportCrypto::plaintext())
        .build()
}

/// Publishes `{"i": 0..group_events}` over [`GROUP_KEYS`] keys with the run's publishers.
async fn publish(store: &EventStore, topic: &str, options: &BenchOptions) -> Result<()> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(options.publishers);
    for _ in 0..options.publishers {
        let (store, topic, next) = (store.clone(), topic.to_owned(), next.clone());
        let events = options.group_events;
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= events {
                    return Ok::<_, PhotonError>(());
                }
                let key = format!("k{}", i % GROUP_KEYS);
                store
                    .publish(&topic, Some(&key), json!(null), json!({ "i": i }))
                    .await?;
            }
        }));
    }
    for task in tasks {
        task.await
            .map_err(|e| PhotonError::InvalidInput(format!("publisher task: {e}")))??;
    }
    store.port().flush().await
}

/// What the handlers of one measurement saw.
struct Tally {
    seen: Vec<AtomicBool>,
    handled: AtomicUsize,
    first: OnceLock<Instant>,
    done: OnceLock<Instant>,
}

/// Runs one executor per port with the handler `options(member)` until each of `events`
/// events was handled; returns events per second from the first handled event to the last
/// first-time one.
async fn measure(
    ports: &[Arc<dyn StoragePort>],
    options: impl Fn(usize) -> HandlerOptions,
    events: usize,
) -> Result<f64> {
    let tally = Arc::new(Tally {
        seen: (0..events).map(|_| AtomicBool::new(false)).collect(),
        handled: AtomicUsize::new(0),
        first: OnceLock::new(),
        done: OnceLock::new(),
    });
    let mut executors: Vec<Executor> = Vec::with_capacity(ports.len());
    for (member, port) in ports.iter().enumerate() {
        let tally = tally.clone();
        let executor = photon(port)?
            .executor()
            .handler_with(options(member), move |event: photon_core::Event| {
                let tally = tally.clone();
                async move {
                    tally.first.get_or_init(Instant::now);
                    tokio::time::sleep(HANDLER_WORK).await;
                    let seen = event.payload["i"]
                        .as_u64()
                        .and_then(|i| tally.seen.get(usize::try_from(i).ok()?));
                    if let Some(seen) = seen {
                        if !seen.swap(true, Ordering::SeqCst)
                            && tally.handled.fetch_add(1, Ordering::SeqCst) + 1 == tally.seen.len()
                        {
                            tally.done.get_or_init(Instant::now);
                        }
                    }
                }
            })
            .start()?;
        executors.push(executor);
    }
    let deadline = Instant::now() + MEASUREMENT_DEADLINE;
    let finished = loop {
        if let (Some(first), Some(done)) = (tally.first.get(), tally.done.get()) {
            break Ok(per_second(events, done.duration_since(*first)));
        }
        if Instant::now() > deadline {
            break Err(PhotonError::InvalidInput(format!(
                "{} of {events} events handled within {MEASUREMENT_DEADLINE:?}",
                tally.handled.load(Ordering::SeqCst)
            )));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    for executor in executors {
        executor.shutdown().await?;
    }
    finished
}
