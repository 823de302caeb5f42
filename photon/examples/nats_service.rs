//! The example service on NATS JetStream: orders in over HTTP, billed and shipped by typed
//! handlers, `GET /admin` for the admin snapshot, a graceful stop on SIGTERM or ctrl-c.
//!
//! ```sh
//! URL_ENV=nats://127.0.0.1:4222 PREFIX_ENV=shop \
//!     cargo run -p photon --example nats_service
//! curl -X POST localhost:8080/orders -H 'content-type: application/json' \
//!      -d '{"order_id":"o-1","item":"tea","quantity":2}'
//! curl localhost:8080/admin
//! ```
//!
//! Start it twice (with different `PHOTON_EXAMPLE_ADDR`) and both see every order: each
//! durable handler has its own checkpoint, shared by name on the server.

mod common;

use photon::nats::NatsStoragePort;

fn main() -> std::process::ExitCode {
    // The server and the stream prefix come from URL_ENV and PREFIX_ENV.
    common::main(NatsStoragePort::builder().build())
}
