//! A durable consumer in a child process is killed (SIGKILL) three times while this
//! process publishes 20,000 keyed events to the same SQLite file; after the last restart
//! every event was handled, each run handled each key in order, and the duplicates are
//! bounded by the checkpoint flush window.
//!
//! The child is this test binary run again with `--ignored --exact crash_child` and
//! [`CHILD_ENV`] set. It appends `run event_id key seq` per handled event to an output
//! file, flushing each line, then acknowledges the event to a `CheckpointCommitter`.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use photon_core::{CheckpointCommitter, CheckpointKey, FlushPolicy, StartPolicy};
use serde_json::json;

const CHILD_ENV: &str = "PHOTON_SQLITE_TEST_CRASH_CHILD";
const TOPIC: &str = "crash.orders";
const SUBSCRIPTION: &str = "crash-consumer";
const EVENTS: usize = 20_000;
const KEYS: usize = 40;
const PUBLISHERS: usize = 4;
const KILLS: usize = 3;
/// Acknowledgements that force a checkpoint commit in the child.
const MAX_PENDING: u32 = 100;

/// The child: consumes the durable subscription until killed.
#[test]
#[ignore = "child process of durable_consumer_survives_three_kills"]
fn crash_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut parts = spec.splitn(3, '|');
    let (run, db, out) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let runtime = photon_testkit::process::child_runtime();
    runtime.block_on(async {
        let store = common::open_store(Path::new(db));
        let key = CheckpointKey::new(SUBSCRIPTION, TOPIC, None);
        let policy = FlushPolicy {
            interval: Duration::from_millis(50),
            max_pending: MAX_PENDING,
        };
        let committer = CheckpointCommitter::new(store.port().clone(), key.clone(), policy);
        let mut output = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(out)
            .unwrap();
        let mut events = store.subscribe_after_checkpoint(key, StartPolicy::Beginning);
        while let Some(event) = events.next().await {
            let event = event.unwrap();
            let line = format!(
                "{run} {} {} {}\n",
                event.event_id,
                event.topic_key.unwrap(),
                event.seq
            );
            output.write_all(line.as_bytes()).unwrap();
            output.flush().unwrap();
            committer.ack(event.seq).await.unwrap();
        }
    });
}

fn spawn_child(run: usize, db: &Path, out: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "crash_child",
            "--test-threads=1",
            "--quiet",
        ])
        .env(
            CHILD_ENV,
            format!("{run}|{}|{}", db.display(), out.display()),
        )
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// One handled event as the child wrote it.
struct Handled {
    run: usize,
    event_id: String,
    key: String,
    seq: i64,
}

fn read_output(out: &Path) -> Vec<Handled> {
    let text = std::fs::read_to_string(out).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            // The last line may be cut by a kill: only complete lines count.
            let fields: Vec<&str> = line.split(' ').collect();
            let [run, event_id, key, seq] = fields[..] else {
                return None;
            };
            Some(Handled {
                run: run.parse().ok()?,
                event_id: event_id.to_owned(),
                key: key.to_owned(),
                seq: seq.parse().ok()?,
            })
        })
        .collect()
}

fn handled_in_run(out: &Path, run: usize) -> usize {
    read_output(out).iter().filter(|h| h.run == run).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_consumer_survives_three_kills() {
    let directory = tempfile::tempdir().unwrap();
    let db: PathBuf = directory.path().join("crash.db");
    let out: PathBuf = directory.path().join("handled.txt");
    let store = common::open_store(&db);

    let published = Arc::new(AtomicUsize::new(0));
    let mut publishers = Vec::new();
    for publisher in 0..PUBLISHERS {
        let (store, published) = (store.clone(), published.clone());
        publishers.push(tokio::spawn(async move {
            let mut ids = Vec::new();
            // Publisher p owns keys p, p + PUBLISHERS, ...: one ordered writer per key.
            for i in 0..EVENTS / PUBLISHERS {
                let key = format!("k{}", publisher + PUBLISHERS * (i % (KEYS / PUBLISHERS)));
                let appended = store
                    .publish(
                        TOPIC,
                        Some(&key),
                        json!(null),
                        json!({"p": publisher, "i": i}),
                    )
                    .await
                    .unwrap();
                ids.push(appended.event_id);
                published.fetch_add(1, Ordering::Relaxed);
                // Paced so that the kills land while publishing goes on.
                if i % 10 == 9 {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
            ids
        }));
    }

    let mut run = 0;
    let mut child = spawn_child(run, &db, &out);
    for kill in 1..=KILLS {
        let threshold = kill * EVENTS / (KILLS + 1);
        while published.load(Ordering::Relaxed) < threshold || handled_in_run(&out, run) < 50 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(
            published.load(Ordering::Relaxed) < EVENTS,
            "kill {kill} came after publishing ended"
        );
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        run += 1;
        child = spawn_child(run, &db, &out);
    }

    let mut all_ids = HashSet::new();
    for publisher in publishers {
        all_ids.extend(publisher.await.unwrap());
    }
    assert_eq!(all_ids.len(), EVENTS);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let seen: HashSet<String> = read_output(&out).into_iter().map(|h| h.event_id).collect();
        if all_ids.iter().all(|id| seen.contains(id)) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "deadline passed with {} of {EVENTS} handled",
            seen.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.kill().unwrap();
    child.wait().unwrap();

    let handled = read_output(&out);
    let seen: HashSet<&str> = handled.iter().map(|h| h.event_id.as_str()).collect();
    let missing = all_ids
        .iter()
        .filter(|id| !seen.contains(id.as_str()))
        .count();
    let duplicates = handled.len() - seen.len();
    assert_eq!(missing, 0);
    assert!(
        seen.iter().all(|id| all_ids.contains(*id)),
        "an unknown event was handled"
    );
    // Per run, each key's seqs strictly increase.
    let mut last: HashMap<(usize, &str), i64> = HashMap::new();
    for h in &handled {
        if let Some(previous) = last.insert((h.run, h.key.as_str()), h.seq) {
            assert!(
                previous < h.seq,
                "run {} key {}: seq {} after {previous}",
                h.run,
                h.key,
                h.seq
            );
        }
    }
    let runs: BTreeMap<usize, usize> = handled.iter().fold(BTreeMap::new(), |mut runs, h| {
        *runs.entry(h.run).or_default() += 1;
        runs
    });
    assert_eq!(runs.len(), KILLS + 1, "every run handled events: {runs:?}");
    // At a kill, at most MAX_PENDING acknowledgements are pending, plus one interval flush
    // of at most MAX_PENDING in flight, plus the event written but not yet acknowledged.
    let bound = KILLS * (2 * MAX_PENDING as usize + 1);
    println!("crash_resume: {EVENTS} events, {KILLS} kills, handled {} lines, missing {missing}, duplicates {duplicates} (bound {bound}), per run {runs:?}", handled.len());
    assert!(
        duplicates <= bound,
        "{duplicates} duplicates, more than {bound}"
    );
}
