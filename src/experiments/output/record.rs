//! The terminal-output experiment's cells and results as records carry
//! them. Data only.

use crate::endpoint::login::host::{Dialect, Target};
use crate::record::testbed::{LinkFacts, Placement};
use serde::{Deserialize, Serialize};

/// Records written before the placement was recorded ran on loopback.
fn loopback() -> Placement {
    Placement::Loopback
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OutputParams {
    pub relay: Target,
    /// What the client speaks (older records: `telnet` or `rlogin`).
    pub protocol: Dialect,
    /// Where server and client run (older records: loopback).
    #[serde(default = "loopback")]
    pub placement: Placement,
    pub file_bytes: u64,
    /// Terminal speed the output is paced to (bits per second, 10 bits a
    /// character as on a serial line), or unpaced.
    pub baud: Option<u32>,
    /// TCP_NODELAY on netlab's server sessions (older records: off).
    #[serde(default)]
    pub nodelay: bool,
    /// `--stall-timeout`: the longest wait for output before the cell
    /// fails (none: the default bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall: Option<crate::endpoint::stall::StallBound>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OutputResult {
    pub params: OutputParams,
    /// Terminal data the client received (the terminal turns LF into CR LF).
    pub bytes_received: u64,
    pub seconds: f64,
    pub kbytes_per_s: f64,
    pub server_cpu_us_per_kb: f64,
    pub client_cpu_us_per_kb: f64,
    /// Data segments the client received per KB of terminal data, and
    /// their mean TCP payload (for SSH, encrypted: larger than the data).
    pub segments_per_kb: f64,
    pub mean_segment_bytes: f64,
    /// The server tree's CPU over the transfer, % of one CPU.
    pub server_cpu_pct: f64,
    /// The link of a netns cell.
    #[serde(default)]
    pub link: Option<LinkFacts>,
    /// TCP_INFO of the terminal's socket at the end (RTT, MSS, path MTU).
    #[serde(default)]
    pub tcp_info: Option<crate::measure::tcpinfo::TcpInfo>,
    /// What the serving tree and its session socket waited on over the
    /// window (older records: not read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits: Option<crate::measure::waits::TreeWaits>,
    /// The serving tree's work a KB of terminal data, where it was
    /// counted: what the 1987 model prices on its VAX (older records:
    /// none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_kb: Option<OutputCounts>,
}

/// The serving tree's work a KB of terminal data.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct OutputCounts {
    pub syscalls: f64,
    pub context_switches: f64,
    /// Segments the terminal received and sent (the server's out and in).
    pub packets_out: f64,
    pub packets_in: f64,
    /// Pty transfers, where the server counts them (netlab's relays).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pty_transfers: Option<f64>,
}

/// An output record's own part: the text typed out and what it cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "experiment", rename = "output")]
pub struct OutputData {
    pub params: OutputParams,
    pub result: Option<Box<OutputResult>>,
}

/// An output record.
pub type Record = crate::record::Record<OutputData>;

/// Nothing of a output cell is read by the profile report beyond its profile.
impl crate::record::profile::Profiled for OutputData {}
