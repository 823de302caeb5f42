//! The ops page in a real headless browser (Debian's chromium, driven through
//! chromedriver): it shows a seeded lag figure and a dead letter; pressing replay publishes
//! the letter's event again, the handler running in this test handles it, and the page
//! shows the letter handled.
//!
//! Skips with a printed reason when chromium or chromedriver is missing, unless
//! `PHOTON_TEST_REQUIRE` names `chromium`. With `PHOTON_UPDATE_SCREENSHOT=1` it also writes
//! the screenshot `docs/cli.md` shows, `docs/serve.png`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{photon_on_sqlite as photon_cmd, Server, DEADLINE};
use fantoccini::{Client, ClientBuilder, Locator};
use futures::StreamExt;
use photon::{GroupOptions, HandlerOptions, Photon, PhotonError};
use serde_json::json;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// chromedriver on a port of its own, killed when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(CHROMEDRIVER)
            .args([format!("--port={port}"), "--allowed-ips=127.0.0.1".into()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let driver = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < DEADLINE,
                "chromedriver did not listen on {port}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        driver
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn browser(driver: &Driver) -> Client {
    let mut capabilities = serde_json::Map::new();
    capabilities.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": CHROMIUM,
            // Root (CI) cannot use chromium's sandbox; the page is our own, on 127.0.0.1.
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1440,1000", "--force-device-scale-factor=1"],
        }),
    );
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(capabilities)
        .connect(&driver.url)
        .await
        .expect("chromedriver starts a chromium session")
}

/// Waits until the text of the first element matching `css` is `expected`.
async fn wait_for_text(client: &Client, css: &str, expected: &str) {
    let started = Instant::now();
    let mut last = String::from("(no element)");
    while started.elapsed() < DEADLINE {
        if let Ok(element) = client.find(Locator::Css(css)).await {
            if let Ok(text) = element.text().await {
                if text == expected {
                    return;
                }
                last = text;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{css} still shows {last:?}, not {expected:?}");
}

fn screenshot_path(name: &str) -> PathBuf {
    let test = std::env::current_exe().unwrap();
    // target/<profile>/deps/<test> → target/<profile>/<name>
    test.parent().unwrap().parent().unwrap().join(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_shows_lag_and_replays_a_dead_letter_until_handled() {
    for tool in [CHROMIUM, CHROMEDRIVER] {
        if !Path::new(tool).exists() {
            photon_testkit::skip_or_fail(
                "chromium",
                &format!("{tool} is missing (apt-get install chromium chromium-driver)"),
            );
            return;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("photon.db");

    // The application: orders, a `billing` handler that refuses order 2 the first time
    // only (an outage), and a `shipping` group that took every order.
    let port = photon::sqlite::SqliteStoragePort::builder()
        .path(&db)
        .build()
        .await
        .unwrap();
    let photon = Photon::builder().storage_port(port).build().unwrap();
    for n in 0..4 {
        let key = format!("c-{}", n % 2);
        photon
            .publish("orders", Some(&key), json!(null), json!({"n": n}))
            .await
            .unwrap();
    }
    let executor = photon
        .executor()
        .handler_with(
            HandlerOptions::new("billing", "orders"),
            |event: photon::Event| async move {
                if event.payload["n"] == json!(2) && event.seq == 3 {
                    return Err(PhotonError::handler_permanent("card processor unavailable"));
                }
                Ok(())
            },
        )
        .start()
        .unwrap();
    executor.wait_idle().await.unwrap();
    assert_eq!(photon.dead_letters("orders").await.unwrap().len(), 1);
    let mut shipping = photon.group_with("shipping", "orders", GroupOptions::new("worker-a"));
    for _ in 0..4 {
        let event = tokio::time::timeout(DEADLINE, shipping.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        shipping.ack(&event).await.unwrap();
    }
    photon
        .set_checkpoint("audit", "orders", None, 1)
        .await
        .unwrap();

    let server = Server::start(photon_cmd(
        &db,
        &[
            "serve",
            "--bind",
            "127.0.0.1:0",
            "--allow-replay",
            "--group",
            "shipping:orders",
        ],
    ));
    let driver = Driver::start();
    let client = browser(&driver).await;
    client.goto(&format!("{}/", server.base)).await.unwrap();

    wait_for_text(&client, "#backend", "sqlite").await;
    wait_for_text(&client, "#mode", "replay allowed").await;
    wait_for_text(&client, "tr[data-subscription='audit'] td.lag", "3").await;
    wait_for_text(&client, "tr[data-subscription='billing'] td.lag", "0").await;
    wait_for_text(&client, "tr[data-topic='orders'] td.head", "4").await;
    wait_for_text(&client, "#dlq-count", "1 stored, 1 not handled").await;
    let letters = client.find_all(Locator::Css("tr.letter")).await.unwrap();
    assert_eq!(letters.len(), 1);
    let error = letters[0]
        .find(Locator::Css("td.error"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(error, "handler failed: card processor unavailable");
    wait_for_text(&client, "tr[data-group='shipping'] td.members", "worker-a").await;

    client
        .find(Locator::Css("tr.letter button.replay"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_for_text(
        &client,
        "tr.letter .status.handled",
        "handled (replayed as seq 5)",
    )
    .await;
    wait_for_text(&client, "#dlq-count", "1 stored, 0 not handled").await;
    wait_for_text(
        &client,
        "tr[data-subscription='billing'] td.checkpoint",
        "5",
    )
    .await;
    wait_for_text(&client, "tr[data-subscription='audit'] td.lag", "4").await;
    assert_eq!(
        client
            .find_all(Locator::Css("tr.letter button.replay"))
            .await
            .unwrap()
            .len(),
        0,
        "a handled letter has no replay button"
    );
    let replayed = photon
        .store()
        .port()
        .list_by_topic("orders", 4, 10)
        .await
        .unwrap();
    assert_eq!(replayed.len(), 1);
    assert_eq!(replayed[0].seq, 5);

    let png = client.screenshot().await.unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    std::fs::write(screenshot_path("serve.png"), &png).unwrap();
    if std::env::var("PHOTON_UPDATE_SCREENSHOT").as_deref() == Ok("1") {
        let docs = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("set by the test runner"))
            .join("../docs/serve.png");
        std::fs::write(docs, &png).unwrap();
    }
    client.close().await.unwrap();
    shipping.leave().await;
    executor.shutdown().await.unwrap();
    photon.shutdown().await.unwrap();
}
