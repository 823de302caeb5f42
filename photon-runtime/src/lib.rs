//! Photon crate `photon-runtime` (in progress).
