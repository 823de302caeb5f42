//! The `photon` binary against the NATS server at 127.0.0.1:4222, under a prefix of its
//! own: topics, lag, checkpoint moves and `photon serve` read what the server holds.

#![cfg(feature = "nats")]

mod common;

use std::process::Command;

use common::{json_lines, ok, with_stdin, Server};
use serde_json::json;

fn photon_cmd(prefix: &str, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_photon"));
    command
        .args(args)
        .env("PHOTON_BACKEND", "nats")
        .env("PHOTON_NATS_URL", "nats://127.0.0.1:4222")
        .env("PHOTON_NATS_PREFIX", prefix)
        .env_remove("PHOTON_NATS_SHARDS")
        .env_remove("PHOTON_NATS_STREAM_SHARDS")
        .env_remove("PHOTON_NATS_STREAM_PREFIX")
        .env_remove("PHOTON_OUTPUT")
        .env_remove("PHOTON_TRANSPORT_KEYS")
        .env_remove("PHOTON_TRANSPORT_KEY");
    command
}

/// A fresh stream prefix starting with `tag`, or `None` (after `skip_or_fail`) without a
/// server.
fn fresh_prefix(tag: &str) -> Option<String> {
    if std::net::TcpStream::connect("127.0.0.1:4222").is_err() {
        photon_testkit::skip_or_fail("nats", "no server at 127.0.0.1:4222");
        return None;
    }
    Some(format!(
        "{tag}{}",
        &uuid::Uuid::new_v4().simple().to_string()[..20]
    ))
}

/// Publishes three `orders` keyed `a`, `b`, `a`; returns their seqs.
fn publish_three(prefix: &str) -> Vec<i64> {
    let published = json_lines(&ok(with_stdin(
        photon_cmd(
            prefix,
            &["publish", "orders", "--key-field", "c", "-o", "json"],
        ),
        "{\"c\": \"a\"}\n{\"c\": \"b\"}\n{\"c\": \"a\"}\n",
    )));
    published
        .iter()
        .map(|p| p["seq"].as_i64().unwrap())
        .collect()
}

/// Deletes every stream under `prefix`.
fn delete_streams(prefix: &str) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let port = photon::nats::NatsStoragePortBuilder::new()
            .url("nats://127.0.0.1:4222")
            .prefix(prefix)
            .build()
            .await
            .unwrap();
        port.delete_all_streams().await.unwrap();
    });
}

#[test]
fn topics_and_lag_on_nats() {
    let Some(prefix) = fresh_prefix("cli") else {
        return;
    };
    let seqs = publish_three(&prefix);
    assert_eq!(seqs.len(), 3);
    let topics = json_lines(&ok(photon_cmd(&prefix, &["topics", "-o", "json"])
        .output()
        .unwrap()));
    assert_eq!(topics.len(), 1, "{topics:?}");
    assert_eq!(topics[0]["name"], json!("orders"));
    assert_eq!(topics[0]["head_seq"], json!(seqs[2]));
    assert_eq!(topics[0]["events"], json!(3));
    assert_eq!(topics[0]["shards"], json!(1));
    assert!(topics[0]["bytes"].as_u64().unwrap() > 0, "{topics:?}");
    let set = seqs[0].to_string();
    ok(photon_cmd(
        &prefix,
        &["checkpoints", "billing", "orders", "--set", &set],
    )
    .output()
    .unwrap());
    let lag = json_lines(&ok(photon_cmd(&prefix, &["lag", "-o", "json"])
        .output()
        .unwrap()));
    assert_eq!(
        lag,
        vec![json!({
            "subscription": "billing",
            "topic": "orders",
            "key": null,
            "checkpoint": seqs[0],
            "head": seqs[2],
            "lag": seqs[2] - seqs[0],
        })]
    );
    delete_streams(&prefix);
}

#[test]
fn serve_and_checkpoint_moves_on_nats() {
    let Some(prefix) = fresh_prefix("srv") else {
        return;
    };
    let seqs = publish_three(&prefix);
    let (first, last) = (seqs[0], seqs[2]);
    let at = |seq: i64| seq.to_string();
    ok(photon_cmd(
        &prefix,
        &["checkpoints", "billing", "orders", "--set", &at(last)],
    )
    .output()
    .unwrap());
    // Back to the first event: refused without --yes, done with it.
    let refused = photon_cmd(
        &prefix,
        &["checkpoints", "billing", "orders", "--set", &at(first)],
    )
    .output()
    .unwrap();
    assert_eq!(refused.status.code(), Some(6));
    let moved = json_lines(&ok(photon_cmd(
        &prefix,
        &[
            "checkpoints",
            "billing",
            "orders",
            "--set",
            &at(first),
            "--yes",
            "-o",
            "json",
        ],
    )
    .output()
    .unwrap()));
    assert_eq!(
        moved,
        vec![
            json!({"subscription": "billing", "topic": "orders", "key": null, "checkpoint": first, "previous": last})
        ]
    );

    let server = Server::start(photon_cmd(&prefix, &["serve", "--bind", "127.0.0.1:0"]));
    let (status, overview) = server.get_json("/api/overview", &[]);
    assert_eq!(status, 200);
    assert_eq!(overview["backend"], json!("nats"));
    assert_eq!(overview["replay_allowed"], json!(false));
    let topics = json_lines(&ok(photon_cmd(&prefix, &["topics", "-o", "json"])
        .output()
        .unwrap()));
    assert_eq!(topics.len(), 1);
    assert_eq!(
        server.get_json("/api/topics", &[]),
        (
            200,
            json!({"supported": true, "reason": null, "topics": topics})
        )
    );
    assert_eq!(
        server.get_json("/api/lag", &[]),
        (
            200,
            json!({"supported": true, "reason": null, "lag": [
                {"subscription": "billing", "topic": "orders", "key": null, "checkpoint": first, "head": last, "lag": last - first}
            ]})
        )
    );
    assert_eq!(
        server.get_json("/api/checkpoints", &[]),
        (
            200,
            json!({"supported": true, "reason": null, "checkpoints": [
                {"subscription": "billing", "topic": "orders", "key": null, "checkpoint": first}
            ]})
        )
    );
    assert_eq!(
        server.get_json("/api/dlq", &[]),
        (
            200,
            json!({"supported": true, "reason": null, "dead_letters": []})
        )
    );
    let (_, _, metrics) = server.request("GET", "/metrics", &[], "");
    assert!(
        metrics.lines().any(|line| line
            == format!(
                "photon_subscription_lag{{backend=\"nats\",topic=\"orders\",subscription=\"billing\"}} {}",
                last - first
            )),
        "{metrics}"
    );
    drop(server);
    let reset = ok(photon_cmd(
        &prefix,
        &["checkpoints", "billing", "orders", "--reset", "--yes"],
    )
    .output()
    .unwrap());
    assert_eq!(
        String::from_utf8(reset.stdout).unwrap(),
        format!("billing orders *: none (was {first})\n")
    );
    delete_streams(&prefix);
}
