//! A commit whose answer is lost (issue 24, defect 8): the connection breaks after the
//! server applied a batch's `COMMIT` and before its answer reached the port. The port must
//! not answer "nothing stored": it finds the batch's events by id and answers with their
//! seqs.
//!
//! The port talks to the server through a proxy of the test's own that, once armed, lets a
//! `COMMIT` through, swallows the server's answer, cuts every connection, and refuses new
//! ones until the port has been refused [`REFUSALS`] times: longer than the writer's own
//! retries, so that only a port that looks its events up answers with them.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use photon_core::{RecordDraft, StoragePort};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::timeout;

use common::PgFactory;

/// Connections the proxy refuses after cutting the committed one.
const REFUSALS: usize = 8;
/// Bound of every wait.
const BOUND: Duration = Duration::from_secs(30);

/// What the proxy is doing.
#[derive(Default)]
struct Proxy {
    /// Cut connections at the next `COMMIT`.
    armed: AtomicBool,
    /// New connections are closed at once.
    refusing: AtomicBool,
    /// Connections refused so far.
    refused: AtomicUsize,
}

impl Proxy {
    /// Starts a proxy onto `upstream`; returns it and its port.
    async fn start(upstream: String) -> (Arc<Self>, u16) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let proxy = Arc::new(Self::default());
        let (cut, _) = watch::channel(0_u64);
        let cut = Arc::new(cut);
        let state = Arc::clone(&proxy);
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if state.refusing.load(Ordering::SeqCst) {
                    drop(client);
                    if state.refused.fetch_add(1, Ordering::SeqCst) + 1 >= REFUSALS {
                        state.refusing.store(false, Ordering::SeqCst);
                    }
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    continue;
                };
                tokio::spawn(relay(Arc::clone(&state), Arc::clone(&cut), client, server));
            }
        });
        (proxy, port)
    }
}

/// Copies both ways until either side closes or every connection is cut.
async fn relay(
    proxy: Arc<Proxy>,
    cut: Arc<watch::Sender<u64>>,
    client: TcpStream,
    server: TcpStream,
) {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let commit_sent = AtomicBool::new(false);
    let mut cuts = cut.subscribe();
    let upstream = async {
        let mut buffer = vec![0_u8; 64 * 1024];
        loop {
            let read = client_read.read(&mut buffer).await?;
            if read == 0 {
                return Ok::<_, std::io::Error>(());
            }
            let chunk = &buffer[..read];
            let commit = proxy.armed.load(Ordering::SeqCst)
                && chunk.windows(6).any(|window| window == b"COMMIT");
            server_write.write_all(chunk).await?;
            if commit {
                commit_sent.store(true, Ordering::SeqCst);
            }
        }
    };
    let downstream = async {
        let mut buffer = vec![0_u8; 64 * 1024];
        loop {
            let read = server_read.read(&mut buffer).await?;
            if read == 0 {
                return Ok::<_, std::io::Error>(());
            }
            if commit_sent.load(Ordering::SeqCst) {
                // The server answered the COMMIT, so it applied it: the port never hears.
                proxy.armed.store(false, Ordering::SeqCst);
                proxy.refusing.store(true, Ordering::SeqCst);
                cut.send_modify(|cuts| *cuts += 1);
                return Ok(());
            }
            client_write.write_all(&buffer[..read]).await?;
        }
    };
    tokio::select! {
        _ = upstream => {}
        _ = downstream => {}
        _ = cuts.changed() => {}
    }
}

fn draft(i: i64) -> RecordDraft {
    photon_testkit::plain_draft("lost", Some(&format!("k{}", i % 2)), json!({ "i": i }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_whose_commit_answer_is_lost_is_answered_with_its_seqs() {
    let Some(factory) = PgFactory::new().await else {
        return;
    };
    let server: tokio_postgres::Config = factory.url.parse().unwrap();
    let server_port = server.get_ports().first().copied().unwrap_or(5432);
    let (proxy, proxy_port) = Proxy::start(format!("127.0.0.1:{server_port}")).await;
    // Clear text, so that the proxy sees the COMMIT.
    let url = format!(
        "host=127.0.0.1 port={proxy_port} user={} dbname={} sslmode=disable",
        server.get_user().unwrap_or("postgres"),
        server.get_dbname().unwrap_or("test"),
    );
    let port = factory.builder().url(url).build().await.unwrap();
    let warm_up = port.append_batch(vec![draft(0), draft(1)]).await.unwrap();
    assert_eq!(warm_up.iter().map(|a| a.seq).collect::<Vec<_>>(), [1, 2]);

    proxy.armed.store(true, Ordering::SeqCst);
    let drafts: Vec<RecordDraft> = (2..5).map(draft).collect();
    let ids: Vec<String> = drafts.iter().map(|d| d.envelope_id.clone()).collect();
    let port = Arc::new(port);
    let appending = tokio::spawn({
        let port = Arc::clone(&port);
        async move { port.append_batch(drafts).await }
    });
    let appended = timeout(BOUND, appending)
        .await
        .expect("the batch is answered within the bound")
        .unwrap();
    assert!(
        proxy.refused.load(Ordering::SeqCst) >= REFUSALS,
        "the batch was answered while the server could not be reached: {appended:?}"
    );
    let appended = appended.expect("the committed batch is answered as stored");
    assert_eq!(
        appended.iter().map(|a| a.seq).collect::<Vec<_>>(),
        [3, 4, 5]
    );
    assert_eq!(
        appended
            .iter()
            .map(|a| a.event_id.clone())
            .collect::<Vec<_>>(),
        ids
    );

    // Stored once each, and nothing else.
    let admin = common::admin(&factory.url).await.unwrap();
    let stored: Vec<(String, i64)> = common::query_pairs(
        &admin,
        &format!(
            "SELECT event_id, seq FROM {}.events ORDER BY seq",
            factory.schema
        ),
    )
    .await;
    let seqs: Vec<i64> = stored.iter().map(|(_, seq)| *seq).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    assert_eq!(
        stored[2..]
            .iter()
            .map(|(id, _)| id.clone())
            .collect::<Vec<_>>(),
        ids
    );
}
