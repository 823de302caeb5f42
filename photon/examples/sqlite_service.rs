//! The example service on SQLite: orders in over HTTP, billed and shipped by typed handlers,
//! `GET /admin` for the admin snapshot, a graceful stop on SIGTERM or ctrl-c.
//!
//! ```sh
//! PHOTON_SQLITE_PATH=/tmp/shop.db cargo run -p photon --example sqlite_service
//! curl -X POST localhost:8080/orders -H 'content-type: application/json' \
//!      -d '{"order_id":"o-1","item":"tea","quantity":2}'
//! curl localhost:8080/admin
//! ```
//!
//! Stop it and start it again: the handlers resume after their checkpoints.

mod common;

use photon::sqlite::SqliteStoragePort;

fn main() -> std::process::ExitCode {
    // The file comes from PHOTON_SQLITE_PATH (default `photon.db` here).
    common::main(SqliteStoragePort::builder().build())
}
