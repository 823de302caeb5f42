//! Consumer groups of the mem port: Photon's generic dispatcher over the mem topic stream.

use std::sync::Arc;

use super::port::MemStoragePort;
use crate::port::{DeliveryStream, GroupRequest};

impl MemStoragePort {
    pub(super) fn join_group(&self, request: GroupRequest) -> DeliveryStream {
        let port = self.clone();
        self.shared
            .groups
            .join(request, Arc::new(self.clone()), move |subscription| {
                port.open_subscription(subscription)
            })
    }
}
