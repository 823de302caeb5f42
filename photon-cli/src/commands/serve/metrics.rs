//! `/metrics`: Photon's metrics in the Prometheus text format.
//!
//! The recorder is installed here, in the `photon` process only: the library never installs
//! one. This process publishes only what it replays, so on each scrape it also reads every
//! durable subscription's lag and the lag of each `--group` partition from the backend,
//! and sets `photon_subscription_lag` and `photon_group_partition_lag` from them.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use photon::core::metrics::{describe, Consumer, ConsumerMetrics};
use photon::PhotonError;

use super::App;
use crate::commands::{checkpoints, groups};

/// How often histograms drop samples older than their window.
const UPKEEP: Duration = Duration::from_secs(5);

/// Installs the Prometheus recorder for this process and hands it the metric table.
///
/// # Errors
/// `InvalidInput` when a recorder is installed already (not expected: only `serve` installs
/// one).
pub(crate) fn install() -> Result<PrometheusHandle, PhotonError> {
    let handle = PrometheusBuilder::new().install_recorder().map_err(|e| {
        PhotonError::InvalidInput(format!("cannot install the Prometheus recorder: {e}"))
    })?;
    describe();
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(UPKEEP);
        loop {
            ticks.tick().await;
            upkeep.run_upkeep();
        }
    });
    Ok(handle)
}

/// Sets the lag gauges from the backend, then renders every metric.
pub(crate) async fn render(State(app): State<Arc<App>>) -> impl IntoResponse {
    refresh_lag(&app).await;
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        app.metrics.render(),
    )
}

/// Lag the backend cannot tell (no listing, no head) is left out, as in the library.
async fn refresh_lag(app: &App) {
    let photon = &app.photon;
    let backend = photon.store().port().label();
    match checkpoints::lag_rows(photon, None, None).await {
        Ok(rows) => {
            for row in rows {
                ConsumerMetrics::new(
                    backend,
                    &row.topic,
                    Consumer::Subscription(&row.subscription),
                )
                .lag(row.head.unwrap_or(0), row.checkpoint.unwrap_or(0));
            }
        }
        Err(err) => report_skipped(&err),
    }
    for name in &app.groups {
        match groups::status(photon, &name.group, &name.topic).await {
            Ok(status) => {
                let keys = ConsumerMetrics::new(backend, &name.topic, Consumer::Group(&name.group));
                for partition in status.partitions {
                    if let (Some(checkpoint), Some(behind)) =
                        (partition.checkpoint, partition.behind_head)
                    {
                        keys.partition_lag(partition.partition, checkpoint + behind, checkpoint);
                    }
                }
            }
            Err(err) => report_skipped(&err),
        }
    }
}

fn report_skipped(err: &PhotonError) {
    if !matches!(err, PhotonError::Unsupported { .. }) {
        eprintln!("photon serve: lag not read for /metrics: {err}");
    }
}
