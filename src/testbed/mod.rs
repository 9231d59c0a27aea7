//! Where endpoints run: the `loopback` placement (both on this host over
//! 127.0.0.1) and the `netns` placement (two network namespaces joined by an
//! emulated link), with link profiles, netlab's wire emulator and the wire
//! view. See `docs/TESTBED.md`.

pub mod capture;
pub mod cgroup;
pub mod emulator;
pub mod link;
pub mod netns;

pub use crate::record::testbed::{LinkVia, Placement};
