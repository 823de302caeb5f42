//! TLS to the cluster: the files and name of a [`TlsConfig`] read into the port's TLS
//! connector (feature `tls`), with errors that name the setting and the file.
//!
//! A refused setting is named as the caller gave it: its variable when it came from the
//! environment (`PHOTON_FLUVIO_TLS_CA`), else its builder setter or config field
//! ([`TlsNames`]).

use photon_core::{PhotonError, Result};

use crate::config::TlsConfig;

/// What each TLS setting is called in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TlsNames {
    /// The switch (`tls`, `PHOTON_FLUVIO_TLS`).
    pub(crate) on: &'static str,
    /// The CA file.
    pub(crate) ca: &'static str,
    /// The client certificate file.
    pub(crate) cert: &'static str,
    /// The client key file.
    pub(crate) key: &'static str,
    /// The domain.
    pub(crate) domain: &'static str,
}

/// The names of the fields of [`crate::FluvioConfig::tls`].
pub(crate) const FIELD_NAMES: TlsNames = TlsNames {
    on: "tls",
    ca: "tls.ca",
    cert: "tls.client_cert",
    key: "tls.client_cert",
    domain: "tls.domain",
};

/// The name the SC's certificate is checked against: the configured domain, else the
/// endpoint's host. It must be a DNS name: each SPU is checked as `<spu name>.<domain>`.
///
/// # Errors
/// [`PhotonError::Config`] naming the domain setting when the name is not a DNS name.
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
pub(crate) fn domain(tls: &TlsConfig, endpoint: &str, names: &TlsNames) -> Result<String> {
    let (domain, given) = match &tls.domain {
        Some(domain) => (domain.trim().to_owned(), true),
        None => (endpoint_host(endpoint).to_owned(), false),
    };
    let is_dns_name = !domain.is_empty()
        && domain.parse::<std::net::IpAddr>().is_err()
        && dns_name(&format!("spu.{domain}"));
    if is_dns_name {
        return Ok(domain);
    }
    let expected = "a DNS name that the SC's certificate holds (each SPU's holds \
                    <spu name>.<domain>), not an IP address";
    Err(if given {
        PhotonError::config(names.domain, domain, expected)
    } else {
        PhotonError::config(
            names.domain,
            "",
            format!("{expected}: unset, it is the endpoint's host {domain:?}"),
        )
    })
}

/// The host of `host:port` (without the brackets of an IPv6 address).
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
fn endpoint_host(endpoint: &str) -> &str {
    let host = endpoint
        .trim()
        .rsplit_once(':')
        .map_or(endpoint.trim(), |(host, _)| host);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// Whether `name` is a DNS name rustls accepts as a server name.
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
fn dns_name(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// The connector of `tls`: reads its files and checks its domain.
///
/// # Errors
/// [`PhotonError::Config`] naming the setting (and the file) that cannot be used.
#[cfg(feature = "tls")]
pub(crate) fn connector(
    tls: &TlsConfig,
    endpoint: &str,
    names: &TlsNames,
) -> Result<fluvio_future::net::DomainConnector> {
    let domain = domain(tls, endpoint, names)?;
    let config = pem::client_config(tls, names)?;
    Ok(crate::socket::tls_connector(config, domain))
}

/// Refuses TLS in a build without the `tls` feature: connecting in plain text instead would
/// leak what the settings meant to protect.
///
/// # Errors
/// Always [`PhotonError::Config`] naming the setting that asked for TLS.
#[cfg(not(feature = "tls"))]
pub(crate) fn connector(
    tls: &TlsConfig,
    _endpoint: &str,
    names: &TlsNames,
) -> Result<fluvio_future::net::DomainConnector> {
    let (variable, value) = match &tls.ca {
        Some(ca) => (names.ca, ca.display().to_string()),
        None => (names.on, "on".to_owned()),
    };
    Err(PhotonError::config(
        variable,
        value,
        "no TLS setting: this build of photon-backend-fluvio lacks its `tls` feature",
    ))
}

#[cfg(feature = "tls")]
mod pem {
    use std::path::Path;
    use std::sync::Arc;

    use futures_rustls::rustls::pki_types::pem::PemObject;
    use futures_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    use futures_rustls::rustls::{ClientConfig, Error as TlsError, RootCertStore};
    use photon_core::{PhotonError, Result};

    use super::TlsNames;
    use crate::config::{TlsConfig, TLS_CA_ENV};

    /// The rustls client configuration of `tls` on the `ring` provider.
    pub(super) fn client_config(tls: &TlsConfig, names: &TlsNames) -> Result<ClientConfig> {
        let roots = match &tls.ca {
            Some(path) => ca_roots(path, names.ca)?,
            None => system_roots(names.on)?,
        };
        let provider = futures_rustls::rustls::crypto::ring::default_provider();
        let builder = ClientConfig::builder_with_provider(Arc::new(provider))
            .with_safe_default_protocol_versions()
            .map_err(|err| PhotonError::config(names.on, "on", format!("TLS 1.2 or 1.3 ({err})")))?
            .with_root_certificates(roots);
        let Some((cert, key)) = &tls.client_cert else {
            return Ok(builder.with_no_client_auth());
        };
        let chain = certificates(cert, names.cert, "client certificate")?;
        let private = private_key(key, names.key)?;
        builder
            .with_client_auth_cert(chain, private)
            .map_err(|err| {
                let why = match err {
                    TlsError::InconsistentKeys(_) => {
                        "it is the key of another certificate".to_owned()
                    }
                    other => other.to_string(),
                };
                PhotonError::config(
                    names.key,
                    key.display().to_string(),
                    format!(
                        "the private key of {}={} ({why})",
                        names.cert,
                        cert.display()
                    ),
                )
            })
    }

    fn ca_roots(path: &Path, variable: &str) -> Result<RootCertStore> {
        let mut roots = RootCertStore::empty();
        for cert in certificates(path, variable, "CA certificates")? {
            roots.add(cert).map_err(|err| {
                PhotonError::config(
                    variable,
                    path.display().to_string(),
                    format!("a PEM file of CA certificates ({err})"),
                )
            })?;
        }
        Ok(roots)
    }

    fn system_roots(variable: &str) -> Result<RootCertStore> {
        let mut roots = RootCertStore::empty();
        let found = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(found.certs);
        if roots.is_empty() {
            return Err(PhotonError::config(
                variable,
                "on",
                format!(
                    "system root certificates, but none could be loaded ({} errors); \
                     set {TLS_CA_ENV}",
                    found.errors.len()
                ),
            ));
        }
        Ok(roots)
    }

    fn read(path: &Path, variable: &str, what: &str) -> Result<Vec<u8>> {
        std::fs::read(path).map_err(|err| {
            PhotonError::config(
                variable,
                path.display().to_string(),
                format!("a readable PEM file of {what} ({err})"),
            )
        })
    }

    fn certificates(
        path: &Path,
        variable: &str,
        what: &str,
    ) -> Result<Vec<CertificateDer<'static>>> {
        let pem = read(path, variable, what)?;
        let refuse = |why: String| {
            PhotonError::config(
                variable,
                path.display().to_string(),
                format!("a PEM file of {what} ({why})"),
            )
        };
        let certs = CertificateDer::pem_slice_iter(&pem)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|err| refuse(err.to_string()))?;
        if certs.is_empty() {
            return Err(refuse("it holds no CERTIFICATE block".to_owned()));
        }
        Ok(certs)
    }

    fn private_key(path: &Path, variable: &str) -> Result<PrivateKeyDer<'static>> {
        let what = "a private key (PKCS#8, PKCS#1 or SEC1)";
        let pem = read(path, variable, what)?;
        PrivateKeyDer::from_pem_slice(&pem).map_err(|err| {
            PhotonError::config(
                variable,
                path.display().to_string(),
                format!("a PEM file of {what} ({err})"),
            )
        })
    }
}

#[cfg(test)]
mod tests;
