//! The TCP sockets of the port's clients: acknowledged at once, written at once.
//!
//! A streaming consumer and the SPU take turns on one socket: the SPU sends records, the
//! consumer answers with its new offset, the SPU answers that request, and only then does
//! it send the next records. The SPU's sockets keep Nagle's algorithm on, so a small
//! response waits until the consumer has acknowledged everything the SPU sent before.
//! With the client's default delayed acknowledgements, the acknowledgement of the offset
//! answer comes only when the kernel's delayed-ACK timer fires (40 ms on Linux), and every
//! publish-to-subscriber round trip took about 44 ms, with the raw client as with Photon.
//!
//! The client's side of that exchange is fixed here: every read is followed by
//! `TCP_QUICKACK` (Linux re-enables delayed acknowledgements by itself, so it is set
//! again after each read), which acknowledges what was read at once, and `TCP_NODELAY`
//! sends the client's own small requests (offset updates, produce requests) without
//! waiting for earlier acknowledgements either.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use async_trait::async_trait;
use fluvio_future::net::tcp_stream::{stream_with_opts, SocketOpts};
use fluvio_future::net::{
    AsConnectionFd, BoxReadConnection, BoxWriteConnection, ConnectionFd, DomainConnector,
    TcpDomainConnector, TcpStream,
};
use futures::io::AsyncRead;

/// The connector for [`fluvio::Fluvio::connect_with_connector`] that sets up every socket
/// as described in this module: `TCP_NODELAY`, keepalive, and an immediate acknowledgement
/// after each read. Plain TCP only (no TLS).
///
/// Photon's port connects with it; a raw `fluvio` client that streams records gets the
/// same round trip with it (the benchmark's raw side uses it).
pub fn prompt_connector() -> DomainConnector {
    Box::new(PromptConnector)
}

/// Opens sockets with immediate writes and acknowledgements.
#[derive(Debug, Clone, Copy, Default)]
struct PromptConnector;

#[async_trait]
impl TcpDomainConnector for PromptConnector {
    async fn connect(
        &self,
        addr: &str,
    ) -> io::Result<(BoxWriteConnection, BoxReadConnection, ConnectionFd)> {
        let options = SocketOpts {
            nodelay: Some(true),
            keepalive: Some(Default::default()),
        };
        let stream = stream_with_opts(addr, Some(options)).await?;
        let fd = stream.as_connection_fd();
        Ok((Box::new(stream.clone()), Box::new(QuickAck(stream)), fd))
    }

    fn new_domain(&self, _domain: String) -> DomainConnector {
        Box::new(*self)
    }

    fn domain(&self) -> &str {
        "localhost"
    }

    fn clone_box(&self) -> DomainConnector {
        Box::new(*self)
    }
}

/// The reading half of a socket, acknowledging what it read at once.
struct QuickAck(TcpStream);

impl AsyncRead for QuickAck {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<io::Result<usize>> {
        let read = Pin::new(&mut self.0).poll_read(cx, buf);
        if let Poll::Ready(Ok(n)) = read {
            if n > 0 {
                // Best effort: a socket that refuses it only acknowledges later.
                let _ = socket2::SockRef::from(&self.0).set_quickack(true);
            }
        }
        read
    }
}
