//! What the binary tests share: running a command with input, reading its output.

#![allow(dead_code)] // each test file uses its own subset

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// The binary on the SQLite file `db` with `args`, clear of the caller's `PHOTON_OUTPUT`,
/// serve token and transport keys.
pub fn photon_on_sqlite(db: &std::path::Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_photon"));
    command
        .args(args)
        .env("PHOTON_BACKEND", "sqlite")
        .env("PHOTON_SQLITE_PATH", db)
        .env_remove("PHOTON_OUTPUT")
        .env_remove("PHOTON_SERVE_TOKEN")
        .env_remove("PHOTON_TRANSPORT_KEYS")
        .env_remove("PHOTON_TRANSPORT_KEY");
    command
}

/// Runs `command` with `input` on its standard input, capturing both output streams.
pub fn with_stdin(mut command: Command, input: &str) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Standard output as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// Standard error as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

/// Standard output as JSON values, one per line.
pub fn json_lines(output: &Output) -> Vec<Value> {
    stdout(output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The output of a command that must have succeeded (it shows both streams when not).
pub fn ok(output: Output) -> Output {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        stdout(&output),
        stderr(&output)
    );
    output
}

/// Longest wait for anything a server does.
pub const DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

/// A running `photon serve`, killed when dropped.
pub struct Server {
    child: std::process::Child,
    /// `http://127.0.0.1:PORT` (no trailing slash).
    pub base: String,
    /// `127.0.0.1:PORT`.
    pub address: String,
}

impl Server {
    /// Starts `command` (a `photon serve --bind 127.0.0.1:0 ...`) and waits for the line
    /// naming its address.
    pub fn start(mut command: std::process::Command) -> Self {
        use std::io::BufRead;
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = std::io::BufReader::new(stdout).lines();
            if let Some(Ok(line)) = lines.next() {
                let _ = sender.send(line);
            }
            // Keep draining so that the server never blocks on a full pipe.
            for _ in lines {}
        });
        let line = match receiver.recv_timeout(DEADLINE) {
            Ok(line) => line,
            Err(err) => {
                let _ = child.kill();
                panic!("photon serve printed no address: {err}");
            }
        };
        let base = line
            .strip_prefix("photon serve: listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .trim_end_matches('/')
            .to_owned();
        let address = base.trim_start_matches("http://").to_owned();
        Self {
            child,
            base,
            address,
        }
    }

    /// One request: the status, the headers (lower-case names) and the body.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> (u16, Vec<(String, String)>, String) {
        use std::io::{Read, Write};
        let mut stream = std::net::TcpStream::connect(&self.address).unwrap();
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.address,
            body.len()
        );
        for (name, value) in headers {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        stream.write_all(request.as_bytes()).unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|line| line.split(' ').nth(1))
            .and_then(|code| code.parse().ok())
            .unwrap();
        let headers = lines
            .filter_map(|line| line.split_once(": "))
            .map(|(name, value)| (name.to_ascii_lowercase(), value.to_owned()))
            .collect();
        (status, headers, body.to_owned())
    }

    /// `GET path` with the given headers: status and JSON body.
    pub fn get_json(&self, path: &str, headers: &[(&str, &str)]) -> (u16, Value) {
        let (status, _, body) = self.request("GET", path, headers, "");
        (
            status,
            serde_json::from_str(&body).unwrap_or(Value::String(body)),
        )
    }

    /// `POST path` with the given headers: status and JSON body.
    pub fn post_json(&self, path: &str, headers: &[(&str, &str)]) -> (u16, Value) {
        let (status, _, body) = self.request("POST", path, headers, "");
        (
            status,
            serde_json::from_str(&body).unwrap_or(Value::String(body)),
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a `billing` handler on `orders` of a SQLite file until it is idle: it refuses the
/// event whose payload `n` is `refused` for good (one dead letter) and handles the others.
pub fn dead_letter_on_sqlite(db: &std::path::Path, refused: i64) {
    use photon::{HandlerOptions, Photon, PhotonError};
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let port = photon::sqlite::SqliteStoragePort::builder()
            .path(db)
            .build()
            .await
            .unwrap();
        let photon = Photon::builder().storage_port(port).build().unwrap();
        let executor = photon
            .executor()
            .handler_with(
                HandlerOptions::new("billing", "orders"),
                move |event: photon::Event| async move {
                    if event.payload["n"] == serde_json::json!(refused) {
                        return Err(PhotonError::handler_permanent(format!(
                            "order {refused} is refused"
                        )));
                    }
                    Ok(())
                },
            )
            .start()
            .unwrap();
        executor.wait_idle().await.unwrap();
        assert_eq!(photon.dead_letters("orders").await.unwrap().len(), 1);
        executor.shutdown().await.unwrap();
        photon.shutdown().await.unwrap();
    });
}
