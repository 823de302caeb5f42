//! The `photon` binary on PostgreSQL (`PHOTON_POSTGRES_URL`, by default the local server's
//! `test` database), in a schema of its own dropped afterwards: publishing from standard
//! input, tailing, listing topics and checkpoints, lag, and moving a checkpoint forward and
//! back.

#![cfg(feature = "postgres")]

mod common;

use std::process::Command;

use common::{json_lines, ok, with_stdin};
use serde_json::json;

fn url() -> String {
    std::env::var("PHOTON_POSTGRES_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// Runs `sql` on the test database; `Err` with the reason when it cannot be reached.
fn execute(sql: &str) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let url = url();
        let connect = tokio_postgres::connect(&url, tokio_postgres::NoTls);
        let (client, connection) = tokio::time::timeout(std::time::Duration::from_secs(5), connect)
            .await
            .map_err(|_| "did not answer".to_owned())?
            .map_err(|err| err.to_string())?;
        tokio::spawn(connection);
        client
            .batch_execute(sql)
            .await
            .map_err(|err| err.to_string())
    })
}

/// The schema of one test, dropped when the test ends.
struct Schema(String);

impl Drop for Schema {
    fn drop(&mut self) {
        let _ = execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.0));
    }
}

fn photon_cmd(schema: &Schema, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_photon"));
    command
        .args(args)
        .env("PHOTON_BACKEND", "postgres")
        .env("PHOTON_POSTGRES_URL", url())
        .env("PHOTON_POSTGRES_SCHEMA", &schema.0)
        .env_remove("PHOTON_OUTPUT")
        .env_remove("PHOTON_TRANSPORT_KEYS")
        .env_remove("PHOTON_TRANSPORT_KEY");
    command
}

fn run_json(schema: &Schema, args: &[&str]) -> Vec<serde_json::Value> {
    json_lines(&ok(photon_cmd(schema, args).output().unwrap()))
}

#[test]
fn publish_tail_list_lag_and_move_checkpoints_on_postgres() {
    if let Err(why) = execute("SELECT 1") {
        return photon_testkit::skip_or_fail(
            "postgres",
            &format!("PostgreSQL at {}: {why}", url()),
        );
    }
    let unique = uuid::Uuid::new_v4().simple().to_string();
    let schema = Schema(format!("photon_cli_{}", &unique[..12]));

    let published = with_stdin(
        photon_cmd(
            &schema,
            &["publish", "orders", "--key-field", "c", "-o", "json"],
        ),
        "{\"c\": \"a\", \"n\": 1}\n{\"c\": \"b\", \"n\": 2}\n{\"c\": \"a\", \"n\": 3}\n",
    );
    let seqs: Vec<i64> = json_lines(&ok(published))
        .iter()
        .map(|p| p["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, vec![1, 2, 3]);

    let tailed = run_json(&schema, &["tail", "orders", "--last", "2", "-o", "json"]);
    let seen: Vec<(i64, &str, i64)> = tailed
        .iter()
        .map(|e| {
            (
                e["seq"].as_i64().unwrap(),
                e["topic_key"].as_str().unwrap(),
                e["payload"]["n"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(seen, vec![(2, "b", 2), (3, "a", 3)]);

    let topics = run_json(&schema, &["topics", "-o", "json"]);
    assert_eq!(topics.len(), 1, "{topics:?}");
    assert_eq!(
        (
            &topics[0]["name"],
            &topics[0]["head_seq"],
            &topics[0]["events"],
            &topics[0]["shards"]
        ),
        (&json!("orders"), &json!(3), &json!(3), &json!(1)),
        "{topics:?}"
    );

    let moved = run_json(
        &schema,
        &[
            "checkpoints",
            "billing",
            "orders",
            "--set",
            "2",
            "-o",
            "json",
        ],
    );
    assert_eq!(moved[0]["checkpoint"], json!(2), "{moved:?}");
    assert_eq!(
        run_json(&schema, &["checkpoints", "-o", "json"]),
        vec![json!({"subscription": "billing", "topic": "orders", "key": null, "checkpoint": 2})]
    );
    assert_eq!(
        run_json(&schema, &["lag", "-o", "json"]),
        vec![json!({
            "subscription": "billing", "topic": "orders", "key": null,
            "checkpoint": 2, "head": 3, "lag": 1,
        })]
    );
    let back = run_json(
        &schema,
        &[
            "checkpoints",
            "billing",
            "orders",
            "--set",
            "1",
            "--yes",
            "-o",
            "json",
        ],
    );
    assert_eq!(back[0]["checkpoint"], json!(1), "{back:?}");
    assert_eq!(back[0]["previous"], json!(2), "{back:?}");
}

#[test]
fn refused_credentials_exit_8_naming_the_user_not_the_password() {
    if let Err(why) = execute("SELECT 1") {
        return photon_testkit::skip_or_fail(
            "postgres",
            &format!("PostgreSQL at {}: {why}", url()),
        );
    }
    let schema = Schema(format!(
        "photon_cli_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    ));
    let (scheme, rest) = url()
        .split_once("://")
        .map(|(s, r)| (s.to_owned(), r.to_owned()))
        .unwrap();
    let host = rest
        .split_once('@')
        .map_or(rest.clone(), |(_, after)| after.to_owned());
    let refused = format!("{scheme}://photon_no_such_role:s3cret-never-shown@{host}");
    let output = photon_cmd(&schema, &["topics", "-o", "json"])
        .env("PHOTON_POSTGRES_URL", refused)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(8));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let error: serde_json::Value = serde_json::from_str(stderr.trim()).unwrap();
    assert_eq!(error["kind"], json!("unauthorized"));
    assert_eq!(error["exit_code"], json!(8));
    let message = error["error"].as_str().unwrap();
    assert!(
        message.contains("user \"photon_no_such_role\""),
        "{message}"
    );
    assert!(!stderr.contains("s3cret-never-shown"), "{stderr}");
}
