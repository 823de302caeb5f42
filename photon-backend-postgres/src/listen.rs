//! The live tail's listener: one connection per port outside the pools that `LISTEN`s on
//! the schema's channel, with TCP keepalive (a connection that died silently is noticed
//! and replaced). Every append transaction (of any process) sends the names of the
//! topics it appended to with `NOTIFY`, which PostgreSQL delivers after the commit; the
//! listener wakes those topics' subscribers.
//!
//! When the connection is lost it reconnects (pausing up to a second between attempts);
//! notifications sent meanwhile are lost, so once it listens again it wakes every
//! subscriber to read. Subscribers also read again every `recheck_interval` without a
//! notification: the backstop while the listener is away.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use photon_core::Result;
use tokio::sync::{mpsc, watch};
use tokio_postgres::{AsyncMessage, Client};

use crate::connection::Server;
use crate::error::{describe, pg_error};
use photon_core::raw::wake::CommitWakers;

/// The `NOTIFY` channel of a schema (a valid identifier: the schema name is checked).
pub(crate) fn channel(schema: &str) -> String {
    format!("photon_{schema}")
}

/// A listening connection: the client (kept so the connection stays open) and the topics
/// notified on it, until the connection ends.
struct Listening {
    _client: Client,
    topics: mpsc::UnboundedReceiver<String>,
}

/// Connects and listens; the connection is driven by a task of its own.
async fn listen(server: &Server, schema: &str) -> Result<Listening> {
    let (client, mut connection) = server.listener().await?;
    let (sender, topics) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(notification)) => {
                    if sender.send(notification.payload().to_owned()).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(error = %describe(&error), "postgres listener connection lost");
                    return;
                }
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN {}", channel(schema)))
        .await
        .map_err(|e| pg_error("listen for appends", e))?;
    Ok(Listening {
        _client: client,
        topics,
    })
}

/// Starts listening: returns once the first connection listens, then keeps listening
/// (reconnecting when needed) until `stop`'s sender is dropped.
///
/// # Errors
/// When the first connection cannot be made.
pub(crate) async fn start(
    server: Server,
    schema: String,
    heads: Arc<CommitWakers>,
    stop: watch::Receiver<()>,
) -> Result<()> {
    let first = listen(&server, &schema).await?;
    tokio::spawn(run(server, schema, heads, stop, first));
    Ok(())
}

async fn run(
    server: Server,
    schema: String,
    heads: Arc<CommitWakers>,
    mut stop: watch::Receiver<()>,
    mut listening: Listening,
) {
    loop {
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                topic = listening.topics.recv() => match topic {
                    Some(topic) => heads.committed(&topic),
                    None => break,
                },
            }
        }
        let mut pause = Duration::from_millis(50);
        listening = loop {
            tokio::select! {
                _ = stop.changed() => return,
                () = tokio::time::sleep(pause) => {}
            }
            match listen(&server, &schema).await {
                Ok(listening) => break listening,
                Err(error) => {
                    tracing::warn!(%error, "postgres listener cannot reconnect; will retry");
                    pause = (pause * 2).min(Duration::from_secs(1));
                }
            }
        };
        heads.wake_all();
    }
}
