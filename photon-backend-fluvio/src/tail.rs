//! Tail positions fixed before any later append can pass them.
//!
//! `subscribe` is synchronous, but a tail position is an end offset the cluster has to be
//! asked for. So that a tail subscription includes every event appended after `subscribe`
//! returns, `subscribe` registers the subscription here before returning, and an append to
//! that Photon topic waits (in any port of this process on the same cluster and prefix)
//! until every registered tail position of the topic has been read. Appends already in
//! flight when `subscribe` is called are concurrent with it and may land on either side.
//!
//! An append from another process is not held back: "after `subscribe` returns" has no
//! meaning across processes without a signal between them, and a signal sent after
//! `subscribe` returns reaches the other process before the tail position is fixed only
//! when it is faster than one read of the end offset (a few milliseconds on a local
//! cluster). Such a process should subscribe from a checkpoint or a seq instead.
//!
//! The fast path of every append is one relaxed atomic load (no tail being fixed anywhere).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::watch;

/// Tail positions being fixed in this process, over every topic.
static PENDING: AtomicUsize = AtomicUsize::new(0);

/// Per topic: how many tail positions are being fixed, observable by waiting appends.
fn gates() -> &'static Mutex<HashMap<String, Arc<watch::Sender<usize>>>> {
    static GATES: OnceLock<Mutex<HashMap<String, Arc<watch::Sender<usize>>>>> = OnceLock::new();
    GATES.get_or_init(Mutex::default)
}

/// The gate's name of a Photon topic on a cluster under a prefix.
pub(crate) fn gate_name(endpoint: &str, prefix: &str, topic: &str) -> String {
    format!("{endpoint}\u{0}{prefix}\u{0}{topic}")
}

/// Holds appends to one topic back until dropped (once the tail position is fixed).
pub(crate) struct TailGate {
    name: String,
    counter: Arc<watch::Sender<usize>>,
}

impl TailGate {
    /// Closes the gate of `name` (synchronously: before `subscribe` returns).
    pub(crate) fn close(name: String) -> Self {
        // Only map lookups and inserts happen under this lock.
        let counter = gates()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(name.clone())
            .or_insert_with(|| Arc::new(watch::Sender::new(0)))
            .clone();
        counter.send_modify(|n| *n += 1);
        PENDING.fetch_add(1, Ordering::SeqCst);
        Self { name, counter }
    }
}

impl Drop for TailGate {
    fn drop(&mut self) {
        let mut gates = gates().lock().unwrap_or_else(|p| p.into_inner());
        self.counter.send_modify(|n| *n -= 1);
        if *self.counter.borrow() == 0 {
            gates.remove(&self.name);
        }
        PENDING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Waits until no tail position of the topic `name()` names is being fixed.
pub(crate) async fn pass(name: impl FnOnce() -> String) {
    if PENDING.load(Ordering::SeqCst) == 0 {
        return;
    }
    let name = name();
    let counter = gates()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&name)
        .cloned();
    if let Some(counter) = counter {
        let mut open = counter.subscribe();
        // The sender lives as long as `counter`, so this only ends at zero.
        let _ = open.wait_for(|n| *n == 0).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn appends_wait_for_the_gate_of_their_topic_only() {
        let gate = TailGate::close(gate_name("e", "p", "t"));
        // Another topic passes at once.
        tokio::time::timeout(Duration::from_secs(1), pass(|| gate_name("e", "p", "u")))
            .await
            .unwrap();
        let waiting = tokio::spawn(pass(|| gate_name("e", "p", "t")));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished());
        drop(gate);
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .unwrap()
            .unwrap();
        assert!(gates()
            .lock()
            .unwrap()
            .get(&gate_name("e", "p", "t"))
            .is_none());
    }
}
