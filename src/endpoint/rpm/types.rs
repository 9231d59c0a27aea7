//! What the responsiveness test's two ends exchange and report: the test
//! a measuring end is asked for, every probe's raw time, every interval's
//! goodput and connections, the sockets' queues, and what a background
//! load carried. Data only; `client` and `server` measure, and rpm's
//! records (`experiments::rpm::record`) carry these as they are.

use crate::analysis::responsiveness::Params as DraftParams;
use crate::endpoint::protocol::Token;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// Which way the load-generating connections carry their bulk data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// From the serving end to the measuring end (`--from`).
    Down,
    /// From the measuring end to the serving end.
    Up,
    /// Both at once: each step adds one connection each way.
    Both,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Down => "down",
            Direction::Up => "up",
            Direction::Both => "both",
        }
    }
}

/// Socket settings of the load-generating connections (each a fix
/// `netlab ablate` can try).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LoadSockets {
    /// TCP_NOTSENT_LOWAT on the sending ends: bytes a socket may hold
    /// unsent before it stops taking more (the draft's advice).
    pub notsent_lowat: Option<u32>,
    /// SO_SNDBUF and SO_RCVBUF, bytes (the kernel doubles what it is given).
    pub sndbuf: Option<u32>,
    pub rcvbuf: Option<u32>,
    /// TCP_CONGESTION on the sending ends (cubic, bbr, reno).
    pub congestion: Option<String>,
}

/// What the measuring end is asked to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientSpec {
    pub server: SocketAddr,
    pub direction: Direction,
    /// Load-generating connections at most, per direction.
    pub max_connections: usize,
    /// Probe pairs (one foreign, one self) a second, at most.
    pub probe_rate: u32,
    /// The test's longest run under load, seconds.
    pub max_duration_s: f64,
    /// Foreign probes on the idle path before any load.
    pub idle_probes: u32,
    pub draft: DraftParams,
    pub sockets: LoadSockets,
    /// A run through agents: the token every connection presents first.
    pub token: Option<Token>,
}

/// Which probe a sample is (the draft's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProbeKind {
    /// A foreign probe's TCP handshake (`tcp_f`).
    TcpForeign,
    /// A foreign probe's 1-byte request and response on its new
    /// connection (`http_f`; netlab's own bytes, no HTTP).
    RequestForeign,
    /// A self probe's 1-byte request and response on a loaded connection
    /// (`http_l`; netlab's framing, no HTTP/2 or TLS).
    RequestLoaded,
}

/// One probe's time.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub kind: ProbeKind,
    /// When it started, ms after the load started (negative: idle).
    pub t_ms: f64,
    pub ms: f64,
}

/// One interval (ID) of the test under load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Seconds after the load started, at the interval's end.
    pub t_s: f64,
    /// Goodput in the interval, bit/s: bytes received on download
    /// connections, bytes acknowledged (TCP_INFO) on upload ones.
    pub goodput_down_bps: f64,
    pub goodput_up_bps: f64,
    /// Load-generating connections open during the interval.
    pub connections: usize,
    /// Probes that started in it (foreign, self).
    pub probes: (u32, u32),
}

/// Why the test under load stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// Goodput, then responsiveness, saturated (the draft's end).
    Saturated,
    /// The time ran out first.
    TimeUp,
}

/// One end's queues, summed over its load-generating connections.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SocketQueue {
    /// The measuring end's: seconds after the load started. The serving
    /// end's: seconds since the Unix epoch (its own clock).
    pub t_s: f64,
    /// Bytes written and not yet sent (tcpi_notsent_bytes), summed over
    /// the measuring end's upload connections.
    pub notsent_bytes: u64,
    /// Bytes sent and not yet acknowledged, summed (SIOCOUTQ less the unsent).
    pub unacked_bytes: u64,
    /// Smoothed RTT and the minimum seen, ms (the first loaded connection's).
    pub srtt_ms: f64,
    pub min_rtt_ms: f64,
    /// Bytes received and not yet read by netlab (SIOCINQ), summed over
    /// the download connections.
    pub unread_bytes: u64,
    /// Bytes in the root qdisc of the interface the end sends on (netlink).
    pub qdisc_backlog_bytes: u64,
}

/// What the measuring end saw: every raw figure.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientReport {
    pub idle: Vec<Sample>,
    pub loaded: Vec<Sample>,
    pub intervals: Vec<Interval>,
    /// The interval (index) where goodput saturated, if it did.
    pub goodput_saturated_at: Option<usize>,
    /// Where responsiveness saturated, if it did.
    pub responsiveness_saturated_at: Option<usize>,
    pub ending: Option<Ending>,
    /// Probes that failed (a connection refused or cut), by reason.
    pub probe_failures: Vec<String>,
    /// Self probes skipped because the chosen connection still had one out.
    pub self_probes_skipped: u64,
    pub queues: Vec<SocketQueue>,
    /// Wall-clock ns (Unix epoch) when the load started: to align with the
    /// emulator's queue timeline.
    pub load_started_unix_ns: u64,
}

/// What the serving end did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerReport {
    pub download_connections: u64,
    pub upload_connections: u64,
    pub probe_connections: u64,
    /// Connections that spoke something else, with why.
    pub refused: Vec<String>,
    /// Connections closed at once because 512 were being served.
    #[serde(default)]
    pub turned_away: u64,
    /// The serving end's queues on its download connections and its
    /// interface's qdisc, every 100 ms while any download ran (`t_s`:
    /// Unix seconds).
    pub queues: Vec<SocketQueue>,
    /// The interface whose qdisc was read, if found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
}

/// What a background load carried.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    pub connections: usize,
    pub seconds: f64,
    /// Bytes received (downloads) and acknowledged (uploads).
    pub down_bytes: u64,
    pub up_bytes: u64,
}

impl LoadReport {
    /// Goodput, both directions, bit/s.
    pub fn goodput_bps(&self) -> f64 {
        (self.down_bytes + self.up_bytes) as f64 * 8.0 / self.seconds.max(1e-9)
    }
}
