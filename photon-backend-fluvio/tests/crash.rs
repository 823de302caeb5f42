//! Real processes killed with SIGKILL: a publisher child and a durable consumer child on a
//! Fluvio topic (1 and 4 shards); the consumer is killed at random points 20 times, and
//! the SPU restarts in the middle. From the children's fsynced logs: nothing published is
//! missing, each key's events come in publish order within every consumer incarnation, and
//! duplicates stay within the checkpoint flush window.
//!
//! Needs a cluster started by `scripts/fluvio-local.sh start` (it restarts the SPU); skips
//! with a message otherwise. The children are this test executable, run with
//! `PHOTON_CRASH_ROLE` set.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{owned_state, restart_spu, FluvioFactory};
use futures::StreamExt;
use photon_core::{
    CheckpointCommitter, CheckpointKey, EventStore, FlushPolicy, PhotonError, StartPolicy,
    TransportCrypto,
};
use serde_json::json;

const ROLE: &str = "PHOTON_CRASH_ROLE";
const DIR: &str = "PHOTON_CRASH_DIR";
const PREFIX: &str = "PHOTON_CRASH_PREFIX";
const SHARDS: &str = "PHOTON_CRASH_SHARDS";
const INCARNATION: &str = "PHOTON_CRASH_INCARNATION";
const TOPIC: &str = "crash.orders";
const EVENTS: i64 = 3000;
const KEYS: i64 = 16;
const KILLS: usize = 20;

fn append_line(file: &mut File, line: &str) {
    file.write_all(line.as_bytes()).unwrap();
    file.write_all(b"\n").unwrap();
    file.sync_data().unwrap();
}

fn open_log(path: &Path) -> File {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap()
}

/// The child side: does nothing unless started by the parent with a role.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_child() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let dir = PathBuf::from(std::env::var(DIR).unwrap());
    let factory = FluvioFactory {
        endpoint: photon_backend_fluvio::fluvio_endpoint_from_env().unwrap(),
        prefix: std::env::var(PREFIX).unwrap(),
        shards: std::env::var(SHARDS).unwrap().parse().unwrap(),
    };
    let port = Arc::new(factory.port().await.unwrap());
    let store = EventStore::new(port.clone(), TransportCrypto::plaintext());
    match role.as_str() {
        "publisher" => {
            let mut log = open_log(&dir.join("published.log"));
            for i in 0..EVENTS {
                let key = format!("k{}", i % KEYS);
                let draft = store
                    .draft(TOPIC, Some(&key), json!(null), json!({"i": i}))
                    .unwrap();
                let deadline = Instant::now() + Duration::from_secs(120);
                loop {
                    match store.port().append(draft.clone()).await {
                        Ok(_) => break,
                        Err(PhotonError::Unavailable { .. }) if Instant::now() < deadline => {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        Err(err) => panic!("append {i}: {err}"),
                    }
                }
                append_line(&mut log, &format!("{key} {i}"));
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
        }
        "consumer" => {
            let incarnation = std::env::var(INCARNATION).unwrap();
            let mut log = open_log(&dir.join("handled.log"));
            let key = CheckpointKey::new("crash", TOPIC, None);
            let committer =
                CheckpointCommitter::new(port.clone(), key.clone(), FlushPolicy::default());
            let mut stream = store.subscribe_after_checkpoint(key, StartPolicy::Beginning);
            while let Some(event) = stream.next().await {
                // An error item (the cluster unreachable while the SPU restarts) ends this
                // incarnation as a crash would; the next one resumes from the checkpoint.
                let event = match event {
                    Ok(event) => event,
                    Err(err) => {
                        eprintln!("consumer {incarnation}: {err}");
                        std::process::exit(3);
                    }
                };
                let i = event.payload["i"].as_i64().unwrap();
                let key = event.topic_key.clone().unwrap();
                append_line(&mut log, &format!("{incarnation} {key} {i}"));
                committer.ack(event.seq).await.unwrap();
            }
        }
        other => panic!("unknown role {other}"),
    }
}

fn child(role: &str, dir: &Path, factory: &FluvioFactory, incarnation: usize) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(DIR, dir)
        .env(PREFIX, &factory.prefix)
        .env(SHARDS, factory.shards.to_string())
        .env(INCARNATION, incarnation.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A pseudo-random pause from a seed, without a dependency.
fn pause(seed: &mut u64) -> Duration {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    Duration::from_millis(300 + *seed % 1500)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_killed_20_times_loses_nothing() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    for shards in [1, 4] {
        let Some(factory) = FluvioFactory::from_env(shards).await else {
            return;
        };
        let Some(state) = owned_state() else {
            return;
        };
        let dir = std::env::temp_dir().join(format!("photon-crash-{}", factory.prefix));
        std::fs::create_dir_all(&dir).unwrap();
        let mut publisher = child("publisher", &dir, &factory, 0);
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64 ^ u64::from(shards);
        for incarnation in 0..KILLS {
            let mut consumer = child("consumer", &dir, &factory, incarnation);
            tokio::time::sleep(pause(&mut seed)).await;
            consumer.kill().unwrap();
            consumer.wait().unwrap();
            if incarnation == KILLS / 2 {
                let state = state.clone();
                tokio::task::spawn_blocking(move || restart_spu(&state))
                    .await
                    .unwrap();
            }
        }
        // The publisher finishes; a last consumer incarnation catches up with it.
        let deadline = Instant::now() + Duration::from_secs(240);
        while publisher.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "publisher did not finish");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(publisher.wait().unwrap().success(), "publisher failed");
        let published = lines(&dir.join("published.log"));
        assert_eq!(published.len(), EVENTS as usize);
        let mut last = child("consumer", &dir, &factory, KILLS);
        let wanted: BTreeSet<String> = published.iter().cloned().collect();
        loop {
            let handled: BTreeSet<String> = lines(&dir.join("handled.log"))
                .iter()
                .map(|l| l.split_once(' ').unwrap().1.to_owned())
                .collect();
            if wanted.is_subset(&handled) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{shards} shards: {} of {} published events handled",
                wanted.intersection(&handled).count(),
                wanted.len()
            );
            assert!(last.try_wait().unwrap().is_none(), "last consumer died");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        last.kill().unwrap();
        last.wait().unwrap();

        let handled = lines(&dir.join("handled.log"));
        let mut per_incarnation: BTreeMap<(String, String), Vec<i64>> = BTreeMap::new();
        let mut times: BTreeMap<i64, usize> = BTreeMap::new();
        for line in &handled {
            let mut parts = line.split(' ');
            let (incarnation, key, i) = (
                parts.next().unwrap().to_owned(),
                parts.next().unwrap().to_owned(),
                parts.next().unwrap().parse::<i64>().unwrap(),
            );
            per_incarnation
                .entry((incarnation, key))
                .or_default()
                .push(i);
            *times.entry(i).or_default() += 1;
        }
        let missing: Vec<i64> = (0..EVENTS).filter(|i| !times.contains_key(i)).collect();
        assert!(missing.is_empty(), "{shards} shards: missing {missing:?}");
        for ((incarnation, key), seen) in &per_incarnation {
            assert!(
                seen.windows(2).all(|w| w[0] < w[1]),
                "{shards} shards: incarnation {incarnation}, key {key} out of order: {seen:?}"
            );
        }
        let duplicates: usize = times.values().map(|n| n - 1).sum();
        // Each kill can repeat at most what was acknowledged but not yet committed: the
        // flush window (256 acknowledgements or 100 ms), per shard.
        let bound = (KILLS + 1) * FlushPolicy::default().max_pending as usize * shards as usize;
        assert!(
            duplicates <= bound,
            "{shards} shards: {duplicates} duplicates, bound {bound}"
        );
        println!(
            "{shards} shards: {} handled lines, {duplicates} duplicates over {} incarnations, missing 0",
            handled.len(),
            KILLS + 1
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
