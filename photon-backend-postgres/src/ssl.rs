//! The TLS parameters of a connection string (`sslmode`, `sslrootcert`, `sslcert`,
//! `sslkey`), read by Photon itself: the driver knows only `sslmode=disable`, `prefer` and
//! `require`, and refuses the other parameters. [`split`] takes them out of the string
//! (URL query or `key=value` form) and hands the driver the rest.

use std::path::PathBuf;

use photon_core::{PhotonError, Result};

/// What `sslmode` asks for (libpq's meanings; `allow` is not accepted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// Clear text only.
    Disable,
    /// TLS without certificate verification when the server offers it, else clear text.
    Prefer,
    /// TLS, without certificate verification (unless `sslrootcert` is given: then as
    /// `VerifyCa`).
    Require,
    /// TLS; the server's chain verified against the roots, its name not checked.
    VerifyCa,
    /// TLS; chain and name (the connection's host) verified.
    VerifyFull,
}

/// The values `sslmode` accepts.
pub(crate) const SSLMODE_VALUES: &str = "one of disable, prefer, require, verify-ca, verify-full";

impl SslMode {
    fn parse(value: &str) -> Result<Self> {
        match value {
            "disable" => Ok(Self::Disable),
            "prefer" => Ok(Self::Prefer),
            "require" => Ok(Self::Require),
            "verify-ca" => Ok(Self::VerifyCa),
            "verify-full" => Ok(Self::VerifyFull),
            other => Err(PhotonError::config("sslmode", other, SSLMODE_VALUES)),
        }
    }

    /// The name in the connection string.
    #[cfg(not(feature = "tls"))]
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }

    /// The driver's mode: it negotiates TLS; verification is Photon's connector's.
    pub(crate) fn driver(self) -> tokio_postgres::config::SslMode {
        match self {
            Self::Disable => tokio_postgres::config::SslMode::Disable,
            Self::Prefer => tokio_postgres::config::SslMode::Prefer,
            Self::Require | Self::VerifyCa | Self::VerifyFull => {
                tokio_postgres::config::SslMode::Require
            }
        }
    }
}

/// Where the trusted roots come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RootCert {
    /// The platform's certificate store (`sslrootcert=system`, or no `sslrootcert`).
    System,
    /// A PEM file of CA certificates.
    File(PathBuf),
}

/// The TLS settings of a connection string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SslSettings {
    /// `sslmode`; `prefer` when absent (as libpq).
    pub(crate) mode: SslMode,
    /// `sslrootcert`, when given.
    pub(crate) root_cert: Option<RootCert>,
    /// `sslcert`: the client certificate chain, a PEM file.
    pub(crate) cert: Option<PathBuf>,
    /// `sslkey`: the client certificate's private key, a PEM file.
    pub(crate) key: Option<PathBuf>,
}

/// A connection string taken apart: the TLS settings, and the rest for the driver.
#[derive(Debug)]
pub(crate) struct Split {
    pub(crate) ssl: SslSettings,
    /// The connection string without the TLS parameters.
    pub(crate) driver: String,
}

/// The parameters [`split`] takes out.
const SSL_PARAMETERS: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// Takes the TLS parameters out of `url` (URL or `key=value` form) and checks them.
///
/// # Errors
/// [`PhotonError::Config`] naming `sslmode` for a value outside [`SSLMODE_VALUES`] (or,
/// without the `tls` feature, one that needs TLS), naming `sslcert` or `sslkey` when one
/// is given without the other, and naming any of them without the `tls` feature.
pub(crate) fn split(url: &str) -> Result<Split> {
    let (pairs, driver) = if url.contains("://") {
        split_url(url)
    } else {
        split_key_values(url)
    };
    let find = |name: &str| {
        pairs
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
    };
    let mode = match find("sslmode") {
        Some(value) => SslMode::parse(&value)?,
        None => SslMode::Prefer,
    };
    let root_cert = find("sslrootcert").map(|value| match value.as_str() {
        "system" => RootCert::System,
        _ => RootCert::File(PathBuf::from(value)),
    });
    let cert = find("sslcert").map(PathBuf::from);
    let key = find("sslkey").map(PathBuf::from);
    match (&cert, &key) {
        (Some(_), None) => return Err(unpaired("sslkey", "sslcert")),
        (None, Some(_)) => return Err(unpaired("sslcert", "sslkey")),
        _ => {}
    }
    let ssl = SslSettings {
        mode,
        root_cert,
        cert,
        key,
    };
    without_tls_feature(&ssl, &pairs)?;
    Ok(Split { ssl, driver })
}

fn unpaired(missing: &str, given: &str) -> PhotonError {
    PhotonError::config(
        missing,
        "",
        format!("a PEM file, given together with {given} (a client certificate needs both)"),
    )
}

/// Without the `tls` feature only clear text can be had: refuses what needs TLS.
#[cfg(not(feature = "tls"))]
fn without_tls_feature(ssl: &SslSettings, pairs: &[(String, String)]) -> Result<()> {
    const WITHOUT: &str = "photon-backend-postgres was built without its `tls` feature";
    if !matches!(ssl.mode, SslMode::Disable | SslMode::Prefer) {
        return Err(PhotonError::config(
            "sslmode",
            ssl.mode.name(),
            format!("disable or prefer ({WITHOUT}, which every other sslmode needs)"),
        ));
    }
    if let Some((name, value)) = pairs
        .iter()
        .find(|(name, _)| SSL_PARAMETERS[1..].contains(&name.as_str()))
    {
        return Err(PhotonError::config(
            name.as_str(),
            value.as_str(),
            format!("no value ({WITHOUT}, which {name} needs)"),
        ));
    }
    Ok(())
}

#[cfg(feature = "tls")]
fn without_tls_feature(_: &SslSettings, _: &[(String, String)]) -> Result<()> {
    Ok(())
}

/// URL form: the TLS pairs of the query (percent-decoded), and the URL without them.
fn split_url(url: &str) -> (Vec<(String, String)>, String) {
    let Some((base, query)) = url.split_once('?') else {
        return (Vec::new(), url.to_owned());
    };
    let mut pairs = Vec::new();
    let mut kept = Vec::new();
    for part in query.split('&') {
        let (name, value) = part.split_once('=').unwrap_or((part, ""));
        let name = percent_decode(name);
        if SSL_PARAMETERS.contains(&name.as_str()) {
            pairs.push((name, percent_decode(value)));
        } else {
            kept.push(part);
        }
    }
    let driver = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    (pairs, driver)
}

/// `%XX` escapes and `+` of a URL query decoded; a malformed escape is kept as written.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|b| (*b as char).to_digit(16));
        match (bytes[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(high), Some(low)) => {
                // Two hex digits make at most 0xff: the cast keeps every bit.
                decoded.push((high * 16 + low) as u8);
                i += 3;
            }
            (b'+', _, _) => {
                decoded.push(b' ');
                i += 1;
            }
            (byte, _, _) => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

/// `key=value` form (values bare or single-quoted with `\` escapes, spaces allowed
/// around `=`): the TLS pairs (unquoted), and the string without them. A string the
/// driver cannot read is passed on whole, for the driver to refuse.
fn split_key_values(text: &str) -> (Vec<(String, String)>, String) {
    let mut pairs = Vec::new();
    let mut kept = Vec::new();
    let mut rest = text.trim_start();
    while !rest.is_empty() {
        let Some((name, value, raw, after)) = next_pair(rest) else {
            return (Vec::new(), text.to_owned());
        };
        if SSL_PARAMETERS.contains(&name) {
            pairs.push((name.to_owned(), value));
        } else {
            kept.push(format!("{name}={raw}"));
        }
        rest = after.trim_start();
    }
    (pairs, kept.join(" "))
}

/// One `key=value` pair at the start of `text`: the key, the unquoted value, the value as
/// written, and the text after it; `None` when it is malformed.
fn next_pair(text: &str) -> Option<(&str, String, &str, &str)> {
    let name_end = text.find(|c: char| c == '=' || c.is_whitespace())?;
    let name = &text[..name_end];
    let after_name = text[name_end..]
        .trim_start()
        .strip_prefix('=')?
        .trim_start();
    if let Some(quoted) = after_name.strip_prefix('\'') {
        let mut value = String::new();
        let mut chars = quoted.char_indices();
        while let Some((at, c)) = chars.next() {
            match c {
                '\\' => value.push(chars.next()?.1),
                '\'' => {
                    let raw_end = 1 + at + 1;
                    return Some((name, value, &after_name[..raw_end], &after_name[raw_end..]));
                }
                other => value.push(other),
            }
        }
        return None;
    }
    let end = after_name
        .find(char::is_whitespace)
        .unwrap_or(after_name.len());
    let raw = &after_name[..end];
    let mut value = String::new();
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        value.push(if c == '\\' { chars.next()? } else { c });
    }
    Some((name, value, raw, &after_name[end..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "tls")]
    #[test]
    fn url_form_loses_its_tls_parameters() {
        let split = split(
            "postgres://app@db:5432/events?sslmode=verify-full&application_name=x\
             &sslrootcert=%2Fetc%2Fca.pem&sslcert=/c.pem&sslkey=/k.pem",
        )
        .unwrap();
        assert_eq!(
            split.driver,
            "postgres://app@db:5432/events?application_name=x"
        );
        assert_eq!(split.ssl.mode, SslMode::VerifyFull);
        assert_eq!(
            split.ssl.root_cert,
            Some(RootCert::File(PathBuf::from("/etc/ca.pem")))
        );
        assert_eq!(split.ssl.cert, Some(PathBuf::from("/c.pem")));
        assert_eq!(split.ssl.key, Some(PathBuf::from("/k.pem")));
        let plain = super::split("postgres://app@db/events?sslmode=disable").unwrap();
        assert_eq!(plain.driver, "postgres://app@db/events");
        assert_eq!(plain.ssl.mode, SslMode::Disable);
    }

    #[cfg(feature = "tls")]
    #[test]
    fn key_value_form_loses_its_tls_parameters() {
        let split = split(
            "host=db user=app sslmode = verify-ca sslrootcert='/my certs/ca.pem' \
             password='it\\'s' dbname=events",
        )
        .unwrap();
        assert_eq!(
            split.driver,
            "host=db user=app password='it\\'s' dbname=events"
        );
        assert_eq!(split.ssl.mode, SslMode::VerifyCa);
        assert_eq!(
            split.ssl.root_cert,
            Some(RootCert::File(PathBuf::from("/my certs/ca.pem")))
        );
        let system = super::split("host=db sslrootcert=system").unwrap();
        assert_eq!(system.ssl.root_cert, Some(RootCert::System));
        assert_eq!(system.ssl.mode, SslMode::Prefer);
    }

    #[test]
    fn refused_values_name_the_parameter() {
        assert_eq!(
            split("postgres://db/x?sslmode=verify-all")
                .unwrap_err()
                .to_string(),
            format!("invalid configuration sslmode=\"verify-all\": expected {SSLMODE_VALUES}")
        );
        let unpaired = split("host=db sslcert=/c.pem").unwrap_err().to_string();
        assert!(
            unpaired.starts_with("invalid configuration sslkey=\"\""),
            "{unpaired}"
        );
    }

    #[cfg(not(feature = "tls"))]
    #[test]
    fn without_the_feature_only_clear_text_modes_are_accepted() {
        let refused = split("postgres://db/x?sslmode=require")
            .unwrap_err()
            .to_string();
        assert!(
            refused.starts_with("invalid configuration sslmode=\"require\"")
                && refused.contains("`tls` feature"),
            "{refused}"
        );
        assert!(split("postgres://db/x?sslmode=prefer").is_ok());
    }
}
