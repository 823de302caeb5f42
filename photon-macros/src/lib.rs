//! Photon crate `photon-macros` (in progress).
