//! Photon crate `photon-backend-fluvio` (in progress).
