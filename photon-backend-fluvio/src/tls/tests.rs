//! Resolution and loading of the TLS settings.

// Without the `tls` feature only the refusals are tested.
#![cfg_attr(not(feature = "tls"), allow(dead_code))]

use std::path::Path;

use photon_core::config::Env;

use super::*;
use crate::config::{
    FluvioConfig, FluvioStoragePortBuilder, TLS_CA_ENV, TLS_CERT_ENV, TLS_DOMAIN_ENV, TLS_ENV,
    TLS_KEY_ENV,
};

#[path = "../../tests/common/certs.rs"]
mod certs;

fn resolve(builder: FluvioStoragePortBuilder, pairs: &[(&str, &str)]) -> Result<FluvioConfig> {
    builder.checked(&Env::from_pairs(pairs.iter().copied()))
}

fn refused(builder: FluvioStoragePortBuilder, pairs: &[(&str, &str)]) -> String {
    resolve(builder, pairs).unwrap_err().to_string()
}

fn text(path: &Path) -> String {
    path.display().to_string()
}

/// A fresh CA with server and client certificates, in a directory removed on drop.
fn cluster_certs() -> (tempfile::TempDir, certs::CertFiles) {
    let dir = tempfile::tempdir().unwrap();
    let files = certs::write_cluster_certs(dir.path(), certs::TEST_DOMAIN).unwrap();
    (dir, files)
}

#[cfg(feature = "tls")]
#[test]
fn tls_is_off_unless_switched_on_or_given_a_ca() {
    let (_dir, files) = cluster_certs();
    let (ca, cert, key) = (
        text(&files.ca),
        text(&files.client),
        text(&files.client_key),
    );
    assert_eq!(
        resolve(FluvioStoragePortBuilder::new(), &[]).unwrap().tls,
        None
    );
    let config = resolve(
        FluvioStoragePortBuilder::new(),
        &[(TLS_CA_ENV, &ca), (TLS_DOMAIN_ENV, "fluvio.local")],
    )
    .unwrap();
    assert_eq!(
        config.tls,
        Some(TlsConfig {
            ca: Some(files.ca.clone()),
            client_cert: None,
            domain: Some("fluvio.local".to_owned()),
        })
    );
    let config = resolve(
        FluvioStoragePortBuilder::new(),
        &[
            (TLS_CA_ENV, &ca),
            (TLS_CERT_ENV, &cert),
            (TLS_KEY_ENV, &key),
            (ENDPOINT_FOR_DOMAIN.0, ENDPOINT_FOR_DOMAIN.1),
        ],
    )
    .unwrap();
    assert_eq!(
        config.tls,
        Some(TlsConfig {
            ca: Some(files.ca.clone()),
            client_cert: Some((files.client.clone(), files.client_key.clone())),
            domain: None,
        })
    );
    let built = FluvioStoragePortBuilder::new()
        .tls_ca(&files.ca)
        .tls_client_cert(&files.client, &files.client_key)
        .tls_domain("fluvio.local");
    assert_eq!(
        resolve(built, &[]).unwrap().tls,
        Some(TlsConfig {
            ca: Some(files.ca.clone()),
            client_cert: Some((files.client.clone(), files.client_key.clone())),
            domain: Some("fluvio.local".to_owned()),
        })
    );
}

/// An endpoint whose host can be the TLS domain.
const ENDPOINT_FOR_DOMAIN: (&str, &str) = (crate::config::ENDPOINT_ENV, "fluvio.local:9003");

#[cfg(feature = "tls")]
#[test]
fn tls_on_without_a_ca_trusts_the_system_roots() {
    let config = resolve(
        FluvioStoragePortBuilder::new(),
        &[(TLS_ENV, "on"), ENDPOINT_FOR_DOMAIN],
    )
    .unwrap();
    assert_eq!(config.tls, Some(TlsConfig::default()));
    let config = resolve(
        FluvioStoragePortBuilder::new().tls(true),
        &[ENDPOINT_FOR_DOMAIN],
    )
    .unwrap();
    assert_eq!(config.tls, Some(TlsConfig::default()));
}

#[test]
fn tls_settings_without_tls_are_refused() {
    assert_eq!(
        refused(
            FluvioStoragePortBuilder::new(),
            &[(TLS_ENV, "off"), (TLS_CA_ENV, "/etc/ca.pem")]
        ),
        "invalid configuration PHOTON_FLUVIO_TLS_CA=\"/etc/ca.pem\": expected no TLS \
         setting while PHOTON_FLUVIO_TLS=off (or TLS on)"
    );
    assert_eq!(
        refused(
            FluvioStoragePortBuilder::new().tls(false),
            &[(TLS_DOMAIN_ENV, "fluvio.local")]
        ),
        "invalid configuration PHOTON_FLUVIO_TLS_DOMAIN=\"fluvio.local\": expected no \
         TLS setting while tls=off (or TLS on)"
    );
    assert_eq!(
        refused(
            FluvioStoragePortBuilder::new(),
            &[(TLS_CERT_ENV, "/c.pem"), (TLS_KEY_ENV, "/k.pem")]
        ),
        "invalid configuration PHOTON_FLUVIO_TLS_CERT=\"/c.pem\": expected \
         PHOTON_FLUVIO_TLS_CA as well (or PHOTON_FLUVIO_TLS=on): TLS is off without a CA"
    );
    assert_eq!(
        refused(
            FluvioStoragePortBuilder::new().tls_domain("fluvio.local"),
            &[]
        ),
        "invalid configuration tls_domain=\"fluvio.local\": expected PHOTON_FLUVIO_TLS_CA \
         as well (or PHOTON_FLUVIO_TLS=on): TLS is off without a CA"
    );
}

#[test]
fn a_certificate_needs_its_key() {
    let on = (TLS_ENV, "on");
    assert_eq!(
        refused(
            FluvioStoragePortBuilder::new(),
            &[on, (TLS_CERT_ENV, "/c.pem")]
        ),
        "invalid configuration PHOTON_FLUVIO_TLS_KEY=\"\": expected the key file of \
         PHOTON_FLUVIO_TLS_CERT=/c.pem (both or neither)"
    );
    assert_eq!(
        refused(
            FluvioStoragePortBuilder::new(),
            &[on, (TLS_KEY_ENV, "/k.pem")]
        ),
        "invalid configuration PHOTON_FLUVIO_TLS_CERT=\"\": expected the certificate file \
         of PHOTON_FLUVIO_TLS_KEY=/k.pem (both or neither)"
    );
}

#[cfg(feature = "tls")]
#[test]
fn unreadable_or_invalid_pem_names_the_setting_and_the_file() {
    let (dir, files) = cluster_certs();
    let missing = text(&dir.path().join("missing.pem"));
    let garbage = dir.path().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate\n").unwrap();
    let garbage = text(&garbage);
    let domain = (TLS_DOMAIN_ENV, "fluvio.local");
    let (cert, key) = (text(&files.client), text(&files.client_key));
    assert_eq!(
        refused(
            FluvioStoragePortBuilder::new(),
            &[(TLS_CA_ENV, &missing), domain]
        ),
        format!(
            "invalid configuration PHOTON_FLUVIO_TLS_CA={missing:?}: expected a readable \
             PEM file of CA certificates (No such file or directory (os error 2))"
        )
    );
    assert_eq!(
        refused(
            FluvioStoragePortBuilder::new(),
            &[(TLS_CA_ENV, &garbage), domain]
        ),
        format!(
            "invalid configuration PHOTON_FLUVIO_TLS_CA={garbage:?}: expected a PEM file of \
             CA certificates (it holds no CERTIFICATE block)"
        )
    );
    assert_eq!(
        refused(
            FluvioStoragePortBuilder::new()
                .tls_ca(&missing)
                .tls_domain("fluvio.local"),
            &[]
        ),
        format!(
            "invalid configuration tls_ca={missing:?}: expected a readable PEM file of CA \
             certificates (No such file or directory (os error 2))"
        )
    );
    let ca = text(&files.ca);
    assert_eq!(
        refused(
            FluvioStoragePortBuilder::new(),
            &[
                (TLS_CA_ENV, &ca),
                domain,
                (TLS_CERT_ENV, &garbage),
                (TLS_KEY_ENV, &key)
            ]
        ),
        format!(
            "invalid configuration PHOTON_FLUVIO_TLS_CERT={garbage:?}: expected a PEM file \
             of client certificate (it holds no CERTIFICATE block)"
        )
    );
    assert_eq!(
        refused(
            FluvioStoragePortBuilder::new(),
            &[
                (TLS_CA_ENV, &ca),
                domain,
                (TLS_CERT_ENV, &cert),
                (TLS_KEY_ENV, &cert)
            ]
        ),
        format!(
            "invalid configuration PHOTON_FLUVIO_TLS_KEY={cert:?}: expected a PEM file of a \
             private key (PKCS#8, PKCS#1 or SEC1) (no items found)"
        )
    );
    // The key of another certificate.
    let server_key = text(&files.server_key);
    assert_eq!(
        refused(
            FluvioStoragePortBuilder::new(),
            &[
                (TLS_CA_ENV, &ca),
                domain,
                (TLS_CERT_ENV, &cert),
                (TLS_KEY_ENV, &server_key)
            ]
        ),
        format!(
            "invalid configuration PHOTON_FLUVIO_TLS_KEY={server_key:?}: expected the \
             private key of PHOTON_FLUVIO_TLS_CERT={cert} (it is the key of another certificate)"
        )
    );
    // A deserialized config names its fields.
    let config: FluvioConfig = serde_json::from_str(&format!(
        r#"{{"endpoint": "fluvio.local:9003", "tls": {{"ca": {missing:?}}}}}"#
    ))
    .unwrap();
    assert_eq!(
        config.validate().unwrap_err().to_string(),
        format!(
            "invalid configuration tls.ca={missing:?}: expected a readable PEM file of CA \
             certificates (No such file or directory (os error 2))"
        )
    );
    let config: FluvioConfig = serde_json::from_str(&format!(
        r#"{{"endpoint": "127.0.0.1:9003", "tls": {{"ca": {ca:?},
             "client_cert": [{cert:?}, {key:?}], "domain": "fluvio.local"}}}}"#
    ))
    .unwrap();
    config.validate().unwrap();
    assert_eq!(
        config.tls.unwrap().client_cert,
        Some((cert.into(), key.into()))
    );
}

#[cfg(not(feature = "tls"))]
#[test]
fn tls_needs_the_feature() {
    assert_eq!(
        refused(
            FluvioStoragePortBuilder::new(),
            &[
                (TLS_CA_ENV, "/etc/ca.pem"),
                (TLS_DOMAIN_ENV, "fluvio.local")
            ]
        ),
        "invalid configuration PHOTON_FLUVIO_TLS_CA=\"/etc/ca.pem\": expected no TLS \
         setting: this build of photon-backend-fluvio lacks its `tls` feature"
    );
}

fn tls(domain: Option<&str>) -> TlsConfig {
    TlsConfig {
        domain: domain.map(str::to_owned),
        ..TlsConfig::default()
    }
}

#[test]
fn the_domain_is_set_or_the_endpoints_host() {
    let names = &FIELD_NAMES;
    assert_eq!(
        domain(&tls(Some("fluvio.local")), "127.0.0.1:9003", names).unwrap(),
        "fluvio.local"
    );
    assert_eq!(
        domain(&tls(None), "fluvio.example.com:9003", names).unwrap(),
        "fluvio.example.com"
    );
    assert_eq!(
        domain(&tls(None), "127.0.0.1:9003", names)
            .unwrap_err()
            .to_string(),
        "invalid configuration tls.domain=\"\": expected a DNS name that the SC's \
         certificate holds (each SPU's holds <spu name>.<domain>), not an IP address: \
         unset, it is the endpoint's host \"127.0.0.1\""
    );
    assert_eq!(
        domain(&tls(None), "[::1]:9003", names)
            .unwrap_err()
            .to_string(),
        "invalid configuration tls.domain=\"\": expected a DNS name that the SC's \
         certificate holds (each SPU's holds <spu name>.<domain>), not an IP address: \
         unset, it is the endpoint's host \"::1\""
    );
    for bad in ["10.0.0.5", "bad name", "-x.local", "a..b"] {
        assert_eq!(
            domain(&tls(Some(bad)), "127.0.0.1:9003", names)
                .unwrap_err()
                .to_string(),
            format!(
                "invalid configuration tls.domain={bad:?}: expected a DNS name that the \
                 SC's certificate holds (each SPU's holds <spu name>.<domain>), not an IP \
                 address"
            )
        );
    }
}
