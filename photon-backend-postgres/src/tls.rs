//! The port's TLS connector (feature `tls`): rustls with the ring provider, configured from
//! the connection string's `sslmode`, `sslrootcert`, `sslcert` and `sslkey` (see `ssl.rs`).
//!
//! - `disable`: clear text. `prefer`: TLS without certificate verification when the server
//!   offers it; when it does not, or the handshake fails, clear text, with a warning.
//! - `require`: TLS without certificate verification (the connection is encrypted, the
//!   server not authenticated), or as `verify-ca` when `sslrootcert` is given (as libpq).
//! - `verify-ca`: the server's chain must lead to a trusted root; its name is not checked.
//! - `verify-full`: chain and name (the host connected to) are checked.
//!
//! Trusted roots: the PEM file `sslrootcert`, or the platform's store
//! (`rustls-native-certs`) for `sslrootcert=system` or no `sslrootcert`. The platform's
//! store is the one the host's administrator maintains (and where a private CA is usually
//! installed), rather than a bundled copy of the web's roots that goes stale with the
//! build. The handshake's signatures are verified in every mode.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;
use photon_core::{PhotonError, Result};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{Client, Connection, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::error::{describe, LABEL};
use crate::ssl::{RootCert, SslMode, SslSettings};

/// The stream of a connection, encrypted or not.
pub(crate) type Stream = <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream;

/// Connects the way the connection string's TLS settings say; clones share one rustls
/// configuration (and the warning that `prefer` fell back to clear text, given once).
#[derive(Clone)]
pub(crate) struct Connector {
    mode: SslMode,
    rustls: MakeRustlsConnect,
    warned: Arc<AtomicBool>,
}

impl Connector {
    /// Reads the certificate files and sets up rustls.
    ///
    /// # Errors
    /// [`PhotonError::Config`] naming `sslrootcert`, `sslcert` or `sslkey` and the path of
    /// a file that cannot be read or holds no usable certificate or key.
    pub(crate) fn new(ssl: &SslSettings) -> Result<Self> {
        Ok(Self {
            mode: ssl.mode,
            rustls: MakeRustlsConnect::new(client_config(ssl)?),
            warned: Arc::default(),
        })
    }

    /// One connection; with `prefer`, in clear text when the server offers no TLS or the
    /// handshake fails (warned once per port).
    ///
    /// # Errors
    /// The driver's error; a refused certificate is named in its sources.
    pub(crate) async fn connect(
        &self,
        pg: &tokio_postgres::Config,
    ) -> std::result::Result<(Client, Connection<Socket, Stream>), tokio_postgres::Error> {
        let attempt = Attempt {
            rustls: self.rustls.clone(),
            handshake: Arc::default(),
        };
        let handshake = Arc::clone(&attempt.handshake);
        match pg.connect(attempt).await {
            Ok(connected) => {
                if self.mode == SslMode::Prefer
                    && handshake.load(Ordering::Relaxed) == NOT_TRIED
                    && over_tcp(pg)
                {
                    self.warn_once(
                        "the PostgreSQL server does not offer TLS: connected in clear text \
                         (sslmode=prefer; use sslmode=require to refuse clear text)",
                    );
                }
                Ok(connected)
            }
            Err(error)
                if self.mode == SslMode::Prefer && handshake.load(Ordering::Relaxed) == FAILED =>
            {
                self.warn_once(&format!(
                    "TLS handshake with the PostgreSQL server failed ({}): connecting in clear \
                     text (sslmode=prefer; use sslmode=require to refuse clear text)",
                    describe(&error)
                ));
                let mut clear = pg.clone();
                clear.ssl_mode(tokio_postgres::config::SslMode::Disable);
                clear
                    .connect(Attempt {
                        rustls: self.rustls.clone(),
                        handshake: Arc::default(),
                    })
                    .await
            }
            Err(error) => Err(error),
        }
    }

    fn warn_once(&self, message: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!("{message}");
        } else {
            tracing::debug!("{message}");
        }
    }
}

/// The rustls error in `error`'s sources, if any.
fn rustls_cause(error: &tokio_postgres::Error) -> Option<&rustls::Error> {
    let mut cause = std::error::Error::source(error);
    while let Some(inner) = cause {
        let tls = inner
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            .or_else(|| inner.downcast_ref::<rustls::Error>());
        if tls.is_some() {
            return tls;
        }
        cause = inner.source();
    }
    None
}

/// Whether the connection may go over TCP: PostgreSQL offers no TLS on Unix sockets, and a
/// clear-text connection there is no fallback worth a warning.
fn over_tcp(pg: &tokio_postgres::Config) -> bool {
    !pg.get_hostaddrs().is_empty()
        || pg
            .get_hosts()
            .iter()
            .any(|host| matches!(host, tokio_postgres::config::Host::Tcp(_)))
}

/// Whether `error` is a certificate the connector refused (or a server refusing the
/// client's): retrying cannot help.
pub(crate) fn is_refused_certificate(error: &tokio_postgres::Error) -> bool {
    matches!(
        rustls_cause(error),
        Some(
            rustls::Error::InvalidCertificate(_)
                | rustls::Error::NoCertificatesPresented
                | rustls::Error::AlertReceived(
                    rustls::AlertDescription::BadCertificate
                        | rustls::AlertDescription::CertificateRequired
                        | rustls::AlertDescription::UnknownCA
                        | rustls::AlertDescription::CertificateUnknown
                )
        )
    )
}

/// What a refused certificate means for the configuration, when that is clear.
pub(crate) fn hint(error: &tokio_postgres::Error) -> Option<&'static str> {
    use rustls::{AlertDescription, CertificateError, Error};
    match rustls_cause(error)? {
        Error::InvalidCertificate(CertificateError::UnknownIssuer) => Some(
            "the server's certificate is not signed by a root of sslrootcert (or of the \
             platform's store when sslrootcert is absent or `system`)",
        ),
        Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => Some(
            "the host connected to is not a name of the server's certificate \
             (sslmode=verify-full checks it; verify-ca does not)",
        ),
        Error::AlertReceived(
            AlertDescription::CertificateRequired | AlertDescription::BadCertificate,
        ) => Some("the server wants a client certificate it accepts (sslcert and sslkey)"),
        _ => None,
    }
}

/// The rustls configuration of `ssl`.
fn client_config(ssl: &SslSettings) -> Result<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| PhotonError::storage(LABEL, "cannot set up TLS", e))?;
    let builder = match (ssl.mode, &ssl.root_cert) {
        (SslMode::Disable | SslMode::Prefer, _) | (SslMode::Require, None) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NameUnchecked {
                roots: None,
                provider,
            })),
        (SslMode::Require | SslMode::VerifyCa, root_cert) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NameUnchecked {
                roots: Some(roots(root_cert.as_ref().unwrap_or(&RootCert::System))?),
                provider,
            })),
        (SslMode::VerifyFull, root_cert) => {
            builder.with_root_certificates(roots(root_cert.as_ref().unwrap_or(&RootCert::System))?)
        }
    };
    match (&ssl.cert, &ssl.key) {
        (Some(cert), Some(key)) => {
            let chain = certificates("sslcert", cert)?;
            let private_key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                PhotonError::config(
                    "sslkey",
                    key.display().to_string(),
                    format!("a readable PEM file holding a private key ({e})"),
                )
            })?;
            builder
                .with_client_auth_cert(chain, private_key)
                .map_err(|e| {
                    PhotonError::config(
                        "sslkey",
                        key.display().to_string(),
                        format!("the private key of sslcert {} ({e})", cert.display()),
                    )
                })
        }
        _ => Ok(builder.with_no_client_auth()),
    }
}

/// The certificates of the PEM file `path`, at least one.
fn certificates(parameter: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let refused = |why: String| {
        PhotonError::config(
            parameter,
            path.display().to_string(),
            format!("a readable PEM file of certificates ({why})"),
        )
    };
    let found = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| refused(e.to_string()))?;
    if found.is_empty() {
        return Err(refused("it holds no certificate".into()));
    }
    Ok(found)
}

/// The trusted roots.
fn roots(root_cert: &RootCert) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    match root_cert {
        RootCert::File(path) => {
            for cert in certificates("sslrootcert", path)? {
                roots.add(cert).map_err(|e| {
                    PhotonError::config(
                        "sslrootcert",
                        path.display().to_string(),
                        format!("CA certificates ({e})"),
                    )
                })?;
            }
        }
        RootCert::System => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                let errors: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
                return Err(PhotonError::config(
                    "sslrootcert",
                    "system",
                    format!(
                        "a platform certificate store holding CA certificates (none found{}); \
                         give a PEM file of CA certificates instead",
                        if errors.is_empty() {
                            String::new()
                        } else {
                            format!(": {}", errors.join("; "))
                        }
                    ),
                ));
            }
        }
    }
    Ok(roots)
}

/// A verifier that never checks the server's name: `require` without roots (`roots:
/// None`: any certificate) and `verify-ca` (the chain must lead to one of `roots`). The
/// handshake's signatures are checked either way.
#[derive(Debug)]
struct NameUnchecked {
    roots: Option<RootCertStore>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for NameUnchecked {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        if let Some(roots) = &self.roots {
            let cert = ParsedCertificate::try_from(end_entity)?;
            rustls::client::verify_server_cert_signed_by_trust_anchor(
                &cert,
                roots,
                intermediates,
                now,
                self.provider.signature_verification_algorithms.all,
            )?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Handshake outcomes of one connection attempt.
const NOT_TRIED: u8 = 0;
const FAILED: u8 = 1;
const DONE: u8 = 2;

/// One connection attempt's connector: records whether a TLS handshake ran and how it
/// ended, which tells `prefer`'s clear-text fallbacks apart.
#[derive(Clone)]
struct Attempt {
    rustls: MakeRustlsConnect,
    handshake: Arc<AtomicU8>,
}

type RustlsConnect = <MakeRustlsConnect as MakeTlsConnect<Socket>>::TlsConnect;

impl MakeTlsConnect<Socket> for Attempt {
    type Stream = Stream;
    type TlsConnect = Handshake;
    type Error = <MakeRustlsConnect as MakeTlsConnect<Socket>>::Error;

    fn make_tls_connect(&mut self, host: &str) -> std::result::Result<Handshake, Self::Error> {
        Ok(Handshake {
            inner: MakeTlsConnect::<Socket>::make_tls_connect(&mut self.rustls, host)?,
            outcome: Arc::clone(&self.handshake),
        })
    }
}

/// A handshake that records its outcome.
struct Handshake {
    inner: RustlsConnect,
    outcome: Arc<AtomicU8>,
}

impl TlsConnect<Socket> for Handshake {
    type Stream = Stream;
    type Error = <RustlsConnect as TlsConnect<Socket>>::Error;
    type Future = BoxFuture<'static, std::result::Result<Stream, Self::Error>>;

    fn connect(self, socket: Socket) -> Self::Future {
        let Self { inner, outcome } = self;
        Box::pin(async move {
            let result = inner.connect(socket).await;
            outcome.store(
                if result.is_ok() { DONE } else { FAILED },
                Ordering::Relaxed,
            );
            result
        })
    }
}
