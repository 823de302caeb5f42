//! The example services' HTTP routes: `POST /orders` publishes an order, `GET /admin`
//! shows `Photon::admin_snapshot` as JSON.

use std::future::Future;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use photon::prelude::*;
use serde_json::{json, Value};

use super::Order;

/// Serves the routes on `listener` until `stop` resolves, then lets open requests finish.
pub async fn serve(
    listener: tokio::net::TcpListener,
    photon: Photon,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), PhotonError> {
    let routes = Router::new()
        .route("/orders", post(publish_order))
        .route("/admin", get(admin))
        .with_state(photon);
    axum::serve(listener, routes)
        .with_graceful_shutdown(stop)
        .await
        .map_err(|err| PhotonError::InvalidInput(format!("HTTP server: {err}")))
}

async fn publish_order(
    State(photon): State<Photon>,
    Json(order): Json<Order>,
) -> (StatusCode, Json<Value>) {
    match order.publish_on(&photon).await {
        Ok(appended) => (
            StatusCode::ACCEPTED,
            Json(json!({ "event_id": appended.event_id, "seq": appended.seq })),
        ),
        Err(err) => failure(&err),
    }
}

async fn admin(State(photon): State<Photon>) -> (StatusCode, Json<Value>) {
    let snapshot = photon.admin_snapshot().await.and_then(|snapshot| {
        serde_json::to_value(snapshot).map_err(|err| PhotonError::codec("admin snapshot", err))
    });
    match snapshot {
        Ok(snapshot) => (StatusCode::OK, Json(snapshot)),
        Err(err) => failure(&err),
    }
}

fn failure(err: &PhotonError) -> (StatusCode, Json<Value>) {
    let status = if err.is_retryable() {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    (status, Json(json!({ "error": err.to_string() })))
}
