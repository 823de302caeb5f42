//! Event headers: a map of strings carried with an event beside its actor and payload, and
//! the limits a publish checks them against.
//!
//! Headers hold what is about an event rather than in it: the W3C `traceparent` of the
//! publishing span (the `otel` feature of `photon-runtime` writes it), a request id, a
//! schema version. They travel inside the record's body, so every port keeps them as it
//! keeps the payload: in clear when no transport key is configured, and sealed together
//! with actor and payload when one is. No header stays visible in storage or on the wire
//! once a key is set; a reader without the key sees none of them.
//!
//! | rule | limit |
//! |---|---|
//! | name | 1 to [`MAX_HEADER_NAME_LEN`] (128) bytes of ASCII letters, digits, `-`, `_` and `.`; case is kept and matters |
//! | value | at most [`MAX_HEADER_VALUE_LEN`] (8 KiB) of UTF-8 without control characters |
//! | count | at most [`MAX_HEADERS`] (64) per event |
//! | total | names and values together at most [`MAX_HEADERS_BYTES`] (16 KiB) |
//!
//! Their encoded size also counts towards the port's `max_payload_bytes`, as actor and
//! payload do. A refused header is a [`PhotonError::InvalidHeader`] naming the topic, the
//! header and the rule, before anything is stored. Records stored before headers existed
//! read as events without headers.

use std::collections::BTreeMap;

use crate::error::{PhotonError, Result};

/// The headers of an event: names to values, kept in name order.
pub type Headers = BTreeMap<String, String>;

/// The W3C Trace Context header naming the span an event was published in.
pub const TRACEPARENT: &str = "traceparent";

/// Most headers one event may carry.
pub const MAX_HEADERS: usize = 64;

/// Longest header name, in bytes.
pub const MAX_HEADER_NAME_LEN: usize = 128;

/// Longest header value, in bytes (room for a W3C `baggage` header).
pub const MAX_HEADER_VALUE_LEN: usize = 8 * 1024;

/// Most bytes of names and values one event's headers may hold together.
pub const MAX_HEADERS_BYTES: usize = 16 * 1024;

/// Which rule a refused header broke.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HeaderProblem {
    /// The event carries more headers than allowed; the named header is the first one
    /// (in name order) beyond the limit.
    TooMany {
        /// Headers the event carries.
        count: usize,
        /// [`MAX_HEADERS`].
        limit: usize,
    },
    /// The name is empty or holds a byte other than ASCII letters, digits, `-`, `_`, `.`.
    InvalidName,
    /// The name is longer than allowed.
    NameTooLong {
        /// Its length in bytes.
        len: usize,
        /// [`MAX_HEADER_NAME_LEN`].
        limit: usize,
    },
    /// The value holds a control character (such as a line break).
    InvalidValue,
    /// The value is longer than allowed.
    ValueTooLong {
        /// Its length in bytes.
        len: usize,
        /// [`MAX_HEADER_VALUE_LEN`].
        limit: usize,
    },
    /// Names and values together pass the limit at the named header (in name order).
    TooLarge {
        /// Bytes of names and values of every header of the event.
        size: usize,
        /// [`MAX_HEADERS_BYTES`].
        limit: usize,
    },
}

impl std::fmt::Display for HeaderProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooMany { count, limit } => {
                write!(f, "{count} headers, over the limit of {limit} headers")
            }
            Self::InvalidName => {
                f.write_str("a header name is 1 or more ASCII letters, digits, '-', '_' or '.'")
            }
            Self::NameTooLong { len, limit } => {
                write!(f, "name of {len} bytes, over the limit of {limit} bytes")
            }
            Self::InvalidValue => f.write_str("a header value holds no control characters"),
            Self::ValueTooLong { len, limit } => {
                write!(f, "value of {len} bytes, over the limit of {limit} bytes")
            }
            Self::TooLarge { size, limit } => write!(
                f,
                "headers of {size} bytes together, over the limit of {limit} bytes"
            ),
        }
    }
}

/// Checks an event's headers against the rules in the [module docs](self).
///
/// # Errors
/// [`PhotonError::InvalidHeader`] naming `topic`, the first header (in name order) that
/// breaks a rule, and the rule.
///
/// # Examples
/// ```
/// use photon_core::headers::{validate_headers, HeaderProblem, Headers, MAX_HEADER_VALUE_LEN};
/// use photon_core::PhotonError;
///
/// let mut headers = Headers::from([("request-id".to_owned(), "r-7".to_owned())]);
/// assert!(validate_headers("orders", &headers).is_ok());
/// headers.insert("note".into(), "x".repeat(MAX_HEADER_VALUE_LEN + 1));
/// match validate_headers("orders", &headers) {
///     Err(PhotonError::InvalidHeader { header, problem: HeaderProblem::ValueTooLong { limit, .. }, .. }) => {
///         assert_eq!((header.as_str(), limit), ("note", MAX_HEADER_VALUE_LEN));
///     }
///     other => panic!("{other:?}"),
/// }
/// ```
pub fn validate_headers(topic: &str, headers: &Headers) -> Result<()> {
    let refuse = |header: &str, problem| PhotonError::InvalidHeader {
        topic: topic.to_owned(),
        header: header.to_owned(),
        problem,
    };
    if let Some(beyond) = headers.keys().nth(MAX_HEADERS) {
        return Err(refuse(
            beyond,
            HeaderProblem::TooMany {
                count: headers.len(),
                limit: MAX_HEADERS,
            },
        ));
    }
    let mut size = 0usize;
    for (name, value) in headers {
        if let Some(problem) = name_problem(name).or_else(|| value_problem(value)) {
            return Err(refuse(name, problem));
        }
        size += name.len() + value.len();
        if size > MAX_HEADERS_BYTES {
            let total = headers.iter().map(|(n, v)| n.len() + v.len()).sum();
            return Err(refuse(
                name,
                HeaderProblem::TooLarge {
                    size: total,
                    limit: MAX_HEADERS_BYTES,
                },
            ));
        }
    }
    Ok(())
}

fn name_problem(name: &str) -> Option<HeaderProblem> {
    if name.len() > MAX_HEADER_NAME_LEN {
        return Some(HeaderProblem::NameTooLong {
            len: name.len(),
            limit: MAX_HEADER_NAME_LEN,
        });
    }
    let allowed = |byte: u8| byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.');
    (name.is_empty() || !name.bytes().all(allowed)).then_some(HeaderProblem::InvalidName)
}

fn value_problem(value: &str) -> Option<HeaderProblem> {
    if value.len() > MAX_HEADER_VALUE_LEN {
        return Some(HeaderProblem::ValueTooLong {
            len: value.len(),
            limit: MAX_HEADER_VALUE_LEN,
        });
    }
    value
        .chars()
        .any(char::is_control)
        .then_some(HeaderProblem::InvalidValue)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(headers: &Headers) -> (String, HeaderProblem) {
        match validate_headers("t", headers) {
            Err(PhotonError::InvalidHeader {
                topic,
                header,
                problem,
            }) => {
                assert_eq!(topic, "t");
                (header, problem)
            }
            other => panic!("expected InvalidHeader, got {other:?}"),
        }
    }

    fn one(name: &str, value: &str) -> Headers {
        Headers::from([(name.to_owned(), value.to_owned())])
    }

    #[test]
    fn names_and_values_within_the_rules_pass() {
        let mut headers = one(
            TRACEPARENT,
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        );
        headers.insert("X-Request_Id.v2".into(), "r-1 ü 東京 ✓".into());
        headers.insert(
            "n".repeat(MAX_HEADER_NAME_LEN),
            "v".repeat(MAX_HEADER_VALUE_LEN),
        );
        headers.insert("empty".into(), String::new());
        assert!(validate_headers("t", &headers).is_ok());
        assert!(validate_headers("t", &Headers::new()).is_ok());
    }

    #[test]
    fn bad_names_and_values_name_the_header_and_the_rule() {
        for name in ["", "with space", "colon:", "ünïcode", "new\nline"] {
            assert_eq!(
                refused(&one(name, "v")),
                (name.to_owned(), HeaderProblem::InvalidName),
                "{name:?}"
            );
        }
        let long = "n".repeat(MAX_HEADER_NAME_LEN + 1);
        assert_eq!(
            refused(&one(&long, "v")),
            (
                long.clone(),
                HeaderProblem::NameTooLong {
                    len: MAX_HEADER_NAME_LEN + 1,
                    limit: MAX_HEADER_NAME_LEN
                }
            )
        );
        for value in ["a\r\nb", "tab\there", "nul\0", "del\u{7f}"] {
            assert_eq!(
                refused(&one("k", value)),
                ("k".to_owned(), HeaderProblem::InvalidValue),
                "{value:?}"
            );
        }
        assert_eq!(
            refused(&one("k", &"v".repeat(MAX_HEADER_VALUE_LEN + 1))),
            (
                "k".to_owned(),
                HeaderProblem::ValueTooLong {
                    len: MAX_HEADER_VALUE_LEN + 1,
                    limit: MAX_HEADER_VALUE_LEN
                }
            )
        );
    }

    #[test]
    fn count_and_total_limits_name_the_header_past_them() {
        let many: Headers = (0..=MAX_HEADERS)
            .map(|i| (format!("h{i:03}"), "v".to_owned()))
            .collect();
        assert_eq!(
            refused(&many),
            (
                format!("h{MAX_HEADERS:03}"),
                HeaderProblem::TooMany {
                    count: MAX_HEADERS + 1,
                    limit: MAX_HEADERS
                }
            )
        );
        let at_limit: Headers = (0..MAX_HEADERS)
            .map(|i| (format!("h{i:03}"), "v".to_owned()))
            .collect();
        assert!(validate_headers("t", &at_limit).is_ok());
        // 16 KiB exactly fits; one byte more is refused at the header that passes it.
        let value = "v".repeat(MAX_HEADER_VALUE_LEN);
        let mut large = one("a", &value);
        large.insert(
            "b".into(),
            "v".repeat(MAX_HEADERS_BYTES - 2 - MAX_HEADER_VALUE_LEN),
        );
        assert!(validate_headers("t", &large).is_ok());
        large.insert(
            "b".into(),
            "v".repeat(MAX_HEADERS_BYTES - 1 - MAX_HEADER_VALUE_LEN),
        );
        large.insert("c".into(), String::new());
        assert_eq!(
            refused(&large),
            (
                "b".to_owned(),
                HeaderProblem::TooLarge {
                    size: MAX_HEADERS_BYTES + 2,
                    limit: MAX_HEADERS_BYTES
                }
            )
        );
        let text = PhotonError::InvalidHeader {
            topic: "orders".into(),
            header: "c".into(),
            problem: HeaderProblem::TooLarge {
                size: 24579,
                limit: MAX_HEADERS_BYTES,
            },
        }
        .to_string();
        assert_eq!(
            text,
            "header \"c\" of an event for topic \"orders\": headers of 24579 bytes together, over the limit of 16384 bytes"
        );
    }
}
