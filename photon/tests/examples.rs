//! Runs the example services as real processes: publishes orders over HTTP, reads the
//! admin snapshot route until both handlers are done, checks its counts, stops the service
//! with SIGTERM and checks that it stopped cleanly with its checkpoints committed.
//!
//! The example binaries are the ones `cargo test` builds beside the tests
//! (`target/<profile>/examples/`); a run that builds only this test (`--test examples`)
//! must build them first: `cargo build -p photon --examples`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use photon::prelude::*;
use serde_json::{json, Value};

/// Longest wait for anything a service does.
const DEADLINE: Duration = Duration::from_secs(60);

/// The orders every test posts: two orders of `o-1`, one each of `o-2` and `o-3`.
const ORDERS: [(&str, &str, u32); 4] = [
    ("o-1", "tea", 2),
    ("o-2", "coffee", 1),
    ("o-1", "scones", 4),
    ("o-3", "jam", 1),
];

fn example_binary(name: &str) -> PathBuf {
    // Tests run from target/<profile>/deps; examples are built into target/<profile>/examples.
    let test = std::env::current_exe().expect("the test binary has a path");
    let profile = test
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test binary lives in target/<profile>/deps");
    let binary = profile.join("examples").join(name);
    assert!(
        binary.is_file(),
        "{} is missing: build the examples first (`cargo build -p photon --examples`)",
        binary.display()
    );
    binary
}

/// A running example service, killed if the test fails before it stopped.
struct Service {
    child: Child,
    lines: mpsc::Receiver<String>,
    address: String,
    printed: Vec<String>,
}

impl Service {
    fn start(name: &str, env: &[(&str, String)]) -> Self {
        let mut command = Command::new(example_binary(name));
        command
            .env("PHOTON_EXAMPLE_ADDR", "127.0.0.1:0")
            .env_remove("PHOTON_EXAMPLE_EXIT_AFTER")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (variable, value) in env {
            command.env(variable, value);
        }
        let mut child = command.spawn().expect("the example starts");
        let lines = read_lines(child.stdout.take().expect("stdout is piped"));
        let mut service = Self {
            child,
            lines,
            address: String::new(),
            printed: Vec::new(),
        };
        let listening = service.wait_for_line(|line| line.starts_with("listening on http://"));
        service.address = listening["listening on http://".len()..].to_owned();
        service
    }

    fn wait_for_line(&mut self, wanted: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.printed.push(line.clone());
                    if wanted(&line) {
                        return line;
                    }
                }
                Err(_) => panic!(
                    "the service did not print the line awaited; it printed {:?}",
                    self.printed
                ),
            }
        }
    }

    fn post_orders(&self) -> Vec<i64> {
        ORDERS
            .iter()
            .map(|(order_id, item, quantity)| {
                let body = json!({ "order_id": order_id, "item": item, "quantity": quantity });
                let (status, answer) = http(&self.address, "POST", "/orders", Some(&body));
                assert_eq!(status, 202, "{answer}");
                answer["seq"].as_i64().expect("the answer names the seq")
            })
            .collect()
    }

    /// The admin snapshot once both handlers handled `count` events and hold none.
    fn snapshot_when_done(&self, count: u64) -> Value {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let (status, snapshot) = http(&self.address, "GET", "/admin", None);
            assert_eq!(status, 200, "{snapshot}");
            let done = ["billing", "shipping"].iter().all(|durable| {
                let handler = handler(&snapshot, durable);
                handler["handled"] == json!(count) && handler["outstanding"] == json!(0)
            });
            if done {
                return snapshot;
            }
            assert!(
                Instant::now() < deadline,
                "the handlers did not finish: {snapshot}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn terminate(&mut self) -> ExitStatus {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success());
        self.wait_for_exit()
    }

    fn wait_for_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = self.child.try_wait().expect("the child can be waited for") {
                return status;
            }
            assert!(Instant::now() < deadline, "the service did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Every line printed until the process closed its output.
    fn rest_of_output(&mut self) -> Vec<String> {
        while let Ok(line) = self.lines.recv_timeout(DEADLINE) {
            self.printed.push(line);
        }
        self.printed.clone()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn read_lines(stdout: ChildStdout) -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    receiver
}

/// One HTTP/1.1 request; the status and the JSON body of the answer.
fn http(address: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let mut stream = TcpStream::connect(address).expect("the service accepts connections");
    stream
        .set_read_timeout(Some(DEADLINE))
        .expect("timeout set");
    let body = body.map(Value::to_string).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("request sent");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer read");
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .expect("an answer with headers");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("a status line");
    let body = serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.to_owned()));
    (status, body)
}

fn handler<'a>(snapshot: &'a Value, durable: &str) -> &'a Value {
    snapshot["handlers"]
        .as_array()
        .and_then(|handlers| handlers.iter().find(|h| h["durable"] == durable))
        .unwrap_or_else(|| panic!("no handler {durable} in {snapshot}"))
}

/// What every backend's snapshot shows after the four orders: each handler handled four
/// events, with no retry, dead letter or stream error, and still runs.
fn check_counts(snapshot: &Value) {
    for durable in ["billing", "shipping"] {
        let handler = handler(snapshot, durable);
        let counts = [
            "handled",
            "retries",
            "dead_lettered",
            "stream_errors",
            "outstanding",
        ]
        .map(|field| handler[field].clone());
        assert_eq!(
            counts,
            [json!(4), json!(0), json!(0), json!(0), json!(0)],
            "{durable}"
        );
        assert_eq!(handler["running"], json!(true));
    }
}

/// The snapshot of a store that can tell heads and list topics: four events on each topic,
/// both checkpoints at the head (once committed), no dead letters.
fn check_positions(service: &Service, seqs: &[i64]) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let (_, snapshot) = http(&service.address, "GET", "/admin", None);
        check_counts(&snapshot);
        let head = seqs.iter().max().copied();
        let orders = snapshot["topics"]
            .as_array()
            .and_then(|topics| topics.iter().find(|t| t["name"] == "orders"))
            .expect("the orders topic");
        assert_eq!(orders["head_seq"], json!(head));
        let letters: Vec<_> = snapshot["dead_letters"]
            .as_array()
            .expect("dead letter counts")
            .iter()
            .map(|d| (d["topic"].clone(), d["count"].clone()))
            .collect();
        assert_eq!(
            letters,
            vec![(json!("orders"), json!(0)), (json!("shipments"), json!(0))]
        );
        let committed = handler(&snapshot, "billing")["lag"] == json!(0)
            && handler(&snapshot, "shipping")["lag"] == json!(0);
        if committed {
            assert_eq!(handler(&snapshot, "billing")["checkpoint"], json!(head));
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the checkpoints were not committed: {snapshot}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Stops the service with SIGTERM and checks it stopped cleanly, having said so.
fn stop_cleanly(service: &mut Service) {
    let status = service.terminate();
    let output = service.rest_of_output();
    assert!(status.success(), "{status}; printed {output:?}");
    let last = output
        .iter()
        .rev()
        .take(3)
        .rev()
        .cloned()
        .collect::<Vec<_>>();
    assert_eq!(
        last,
        vec![
            "SIGTERM received".to_owned(),
            "stopping: draining handlers and committing checkpoints".to_owned(),
            "stopped: 4 orders billed, 4 shipments".to_owned(),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_service_serves_and_stops_on_sigterm() {
    let directory = tempfile::tempdir().unwrap();
    let path = directory.path().join("shop.db");
    let env = [("PHOTON_SQLITE_PATH", path.display().to_string())];
    let mut service = Service::start("sqlite_service", &env);
    let seqs = service.post_orders();
    assert_eq!(seqs, vec![1, 2, 3, 4]);
    service.snapshot_when_done(4);
    check_positions(&service, &seqs);
    stop_cleanly(&mut service);

    // The file holds what the service committed on its way out.
    let port = photon::sqlite::SqliteStoragePort::builder()
        .path(&path)
        .build()
        .await
        .unwrap();
    let photon = Photon::builder().storage_port(port).build().unwrap();
    for (durable, topic) in [("billing", "orders"), ("shipping", "shipments")] {
        assert_eq!(
            photon.checkpoint(durable, topic, None).await.unwrap(),
            Some(4),
            "{durable}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sqlite_service_stops_by_itself_after_the_shipments_asked_for() {
    let directory = tempfile::tempdir().unwrap();
    let env = [
        (
            "PHOTON_SQLITE_PATH",
            directory.path().join("shop.db").display().to_string(),
        ),
        ("PHOTON_EXAMPLE_EXIT_AFTER", "4".to_owned()),
    ];
    let mut service = Service::start("sqlite_service", &env);
    service.post_orders();
    let status = service.wait_for_exit();
    let output = service.rest_of_output();
    assert!(status.success(), "{status}; printed {output:?}");
    assert_eq!(
        output.last().map(String::as_str),
        Some("stopped: 4 orders billed, 4 shipments")
    );
    assert!(output.contains(&"PHOTON_EXAMPLE_EXIT_AFTER reached".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nats_service_serves_and_stops_on_sigterm() {
    let url = std::env::var(photon::nats::URL_ENV)
        .unwrap_or_else(|_| photon::nats::DEFAULT_URL.to_owned());
    let unique = uuid::Uuid::new_v4().simple().to_string();
    let prefix = format!("example{}", &unique[..12]);
    let cleanup = photon::nats::NatsStoragePort::builder()
        .url(url.clone())
        .prefix(prefix.clone());
    let reachable = tokio::time::timeout(Duration::from_secs(10), cleanup.clone().build()).await;
    let port = match reachable {
        Ok(Ok(port)) => port,
        Ok(Err(err)) => {
            return photon_testkit::skip_or_fail("nats", &format!("NATS at {url}: {err}"))
        }
        Err(_) => {
            return photon_testkit::skip_or_fail("nats", &format!("NATS at {url} did not answer"))
        }
    };
    let env = [("PHOTON_NATS_URL", url), ("PHOTON_NATS_PREFIX", prefix)];
    let mut service = Service::start("nats_service", &env);
    let seqs = service.post_orders();
    service.snapshot_when_done(4);
    check_positions(&service, &seqs);
    stop_cleanly(&mut service);
    port.delete_all_streams().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fluvio_service_serves_and_stops_on_sigterm() {
    let Ok(endpoint) = std::env::var(photon::fluvio::ENDPOINT_ENV) else {
        return photon_testkit::skip_or_fail(
            "fluvio",
            "PHOTON_FLUVIO_ENDPOINT is unset (start a cluster with scripts/fluvio-local.sh)",
        );
    };
    let unique = uuid::Uuid::new_v4().simple().to_string();
    let env = [
        ("PHOTON_FLUVIO_ENDPOINT", endpoint),
        ("PHOTON_FLUVIO_PREFIX", format!("ex{}", &unique[..10])),
    ];
    let mut service = Service::start("fluvio_service", &env);
    service.post_orders();
    let snapshot = service.snapshot_when_done(4);
    check_counts(&snapshot);
    // Fluvio cannot tell heads nor list topics: the snapshot says so with nulls.
    assert_eq!(handler(&snapshot, "billing")["lag"], json!(null));
    stop_cleanly(&mut service);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_service_serves_and_stops_on_sigterm() {
    let url = std::env::var(photon::postgres::URL_ENV)
        .ok()
        .filter(|url| !url.trim().is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/test".to_owned());
    let unique = uuid::Uuid::new_v4().simple().to_string();
    let schema = format!("photon_example_{}", &unique[..12]);
    let connected = tokio::time::timeout(
        Duration::from_secs(10),
        tokio_postgres::connect(&url, tokio_postgres::NoTls),
    )
    .await;
    let client = match connected {
        Ok(Ok((client, connection))) => {
            tokio::spawn(connection);
            client
        }
        Ok(Err(err)) => {
            return photon_testkit::skip_or_fail("postgres", &format!("PostgreSQL at {url}: {err}"))
        }
        Err(_) => {
            return photon_testkit::skip_or_fail(
                "postgres",
                &format!("PostgreSQL at {url} did not answer"),
            )
        }
    };
    let env = [
        ("PHOTON_POSTGRES_URL", url),
        ("PHOTON_POSTGRES_SCHEMA", schema.clone()),
    ];
    let mut service = Service::start("postgres_service", &env);
    let seqs = service.post_orders();
    service.snapshot_when_done(4);
    check_positions(&service, &seqs);
    stop_cleanly(&mut service);
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .unwrap();
}
