//! Photon crate `photon-bench` (in progress).
