//! Checkpoints of the mem port.

use super::port::MemStoragePort;
use crate::port::CheckpointKey;

impl MemStoragePort {
    pub(super) fn checkpoint(&self, key: &CheckpointKey) -> Option<i64> {
        self.shared.lock().checkpoints.get(key).copied()
    }

    /// Stores `seq` unless a higher one is stored already.
    pub(super) fn raise_checkpoint(&self, key: &CheckpointKey, seq: i64) {
        let mut state = self.shared.lock();
        let stored = state.checkpoints.entry(key.clone()).or_insert(seq);
        *stored = (*stored).max(seq);
    }

    /// Replaces a checkpoint with `seq`, or removes it.
    pub(super) fn replace_checkpoint(&self, key: &CheckpointKey, seq: Option<i64>) {
        let mut state = self.shared.lock();
        match seq {
            Some(seq) => {
                state.checkpoints.insert(key.clone(), seq);
            }
            None => {
                state.checkpoints.remove(key);
            }
        }
    }
}
