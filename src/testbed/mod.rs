//! Where endpoints run: the `loopback` placement (both on this host over
//! 127.0.0.1) and the `netns` placement (two network namespaces joined by an
//! emulated link), with link profiles, netlab's wire emulator and the wire
//! view. See `docs/TESTBED.md`.

pub mod capture;
pub mod emulator;
pub mod link;
pub mod netns;

use serde::{Deserialize, Serialize};

/// How the link is built when a profile could use either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkVia {
    /// veth for unimpaired links; netem or the emulator for delay, jitter, loss.
    #[default]
    Auto,
    /// Always netlab's emulator (to measure the emulator itself).
    Emulator,
}

/// Where the two endpoints of an experiment run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Placement {
    Loopback,
    Netns {
        link: link::LinkProfile,
        via: LinkVia,
        /// Capture the link on side A; write a pcap there if given.
        capture: bool,
        pcap: Option<std::path::PathBuf>,
        verbose: bool,
    },
}

impl Placement {
    pub fn name(&self) -> &'static str {
        match self {
            Placement::Loopback => "loopback",
            Placement::Netns { .. } => "netns",
        }
    }
}
