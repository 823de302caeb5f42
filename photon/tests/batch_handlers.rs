//! `#[subscribe(batch_max = .., batch_wait = "..")]`: the declared batch handler compiles,
//! starts with `Photon::start_executor`, and gets the events in batches of at most
//! `batch_max`, each key in order.

use std::collections::HashMap;
use std::sync::Mutex;

use photon::prelude::*;
use serde::{Deserialize, Serialize};

#[topic(name = "parcels", keyed_by = "parcel_id")]
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Parcel {
    parcel_id: String,
    n: u32,
}

#[derive(Clone)]
struct Depot(&'static str);

/// Each batch as `(key, n)`, in the order handled.
static BATCHES: Mutex<Vec<Vec<(String, u32)>>> = Mutex::new(Vec::new());

#[subscribe(
    durable = "sorting",
    batch_max = 4,
    batch_wait = "10ms",
    max_attempts = 2
)]
async fn sort(parcels: Vec<TypedEvent<Parcel>>, State(depot): State<Depot>, _photon: Photon) {
    assert_eq!(depot.0, "north");
    let batch = parcels
        .iter()
        .map(|parcel| (parcel.value.parcel_id.clone(), parcel.value.n))
        .collect();
    BATCHES.lock().unwrap().push(batch);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_batch_handler_gets_batches_in_key_order() {
    let photon = Photon::builder().state(Depot("north")).build().unwrap();
    for n in 0..10u32 {
        let parcel = Parcel {
            parcel_id: format!("p-{}", n % 3),
            n,
        };
        parcel.publish_on(&photon).await.unwrap();
    }
    let executor = photon.start_executor().unwrap();
    let declared = &executor.handlers()[0];
    assert_eq!(
        declared.batch_policy().map(|policy| policy.max_events()),
        Some(4)
    );
    executor.wait_idle().await.unwrap();
    executor.shutdown().await.unwrap();
    let batches = BATCHES.lock().unwrap().clone();
    assert!(
        batches.iter().all(|batch| (1..=4).contains(&batch.len())),
        "{batches:?}"
    );
    let mut by_key: HashMap<String, Vec<u32>> = HashMap::new();
    for (key, n) in batches.concat() {
        by_key.entry(key).or_default().push(n);
    }
    assert_eq!(by_key["p-0"], vec![0, 3, 6, 9]);
    assert_eq!(by_key["p-1"], vec![1, 4, 7]);
    assert_eq!(by_key["p-2"], vec![2, 5, 8]);
}
