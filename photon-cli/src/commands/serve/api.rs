//! The JSON API under `/api/`: the CLI commands' own functions, answered as JSON.
//!
//! A listing answers `{"supported": true, "reason": null, "<name>": [...]}`; where the
//! backend lacks what the listing needs (capability `catalog`, `head_seq` or `list`) it
//! answers 200 with `"supported": false`, the reason, and an empty list, so that the page
//! says so instead of failing. Other errors answer `{"error", "kind"}` with a status that
//! matches the CLI's exit code.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use photon::PhotonError;
use serde::Serialize;
use serde_json::{json, Value};

use super::App;
use crate::commands::output::{exit_code, kind};
use crate::commands::{checkpoints, dlq, groups, topics};

/// An error as JSON, with the HTTP status of its kind.
fn failure(err: &PhotonError) -> Response {
    let status = match exit_code(err) {
        3 => StatusCode::NOT_FOUND,
        4 => StatusCode::SERVICE_UNAVAILABLE,
        6 => StatusCode::BAD_REQUEST,
        7 => StatusCode::NOT_IMPLEMENTED,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (
        status,
        Json(json!({"error": err.to_string(), "kind": kind(err)})),
    )
        .into_response()
}

/// A listing, or what the backend cannot list.
fn listing<T: Serialize>(name: &str, result: Result<Vec<T>, PhotonError>) -> Response {
    let (supported, reason, items) = match result {
        Ok(items) => match serde_json::to_value(items) {
            Ok(items) => (true, Value::Null, items),
            Err(e) => return failure(&PhotonError::codec(name, e)),
        },
        Err(err @ PhotonError::Unsupported { .. }) => {
            (false, Value::String(err.to_string()), json!([]))
        }
        Err(err) => return failure(&err),
    };
    let mut body = serde_json::Map::new();
    body.insert("supported".into(), supported.into());
    body.insert("reason".into(), reason);
    body.insert(name.into(), items);
    Json(Value::Object(body)).into_response()
}

/// `GET /api/overview`: the backend, what it can list, and whether replay is allowed.
pub(crate) async fn overview(State(app): State<Arc<App>>) -> Response {
    let port = app.photon.store().port();
    let capabilities = port.capabilities();
    Json(json!({
        "backend": port.label(),
        "capabilities": {
            "catalog": capabilities.catalog,
            "head_seq": capabilities.head_seq,
            "list": capabilities.list,
            "consumer_groups": capabilities.consumer_groups,
            "checkpoint_reset": capabilities.checkpoint_reset,
            "atomic_batches": capabilities.atomic_batches,
        },
        "replay_allowed": app.allow_replay,
        "groups": app.groups,
    }))
    .into_response()
}

/// `GET /api/topics`: as `photon topics`.
pub(crate) async fn topics(State(app): State<Arc<App>>) -> Response {
    listing("topics", topics::list(&app.photon).await)
}

/// `GET /api/lag`: as `photon lag`.
pub(crate) async fn lag(State(app): State<Arc<App>>) -> Response {
    listing("lag", checkpoints::lag_rows(&app.photon, None, None).await)
}

/// `GET /api/checkpoints`: as `photon checkpoints`.
pub(crate) async fn checkpoints(State(app): State<Arc<App>>) -> Response {
    listing("checkpoints", checkpoints::stored(&app.photon).await)
}

/// `GET /api/groups`: as `photon groups`, for each `--group`.
pub(crate) async fn groups(State(app): State<Arc<App>>) -> Response {
    let mut statuses = Vec::with_capacity(app.groups.len());
    for name in &app.groups {
        match groups::status(&app.photon, &name.group, &name.topic).await {
            Ok(status) => statuses.push(status),
            Err(err) => return listing::<()>("groups", Err(err)),
        }
    }
    listing("groups", Ok(statuses))
}

/// `GET /api/dlq`: the dead letters of every topic, as `photon dlq list` per topic.
pub(crate) async fn dead_letters(State(app): State<Arc<App>>) -> Response {
    listing("dead_letters", dlq::all_letters(&app.photon).await)
}

/// `GET /api/dlq/{topic}`: as `photon dlq list TOPIC`.
pub(crate) async fn topic_dead_letters(
    State(app): State<Arc<App>>,
    Path(topic): Path<String>,
) -> Response {
    listing("dead_letters", dlq::letters(&app.photon, &topic).await)
}

/// `POST /api/dlq/{topic}/{id}/replay`: as `photon dlq replay TOPIC ID`; 403 unless the
/// server was started with `--allow-replay`.
pub(crate) async fn replay(
    State(app): State<Arc<App>>,
    Path((topic, id)): Path<(String, String)>,
) -> Response {
    if !app.allow_replay {
        return (
            StatusCode::FORBIDDEN,
            Json(json!({
                "error": "replay is off: start `photon serve` with --allow-replay to allow it",
                "kind": "forbidden",
            })),
        )
            .into_response();
    }
    let replayed = match dlq::find(&app.photon, &topic, &id).await {
        Ok(letter) => dlq::replay_one(&app.photon, &letter).await,
        Err(err) => Err(err),
    };
    match replayed {
        Ok(row) => Json(row).into_response(),
        Err(err) => failure(&err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body(response: Response) -> (StatusCode, Value) {
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .unwrap();
        (status, serde_json::from_slice(&bytes).unwrap())
    }

    #[tokio::test]
    async fn a_backend_without_a_listing_says_so() {
        let refused: Result<Vec<u8>, PhotonError> = Err(PhotonError::Unsupported {
            backend: "fluvio",
            operation: "list_topics",
        });
        assert_eq!(
            body(listing("topics", refused)).await,
            (
                StatusCode::OK,
                json!({
                    "supported": false,
                    "reason": "list_topics is not supported by the fluvio storage port",
                    "topics": [],
                })
            )
        );
    }

    #[tokio::test]
    async fn other_errors_answer_with_the_status_of_their_kind() {
        let missing: Result<Vec<u8>, PhotonError> = Err(PhotonError::NotFound("x".into()));
        assert_eq!(
            body(listing("topics", missing)).await,
            (
                StatusCode::NOT_FOUND,
                json!({"error": "not found: x", "kind": "not_found"})
            )
        );
        let bad: Result<Vec<u8>, PhotonError> = Err(PhotonError::InvalidInput("y".into()));
        assert_eq!(body(listing("lag", bad)).await.0, StatusCode::BAD_REQUEST);
    }
}
