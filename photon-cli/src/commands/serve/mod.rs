//! `serve`: an HTTP server with `/metrics` for Prometheus, a JSON API under `/api/`, and
//! the ops page at `/`.
//!
//! The JSON endpoints call the same functions as the CLI commands (`topics`, `lag`,
//! `checkpoints`, `groups`, `dlq`), so both always show the same figures.

mod api;
mod auth;
mod metrics;
mod page;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;
use clap::Args;
use photon::{Photon, PhotonError};
use serde_json::json;

use super::backend::Backend;
use super::output::Output;

/// Where to listen, who may ask, and what the page may do.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (this machine only by default; port 0 picks a free one).
    #[arg(long, default_value = "127.0.0.1:9470")]
    bind: SocketAddr,
    /// Token every request must carry as `Authorization: Bearer <token>` (the page asks for
    /// it once and keeps it in a cookie); without it, no token is asked for.
    #[arg(long, env = "PHOTON_SERVE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Allow replaying dead letters (the page's buttons and `POST /api/dlq/...`); without
    /// it the server only reads.
    #[arg(long)]
    allow_replay: bool,
    /// A consumer group to show, as GROUP:TOPIC (repeat for more; groups cannot be listed).
    #[arg(long = "group", value_name = "GROUP:TOPIC", value_parser = parse_group)]
    groups: Vec<GroupName>,
}

/// A group to show, and its topic.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GroupName {
    /// Group name.
    pub group: String,
    /// Topic name.
    pub topic: String,
}

fn parse_group(text: &str) -> Result<GroupName, String> {
    match text.split_once(':') {
        Some((group, topic)) if !group.is_empty() && !topic.is_empty() => Ok(GroupName {
            group: group.to_owned(),
            topic: topic.to_owned(),
        }),
        _ => Err(format!("{text:?}: expected GROUP:TOPIC")),
    }
}

/// What every request handler shares.
pub(crate) struct App {
    photon: Photon,
    token: Option<String>,
    allow_replay: bool,
    groups: Vec<GroupName>,
    metrics: metrics_exporter_prometheus::PrometheusHandle,
}

/// Serves until ctrl-c or SIGTERM.
///
/// # Errors
/// `Config` for an address that cannot be bound or a token that cannot travel in a header
/// or cookie; the backend's errors when it cannot be opened.
pub async fn run(backend: Backend, output: Output, args: ServeArgs) -> Result<(), PhotonError> {
    if let Some(token) = &args.token {
        auth::check_token(token)?;
    }
    let photon = backend.photon().await?;
    let metrics = metrics::install()?;
    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .map_err(|e| {
            PhotonError::config(
                "--bind",
                args.bind.to_string(),
                format!("an address this machine can listen on ({e})"),
            )
        })?;
    let address = listener.local_addr().map_err(|e| {
        PhotonError::config(
            "--bind",
            args.bind.to_string(),
            format!("a bound address ({e})"),
        )
    })?;
    let app = Arc::new(App {
        photon: photon.clone(),
        token: args.token,
        allow_replay: args.allow_replay,
        groups: args.groups,
        metrics,
    });
    let url = format!("http://{address}/");
    output.emit(
        &json!({"listening": url, "replay_allowed": app.allow_replay, "token_required": app.token.is_some()}),
        || format!("photon serve: listening on {url}"),
    );
    let served = axum::serve(listener, router(app))
        .with_graceful_shutdown(stopped())
        .await;
    photon.shutdown().await?;
    served.map_err(|e| PhotonError::Closed(format!("the HTTP server stopped: {e}")))
}

fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/", get(page::page))
        .route("/metrics", get(metrics::render))
        .route("/api/overview", get(api::overview))
        .route("/api/topics", get(api::topics))
        .route("/api/lag", get(api::lag))
        .route("/api/checkpoints", get(api::checkpoints))
        .route("/api/groups", get(api::groups))
        .route("/api/dlq", get(api::dead_letters))
        .route("/api/dlq/{topic}", get(api::topic_dead_letters))
        .route("/api/dlq/{topic}/{id}/replay", post(api::replay))
        .route_layer(axum::middleware::from_fn_with_state(
            app.clone(),
            auth::require_token,
        ))
        .route("/login", post(auth::login))
        .with_state(app)
}

/// Resolves on ctrl-c or SIGTERM.
async fn stopped() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}
