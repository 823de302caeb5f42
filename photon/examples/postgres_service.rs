//! The example service on PostgreSQL: orders in over HTTP, billed and shipped by typed
//! handlers, `GET /admin` for the admin snapshot, a graceful stop on SIGTERM or ctrl-c.
//!
//! ```sh
//! PHOTON_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/postgres PHOTON_POSTGRES_SCHEMA=shop \
//!     cargo run -p photon --example postgres_service
//! curl -X POST localhost:8080/orders -H 'content-type: application/json' \
//!      -d '{"order_id":"o-1","item":"tea","quantity":2}'
//! curl localhost:8080/admin
//! ```
//!
//! Start it twice (with different `PHOTON_EXAMPLE_ADDR`) and both see every order: each
//! durable handler has its own checkpoint, shared by name in the database.

mod common;

use photon::postgres::PostgresStoragePort;

fn main() -> std::process::ExitCode {
    // The database and schema come from PHOTON_POSTGRES_URL and PHOTON_POSTGRES_SCHEMA.
    common::main(PostgresStoragePort::builder().build())
}
