//! The optional bearer token: in the `Authorization` header (scripts, Prometheus), or in
//! the cookie that `POST /login` sets (the page, which a browser cannot send headers for).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::{Form, Json};
use photon::PhotonError;
use serde_json::json;

use super::App;

/// The cookie the page's login sets.
const COOKIE: &str = "photon_token";

/// Refuses tokens that could not travel in a header or a cookie unchanged.
///
/// # Errors
/// `Config` naming `--token (PHOTON_SERVE_TOKEN)`.
pub(crate) fn check_token(token: &str) -> Result<(), PhotonError> {
    let fits = !token.is_empty()
        && token
            .bytes()
            .all(|b| b.is_ascii_graphic() && !matches!(b, b';' | b',' | b'"' | b'\\'));
    if fits {
        Ok(())
    } else {
        Err(PhotonError::config(
            "--token (PHOTON_SERVE_TOKEN)",
            "(hidden)",
            "printable ASCII without spaces, ';', ',', '\"' or '\\' (for example from `openssl rand -hex 32`)",
        ))
    }
}

/// Compares without stopping at the first difference, so that timing tells nothing of
/// how much of a guess was right.
fn same(given: &str, expected: &str) -> bool {
    given.len() == expected.len()
        && given
            .bytes()
            .zip(expected.bytes())
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

fn presented(headers: &HeaderMap) -> Vec<&str> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    let cookies = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='));
    bearer.into_iter().chain(cookies).collect()
}

/// Lets a request through when no token is set or it carries the token; otherwise 401
/// (the login form for the page, JSON for the rest).
pub(crate) async fn require_token(
    State(app): State<Arc<App>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = &app.token else {
        return next.run(request).await;
    };
    if presented(request.headers())
        .into_iter()
        .any(|given| same(given, token))
    {
        return next.run(request).await;
    }
    let mut response = if request.uri().path() == "/" {
        (StatusCode::UNAUTHORIZED, Html(LOGIN)).into_response()
    } else {
        (
            StatusCode::UNAUTHORIZED,
            Json(json!({
                "error": "this server needs a bearer token: send `Authorization: Bearer <token>`",
                "kind": "unauthorized",
            })),
        )
            .into_response()
    };
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"photon\""),
    );
    response
}

/// The login form's fields.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct Login {
    token: String,
}

/// Sets the token cookie when the token is right, and goes back to the page.
pub(crate) async fn login(State(app): State<Arc<App>>, Form(login): Form<Login>) -> Response {
    match &app.token {
        Some(token) if same(&login.token, token) => {
            let mut response = Redirect::to("/").into_response();
            // Strict keeps other sites' pages from sending it (a replay is a POST).
            let cookie = format!("{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/");
            if let Ok(value) = HeaderValue::from_str(&cookie) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
        }
        Some(_) => (StatusCode::UNAUTHORIZED, Html(LOGIN)).into_response(),
        None => Redirect::to("/").into_response(),
    }
}

const LOGIN: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Photon: token</title>
<style>body{font:15px system-ui,sans-serif;margin:3rem auto;max-width:28rem;color:#1d2330}
input,button{font:inherit;padding:.4rem .6rem}</style></head>
<body><h1>Photon</h1><p>This server needs its token.</p>
<form method="post" action="/login"><input type="password" name="token" autofocus required>
<button type="submit">Open</button></form></body></html>"#;
