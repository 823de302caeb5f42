//! TLS to PostgreSQL (feature `tls`): every connection of a port (page reads, writer,
//! listener, group coordination) encrypted or not as `sslmode` says, seen by the server in
//! `pg_stat_ssl`; certificate verification against a CA made here (`verify-full` through a
//! TLS-terminating proxy whose certificate that CA signed, since the server's own
//! certificate cannot be replaced); client certificates; typed errors naming the cause.
//!
//! Nothing here sleeps: each step waits for an event (an answer, a delivered event), every
//! wait bounded so that a regression fails instead of hanging.

#![cfg(feature = "tls")]

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use photon_backend_postgres::PostgresStoragePort;
use photon_core::PhotonError;
use photon_runtime::Photon;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::timeout;

use common::PgFactory;

/// Bound of every wait.
const BOUND: Duration = Duration::from_secs(30);
/// PostgreSQL's SSLRequest: length 8, then the code 80877103.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 4, 210, 22, 47];

/// `url` with `params` added to its query, and a unique `application_name`, which is
/// returned too: the port's sessions are found by it in `pg_stat_activity`.
fn with_params(url: &str, params: &str) -> (String, String) {
    let name = format!(
        "photon-tls-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    let separator = if url.contains('?') { '&' } else { '?' };
    (
        format!("{url}{separator}{params}&application_name={name}"),
        name,
    )
}

/// Publishes, reads with a live subscriber and with a consumer group member (so that the
/// page-read, writer, listener and coordination connections are all open), then returns
/// whether each of the port's sessions is encrypted, from the server's view.
async fn exercise(factory: &PgFactory, url: &str, name: &str) -> Vec<bool> {
    let port = factory.builder().url(url).build().await.unwrap();
    let photon = Photon::builder().storage_port(port).build().unwrap();
    let mut durable = photon.durable("tls-reader", "tls.orders", None);
    let mut group = photon.group("tls-workers", "tls.orders");
    for i in 0..3 {
        photon
            .publish("tls.orders", Some("k"), json!(null), json!({ "i": i }))
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    for _ in 0..3 {
        let event = timeout(BOUND, durable.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        durable.ack(&event).await.unwrap();
        seen.push(event.seq);
    }
    assert_eq!(seen, vec![1, 2, 3]);
    let event = timeout(BOUND, group.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(event.seq, 1);
    group.ack(&event).await.unwrap();
    durable.flush().await.unwrap();
    let sessions = ssl_of_sessions(factory, name).await;
    photon.shutdown().await.unwrap();
    sessions
}

/// Whether each session named `name` is encrypted.
async fn ssl_of_sessions(factory: &PgFactory, name: &str) -> Vec<bool> {
    let admin = common::admin(&factory.url).await.unwrap();
    admin
        .query(
            "SELECT ssl FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) \
             WHERE application_name = $1",
            &[&name],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect()
}

/// At least one connection each: page reads, writer, listener, coordination.
const KINDS_OF_CONNECTION: usize = 4;

/// Under `sslmode`, the port opens every kind of connection, each of them encrypted when
/// `encrypted` and none of them otherwise.
async fn every_connection_is(sslmode: &str, encrypted: bool) {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    let (url, name) = with_params(&factory.url, &format!("sslmode={sslmode}"));
    let sessions = exercise(&factory, &url, &name).await;
    assert!(sessions.len() >= KINDS_OF_CONNECTION, "{sessions:?}");
    assert_eq!(
        sessions.iter().filter(|ssl| **ssl != encrypted).count(),
        0,
        "{sessions:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_encrypts_every_connection_of_the_port() {
    every_connection_is("require", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disable_keeps_every_connection_in_clear_text() {
    every_connection_is("disable", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefer_uses_tls_when_the_server_offers_it() {
    every_connection_is("prefer", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_sslmode_is_a_config_error_naming_it() {
    let refused = PostgresStoragePort::builder()
        .url("postgres://postgres@127.0.0.1:5432/test?sslmode=verify-everything")
        .build()
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, PhotonError::Config { variable, value, .. }
            if variable == "sslmode" && value == "verify-everything"),
        "{refused:?}"
    );
    assert_eq!(
        refused.to_string(),
        "invalid configuration sslmode=\"verify-everything\": expected one of disable, \
         prefer, require, verify-ca, verify-full"
    );
}

/// A CA made for one test, its certificate written to `ca.pem` in `dir`.
struct Authority {
    issuer: Issuer<'static, KeyPair>,
    pem_file: PathBuf,
}

impl Authority {
    fn new(dir: &Path) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "Photon test CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = params.self_signed(&key).unwrap();
        let pem_file = dir.join("ca.pem");
        std::fs::write(&pem_file, cert.pem()).unwrap();
        Self {
            issuer: Issuer::new(params, key),
            pem_file,
        }
    }

    /// A certificate for `names` signed by this CA, and its key.
    fn sign(
        &self,
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
    ) -> (CertificateDer<'static>, KeyPair) {
        let (cert, _, key) = self.sign_pem(names, usage);
        (cert, key)
    }

    /// As [`Self::sign`], with the certificate's PEM too.
    fn sign_pem(
        &self,
        names: &[&str],
        usage: ExtendedKeyUsagePurpose,
    ) -> (CertificateDer<'static>, String, KeyPair) {
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
                .unwrap();
        params.distinguished_name.push(
            DnType::CommonName,
            names.first().copied().unwrap_or("client"),
        );
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.der().clone(), cert.pem(), key)
    }

    fn roots(&self) -> rustls::RootCertStore {
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls::pki_types::pem::PemObject::pem_file_iter(&self.pem_file).unwrap() {
            roots.add(cert.unwrap()).unwrap();
        }
        roots
    }
}

fn key_der(key: &KeyPair) -> PrivateKeyDer<'static> {
    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()))
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A TLS-terminating proxy on 127.0.0.1: answers the SSLRequest with `S`, accepts TLS with
/// its certificate, then copies between the client and the test server in clear text.
struct Proxy {
    address: SocketAddr,
    /// The client certificate of each accepted handshake (`None`: none presented).
    client_certs: Arc<Mutex<Vec<Option<Vec<u8>>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Proxy {
    /// `client_roots`: when given, the proxy requires a client certificate they signed.
    async fn start(
        server_cert: (CertificateDer<'static>, KeyPair),
        client_roots: Option<rustls::RootCertStore>,
        upstream: String,
    ) -> Self {
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = match client_roots {
            Some(roots) => builder.with_client_cert_verifier(
                rustls::server::WebPkiClientVerifier::builder_with_provider(
                    Arc::new(roots),
                    provider(),
                )
                .build()
                .unwrap(),
            ),
            None => builder.with_no_client_auth(),
        };
        let config = builder
            .with_single_cert(vec![server_cert.0], key_der(&server_cert.1))
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let client_certs = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&client_certs);
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (acceptor, upstream, seen) =
                    (acceptor.clone(), upstream.clone(), Arc::clone(&seen));
                tokio::spawn(async move {
                    // A failed handshake (a refused certificate) just ends this connection.
                    let _ = relay(socket, acceptor, &upstream, &seen).await;
                });
            }
        });
        Self {
            address,
            client_certs,
            task,
        }
    }

    fn client_certs(&self) -> Vec<Option<Vec<u8>>> {
        self.client_certs.lock().unwrap().clone()
    }
}

async fn relay(
    mut socket: TcpStream,
    acceptor: tokio_rustls::TlsAcceptor,
    upstream: &str,
    seen: &Mutex<Vec<Option<Vec<u8>>>>,
) -> std::io::Result<()> {
    let mut request = [0u8; 8];
    socket.read_exact(&mut request).await?;
    if request != SSL_REQUEST {
        return Ok(());
    }
    socket.write_all(b"S").await?;
    let mut tls = acceptor.accept(socket).await?;
    let client_cert = tls
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|cert| cert.to_vec());
    seen.lock().unwrap().push(client_cert);
    let mut server = TcpStream::connect(upstream).await?;
    tokio::io::copy_bidirectional(&mut tls, &mut server).await?;
    Ok(())
}

/// The test server's `host:port`, user and database.
fn upstream(url: &str) -> (String, String, String) {
    let config: tokio_postgres::Config = common::without_tls(url).parse().unwrap();
    let host = match config.get_hosts().first() {
        Some(tokio_postgres::config::Host::Tcp(host)) => host.clone(),
        _ => "127.0.0.1".to_owned(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    (
        format!("{host}:{port}"),
        config.get_user().unwrap_or("postgres").to_owned(),
        config.get_dbname().unwrap_or("postgres").to_owned(),
    )
}

/// A port onto the factory's schema at `url`, built within [`BOUND`].
async fn build_at(factory: &PgFactory, url: String) -> photon_core::Result<PostgresStoragePort> {
    timeout(BOUND, factory.builder().url(url).build())
        .await
        .expect("the build answers within the bound")
}

/// A runtime on `port` that has published `payload` to `topic`, and what it appended.
async fn publish_one(
    port: PostgresStoragePort,
    topic: &str,
    payload: serde_json::Value,
) -> (Photon, photon_core::Appended) {
    let photon = Photon::builder().storage_port(port).build().unwrap();
    let appended = photon
        .publish(topic, None, json!(null), payload)
        .await
        .unwrap();
    (photon, appended)
}

/// A connection string to `localhost` through `proxy`, with `params`.
fn through(proxy: &Proxy, factory: &PgFactory, params: &str) -> (String, String) {
    let (_, user, database) = upstream(&factory.url);
    with_params(
        &format!(
            "postgres://{user}@localhost:{}/{database}",
            proxy.address.port()
        ),
        params,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_refuses_a_server_certificate_of_another_ca() {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ca = Authority::new(dir.path());
    let (url, _) = with_params(
        &common::without_tls(&factory.url),
        &format!(
            "sslmode=verify-full&sslrootcert={}&connect_timeout=10",
            ca.pem_file.display()
        ),
    );
    let refused = factory.builder().url(url).build().await.unwrap_err();
    let message = refused.to_string();
    assert!(
        message.contains("UnknownIssuer")
            && message.contains("not signed by a root of sslrootcert"),
        "{message}"
    );
    assert!(!refused.is_retryable(), "{refused:?}");
    // `require` with a root file verifies the chain, as libpq does.
    let (url, _) = with_params(
        &common::without_tls(&factory.url),
        &format!("sslmode=require&sslrootcert={}", ca.pem_file.display()),
    );
    let refused = factory.builder().url(url).build().await.unwrap_err();
    assert!(refused.to_string().contains("UnknownIssuer"), "{refused}");
}

/// A proxy that answers the SSLRequest with `N` (no TLS), then relays in clear text.
async fn clear_text_proxy(upstream: String) -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let mut request = [0u8; 8];
                socket.read_exact(&mut request).await?;
                let mut server = TcpStream::connect(upstream).await?;
                if request == SSL_REQUEST {
                    socket.write_all(b"N").await?;
                } else {
                    server.write_all(&request).await?;
                }
                tokio::io::copy_bidirectional(&mut socket, &mut server).await?;
                std::io::Result::Ok(())
            });
        }
    });
    (address, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefer_falls_back_to_clear_text_and_require_refuses_it() {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    let (server, user, database) = upstream(&factory.url);
    let (address, task) = clear_text_proxy(server).await;
    let base = format!("postgres://{user}@127.0.0.1:{}/{database}", address.port());
    let (url, name) = with_params(&base, "sslmode=prefer");
    let port = build_at(&factory, url).await.unwrap();
    let (photon, appended) = publish_one(port, "tls.clear", json!(1)).await;
    assert_eq!(appended.seq, 1);
    let sessions = ssl_of_sessions(&factory, &name).await;
    assert!(sessions.len() >= 3, "{sessions:?}");
    assert_eq!(
        sessions.iter().filter(|ssl| **ssl).count(),
        0,
        "{sessions:?}"
    );
    photon.shutdown().await.unwrap();

    let (url, _) = with_params(&base, "sslmode=require");
    let refused = build_at(&factory, url).await.unwrap_err();
    assert!(
        refused.to_string().contains("server does not support TLS"),
        "{refused}"
    );
    task.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_through_a_proxy_signed_by_the_root_succeeds_for_its_name_only() {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ca = Authority::new(dir.path());
    let (server, _, _) = upstream(&factory.url);
    let localhost = Proxy::start(
        ca.sign(
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        ),
        None,
        server.clone(),
    )
    .await;
    let params = format!("sslmode=verify-full&sslrootcert={}", ca.pem_file.display());
    let (url, _) = through(&localhost, &factory, &params);
    let port = build_at(&factory, url).await.unwrap();
    let (photon, appended) = publish_one(port, "tls.proxied", json!({ "through": "proxy" })).await;
    assert_eq!(appended.seq, 1);
    photon.shutdown().await.unwrap();
    assert!(!localhost.client_certs().is_empty());

    let elsewhere = Proxy::start(
        ca.sign(&["db.example"], ExtendedKeyUsagePurpose::ServerAuth),
        None,
        server,
    )
    .await;
    let (url, _) = through(&elsewhere, &factory, &params);
    let refused = build_at(&factory, url).await.unwrap_err();
    let message = refused.to_string();
    assert!(
        message.contains("certificate not valid for name \"localhost\"")
            && message.contains("db.example"),
        "{message}"
    );
    assert!(!refused.is_retryable(), "{refused:?}");

    // verify-ca checks the chain only: the same certificate for another name passes.
    let params = format!("sslmode=verify-ca&sslrootcert={}", ca.pem_file.display());
    let (url, _) = through(&elsewhere, &factory, &params);
    let port = build_at(&factory, url).await.unwrap();
    drop(port);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_presented_on_every_connection() {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ca = Authority::new(dir.path());
    let (server, _, _) = upstream(&factory.url);
    let proxy = Proxy::start(
        ca.sign(&["localhost"], ExtendedKeyUsagePurpose::ServerAuth),
        Some(ca.roots()),
        server,
    )
    .await;
    let (client_cert, client_pem, client_key) =
        ca.sign_pem(&["photon-client"], ExtendedKeyUsagePurpose::ClientAuth);
    let (cert_file, key_file) = (dir.path().join("client.pem"), dir.path().join("client.key"));
    std::fs::write(&cert_file, client_pem).unwrap();
    std::fs::write(&key_file, client_key.serialize_pem()).unwrap();
    let params = format!(
        "sslmode=verify-full&sslrootcert={}&sslcert={}&sslkey={}",
        ca.pem_file.display(),
        cert_file.display(),
        key_file.display()
    );
    let (url, _) = through(&proxy, &factory, &params);
    let port = build_at(&factory, url).await.unwrap();
    let (photon, _) = publish_one(port, "tls.clients", json!(1)).await;
    photon.shutdown().await.unwrap();
    let seen = proxy.client_certs();
    // The read pool's first connection, the listener and the writer's.
    assert!(seen.len() >= 3, "{} handshakes", seen.len());
    assert!(
        seen.iter()
            .all(|cert| cert.as_deref() == Some(client_cert.as_ref())),
        "a handshake without the client certificate"
    );

    // Without a client certificate the proxy refuses the handshake.
    let params = format!("sslmode=verify-full&sslrootcert={}", ca.pem_file.display());
    let (url, _) = through(&proxy, &factory, &params);
    let refused = build_at(&factory, url).await.unwrap_err();
    let message = refused.to_string();
    assert!(message.contains("sslcert and sslkey"), "{message}");
    assert!(!refused.is_retryable(), "{refused:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_certificate_files_are_config_errors_naming_parameter_and_path() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Authority::new(dir.path());
    let missing = dir.path().join("missing.key");
    let open = |params: String| async move {
        PostgresStoragePort::builder()
            .url(format!("postgres://postgres@127.0.0.1:5432/test?{params}"))
            .build()
            .await
            .unwrap_err()
    };
    let refused = open(format!(
        "sslmode=require&sslcert={}&sslkey={}",
        ca.pem_file.display(),
        missing.display()
    ))
    .await;
    assert!(
        matches!(&refused, PhotonError::Config { variable, value, .. }
            if variable == "sslkey" && value == &missing.display().to_string()),
        "{refused:?}"
    );
    let missing_root = dir.path().join("nowhere.pem");
    let refused = open(format!(
        "sslmode=verify-ca&sslrootcert={}",
        missing_root.display()
    ))
    .await;
    assert!(
        matches!(&refused, PhotonError::Config { variable, value, .. }
            if variable == "sslrootcert" && value == &missing_root.display().to_string()),
        "{refused:?}"
    );
    let not_pem = dir.path().join("empty.pem");
    std::fs::write(&not_pem, "no certificate here\n").unwrap();
    let refused = open(format!(
        "sslmode=verify-full&sslrootcert={}",
        not_pem.display()
    ))
    .await;
    assert_eq!(
        refused.to_string(),
        format!(
            "invalid configuration sslrootcert={:?}: expected a readable PEM file of \
             certificates (it holds no certificate)",
            not_pem.display().to_string()
        )
    );
}
