//! The example service on Fluvio: orders in over HTTP, billed and shipped by typed
//! handlers, `GET /admin` for the admin snapshot, a graceful stop on SIGTERM or ctrl-c.
//!
//! ```sh
//! scripts/fluvio-local.sh start      # prints the endpoint to export
//! PHOTON_FLUVIO_ENDPOINT=127.0.0.1:9003 PHOTON_FLUVIO_PREFIX=shop \
//!     cargo run -p photon --example fluvio_service
//! curl -X POST localhost:8080/orders -H 'content-type: application/json' \
//!      -d '{"order_id":"o-1","item":"tea","quantity":2}'
//! curl localhost:8080/admin
//! ```
//!
//! Fluvio cannot tell a topic's head or list a topic, so the snapshot's `head_seq`, `lag`
//! and dead-letter counts are `null` there.

mod common;

use photon::fluvio::FluvioStoragePortBuilder;

fn main() -> std::process::ExitCode {
    // The cluster and the topic prefix come from PHOTON_FLUVIO_ENDPOINT and PHOTON_FLUVIO_PREFIX.
    common::main(FluvioStoragePortBuilder::new().build())
}
