//! The lease a group handler's attempt runs under, for handlers that fence their own
//! writes with it.

use std::future::Future;

use photon_core::group::Ownership;

tokio::task_local! {
    static OWNERSHIP: Option<Ownership>;
}

/// The partition lease the running group handler attempt was started under: the
/// partition's id, the lease's epoch (which only grows for a partition) and the owner
/// token. `None` outside a group handler's attempt (and in tasks the handler spawns).
///
/// A handler that writes to a store of its own can keep `(partition, epoch)` beside its
/// writes and refuse a write whose epoch is lower than the one stored: that fences an
/// attempt that outlived its lease (a process frozen mid-attempt, a handler slower than the
/// lease), which Photon itself can only fence at acknowledgement.
///
/// ```
/// assert!(photon_runtime::current_ownership().is_none());
/// ```
pub fn current_ownership() -> Option<Ownership> {
    OWNERSHIP.try_with(Clone::clone).ok().flatten()
}

/// Runs `attempt` with `ownership` as its [`current_ownership`].
pub(crate) async fn under<F: Future>(ownership: Option<Ownership>, attempt: F) -> F::Output {
    OWNERSHIP.scope(ownership, attempt).await
}
