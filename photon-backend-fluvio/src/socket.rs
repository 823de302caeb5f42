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
//!
//! Two connectors set sockets up this way: [`prompt_connector`] speaks plain TCP, and
//! `prompt_tls_connector` (feature `tls`) runs TLS (rustls) over the same sockets, the
//! acknowledgement following every read of the encrypted stream. The TLS connector checks
//! the SC's certificate against its domain and an SPU's against `<spu name>.<domain>` (the
//! names Fluvio's client asks for). A handshake that fails returns an error naming the
//! cause (`unknown issuer`, `name mismatch`, ...); one that gets no answer within 10 s
//! (an endpoint that does not serve TLS) fails too, instead of waiting.
//!
//! Against `fluvio-run --tls` the client's side is not the whole exchange: the SC and the
//! SPU serve TLS through a proxy in front of a plain endpoint, and the SPU's peer is then
//! that proxy, whose sockets delay their acknowledgements. Measured here (local cluster,
//! `tests/tls.rs` set-up): publishes are acknowledged in about 2.4 ms (1.1 ms plain), but a
//! publish-to-subscriber round trip takes about 44 ms again (2.3 ms plain). Throughput
//! suffers less than latency; groups with very short leases (1 s) can miss renewals.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use async_trait::async_trait;
use fluvio_future::net::tcp_stream::{stream_with_opts, SocketOpts};
use fluvio_future::net::{
    AsConnectionFd, BoxReadConnection, BoxWriteConnection, ConnectionFd, DomainConnector,
    TcpDomainConnector, TcpStream,
};
use futures::io::{AsyncRead, AsyncWrite};

#[cfg(feature = "tls")]
pub use self::tls::prompt_tls_connector;
#[cfg(feature = "tls")]
pub(crate) use self::tls::{tls_connector, tls_failure};

/// The connector for [`fluvio::Fluvio::connect_with_connector`] that sets up every socket
/// as described in this module: `TCP_NODELAY`, keepalive, and an immediate acknowledgement
/// after each read. Plain TCP (`prompt_tls_connector` adds TLS).
///
/// Photon's port connects with it when TLS is off; a raw `fluvio` client that streams
/// records gets the same round trip with it (the benchmark's raw side uses it).
/// [`crate::FluvioConfig::connector`] picks this one or the TLS one as the port does.
pub fn prompt_connector() -> DomainConnector {
    Box::new(PromptConnector)
}

/// A TCP connection to `addr` with `TCP_NODELAY` and keepalive.
async fn open_stream(addr: &str) -> io::Result<TcpStream> {
    let options = SocketOpts {
        nodelay: Some(true),
        keepalive: Some(Default::default()),
    };
    stream_with_opts(addr, Some(options)).await
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
        let stream = open_stream(addr).await?;
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

/// A socket that acknowledges what it read at once (writes pass through): the reading
/// half of a plain connection, the whole socket under TLS.
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

impl AsyncWrite for QuickAck {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_close(cx)
    }
}

#[cfg(feature = "tls")]
mod tls {
    use std::io;
    use std::sync::Arc;
    use std::time::Duration;

    use async_trait::async_trait;
    use fluvio_future::net::{
        AsConnectionFd, BoxReadConnection, BoxWriteConnection, ConnectionFd, DomainConnector,
        TcpDomainConnector,
    };
    use futures::future::{select, Either};
    use futures::io::AsyncReadExt;
    use futures_rustls::rustls::pki_types::ServerName;
    use futures_rustls::rustls::{
        AlertDescription, CertificateError, ClientConfig, Error as TlsError,
    };
    use futures_rustls::TlsConnector;
    use photon_core::{BoxError, Result};

    use super::{open_stream, QuickAck};
    use crate::config::TlsConfig;

    /// How long a TLS handshake may take once the TCP connection is up.
    pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

    /// The TLS connector for [`fluvio::Fluvio::connect_with_connector`]: the sockets of
    /// [`super::prompt_connector`] (`TCP_NODELAY`, keepalive, an immediate acknowledgement
    /// after each read) with TLS over them, trusting the CA of `tls` (or the system's roots)
    /// and showing its client certificate, if any.
    ///
    /// The SC's certificate must hold the domain ([`TlsConfig::domain`], default: the host
    /// of `endpoint`), each SPU's `<spu name>.<domain>`. The files are read once, here.
    ///
    /// ```no_run
    /// # async fn run() -> anyhow::Result<()> {
    /// use photon_backend_fluvio::{prompt_tls_connector, FluvioConfig};
    ///
    /// let config = FluvioConfig::from_env()?; // PHOTON_FLUVIO_TLS_CA, ...
    /// if let Some(tls) = &config.tls {
    ///     let connector = prompt_tls_connector(tls, &config.endpoint)?;
    ///     let cluster = fluvio::FluvioClusterConfig::new(config.endpoint.clone());
    ///     let fluvio = fluvio::Fluvio::connect_with_connector(connector, &cluster).await?;
    /// #   let _ = fluvio;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`photon_core::PhotonError::Config`] naming the field (`tls.ca`, `tls.client_cert`,
    /// `tls.domain`) and the file when a file cannot be read or holds no usable PEM, the key
    /// does not go with the certificate, or the domain is not a DNS name. Connecting with it
    /// fails with an I/O error naming the cause when a handshake fails (`unknown issuer`,
    /// `name mismatch`, no answer within 10 s).
    pub fn prompt_tls_connector(tls: &TlsConfig, endpoint: &str) -> Result<DomainConnector> {
        crate::tls::connector(tls, endpoint, &crate::tls::FIELD_NAMES)
    }

    /// The TLS connector of a loaded client configuration, checking `domain`.
    pub(crate) fn tls_connector(config: ClientConfig, domain: String) -> DomainConnector {
        Box::new(PromptTlsConnector {
            tls: TlsConnector::from(Arc::new(config)),
            domain,
        })
    }

    /// Opens prompt sockets and runs TLS over them.
    #[derive(Clone)]
    struct PromptTlsConnector {
        tls: TlsConnector,
        /// The name the peer's certificate must hold (Fluvio's client prefixes it with an
        /// SPU's name through [`TcpDomainConnector::new_domain`]).
        domain: String,
    }

    #[async_trait]
    impl TcpDomainConnector for PromptTlsConnector {
        async fn connect(
            &self,
            addr: &str,
        ) -> io::Result<(BoxWriteConnection, BoxReadConnection, ConnectionFd)> {
            let failed = |kind, cause| {
                io::Error::new(
                    kind,
                    HandshakeFailure {
                        addr: addr.to_owned(),
                        domain: self.domain.clone(),
                        cause,
                    },
                )
            };
            let name = ServerName::try_from(self.domain.clone())
                .map_err(|err| failed(io::ErrorKind::InvalidInput, err.to_string()))?;
            let stream = open_stream(addr).await?;
            let fd = stream.as_connection_fd();
            let handshake = self.tls.connect(name, QuickAck(stream));
            let deadline = fluvio_future::timer::sleep(HANDSHAKE_TIMEOUT);
            let stream = match select(handshake, Box::pin(deadline)).await {
                Either::Left((Ok(stream), _)) => stream,
                Either::Left((Err(err), _)) => {
                    let cause = cause(&err, &self.domain);
                    return Err(failed(err.kind(), cause));
                }
                Either::Right(_) => {
                    let cause = format!(
                        "no answer within {HANDSHAKE_TIMEOUT:?} (does the endpoint serve TLS?)"
                    );
                    return Err(failed(io::ErrorKind::TimedOut, cause));
                }
            };
            let (read, write) = stream.split();
            Ok((Box::new(write), Box::new(read), fd))
        }

        fn new_domain(&self, domain: String) -> DomainConnector {
            Box::new(Self {
                tls: self.tls.clone(),
                domain,
            })
        }

        fn domain(&self) -> &str {
            &self.domain
        }

        fn clone_box(&self) -> DomainConnector {
            Box::new(self.clone())
        }
    }

    /// Why a handshake failed, in words: the common certificate problems by name.
    fn cause(err: &io::Error, domain: &str) -> String {
        let tls = err
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<TlsError>());
        match tls {
            Some(TlsError::InvalidCertificate(CertificateError::UnknownIssuer)) => {
                "unknown issuer: the server's certificate is not signed by a trusted CA".to_owned()
            }
            Some(TlsError::InvalidCertificate(CertificateError::BadSignature)) => {
                "bad signature: the server's certificate is not signed by the trusted CA of \
                 its issuer's name"
                    .to_owned()
            }
            Some(TlsError::InvalidCertificate(CertificateError::NotValidForName)) => {
                format!("name mismatch: the server's certificate does not hold {domain:?}")
            }
            Some(TlsError::InvalidCertificate(CertificateError::NotValidForNameContext {
                presented,
                ..
            })) => format!(
                "name mismatch: the server's certificate does not hold {domain:?} (it holds {})",
                presented.join(", ")
            ),
            Some(other) => other.to_string(),
            None => err.to_string(),
        }
    }

    /// The TLS failure behind a failed connect, in words, with its error when it has one:
    /// a failed handshake, or an alert the server sent right after it (TLS 1.3 servers
    /// refuse a missing or unknown client certificate only then, on the first read).
    pub(crate) fn tls_failure(err: &anyhow::Error) -> Option<(String, Option<BoxError>)> {
        err.chain().find_map(|cause| {
            let inner = cause.downcast_ref::<io::Error>()?.get_ref()?;
            if let Some(failure) = inner.downcast_ref::<HandshakeFailure>() {
                let source: BoxError = Box::new(failure.clone());
                return Some((failure.to_string(), Some(source)));
            }
            let refused = match inner.downcast_ref::<TlsError>()? {
                TlsError::AlertReceived(AlertDescription::CertificateRequired) => {
                    "the server requires a client certificate (alert CertificateRequired)"
                        .to_owned()
                }
                TlsError::AlertReceived(
                    alert @ (AlertDescription::BadCertificate
                    | AlertDescription::UnknownCA
                    | AlertDescription::CertificateUnknown
                    | AlertDescription::UnsupportedCertificate
                    | AlertDescription::CertificateExpired
                    | AlertDescription::CertificateRevoked
                    | AlertDescription::AccessDenied),
                ) => format!("the server refused the client certificate (alert {alert:?})"),
                other => other.to_string(),
            };
            Some((format!("TLS: {refused}"), None))
        })
    }

    /// A TLS handshake that failed: where, for which name, and why.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct HandshakeFailure {
        /// The address connected to.
        pub(crate) addr: String,
        /// The name the certificate was checked against.
        pub(crate) domain: String,
        /// What went wrong.
        pub(crate) cause: String,
    }

    impl std::fmt::Display for HandshakeFailure {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(
                f,
                "TLS handshake with {} as {:?} failed: {}",
                self.addr, self.domain, self.cause
            )
        }
    }

    impl std::error::Error for HandshakeFailure {}
}
