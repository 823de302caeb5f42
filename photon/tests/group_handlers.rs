//! `#[subscribe(group = "...")]` end to end through the facade: two instances on one store
//! start the declared group handler and share the topic's values.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use photon::prelude::*;
use serde::{Deserialize, Serialize};

#[topic(name = "parcels", keyed_by = "parcel_id")]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Parcel {
    parcel_id: String,
    n: u32,
}

static PACKED: Mutex<Vec<(String, u32)>> = Mutex::new(Vec::new());

#[subscribe(group = "packers")]
async fn pack(parcel: Parcel) -> Result<(), PhotonError> {
    PACKED.lock().unwrap().push((parcel.parcel_id, parcel.n));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn declared_group_handlers_share_a_topic() {
    let store = photon::mem::MemStoragePort::new();
    let first = Photon::builder()
        .storage_port(store.clone())
        .build()
        .unwrap();
    let second = Photon::builder().storage_port(store).build().unwrap();
    let executors = [
        first.start_executor().unwrap(),
        second.start_executor().unwrap(),
    ];
    tokio::time::sleep(Duration::from_millis(800)).await;
    for n in 0..60 {
        Parcel {
            parcel_id: format!("p-{}", n % 6),
            n,
        }
        .publish_on(&first)
        .await
        .unwrap();
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while PACKED.lock().unwrap().len() < 60 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not all parcels packed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for executor in &executors {
        executor.shutdown().await.unwrap();
    }
    let packed = PACKED.lock().unwrap();
    assert_eq!(packed.len(), 60, "each parcel packed once");
    let unique: HashSet<u32> = packed.iter().map(|(_, n)| *n).collect();
    assert_eq!(unique.len(), 60);
    for key in 0..6 {
        let order: Vec<u32> = packed
            .iter()
            .filter(|(id, _)| *id == format!("p-{key}"))
            .map(|(_, n)| *n)
            .collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "p-{key}: {order:?}");
    }
}
