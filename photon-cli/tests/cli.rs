//! The `photon` binary run as a user runs it, against a SQLite file: exact output, exit
//! codes, JSON lines, standard input, dead letters, keys.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::{
    dead_letter_on_sqlite, json_lines, ok, photon_on_sqlite as photon_cmd, stderr, stdout,
    with_stdin,
};
use serde_json::{json, Value};

struct Store {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

/// The database file, for the helpers that take a path.
impl std::ops::Deref for Store {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.path
    }
}

/// A fresh database path in a directory removed on drop (`let db = &store();` keeps it
/// for the test).
fn store() -> Store {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("photon.db");
    Store { _dir: dir, path }
}

fn run(db: &Path, args: &[&str]) -> Output {
    photon_cmd(db, args).output().unwrap()
}

/// `photon checkpoints ARGS` on `db`.
fn checkpoints(db: &Path, args: &[&str]) -> Output {
    run(db, &[&["checkpoints"], args].concat())
}

fn run_with_input(db: &Path, args: &[&str], input: &str) -> Output {
    with_stdin(photon_cmd(db, args), input)
}

/// Publishes `{"n": i, "customer": "c-{i % 2}"}` for each i, keyed by customer.
fn publish_orders(db: &Path, numbers: std::ops::Range<i64>) {
    let lines: String = numbers
        .map(|n| format!("{}\n", json!({"n": n, "customer": format!("c-{}", n % 2)})))
        .collect();
    ok(run_with_input(
        db,
        &["publish", "orders", "--key-field", "customer", "-o", "json"],
        &lines,
    ));
}

#[test]
fn the_in_process_backend_is_refused_with_a_hint() {
    let output = Command::new(env!("CARGO_BIN_EXE_photon"))
        .args(["publish", "orders", "{}"])
        .env_remove("PHOTON_BACKEND")
        .env_remove("PHOTON_OUTPUT")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(5));
    let message = stderr(&output);
    assert!(message.contains("--backend (PHOTON_BACKEND)"), "{message}");
    assert!(message.contains("sqlite"), "{message}");
    assert!(message.contains("photon demo"), "{message}");
    assert_eq!(stdout(&output), "");
}

#[test]
fn publish_from_standard_input_then_replay_and_tail() {
    let db = &store();
    let published = ok(run_with_input(
        db,
        &["publish", "orders", "--key-field", "customer", "-o", "json"],
        "{\"n\": 0, \"customer\": \"c-0\"}\n\n{\"n\": 1, \"customer\": \"c-1\"}\n{\"n\": 2, \"customer\": \"c-0\"}\n",
    ));
    let appended = json_lines(&published);
    assert_eq!(
        appended
            .iter()
            .map(|a| a["seq"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    let replayed = json_lines(&ok(run(db, &["replay", "orders"])));
    assert_eq!(replayed.len(), 3);
    for (n, event) in replayed.iter().enumerate() {
        assert_eq!(event["payload"]["n"], json!(n));
        assert_eq!(event["topic_key"], json!(format!("c-{}", n % 2)));
        assert_eq!(event["event_id"], appended[n]["event_id"]);
    }
    let newest = json_lines(&ok(run(db, &["tail", "orders", "--last", "2"])));
    assert_eq!(
        newest
            .iter()
            .map(|e| e["payload"]["n"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        vec![1, 2]
    );
    let keyed = json_lines(&ok(run(db, &["tail", "orders", "--key", "c-0", "-n", "5"])));
    assert_eq!(
        keyed
            .iter()
            .map(|e| e["payload"]["n"].as_i64().unwrap())
            .collect::<Vec<_>>(),
        vec![0, 2]
    );
    let text = ok(run(
        db,
        &["publish", "orders", "{\"n\": 3}", "--key", "c-1"],
    ));
    let printed = stdout(&text);
    assert!(printed.starts_with("published seq 4 id "), "{printed}");
}

#[test]
fn a_bad_line_stops_publishing_and_says_where() {
    let db = &store();
    let output = run_with_input(
        db,
        &["publish", "orders"],
        "{\"n\": 0}\n{\"n\": \n{\"n\": 2}\n",
    );
    assert_eq!(output.status.code(), Some(6));
    let message = stderr(&output);
    assert!(message.contains("line 2 is not valid JSON"), "{message}");
    assert!(message.contains("after 1 published events"), "{message}");
    let replayed = json_lines(&ok(run(db, &["replay", "orders"])));
    assert_eq!(replayed.len(), 1);
    assert_eq!(replayed[0]["payload"], json!({"n": 0}));
    let missing = run(
        db,
        &["publish", "orders", "--key-field", "customer", "{\"n\": 5}"],
    );
    assert_eq!(missing.status.code(), Some(6));
    assert!(stderr(&missing).contains("no string or number field \"customer\""));
}

#[test]
fn an_unknown_event_is_not_found_in_json() {
    let store = store();
    let output = run(&store.path, &["get", "no-such-id", "-o", "json"]);
    assert_eq!(output.status.code(), Some(3));
    let error: Value = serde_json::from_str(stderr(&output).trim()).unwrap();
    assert_eq!(error["kind"], json!("not_found"));
    assert_eq!(error["exit_code"], json!(3));
    assert!(error["error"].as_str().unwrap().contains("no-such-id"));
}

#[test]
fn lag_and_checkpoints() {
    let db = &store();
    publish_orders(db, 0..5);
    let before = json_lines(&ok(run(db, &["lag", "billing", "orders", "-o", "json"])));
    assert_eq!(
        before,
        vec![
            json!({"subscription": "billing", "topic": "orders", "key": null, "checkpoint": null, "head": 5, "lag": 5})
        ]
    );
    let set = json_lines(&ok(checkpoints(
        db,
        &["billing", "orders", "--set", "3", "-o", "json"],
    )));
    assert_eq!(set[0]["checkpoint"], json!(3));
    let text = stdout(&ok(run(db, &["lag", "billing", "orders"])));
    assert_eq!(text, "billing on orders: checkpoint 3, head 5, lag 2\n");
    ok(checkpoints(
        db,
        &["audit", "orders", "--key", "c-1", "--set", "2"],
    ));
    let all = stdout(&ok(run(db, &["lag"])));
    assert_eq!(
        all,
        "audit on orders (key c-1): checkpoint 2, head 4, lag 2\nbilling on orders: checkpoint 3, head 5, lag 2\n"
    );
}

#[test]
fn topics_are_listed_with_head_and_count() {
    let db = &store();
    publish_orders(db, 0..3);
    ok(run(db, &["publish", "audit", "{}"]));
    let listed = json_lines(&ok(run(db, &["topics", "-o", "json"])));
    assert_eq!(
        listed,
        vec![
            json!({"name": "audit", "head_seq": 1, "events": 1, "bytes": null, "shards": 1}),
            json!({"name": "orders", "head_seq": 3, "events": 3, "bytes": null, "shards": 1}),
        ]
    );
    let text = stdout(&ok(run(db, &["topics"])));
    assert_eq!(
        text,
        "audit head 1 events 1 bytes - shards 1\norders head 3 events 3 bytes - shards 1\n"
    );
}

#[test]
fn dead_letters_are_listed_shown_and_replayed() {
    let store = store();
    let db = store.path.clone();
    publish_orders(&db, 0..4);
    dead_letter_on_sqlite(&db, 2);
    let listed = json_lines(&ok(run(&db, &["dlq", "list", "orders", "-o", "json"])));
    assert_eq!(listed.len(), 1);
    let letter = &listed[0];
    assert_eq!(
        letter["original"]["payload"],
        json!({"n": 2, "customer": "c-0"})
    );
    assert_eq!(letter["original"]["seq"], json!(3));
    assert_eq!(letter["error"], json!("handler failed: order 2 is refused"));
    let id = letter["dead_letter_id"].as_str().unwrap();
    let shown = json_lines(&ok(run(&db, &["dlq", "show", "orders", id, "-o", "json"])));
    assert_eq!(&shown[0], letter);
    let unknown = run(&db, &["dlq", "show", "orders", "nope"]);
    assert_eq!(unknown.status.code(), Some(3));
    let replayed = json_lines(&ok(run(
        &db,
        &["dlq", "replay", "orders", "--all", "-o", "json"],
    )));
    assert_eq!(replayed.len(), 1);
    assert_eq!(replayed[0]["dead_letter_id"], json!(id));
    assert_eq!(replayed[0]["seq"], json!(5));
    let events = json_lines(&ok(run(&db, &["replay", "orders", "--after-seq", "4"])));
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["payload"], json!({"n": 2, "customer": "c-0"}));
    assert_eq!(events[0]["topic_key"], json!("c-0"));
}

#[test]
fn keygen_makes_a_ring_photon_accepts() {
    let store = store();
    let first = json_lines(&ok(run(
        &store.path,
        &["keygen", "--id", "k1", "-o", "json"],
    )));
    let ring = first[0]["PHOTON_TRANSPORT_KEYS"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(ring.starts_with("k1:"), "{ring}");
    let rotated = stdout(&ok(run(
        &store.path,
        &["keygen", "--id", "k2", "--ring", &ring],
    )));
    let value = rotated
        .trim()
        .strip_prefix("PHOTON_TRANSPORT_KEYS=")
        .unwrap();
    let crypto = photon::TransportCrypto::parse_key_list("test", value).unwrap();
    assert_eq!(crypto.key_ids().collect::<Vec<_>>(), vec!["k1", "k2"]);
    assert_eq!(crypto.sealing_key_id(), Some("k2"));
    let duplicate = run(&store.path, &["keygen", "--id", "k1", "--ring", &ring]);
    assert_eq!(duplicate.status.code(), Some(6));
    // Events published with the new ring are sealed and read back with it.
    let published = photon_cmd(&store.path, &["publish", "secrets", "{\"s\": 1}"])
        .env("PHOTON_TRANSPORT_KEYS", value)
        .output()
        .unwrap();
    assert!(published.status.success(), "{}", stderr(&published));
    let read = photon_cmd(&store.path, &["replay", "secrets"])
        .env("PHOTON_TRANSPORT_KEYS", value)
        .output()
        .unwrap();
    assert_eq!(json_lines(&read)[0]["payload"], json!({"s": 1}));
    let without_key = ok(run(&store.path, &["replay", "secrets"]));
    assert_eq!(stdout(&without_key), "");
    let message = stderr(&without_key);
    assert!(message.contains("skipped"), "{message}");
}

#[test]
fn tail_follow_prints_new_events() {
    let db = &store();
    publish_orders(db, 0..3);
    let mut child = photon_cmd(db, &["tail", "orders", "--last", "1", "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["payload"]["n"], json!(2));
    publish_orders(db, 3..5);
    let mut followed = Vec::new();
    for _ in 0..2 {
        let line = lines.next().unwrap().unwrap();
        let event: Value = serde_json::from_str(&line).unwrap();
        followed.push(event["payload"]["n"].as_i64().unwrap());
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(followed, vec![3, 4]);
}

#[test]
fn help_lists_examples_and_exit_codes_and_completions_generate() {
    let help = Command::new(env!("CARGO_BIN_EXE_photon"))
        .arg("--help")
        .output()
        .unwrap();
    let text = stdout(&help);
    assert!(text.contains("Examples:"), "{text}");
    assert!(text.contains("3  not found"), "{text}");
    let completions = Command::new(env!("CARGO_BIN_EXE_photon"))
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert!(completions.status.success());
    let script = stdout(&completions);
    assert!(
        script.contains("_photon()"),
        "{}",
        &script[..script.len().min(200)]
    );
    assert!(script.contains("dlq"));
}

#[test]
fn groups_show_as_json() {
    let store = store();
    let output = ok(run(
        &store.path,
        &["groups", "workers", "orders", "-o", "json"],
    ));
    assert_eq!(
        json_lines(&output),
        vec![json!({"group": "workers", "topic": "orders", "members": [], "partitions": []})]
    );
}

#[test]
fn checkpoints_move_back_only_when_confirmed() {
    let db = &store();
    publish_orders(db, 0..6);
    let moved = json_lines(&ok(checkpoints(
        db,
        &["billing", "orders", "--set", "5", "-o", "json"],
    )));
    assert_eq!(
        moved,
        vec![
            json!({"subscription": "billing", "topic": "orders", "key": null, "checkpoint": 5, "previous": null})
        ]
    );
    // Back without --yes and without a terminal: refused, nothing moves.
    let refused = checkpoints(db, &["billing", "orders", "--set", "2"]);
    assert_eq!(refused.status.code(), Some(6));
    assert_eq!(
        stderr(&refused),
        "error: invalid input: move checkpoint billing on orders back from 5 to 2: the events after 2 are delivered again; pass --yes to confirm\n"
    );
    assert_eq!(
        stdout(&ok(checkpoints(db, &["billing", "orders"]))),
        "billing orders *: 5\n"
    );
    assert_eq!(
        stdout(&ok(checkpoints(
            db,
            &["billing", "orders", "--set", "2", "--yes"]
        ))),
        "billing orders *: 2 (was 5)\n"
    );
    // Forward needs no confirmation; beyond the head and below 0 are refused.
    assert_eq!(
        stdout(&ok(checkpoints(db, &["billing", "orders", "--set", "4"]))),
        "billing orders *: 4 (was 2)\n"
    );
    let beyond = checkpoints(db, &["billing", "orders", "--set", "7"]);
    assert_eq!(beyond.status.code(), Some(6));
    let message = stderr(&beyond);
    assert!(
        message.contains("--set 7: beyond the head of topic \"orders\" (6)"),
        "{message}"
    );
    let negative = checkpoints(db, &["billing", "orders", "--set=-1"]);
    assert_eq!(negative.status.code(), Some(6));
    // A keyed checkpoint moves on its own.
    ok(checkpoints(
        db,
        &["audit", "orders", "--key", "c-1", "--set", "5"],
    ));
    let listed = json_lines(&ok(checkpoints(db, &["-o", "json"])));
    assert_eq!(
        listed,
        vec![
            json!({"subscription": "audit", "topic": "orders", "key": "c-1", "checkpoint": 5}),
            json!({"subscription": "billing", "topic": "orders", "key": null, "checkpoint": 4}),
        ]
    );
    // A reset removes the checkpoint, confirmed.
    let unconfirmed = checkpoints(db, &["billing", "orders", "--reset"]);
    assert_eq!(unconfirmed.status.code(), Some(6));
    let message = stderr(&unconfirmed);
    assert!(
        message.contains("remove checkpoint billing on orders (at 4)"),
        "{message}"
    );
    assert_eq!(
        stdout(&ok(checkpoints(
            db,
            &["billing", "orders", "--reset", "-y"]
        ))),
        "billing orders *: none (was 4)\n"
    );
    assert_eq!(stdout(&ok(checkpoints(db, &[]))), "audit orders c-1: 5\n");
    let both = checkpoints(db, &["billing", "orders", "--reset", "--set", "1"]);
    assert_eq!(both.status.code(), Some(2));
}

/// On a terminal a move back is asked for: `y` moves it, anything else leaves it.
#[test]
fn a_move_back_is_asked_for_on_a_terminal() {
    // `script` (util-linux) gives the command a terminal as its standard input.
    if !Path::new("/usr/bin/script").exists() {
        println!("skipped: /usr/bin/script is missing (util-linux), so no terminal can be given");
        return;
    }
    let db = &store();
    publish_orders(db, 0..3);
    ok(checkpoints(db, &["billing", "orders", "--set", "3"]));
    let on_terminal = |answer: &str, seq: &str| {
        let line = format!(
            "{} checkpoints billing orders --set {seq}",
            env!("CARGO_BIN_EXE_photon")
        );
        let mut command = Command::new("/usr/bin/script");
        command
            .args(["-qec", &line, "/dev/null"])
            .env("PHOTON_BACKEND", "sqlite")
            .env("PHOTON_SQLITE_PATH", db.as_os_str())
            .env_remove("PHOTON_OUTPUT");
        with_stdin(command, answer)
    };
    let declined = on_terminal("n\n", "1");
    assert_eq!(declined.status.code(), Some(6));
    let text = stdout(&declined);
    assert!(
        text.contains("move checkpoint billing on orders back from 3 to 1: the events after 1 are delivered again.\r\nProceed? [y/N] "),
        "{text:?}"
    );
    assert!(text.contains("not confirmed, nothing changed"), "{text:?}");
    assert_eq!(
        stdout(&ok(checkpoints(db, &["billing", "orders"]))),
        "billing orders *: 3\n"
    );
    let accepted = on_terminal("y\n", "1");
    assert_eq!(accepted.status.code(), Some(0), "{}", stdout(&accepted));
    let printed = stdout(&accepted);
    assert!(printed.contains("billing orders *: 1 (was 3)"), "{printed}");
}
