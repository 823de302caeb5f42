//! What the example services share: their typed topics and handlers, the HTTP routes, and
//! the run loop with its graceful shutdown. Each `*_service.rs` only opens its store.
//!
//! Environment of every example service:
//! - `PHOTON_EXAMPLE_ADDR`: where the HTTP routes listen (default `127.0.0.1:8080`; port 0
//!   picks a free one). The service prints `listening on http://ADDR` once it serves.
//! - `PHOTON_EXAMPLE_EXIT_AFTER=N`: shut down gracefully once `N` shipments were handled,
//!   as if SIGTERM had arrived (for scripted runs).
//! - The store's own `PHOTON_<ADAPTER>_*` variables, and `PHOTON_EXECUTOR_*`.

mod http;

use std::future::Future;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use photon::prelude::*;
use photon::StoragePort;
use serde::{Deserialize, Serialize};

/// Listening address variable.
pub const ADDR_ENV: &str = "PHOTON_EXAMPLE_ADDR";
/// Shipments after which the service stops by itself.
pub const EXIT_AFTER_ENV: &str = "PHOTON_EXAMPLE_EXIT_AFTER";

/// An order, as `POST /orders` takes it; one order's events stay in order.
#[topic(name = "orders", keyed_by = "order_id")]
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Order {
    pub order_id: String,
    pub item: String,
    pub quantity: u32,
}

/// A billed order on its way to the customer.
#[topic(name = "shipments", keyed_by = "order_id")]
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Shipment {
    pub order_id: String,
    pub item: String,
    pub quantity: u32,
}

static BILLED: AtomicUsize = AtomicUsize::new(0);
static SHIPPED: AtomicUsize = AtomicUsize::new(0);

/// Ships a billed order: declared with `#[subscribe]`, started by `declared_handlers()`.
#[subscribe(durable = "shipping")]
async fn ship(shipment: Shipment) -> Result<(), PhotonError> {
    println!(
        "shipping {} x {} for {}",
        shipment.quantity, shipment.item, shipment.order_id
    );
    SHIPPED.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

/// Bills an order and publishes its shipment through the `Photon` the executor runs on
/// (a handler argument, like `State<T>` and `Context`).
#[subscribe(durable = "billing")]
async fn bill(order: Order, photon: Photon) -> Result<(), PhotonError> {
    println!(
        "billing {} ({} x {})",
        order.order_id, order.quantity, order.item
    );
    let shipment = Shipment {
        order_id: order.order_id,
        item: order.item,
        quantity: order.quantity,
    };
    shipment.publish_on(&photon).await?;
    BILLED.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

/// Runs the service on `port` until SIGTERM, ctrl-c or `PHOTON_EXAMPLE_EXIT_AFTER`; the
/// process exit code says whether it ran and stopped cleanly.
pub fn main<P, F>(open: F) -> ExitCode
where
    P: StoragePort,
    F: Future<Output = photon::Result<P>>,
{
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the tokio runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(open)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run<P, F>(open: F) -> Result<(), PhotonError>
where
    P: StoragePort,
    F: Future<Output = photon::Result<P>>,
{
    let exit_after = exit_after()?;
    let address = std::env::var(ADDR_ENV).unwrap_or_else(|_| "127.0.0.1:8080".to_owned());
    let photon = Photon::builder().storage_port(open.await?).build()?;
    let executor = photon.start_executor()?;
    let listener = tokio::net::TcpListener::bind(&address)
        .await
        .map_err(|err| {
            PhotonError::config(
                ADDR_ENV,
                &address,
                format!("a free address to listen on ({err})"),
            )
        })?;
    let bound = listener
        .local_addr()
        .map_err(|err| PhotonError::InvalidInput(format!("listening address: {err}")))?;
    println!("listening on http://{bound}");
    http::serve(listener, photon.clone(), stop_requested(exit_after)).await?;

    println!("stopping: draining handlers and committing checkpoints");
    executor.shutdown().await?;
    photon.shutdown().await?;
    println!(
        "stopped: {} orders billed, {} shipments",
        BILLED.load(Ordering::SeqCst),
        SHIPPED.load(Ordering::SeqCst)
    );
    Ok(())
}

fn exit_after() -> Result<Option<usize>, PhotonError> {
    match std::env::var(EXIT_AFTER_ENV) {
        Ok(value) => value
            .parse()
            .map(Some)
            .map_err(|_| PhotonError::config(EXIT_AFTER_ENV, value, "a count of shipments")),
        Err(_) => Ok(None),
    }
}

/// Resolves on SIGTERM, ctrl-c, or once `exit_after` shipments were handled.
async fn stop_requested(exit_after: Option<usize>) {
    let shipped_enough = async {
        match exit_after {
            Some(count) => {
                while SHIPPED.load(Ordering::SeqCst) < count {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = terminated() => println!("SIGTERM received"),
        _ = tokio::signal::ctrl_c() => println!("ctrl-c received"),
        () = shipped_enough => println!("{EXIT_AFTER_ENV} reached"),
    }
}

#[cfg(unix)]
async fn terminated() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut signal) => {
            signal.recv().await;
        }
        Err(err) => {
            eprintln!("cannot listen for SIGTERM ({err}); stop with ctrl-c");
            std::future::pending::<()>().await;
        }
    }
}

#[cfg(not(unix))]
async fn terminated() {
    std::future::pending::<()>().await;
}
