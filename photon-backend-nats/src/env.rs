//! The NATS port's own kinds of setting (server URLs, the stream prefix) for its settings
//! table in `config.rs` (`photon_core::settings!`), the check across settings (a client
//! certificate and its key go together), the redaction of URL secrets; the tests of the
//! table at work.

use photon_core::config::TextRule;
use photon_core::{PhotonError, Result};

use crate::config::{TlsConfig, TLS_CERT_FILE_ENV, TLS_KEY_FILE_ENV};

/// Server URLs, comma separated, none empty; shown without passwords or tokens in `Debug`
/// and in errors.
#[derive(Debug)]
pub enum ServerUrls {}

impl TextRule for ServerUrls {
    fn form() -> String {
        "server URLs, comma separated".to_owned()
    }
    fn check(name: &str, urls: &str) -> Result<()> {
        if urls.split(',').any(|part| part.trim().is_empty()) {
            return Err(PhotonError::config(
                name,
                redact_url(urls),
                "one or more server URLs, comma separated",
            ));
        }
        Ok(())
    }
    fn shown(text: &str) -> String {
        redact_url(text)
    }
}

/// A prefix of stream and subject names: 1 to 32 characters from `[A-Za-z0-9-]`.
#[derive(Debug)]
pub enum StreamPrefix {}

impl TextRule for StreamPrefix {
    fn form() -> String {
        "1 to 32 characters from `[A-Za-z0-9-]`".to_owned()
    }
    fn check(name: &str, prefix: &str) -> Result<()> {
        let accepted = (1..=32).contains(&prefix.len())
            && prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-');
        if accepted {
            Ok(())
        } else {
            Err(PhotonError::config(
                name,
                prefix,
                "1 to 32 characters from [A-Za-z0-9-]",
            ))
        }
    }
}

/// The URL list with any `user:password@` or `token@` part replaced by `***@`.
pub(crate) fn redact_url(url: &str) -> String {
    url.split(',')
        .map(|part| match (part.find("://"), part.rfind('@')) {
            (Some(scheme), Some(at)) if at > scheme => {
                format!("{}***{}", &part[..scheme + 3], &part[at..])
            }
            (None, Some(at)) => format!("***{}", &part[at..]),
            _ => part.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A client certificate needs its key, and a key its certificate.
pub(crate) fn check_client_cert(tls: &TlsConfig) -> Result<()> {
    match (&tls.cert_file, &tls.key_file) {
        (Some(cert), None) => Err(PhotonError::config(
            "tls.key_file",
            "",
            format!(
                "a key file ({TLS_KEY_FILE_ENV}) to go with the certificate {}",
                cert.display()
            ),
        )),
        (None, Some(key)) => Err(PhotonError::config(
            "tls.cert_file",
            "",
            format!(
                "a certificate file ({TLS_CERT_FILE_ENV}) to go with the key {}",
                key.display()
            ),
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::path::PathBuf;
    use std::time::Duration;

    use crate::config::*;
    use photon_core::config::Env;

    fn resolve(builder: NatsStoragePortBuilder, pairs: &[(&str, &str)]) -> Result<NatsConfig> {
        builder.checked(&Env::from_pairs(pairs.iter().copied()))
    }

    fn refused(pairs: &[(&str, &str)]) -> String {
        let err = resolve(NatsStoragePortBuilder::new(), pairs).unwrap_err();
        assert!(matches!(err, PhotonError::Config { .. }), "{err}");
        err.to_string()
    }

    #[test]
    fn defaults_without_env() {
        assert_eq!(
            resolve(NatsStoragePortBuilder::new(), &[]).unwrap(),
            NatsConfig::default()
        );
    }

    #[test]
    fn env_values_are_parsed() {
        let config = resolve(
            NatsStoragePortBuilder::new(),
            &[
                (URL_ENV, "nats://a:1,nats://b:2"),
                (PREFIX_ENV, "Shop-1"),
                (REPLICAS_ENV, "3"),
                (RETENTION_MAX_AGE_ENV, "7d"),
                (RETENTION_MAX_BYTES_ENV, "2GiB"),
                (RETENTION_DEAD_LETTERS_ENV, "on"),
                (SHARDS_ENV, "4"),
                (SYNC_ACK_ENV, "False"),
                (MAX_IN_FLIGHT_ENV, "1024"),
                (REPLAY_CURSOR_ENV, "tail_only"),
                (CONNECT_TIMEOUT_ENV, "250ms"),
                (CREDENTIALS_FILE_ENV, "/x.creds"),
                (TLS_REQUIRED_ENV, "yes"),
                (TLS_CA_FILE_ENV, "/ca.pem"),
                (TLS_CERT_FILE_ENV, "/c.pem"),
                (TLS_KEY_FILE_ENV, "/k.pem"),
            ],
        )
        .unwrap();
        assert_eq!(config.url, "nats://a:1,nats://b:2");
        assert_eq!(config.prefix, "Shop-1");
        assert_eq!(config.replicas, 3);
        assert_eq!(config.retention_max_age, Some(Duration::from_secs(604_800)));
        assert_eq!(config.retention_max_bytes, Some(2 << 30));
        assert!(config.retention_dead_letters);
        assert_eq!(config.shards, 4);
        assert!(!config.sync_ack);
        assert_eq!(config.max_in_flight, 1024);
        assert_eq!(config.replay_cursor, ReplayCursor::TailOnly);
        assert_eq!(config.connect_timeout, Duration::from_millis(250));
        assert_eq!(config.credentials_file, Some(PathBuf::from("/x.creds")));
        assert!(config.tls.required);
        assert_eq!(config.tls.ca_file, Some(PathBuf::from("/ca.pem")));
        assert_eq!(config.tls.cert_file, Some(PathBuf::from("/c.pem")));
        assert_eq!(config.tls.key_file, Some(PathBuf::from("/k.pem")));
    }

    #[test]
    fn deprecated_names_still_work() {
        let config = resolve(
            NatsStoragePortBuilder::new(),
            &[
                ("PHOTON_NATS_STREAM_PREFIX", "old"),
                ("PHOTON_NATS_STREAM_SHARDS", "2"),
                ("PHOTON_NATS_MAX_AGE", "90m"),
                ("PHOTON_NATS_MAX_BYTES", "2g"),
            ],
        )
        .unwrap();
        assert_eq!(config.prefix, "old");
        assert_eq!(config.shards, 2);
        assert_eq!(config.retention_max_age, Some(Duration::from_secs(5400)));
        assert_eq!(config.retention_max_bytes, Some(2 << 30));
        assert_eq!(
            refused(&[(SHARDS_ENV, "4"), ("PHOTON_NATS_STREAM_SHARDS", "2")]),
            "invalid configuration PHOTON_NATS_SHARDS=\"4\": expected the same value as \
             PHOTON_NATS_STREAM_SHARDS=\"2\", an older name of this setting (or unset it)"
        );
    }

    #[test]
    fn zero_retention_is_no_limit() {
        let config = resolve(
            NatsStoragePortBuilder::new(),
            &[(RETENTION_MAX_AGE_ENV, "0"), (RETENTION_MAX_BYTES_ENV, "0")],
        )
        .unwrap();
        assert_eq!(
            (config.retention_max_age, config.retention_max_bytes),
            (None, None)
        );
    }

    #[test]
    fn builder_wins_over_env() {
        let builder = NatsStoragePortBuilder::new()
            .shards(2)
            .sync_ack(true)
            .url("nats://x:9");
        let config = resolve(
            builder,
            &[
                (SHARDS_ENV, "8"),
                (SYNC_ACK_ENV, "false"),
                (URL_ENV, "nats://y:1"),
            ],
        )
        .unwrap();
        assert_eq!(
            (config.shards, config.sync_ack, config.url.as_str()),
            (2, true, "nats://x:9")
        );
    }

    #[test]
    fn bad_values_name_variable_and_accepted_values() {
        let cases = [
            (REPLICAS_ENV, "0", "expected an integer from 1 to 5"),
            (REPLICAS_ENV, "three", "expected an integer from 1 to 5"),
            (SHARDS_ENV, "65", "expected an integer from 1 to 64"),
            (
                "PHOTON_NATS_STREAM_SHARDS",
                "0",
                "expected an integer from 1 to 64",
            ),
            (
                MAX_IN_FLIGHT_ENV,
                "-1",
                "expected an integer from 1 to 65536",
            ),
            (
                RETENTION_MAX_AGE_ENV,
                "10",
                "expected a duration with a unit",
            ),
            (
                "PHOTON_NATS_MAX_AGE",
                "7 fortnights",
                "expected a duration with a unit",
            ),
            (RETENTION_MAX_BYTES_ENV, "lots", "expected a size in bytes"),
            (SYNC_ACK_ENV, "maybe", "expected true or false"),
            (TLS_REQUIRED_ENV, "2", "expected true or false"),
            (
                REPLAY_CURSOR_ENV,
                "beginning",
                "expected stream_seq or tail_only",
            ),
            (
                PREFIX_ENV,
                "a.b",
                "expected 1 to 32 characters from [A-Za-z0-9-]",
            ),
            (
                "PHOTON_NATS_STREAM_PREFIX",
                "under_score",
                "expected 1 to 32 characters from [A-Za-z0-9-]",
            ),
            (
                URL_ENV,
                "nats://a:1,,nats://b:2",
                "expected one or more server URLs, comma separated",
            ),
            (
                CONNECT_TIMEOUT_ENV,
                "0",
                "expected a duration greater than zero",
            ),
        ];
        for (name, value, expected) in cases {
            let message = refused(&[(name, value)]);
            let prefix = format!("invalid configuration {name}={value:?}: {expected}");
            assert!(message.starts_with(&prefix), "{message}");
        }
    }

    #[test]
    fn builder_values_name_their_field() {
        let err = resolve(NatsStoragePortBuilder::new().shards(0), &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid configuration shards=\"0\": expected an integer from 1 to 64"
        );
        let err = resolve(NatsStoragePortBuilder::new().prefix("a b"), &[]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid configuration prefix=\"a b\": expected 1 to 32 characters from [A-Za-z0-9-]"
        );
    }

    #[test]
    fn half_a_client_certificate_is_refused() {
        assert!(refused(&[(TLS_CERT_FILE_ENV, "/c.pem")]).contains(TLS_KEY_FILE_ENV));
        assert!(refused(&[(TLS_KEY_FILE_ENV, "/k.pem")]).contains(TLS_CERT_FILE_ENV));
    }

    #[test]
    fn the_configuration_page_holds_the_settings_table() {
        let page = std::path::Path::new(
            &std::env::var("CARGO_MANIFEST_DIR").expect("set by the test runner"),
        )
        .join("../docs/configuration.md");
        photon_core::config::assert_documented(&page, &NatsConfig::settings());
    }

    #[test]
    fn debug_hides_url_secrets() {
        let config = resolve(
            NatsStoragePortBuilder::new().url("nats://app:s3cret@a:4222,tls://tok3n@b:4222"),
            &[],
        )
        .unwrap();
        let printed = format!("{config:?}");
        assert!(
            !printed.contains("s3cret") && !printed.contains("tok3n"),
            "{printed}"
        );
        assert!(
            printed.contains("nats://***@a:4222,tls://***@b:4222"),
            "{printed}"
        );
        let err = resolve(
            NatsStoragePortBuilder::new().url("nats://u:s3cret@a:1,"),
            &[],
        )
        .unwrap_err();
        assert!(!err.to_string().contains("s3cret"), "{err}");
    }

    #[test]
    fn deserializes_in_the_dialect() {
        let config: NatsConfig = serde_json::from_str(
            r#"{"url": "nats://10.0.0.1:4222", "stream_prefix": "shop", "shards": 4,
                "retention_max_age": "7d", "retention_max_bytes": "10GiB",
                "retention_dead_letters": true, "sync_ack": "off", "max_in_flight": 64,
                "replay_cursor": "tail_only", "connect_timeout": "5s",
                "tls": {"required": "yes", "cert_file": "/c.pem", "key_file": "/k.pem"}}"#,
        )
        .unwrap();
        config.validate().unwrap();
        assert_eq!(config.url, "nats://10.0.0.1:4222");
        assert_eq!(config.prefix, "shop");
        assert_eq!(config.shards, 4);
        assert_eq!(config.retention_max_age, Some(Duration::from_secs(604_800)));
        assert_eq!(config.retention_max_bytes, Some(10 << 30));
        assert!(config.retention_dead_letters);
        assert!(!config.sync_ack);
        assert_eq!(config.max_in_flight, 64);
        assert_eq!(config.replay_cursor, ReplayCursor::TailOnly);
        assert_eq!(config.connect_timeout, Duration::from_secs(5));
        assert!(config.tls.required);
        assert_eq!(config.tls.cert_file, Some(PathBuf::from("/c.pem")));
        assert_eq!(config.replicas, 1);
        let bad = serde_json::from_str::<NatsConfig>(r#"{"shards": 100}"#).unwrap_err();
        assert!(
            bad.to_string().starts_with(
                "invalid configuration shards=\"100\": expected an integer from 1 to 64"
            ),
            "{bad}"
        );
        let half: NatsConfig = serde_json::from_str(r#"{"tls": {"cert_file": "/c.pem"}}"#).unwrap();
        assert!(half
            .validate()
            .unwrap_err()
            .to_string()
            .contains("tls.key_file"));
    }
}
