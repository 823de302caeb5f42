//! `/`: the ops page, one server-rendered HTML file whose script reads the JSON API every
//! few seconds (no build step, no outside assets).

use axum::http::header;
use axum::response::IntoResponse;

/// The page.
const PAGE: &str = include_str!("page.html");

/// `GET /`: the page; its script fills it from `/api/...`.
pub(crate) async fn page() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            // Everything the page uses is its own; nothing may be loaded from elsewhere.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; form-action 'self'",
            ),
        ],
        PAGE,
    )
}
