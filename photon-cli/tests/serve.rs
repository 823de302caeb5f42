//! `photon serve` run as a process over a SQLite file: the JSON API answers exactly what
//! the commands print, the token guards every route, replay needs `--allow-replay`, and
//! `/metrics` shows the lag read from the backend.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{
    dead_letter_on_sqlite, json_lines, ok, photon_on_sqlite as photon_cmd, stderr, Server,
};
use serde_json::json;

fn run(db: &Path, args: &[&str]) -> Output {
    photon_cmd(db, args).output().unwrap()
}

fn serve(db: &Path, extra: &[&str]) -> Server {
    let mut args = vec!["serve", "--bind", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    Server::start(photon_cmd(db, &args))
}

/// Four orders `{"n": i, "customer": "c-{i % 2}"}`, order 2 dead-lettered by `billing`
/// (which handled the others), and `audit` at seq 1.
fn seeded(db: &Path) {
    let mut child = photon_cmd(db, &["publish", "orders", "--key-field", "customer"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let lines: String = (0..4)
        .map(|n| format!("{}\n", json!({"n": n, "customer": format!("c-{}", n % 2)})))
        .collect();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(lines.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
    dead_letter_on_sqlite(db, 2);
    ok(run(db, &["checkpoints", "audit", "orders", "--set", "1"]));
}

const TOKEN: &str = "s3cret-token";

#[test]
fn the_api_answers_what_the_commands_print() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("photon.db");
    seeded(&db);
    let server = serve(
        &db,
        &[
            "--token",
            TOKEN,
            "--allow-replay",
            "--group",
            "workers:orders",
        ],
    );
    let bearer = format!("Bearer {TOKEN}");
    let auth = [("Authorization", bearer.as_str())];

    assert_eq!(
        server.get_json("/api/overview", &auth),
        (
            200,
            json!({
                "backend": "sqlite",
                "capabilities": {"catalog": true, "head_seq": true, "list": true, "consumer_groups": true, "checkpoint_reset": true, "atomic_batches": true},
                "replay_allowed": true,
                "groups": [{"group": "workers", "topic": "orders"}],
            })
        )
    );
    assert_eq!(
        server.get_json("/api/topics", &auth),
        (
            200,
            json!({"supported": true, "reason": null, "topics": [
                {"name": "orders", "head_seq": 4, "events": 4, "bytes": null, "shards": 1},
                {"name": "orders.dlq", "head_seq": 1, "events": 1, "bytes": null, "shards": 1},
            ]})
        )
    );
    let topics = json_lines(&ok(run(&db, &["topics", "-o", "json"])));
    assert_eq!(
        server.get_json("/api/topics", &auth).1["topics"],
        json!(topics)
    );
    let lag = json!([
        {"subscription": "audit", "topic": "orders", "key": null, "checkpoint": 1, "head": 4, "lag": 3},
        {"subscription": "billing", "topic": "orders", "key": null, "checkpoint": 4, "head": 4, "lag": 0},
    ]);
    assert_eq!(
        server.get_json("/api/lag", &auth),
        (200, json!({"supported": true, "reason": null, "lag": lag}))
    );
    assert_eq!(
        json!(json_lines(&ok(run(&db, &["lag", "-o", "json"])))),
        lag
    );
    let checkpoints = json!([
        {"subscription": "audit", "topic": "orders", "key": null, "checkpoint": 1},
        {"subscription": "billing", "topic": "orders", "key": null, "checkpoint": 4},
    ]);
    assert_eq!(
        server.get_json("/api/checkpoints", &auth),
        (
            200,
            json!({"supported": true, "reason": null, "checkpoints": checkpoints})
        )
    );
    assert_eq!(
        json!(json_lines(&ok(run(&db, &["checkpoints", "-o", "json"])))),
        checkpoints
    );
    assert_eq!(
        server.get_json("/api/groups", &auth),
        (
            200,
            json!({"supported": true, "reason": null, "groups": [
                {"group": "workers", "topic": "orders", "members": [], "partitions": []}
            ]})
        )
    );

    let letters = json_lines(&ok(run(&db, &["dlq", "list", "orders", "-o", "json"])));
    assert_eq!(letters.len(), 1);
    let letter = &letters[0];
    assert_eq!(letter["error"], json!("handler failed: order 2 is refused"));
    assert_eq!(letter["subscription"], json!("billing"));
    assert_eq!(letter["original"]["seq"], json!(3));
    assert_eq!(
        letter["original"]["payload"],
        json!({"n": 2, "customer": "c-0"})
    );
    let listed = json!({"supported": true, "reason": null, "dead_letters": letters});
    assert_eq!(server.get_json("/api/dlq", &auth), (200, listed.clone()));
    assert_eq!(server.get_json("/api/dlq/orders", &auth), (200, listed));
    assert_eq!(
        server.get_json("/api/dlq/audit", &auth),
        (
            200,
            json!({"supported": true, "reason": null, "dead_letters": []})
        )
    );
    assert_eq!(
        server.get_json("/api/dlq/Not%20A%20Topic", &auth).0,
        400,
        "a bad topic name is bad input"
    );

    let id = letter["dead_letter_id"].as_str().unwrap();
    assert_eq!(
        server.post_json("/api/dlq/orders/nope/replay", &auth),
        (
            404,
            json!({"error": "not found: dead letter nope of topic orders", "kind": "not_found"})
        )
    );
    let (status, replayed) = server.post_json(&format!("/api/dlq/orders/{id}/replay"), &auth);
    assert_eq!(status, 200, "{replayed}");
    let event_id = replayed["event_id"].as_str().unwrap().to_owned();
    assert_eq!(
        replayed,
        json!({"dead_letter_id": id, "event_id": event_id, "seq": 5})
    );
    let events = json_lines(&ok(run(&db, &["replay", "orders", "--after-seq", "4"])));
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["event_id"], json!(event_id));
    assert_eq!(events[0]["payload"], json!({"n": 2, "customer": "c-0"}));
    assert_eq!(events[0]["topic_key"], json!("c-0"));

    let (status, headers, metrics) = server.request("GET", "/metrics", &auth, "");
    assert_eq!(status, 200);
    assert!(headers.contains(&(
        "content-type".into(),
        "text/plain; version=0.0.4; charset=utf-8".into()
    )));
    // The exporter orders the series of one metric as it likes.
    let mut samples: Vec<&str> = metrics
        .lines()
        .filter(|line| !line.starts_with('#') && !line.is_empty())
        .collect();
    samples.sort_unstable();
    assert_eq!(
        samples,
        vec![
            "photon_published_total{backend=\"sqlite\",topic=\"orders\"} 1",
            "photon_subscription_lag{backend=\"sqlite\",topic=\"orders\",subscription=\"audit\"} 4",
            "photon_subscription_lag{backend=\"sqlite\",topic=\"orders\",subscription=\"billing\"} 1",
        ],
        "{metrics}"
    );
    assert!(
        metrics.contains("# TYPE photon_subscription_lag gauge"),
        "{metrics}"
    );
}

#[test]
fn without_the_token_every_route_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("photon.db");
    seeded(&db);
    let server = Server::start({
        let mut command = photon_cmd(&db, &["serve", "--bind", "127.0.0.1:0", "--allow-replay"]);
        command.env("PHOTON_SERVE_TOKEN", TOKEN);
        command
    });
    let refused = json!({
        "error": "this server needs a bearer token: send `Authorization: Bearer <token>`",
        "kind": "unauthorized",
    });
    let wrong = [("Authorization", "Bearer s3cret-tokem")];
    for path in [
        "/metrics",
        "/api/overview",
        "/api/topics",
        "/api/lag",
        "/api/checkpoints",
        "/api/groups",
        "/api/dlq",
        "/api/dlq/orders",
    ] {
        assert_eq!(server.get_json(path, &[]), (401, refused.clone()), "{path}");
        assert_eq!(
            server.get_json(path, &wrong),
            (401, refused.clone()),
            "{path}"
        );
    }
    let letters = json_lines(&ok(run(&db, &["dlq", "list", "orders", "-o", "json"])));
    let id = letters[0]["dead_letter_id"].as_str().unwrap();
    assert_eq!(
        server.post_json(&format!("/api/dlq/orders/{id}/replay"), &[]),
        (401, refused)
    );
    assert_eq!(
        json_lines(&ok(run(&db, &["topics", "-o", "json"])))[0]["head_seq"],
        json!(4),
        "nothing was replayed"
    );

    // The page asks for the token, and the login keeps it in a cookie.
    let (status, headers, body) = server.request("GET", "/", &[], "");
    assert_eq!(status, 401);
    assert!(headers.contains(&("www-authenticate".into(), "Bearer realm=\"photon\"".into())));
    assert!(
        body.contains("<form method=\"post\" action=\"/login\">"),
        "{body}"
    );
    let form = [("Content-Type", "application/x-www-form-urlencoded")];
    let (status, _, _) = server.request("POST", "/login", &form, "token=nope");
    assert_eq!(status, 401);
    let (status, headers, _) = server.request("POST", "/login", &form, &format!("token={TOKEN}"));
    assert_eq!(status, 303);
    let cookie = format!("photon_token={TOKEN}; HttpOnly; SameSite=Strict; Path=/");
    assert!(
        headers.contains(&("set-cookie".into(), cookie)),
        "{headers:?}"
    );
    let sent = format!("photon_token={TOKEN}");
    let (status, _, page) = server.request("GET", "/", &[("Cookie", &sent)], "");
    assert_eq!(status, 200);
    assert!(page.contains("<title>Photon</title>"), "{page}");
    assert_eq!(
        server.get_json("/api/lag", &[("Cookie", &sent)]).1["lag"][0]["lag"],
        json!(3)
    );
}

#[test]
fn replay_is_refused_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("photon.db");
    seeded(&db);
    let server = serve(&db, &[]);
    let letters = json_lines(&ok(run(&db, &["dlq", "list", "orders", "-o", "json"])));
    let id = letters[0]["dead_letter_id"].as_str().unwrap();
    assert_eq!(
        server.post_json(&format!("/api/dlq/orders/{id}/replay"), &[]),
        (
            403,
            json!({
                "error": "replay is off: start `photon serve` with --allow-replay to allow it",
                "kind": "forbidden",
            })
        )
    );
    assert_eq!(
        server.get_json("/api/overview", &[]).1["replay_allowed"],
        json!(false)
    );
    let events = json_lines(&ok(run(&db, &["replay", "orders"])));
    assert_eq!(events.len(), 4, "nothing was published");
    // Without a token, the routes need none.
    assert_eq!(server.get_json("/api/topics", &[]).0, 200);
}

#[test]
fn bad_settings_are_refused_before_serving() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("photon.db");
    let spaced = run(&db, &["serve", "--bind", "127.0.0.1:0", "--token", "a b"]);
    assert_eq!(spaced.status.code(), Some(5));
    assert!(
        stderr(&spaced).contains("--token (PHOTON_SERVE_TOKEN)"),
        "{}",
        stderr(&spaced)
    );
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let busy = run(&db, &["serve", "--bind", &address]);
    assert_eq!(busy.status.code(), Some(5));
    assert!(stderr(&busy).contains("--bind"), "{}", stderr(&busy));
    let group = run(&db, &["serve", "--group", "workers"]);
    assert_eq!(group.status.code(), Some(2));
    assert!(
        stderr(&group).contains("expected GROUP:TOPIC"),
        "{}",
        stderr(&group)
    );
    let mem = Command::new(env!("CARGO_BIN_EXE_photon"))
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env_remove("PHOTON_BACKEND")
        .output()
        .unwrap();
    assert_eq!(mem.status.code(), Some(5));
}
