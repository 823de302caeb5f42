//! Certificates of a TLS test cluster, made with rcgen: a CA (named uniquely), a server certificate for the
//! SC and the SPUs (`<domain>`, `*.<domain>`, `localhost`, `127.0.0.1`) and a client
//! certificate, as PEM files. Shared by the TLS tests and the example `fluvio_tls_certs`
//! (which `scripts/fluvio-local.sh` runs).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// The domain of the test cluster's certificates: the SC holds it, each SPU
/// `<spu name>.<domain>` (two labels, so that `*.<domain>` is a valid wildcard).
pub const TEST_DOMAIN: &str = "fluvio.local";

/// The files [`write_cluster_certs`] writes.
#[derive(Debug, Clone)]
pub struct CertFiles {
    /// `ca.pem`: the CA certificate.
    pub ca: PathBuf,
    /// `server.pem`: the SC's and SPUs' certificate.
    pub server: PathBuf,
    /// `server-key.pem`: its key.
    pub server_key: PathBuf,
    /// `client.pem`: a client certificate of the CA.
    pub client: PathBuf,
    /// `client-key.pem`: its key.
    pub client_key: PathBuf,
}

/// Writes a fresh CA with a server and a client certificate into `dir` (created if
/// missing); the server certificate holds `domain` and `*.{domain}`.
pub fn write_cluster_certs(dir: &Path, domain: &str) -> Result<CertFiles, String> {
    let failed = |what: &str, err: &dyn std::fmt::Display| format!("{what}: {err}");
    std::fs::create_dir_all(dir).map_err(|err| failed("create the directory", &err))?;
    let ca_key = KeyPair::generate().map_err(|err| failed("CA key", &err))?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(|err| failed("CA", &err))?;
    // A name of its own: two test CAs never pass for each other by name.
    let made = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|err| failed("clock", &err))?;
    ca.distinguished_name.push(
        DnType::CommonName,
        format!("Photon test CA {}", made.as_nanos()),
    );
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca.self_signed(&ca_key).map_err(|err| failed("CA", &err))?;
    let issuer = Issuer::new(ca, ca_key);

    let names = vec![
        domain.to_owned(),
        format!("*.{domain}"),
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
    ];
    let mut server = CertificateParams::new(names).map_err(|err| failed("server", &err))?;
    server
        .distinguished_name
        .push(DnType::CommonName, domain.to_owned());
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let server_key = KeyPair::generate().map_err(|err| failed("server key", &err))?;
    let server_cert = server
        .signed_by(&server_key, &issuer)
        .map_err(|err| failed("server", &err))?;

    let mut client =
        CertificateParams::new(Vec::<String>::new()).map_err(|err| failed("client", &err))?;
    client
        .distinguished_name
        .push(DnType::CommonName, "photon-client");
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_key = KeyPair::generate().map_err(|err| failed("client key", &err))?;
    let client_cert = client
        .signed_by(&client_key, &issuer)
        .map_err(|err| failed("client", &err))?;

    let files = CertFiles {
        ca: dir.join("ca.pem"),
        server: dir.join("server.pem"),
        server_key: dir.join("server-key.pem"),
        client: dir.join("client.pem"),
        client_key: dir.join("client-key.pem"),
    };
    for (path, pem) in [
        (&files.ca, ca_cert.pem()),
        (&files.server, server_cert.pem()),
        (&files.server_key, server_key.serialize_pem()),
        (&files.client, client_cert.pem()),
        (&files.client_key, client_key.serialize_pem()),
    ] {
        std::fs::write(path, pem).map_err(|err| failed(&path.display().to_string(), &err))?;
    }
    Ok(files)
}
