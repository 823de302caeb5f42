//! The `photon` binary against the Fluvio cluster of `PHOTON_FLUVIO_ENDPOINT`, under a
//! prefix of its own: publishing, tailing, listing topics, checkpoints and whole-topic lag,
//! and moving a checkpoint forward work; what Fluvio cannot do (a keyed subscription's lag,
//! moving a checkpoint back, listing dead letters) is refused as unsupported, naming the
//! backend, with the CLI's exit code for it; `photon serve` lists what the CLI lists and
//! says what it cannot.

#![cfg(feature = "fluvio")]

mod common;

use std::process::Command;

use common::{json_lines, ok, stderr, with_stdin, Server};
use serde_json::json;

/// The CLI's exit code for a capability the backend lacks.
const UNSUPPORTED: i32 = 7;

fn endpoint() -> Option<String> {
    let endpoint = std::env::var("PHOTON_FLUVIO_ENDPOINT").ok();
    if endpoint.is_none() {
        photon_testkit::skip_or_fail("fluvio", "PHOTON_FLUVIO_ENDPOINT is not set");
    }
    endpoint
}

fn photon_cmd(endpoint: &str, prefix: &str, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_photon"));
    command
        .args(args)
        .env("PHOTON_BACKEND", "fluvio")
        .env("PHOTON_FLUVIO_ENDPOINT", endpoint)
        .env("PHOTON_FLUVIO_PREFIX", prefix)
        .env_remove("PHOTON_FLUVIO_SHARDS")
        .env_remove("PHOTON_FLUVIO_TOPIC_SHARDS")
        .env_remove("PHOTON_OUTPUT")
        .env_remove("PHOTON_TRANSPORT_KEYS")
        .env_remove("PHOTON_TRANSPORT_KEY");
    command
}

fn publish_three(endpoint: &str, prefix: &str) -> Vec<i64> {
    let published = with_stdin(
        photon_cmd(
            endpoint,
            prefix,
            &["publish", "orders", "--key-field", "c", "-o", "json"],
        ),
        "{\"c\": \"a\", \"n\": 1}\n{\"c\": \"b\", \"n\": 2}\n{\"c\": \"a\", \"n\": 3}\n",
    );
    json_lines(&ok(published))
        .iter()
        .map(|p| p["seq"].as_i64().unwrap())
        .collect()
}

#[test]
fn publish_tail_list_and_refusals_on_fluvio() {
    let Some(endpoint) = endpoint() else {
        return;
    };
    let prefix = format!("cli{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let seqs = publish_three(&endpoint, &prefix);
    assert_eq!(seqs.len(), 3);
    assert!(seqs[0] < seqs[1] && seqs[1] < seqs[2], "{seqs:?}");

    let tailed = json_lines(&ok(photon_cmd(
        &endpoint,
        &prefix,
        &["tail", "orders", "--last", "3", "-o", "json"],
    )
    .output()
    .unwrap()));
    let seen: Vec<(i64, String, i64)> = tailed
        .iter()
        .map(|e| {
            (
                e["seq"].as_i64().unwrap(),
                e["topic_key"].as_str().unwrap().to_owned(),
                e["payload"]["n"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        vec![
            (seqs[0], "a".to_owned(), 1),
            (seqs[1], "b".to_owned(), 2),
            (seqs[2], "a".to_owned(), 3),
        ]
    );

    // Moving a checkpoint forward is a commit, which Fluvio stores; moving it back is not.
    let (first, second) = (seqs[0].to_string(), seqs[1].to_string());
    let moved = ok(photon_cmd(
        &endpoint,
        &prefix,
        &["checkpoints", "billing", "orders", "--set", &second],
    )
    .output()
    .unwrap());
    assert_eq!(
        common::stdout(&moved).trim(),
        format!("billing orders *: {second} (was none)")
    );
    let topics = json_lines(&ok(photon_cmd(
        &endpoint,
        &prefix,
        &["topics", "-o", "json"],
    )
    .output()
    .unwrap()));
    assert_eq!(topics.len(), 1, "{topics:?}");
    assert_eq!(topics[0]["name"], json!("orders"), "{topics:?}");
    assert_eq!(topics[0]["head_seq"], json!(seqs[2]), "{topics:?}");
    assert_eq!(topics[0]["shards"], json!(1), "{topics:?}");
    assert_eq!(topics[0]["events"], json!(null), "{topics:?}");

    let checkpoints = json_lines(&ok(photon_cmd(
        &endpoint,
        &prefix,
        &["checkpoints", "-o", "json"],
    )
    .output()
    .unwrap()));
    assert_eq!(
        checkpoints,
        vec![
            json!({"subscription": "billing", "topic": "orders", "key": null, "checkpoint": seqs[1]})
        ]
    );
    let lag = json_lines(&ok(photon_cmd(&endpoint, &prefix, &["lag", "-o", "json"])
        .output()
        .unwrap()));
    assert_eq!(
        lag,
        vec![json!({
            "subscription": "billing", "topic": "orders", "key": null,
            "checkpoint": seqs[1], "head": seqs[2], "lag": seqs[2] - seqs[1],
        })]
    );

    for args in [
        vec!["lag", "billing", "orders", "--key", "a"],
        vec!["checkpoints", "billing", "orders", "--set", &first, "--yes"],
        vec!["dlq", "list", "orders"],
    ] {
        let output = photon_cmd(&endpoint, &prefix, &args).output().unwrap();
        assert_eq!(
            output.status.code(),
            Some(UNSUPPORTED),
            "{args:?}: {output:?}"
        );
        let message = stderr(&output);
        assert!(
            message.contains("fluvio"),
            "{args:?} names the backend: {message}"
        );
    }
}

#[test]
fn serve_lists_fluvio_topics_and_says_what_it_cannot() {
    let Some(endpoint) = endpoint() else {
        return;
    };
    let prefix = format!("srv{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let seqs = publish_three(&endpoint, &prefix);
    let mut command = photon_cmd(&endpoint, &prefix, &["serve", "--bind", "127.0.0.1:0"]);
    command.env_remove("PHOTON_SERVE_TOKEN");
    let server = Server::start(command);
    let (status, topics) = server.get_json("/api/topics", &[]);
    assert_eq!(status, 200, "{topics}");
    assert_eq!(topics["supported"], json!(true), "{topics}");
    assert_eq!(
        topics["topics"],
        json!([{"name": "orders", "head_seq": seqs[2], "events": null, "bytes": topics["topics"][0]["bytes"], "shards": 1}]),
        "{topics}"
    );
    let (status, letters) = server.get_json("/api/dlq", &[]);
    assert_eq!(status, 200, "{letters}");
    assert_eq!(letters["supported"], json!(false), "{letters}");
    assert_eq!(letters["dead_letters"], json!([]), "{letters}");
    assert!(
        letters["reason"].as_str().unwrap().contains("fluvio"),
        "{letters}"
    );
}
