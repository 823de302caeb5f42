//! `--output`: text for people, JSON for scripts, and the exit code of each error.

use clap::ValueEnum;
use photon::PhotonError;
use serde_json::{json, Value};

/// How a command prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// Lines for people.
    Text,
    /// One JSON value per line (events as JSON lines), for scripts.
    Json,
}

impl Output {
    /// Prints `value` as one JSON line in JSON mode, else the text `text` makes.
    pub fn emit(self, value: &Value, text: impl FnOnce() -> String) {
        match self {
            Self::Json => println!("{value}"),
            Self::Text => println!("{}", text()),
        }
    }

    /// Reports a failed command on stderr (as a JSON object in JSON mode).
    pub fn error(self, err: &PhotonError) {
        match self {
            Self::Json => eprintln!(
                "{}",
                json!({"error": err.to_string(), "kind": kind(err), "exit_code": exit_code(err)})
            ),
            Self::Text => eprintln!("error: {err}"),
        }
    }
}

/// The exit codes, as `--help` lists them.
pub const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  storage, codec or other failure
  2  usage error (unknown command or option)
  3  not found (event, dead letter, checkpoint)
  4  backend unavailable (cannot connect, closed)
  5  bad configuration (a PHOTON_* variable, or the in-process backend for a command that needs a durable one)
  6  bad input (topic, key, JSON, size or depth limits)
  7  not supported by this backend
  8  credentials refused by the server (wrong password, unknown user, refused certificate)";

/// The exit code of a failed command.
pub fn exit_code(err: &PhotonError) -> u8 {
    match err {
        PhotonError::NotFound(_) => 3,
        PhotonError::Unavailable { .. } | PhotonError::Closed(_) => 4,
        PhotonError::Config { .. } => 5,
        PhotonError::InvalidTopic { .. }
        | PhotonError::InvalidKey { .. }
        | PhotonError::PayloadTooLarge { .. }
        | PhotonError::PayloadTooDeep { .. }
        | PhotonError::InvalidInput(_) => 6,
        PhotonError::Unsupported { .. } => 7,
        PhotonError::Unauthorized { .. } => 8,
        _ => 1,
    }
}

/// A short name of the error's kind, for JSON output.
pub fn kind(err: &PhotonError) -> &'static str {
    match exit_code(err) {
        3 => "not_found",
        4 => "unavailable",
        5 => "config",
        6 => "invalid_input",
        7 => "unsupported",
        8 => "unauthorized",
        _ => "failure",
    }
}

/// `value` as JSON; `what` names it in the error.
///
/// # Errors
/// [`PhotonError::Codec`] (not expected: every value printed is plain data).
pub fn to_json(what: &str, value: &impl serde::Serialize) -> Result<Value, PhotonError> {
    serde_json::to_value(value).map_err(|e| PhotonError::codec(what, e))
}

/// `Some(n)` as its text, `None` as `none`.
pub fn show(value: Option<i64>) -> String {
    value.map_or_else(|| "none".to_owned(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_has_its_code() {
        assert_eq!(exit_code(&PhotonError::NotFound("e".into())), 3);
        assert_eq!(exit_code(&PhotonError::Closed("c".into())), 4);
        assert_eq!(exit_code(&PhotonError::config("V", "x", "y")), 5);
        assert_eq!(exit_code(&PhotonError::InvalidInput("i".into())), 6);
        assert_eq!(
            kind(&PhotonError::InvalidInput("i".into())),
            "invalid_input"
        );
    }
}
