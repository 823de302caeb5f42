//! Photon crate `photon-backend-nats` (in progress).
