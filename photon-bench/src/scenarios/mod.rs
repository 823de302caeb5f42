//! One scenario per adapter. Each measures Photon's public API over the adapter's port
//! ([`PhotonSide`]) beside the raw client doing the same work, in the same run, in rounds
//! in which the sides take turns at going first.

mod delayed;
mod executor;
pub mod fluvio;
pub mod groups;
pub mod mem;
pub mod nats;
mod photon_side;
pub mod postgres;
pub mod sqlite;
mod turns;

pub use delayed::DELAYED_SHARE;
pub use executor::{HandlerKind, EXECUTOR_KEYS};
pub use photon_side::{PhotonSide, Publishing, Sealing};

use futures::FutureExt;
use photon_core::Result;

use crate::latency::{Latencies, LatencyFigure};
use crate::measure::BenchOptions;
use crate::report::{AdapterFigures, BaselineKind, LatencyRow, ThroughputRow};
use turns::{in_turns, side, Side};

/// The adapters this harness knows, in report order.
/// (`postgres` runs in clear text, `postgres-tls` with TLS on both sides.)
pub const ADAPTERS: &[&str] = &[
    "mem",
    "sqlite",
    "postgres",
    "postgres-tls",
    "nats",
    "fluvio",
];

/// Runs one adapter's scenario.
///
/// # Errors
/// [`photon_core::PhotonError::InvalidInput`] for an unknown adapter; the adapter's errors
/// (for example an unreachable server).
pub async fn run(adapter: &str, options: &BenchOptions) -> Result<AdapterFigures> {
    match adapter {
        "mem" => mem::run(options).await,
        "sqlite" => sqlite::run(options).await,
        "nats" => nats::run(options).await,
        "fluvio" => fluvio::run(options).await,
        "postgres" => postgres::run(options, false).await,
        "postgres-tls" => postgres::run(options, true).await,
        other => Err(photon_core::PhotonError::InvalidInput(format!(
            "unknown adapter {other:?}; known: {}",
            ADAPTERS.join(", ")
        ))),
    }
}

/// Ends a raw end-to-end window: waits for its publishing task, then gives the rate of
/// `events` read in `elapsed`.
///
/// # Errors
/// The publishing task's error, or its panic.
pub(crate) async fn raw_end_to_end_rate(
    publishing: tokio::task::JoinHandle<Result<()>>,
    events: usize,
    elapsed: std::time::Duration,
) -> Result<f64> {
    publishing.await.map_err(|e| {
        photon_core::PhotonError::InvalidInput(format!("raw publisher task: {e}"))
    })??;
    Ok(crate::measure::per_second(events, elapsed))
}

/// A raw client doing the same work as Photon's side; each round on its own topic.
pub(crate) trait RawClient {
    /// Acknowledged publishes per second.
    async fn publish_rate(&self, options: &BenchOptions, round: usize) -> Result<f64>;
    /// Events per second from publish to consumption.
    async fn end_to_end_rate(&self, options: &BenchOptions, round: usize) -> Result<f64>;
    /// `options.latency_share(round)` one-at-a-time publish → receive round trips.
    async fn latency(&self, options: &BenchOptions, round: usize) -> Result<Latencies>;
    /// Whether the client measures [`RawClient::publish_batch_rate`] (a `publish_batch`
    /// row is made only then).
    fn batches(&self) -> bool {
        false
    }
    /// Acknowledged publishes per second written in batches of
    /// [`photon_side::BATCH_EVENTS`].
    async fn publish_batch_rate(&self, options: &BenchOptions, round: usize) -> Result<f64> {
        let _ = (options, round);
        Err(no_batches())
    }
    /// Events per second from publish, in batches of [`photon_side::BATCH_EVENTS`], to
    /// consumption.
    async fn end_to_end_batch_rate(&self, options: &BenchOptions, round: usize) -> Result<f64> {
        let _ = (options, round);
        Err(no_batches())
    }
}

fn no_batches() -> photon_core::PhotonError {
    photon_core::PhotonError::InvalidInput("this raw client does not measure batches".into())
}

/// Every row of `adapter`: publish, end to end and round trips of Photon in plaintext and
/// sealed beside the raw client, the executor beside a durable subscription, the executor's
/// batch handler beside its single-event handler, and the replay
/// of one key of 64 beside the replay of the whole topic (what a keyed subscription pays
/// for the other keys' records), and the round trips of the subscription and of the
/// executor (publish -> handler start) beside the raw client's, and end to end and the
/// executor with spans and metrics on beside the same with them off, and events due at once
/// through the scheduler beside the same published at once (end to end, and their round
/// trips beside the raw client's); each over `options.rounds` rounds, the sides taking
/// turns at going first.
///
/// # Errors
/// The first error of any side.
pub(crate) async fn compare(
    adapter: &str,
    photon: &PhotonSide,
    raw: &impl RawClient,
    options: &BenchOptions,
) -> Result<AdapterFigures> {
    let (rounds, events) = (options.rounds, options.events);
    let mut figures = AdapterFigures::default();
    let [plain, sealed, raw_rates] = in_turns(
        "publish",
        rounds,
        events,
        [
            side("photon", |r| {
                photon
                    .publish_rate(options, r, Sealing::Plain)
                    .boxed_local()
            }),
            side("sealed", |r| {
                photon
                    .publish_rate(options, r, Sealing::Sealed)
                    .boxed_local()
            }),
            side("raw", |r| raw.publish_rate(options, r).boxed_local()),
        ],
    )
    .await?;
    figures
        .throughput
        .extend(raw_rows(adapter, "publish", plain, sealed, raw_rates));
    if raw.batches() {
        let row = paired_row(
            (adapter, "publish_batch", options),
            side("photon", |r| {
                photon.publish_batch_rate(options, r).boxed_local()
            }),
            BaselineKind::Raw,
            side("raw", |r| raw.publish_batch_rate(options, r).boxed_local()),
        );
        figures.throughput.push(row.await?);
    }
    if options.publish_only {
        return Ok(figures);
    }

    let [plain, sealed, raw_rates] = in_turns(
        "end to end",
        rounds,
        events,
        [
            side("photon", |r| {
                photon
                    .end_to_end_rate(options, r, Sealing::Plain)
                    .boxed_local()
            }),
            side("sealed", |r| {
                photon
                    .end_to_end_rate(options, r, Sealing::Sealed)
                    .boxed_local()
            }),
            side("raw", |r| raw.end_to_end_rate(options, r).boxed_local()),
        ],
    )
    .await?;
    figures
        .throughput
        .extend(raw_rows(adapter, "end_to_end", plain, sealed, raw_rates));
    if raw.batches() {
        let row = paired_row(
            (adapter, "end_to_end_batch", options),
            side("photon", |r| {
                photon.end_to_end_batch_rate(options, r).boxed_local()
            }),
            BaselineKind::Raw,
            side("raw", |r| {
                raw.end_to_end_batch_rate(options, r).boxed_local()
            }),
        );
        figures.throughput.push(row.await?);
    }

    let row = paired_row(
        (adapter, "executor", options),
        side("executor", |r| {
            photon.executor_rate(options, r).boxed_local()
        }),
        BaselineKind::Durable,
        side("durable", |r| photon.durable_rate(options, r).boxed_local()),
    );
    figures.throughput.push(row.await?);

    let row = paired_row(
        (adapter, "executor_batch", options),
        side("batch", |r| {
            photon.executor_batch_rate(options, r).boxed_local()
        }),
        BaselineKind::SingleHandler,
        side("single", |r| photon.executor_rate(options, r).boxed_local()),
    );
    figures.throughput.push(row.await?);

    let row = paired_row(
        (adapter, "executor_batch_backlog", options),
        side("batch", |r| {
            photon
                .executor_backlog_rate(options, r, HandlerKind::Batch)
                .boxed_local()
        }),
        BaselineKind::SingleHandler,
        side("single", |r| {
            photon
                .executor_backlog_rate(options, r, HandlerKind::Single)
                .boxed_local()
        }),
    );
    figures.throughput.push(row.await?);

    let row = paired_row(
        (adapter, "end_to_end_telemetry", options),
        side("on", |r| {
            with_telemetry(photon.end_to_end_rate(options, r, Sealing::Plain)).boxed_local()
        }),
        BaselineKind::TelemetryOff,
        side("off", |r| {
            photon
                .end_to_end_rate(options, r, Sealing::Plain)
                .boxed_local()
        }),
    );
    figures.throughput.push(row.await?);

    let row = paired_row(
        (adapter, "executor_telemetry", options),
        side("on", |r| {
            with_telemetry(photon.executor_rate(options, r)).boxed_local()
        }),
        BaselineKind::TelemetryOff,
        side("off", |r| photon.executor_rate(options, r).boxed_local()),
    );
    figures.throughput.push(row.await?);

    figures
        .throughput
        .push(keyed_replay_row(adapter, "keyed_replay", photon, options).await?);

    let [plain, sealed, raw_latencies] = in_turns(
        "round trip",
        rounds,
        events,
        [
            side("photon", |r| {
                photon.latency(options, r, Sealing::Plain).boxed_local()
            }),
            side("sealed", |r| {
                photon.latency(options, r, Sealing::Sealed).boxed_local()
            }),
            side("raw", |r| raw.latency(options, r).boxed_local()),
        ],
    )
    .await?;
    let raw_figure = latency_figure(&raw_latencies);
    let [executor] = in_turns(
        "executor round trip",
        rounds,
        events,
        [side("executor", |r| {
            photon.executor_latency(options, r).boxed_local()
        })],
    )
    .await?;
    // Last: the scheduler these start keeps running in the process afterwards.
    let row = paired_row(
        (adapter, "end_to_end_delayed", options),
        side("delayed", |r| {
            photon
                .delayed_end_to_end_rate(options, r, Publishing::DueNow)
                .boxed_local()
        }),
        BaselineKind::AtOnce,
        side("at once", |r| {
            photon
                .delayed_end_to_end_rate(options, r, Publishing::Each)
                .boxed_local()
        }),
    );
    figures.throughput.push(row.await?);
    let [delayed] = in_turns(
        "delayed round trip",
        rounds,
        events,
        [side("delayed", |r| {
            photon.delayed_latency(options, r).boxed_local()
        })],
    )
    .await?;
    for (metric, rounds) in [
        ("latency", plain),
        ("latency_sealed", sealed),
        ("latency_executor", executor),
        ("latency_delayed", delayed),
    ] {
        figures.latency.push(LatencyRow {
            adapter: adapter.to_owned(),
            metric: metric.to_owned(),
            photon: latency_figure(&rounds),
            raw: raw_figure.clone(),
        });
    }
    Ok(figures)
}

/// The replay of one key of 64 beside the replay of the whole topic, as the row `metric`.
///
/// # Errors
/// The first error of either side.
async fn keyed_replay_row(
    adapter: &str,
    metric: &str,
    photon: &PhotonSide,
    options: &BenchOptions,
) -> Result<ThroughputRow> {
    paired_row(
        (adapter, metric, options),
        side("keyed", |r| {
            photon.replay_rate(options, r, Some("k0")).boxed_local()
        }),
        BaselineKind::WholeTopic,
        side("whole", |r| {
            photon.replay_rate(options, r, None).boxed_local()
        }),
    )
    .await
}

/// `measure` with Photon's spans and metrics on ([`crate::telemetry`]); off again after.
///
/// # Errors
/// `measure`'s error, or the switch's.
async fn with_telemetry<T>(measure: impl std::future::Future<Output = Result<T>>) -> Result<T> {
    crate::telemetry::set(true)?;
    let measured = measure.await;
    crate::telemetry::set(false)?;
    measured
}

/// The row `metric` of `adapter`: Photon's side beside `baseline`, in turns over
/// `options.rounds` rounds (stderr names the rounds after the metric).
async fn paired_row<'a>(
    (adapter, metric, options): (&str, &str, &BenchOptions),
    photon: Side<'a, f64>,
    baseline_kind: BaselineKind,
    baseline: Side<'a, f64>,
) -> Result<ThroughputRow> {
    let what = metric.replace('_', " ");
    let [photon, baseline] =
        in_turns(&what, options.rounds, options.events, [photon, baseline]).await?;
    Ok(ThroughputRow::new(
        adapter,
        metric,
        photon,
        baseline_kind,
        baseline,
    ))
}

/// `metric` in plaintext and `{metric}_sealed`, each beside the same raw rounds.
fn raw_rows(
    adapter: &str,
    metric: &str,
    plain: Vec<f64>,
    sealed: Vec<f64>,
    raw: Vec<f64>,
) -> [ThroughputRow; 2] {
    [
        ThroughputRow::new(adapter, metric, plain, BaselineKind::Raw, raw.clone()),
        ThroughputRow::new(
            adapter,
            &format!("{metric}_sealed"),
            sealed,
            BaselineKind::Raw,
            raw,
        ),
    ]
}

/// The figure of all `rounds` merged, with each round's own line.
pub(crate) fn latency_figure(rounds: &[Latencies]) -> LatencyFigure {
    let mut merged = Latencies::default();
    for round in rounds {
        merged.merge(round);
    }
    merged.figure(rounds.iter().map(Latencies::round).collect())
}
