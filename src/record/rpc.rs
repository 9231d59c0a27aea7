//! The 1989 RPC experiment's cells and results as records carry them: the
//! protocol, the client's write strategy and options, the server's options,
//! what each end measured. Data only; `endpoint::rpc` implements them.

use super::stats::Spread;
use super::testbed::{CaptureReport, EmulatorReport, LinkFacts, Placement};
use crate::measure::{netstat::Counters, rusage::ProcessUsage, tcpinfo::TcpInfo};
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Proto {
    Tcp,
    Udp,
}

impl Proto {
    pub fn name(&self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        }
    }
}

/// How the client writes a TCP request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// As Sun's xdrrec: a write per 4000-byte fragment.
    Sun,
    /// The record mark and header, then the argument.
    TwoWrite,
    /// One writev of the whole record.
    Writev,
}

impl Strategy {
    pub fn name(&self) -> &'static str {
        match self {
            Strategy::Sun => "sun",
            Strategy::TwoWrite => "two-write",
            Strategy::Writev => "writev",
        }
    }
}

/// Socket options for the client's TCP connection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientOptions {
    pub nodelay: bool,
    /// Hold the writes of one call in TCP_CORK and release them together.
    pub cork: bool,
    /// Re-arm TCP_QUICKACK after every read.
    pub quickack: bool,
    /// Spin on non-blocking receives this many µs before sleeping in a
    /// blocking one (see [`super::busypoll`]); 0 never spins.
    #[serde(default)]
    pub busy_poll_us: u32,
    /// The CPU the client runs on (`--pin`); none: where the scheduler puts it.
    #[serde(default)]
    pub cpu: Option<usize>,
    /// SO_SNDBUF and SO_RCVBUF asked for before connecting (`--sockbuf`);
    /// Linux doubles the value and keeps at least its minimum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockbuf: Option<u32>,
    /// A new TCP connection for every call, closed after its reply
    /// (netperf's TCP_CRR): each call's time holds the handshake, the call
    /// and the close.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub connect_per_call: bool,
}

impl ClientOptions {
    pub fn busy_poll(&self) -> Duration {
        Duration::from_micros(self.busy_poll_us.into())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerOptions {
    /// Largest record accepted over TCP (and largest SINK argument).
    pub max_record: usize,
    pub nodelay: bool,
    /// Re-arm TCP_QUICKACK after every read, so the server never delays an ACK.
    pub quickack: bool,
    /// A connection silent this long is closed.
    pub idle_timeout_ms: u64,
    pub max_connections: usize,
    /// Spin on non-blocking receives this many µs before sleeping in a
    /// blocking one, on every connection and on UDP (see
    /// [`super::busypoll`]); 0 never spins.
    #[serde(default)]
    pub busy_poll_us: u32,
    /// The CPU every serving thread runs on (`--pin`); none: where the
    /// scheduler puts them.
    #[serde(default)]
    pub cpu: Option<usize>,
    /// SO_SNDBUF and SO_RCVBUF of the listening socket, which accepted
    /// connections inherit (`--sockbuf`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockbuf: Option<u32>,
}

impl ServerOptions {
    pub fn busy_poll(&self) -> Duration {
        Duration::from_micros(self.busy_poll_us.into())
    }
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            max_record: 1 << 20,
            nodelay: false,
            quickack: false,
            idle_timeout_ms: 60_000,
            max_connections: 1024,
            busy_poll_us: 0,
            cpu: None,
            sockbuf: None,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RpcClientReport {
    /// Seconds for each repetition of `calls` calls.
    pub rep_seconds: Vec<f64>,
    /// Per-call latency, µs.
    pub latency_us_p50: f64,
    pub latency_us_p90: f64,
    pub latency_us_p99: f64,
    pub latency_us_max: f64,
    pub latency_us_min: f64,
    /// `write(2)`s per call the strategy makes.
    pub writes_per_call: usize,
    pub syscalls: u64,
    /// Busy-poll receives that found nothing (0 unless busy polling).
    #[serde(default)]
    pub empty_polls: u64,
    pub usage: ProcessUsage,
    pub counters: Counters,
    pub tcp_info: Option<TcpInfo>,
    pub udp_retransmissions: u64,
    /// `--connect-per-call`: the connections opened (one per call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<u64>,
}

/// What a server did over its life.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerReport {
    pub calls: u64,
    pub dropped_records: u64,
    pub closed_bad_peers: u64,
    pub connections: u64,
    pub usage: ProcessUsage,
    /// Kernel counter deltas in the server's namespace over its life.
    pub counters: Counters,
}

/// One cell: an argument size, a protocol, a way of sending, a placement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcParams {
    pub size: usize,
    pub proto: Proto,
    /// How TCP requests are written (ignored for UDP).
    pub strategy: Strategy,
    pub client: ClientOptions,
    pub server: ServerOptions,
    pub calls: u32,
    pub reps: u32,
    pub placement: Placement,
    /// Why the cell ran: the grid itself, a diagnosis rerun, a cliff probe.
    pub purpose: Purpose,
    /// Capture the connection's segments (on the client's side of the path).
    #[serde(default)]
    pub capture_timeline: bool,
}

impl RpcParams {
    /// `TCP local`, `UDP remote`, ...: the source table's column.
    pub fn column(&self) -> String {
        format!(
            "{} {}",
            self.proto.name().to_uppercase(),
            match &self.placement {
                Placement::Loopback => "local",
                Placement::Netns { .. } => "remote",
                // As in 1989: "local" is both ends on one (the --to) host.
                Placement::Remote { from, to } if from == to => "local",
                Placement::Remote { .. } => "remote",
            }
        )
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RpcResult {
    pub client: RpcClientReport,
    pub server: ServerReport,
    /// Milliseconds for 100 calls, over the repetitions.
    pub ms_per_100_calls: Spread,
    /// The server namespace's delayed ACKs per call.
    pub delayed_acks_per_call: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkFacts>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator: Option<EmulatorReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureReport>,
    /// The port the server listened on (for reading the capture).
    #[serde(default)]
    pub server_port: u16,
}

/// Why an RPC cell ran. Written as the strings records have always carried:
/// `measure`, `find-cliffs`, `diagnose: <what changed>`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", from = "String")]
pub enum Purpose {
    /// A cell of the experiment's grid.
    Measure,
    /// A probe of `--find-cliffs`.
    FindCliffs,
    /// A flagged cell rerun with one thing changed (or captured), to explain it.
    Diagnose(String),
    /// A purpose this netlab does not know (a later version's record).
    Other(String),
}

const DIAGNOSE_PREFIX: &str = "diagnose: ";

impl From<Purpose> for String {
    fn from(purpose: Purpose) -> String {
        match purpose {
            Purpose::Measure => "measure".into(),
            Purpose::FindCliffs => "find-cliffs".into(),
            Purpose::Diagnose(change) => format!("{DIAGNOSE_PREFIX}{change}"),
            Purpose::Other(text) => text,
        }
    }
}

impl From<String> for Purpose {
    fn from(text: String) -> Purpose {
        match text.as_str() {
            "measure" => Purpose::Measure,
            "find-cliffs" => Purpose::FindCliffs,
            _ => match text.strip_prefix(DIAGNOSE_PREFIX) {
                Some(change) => Purpose::Diagnose(change.into()),
                None => Purpose::Other(text),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Purpose;

    #[test]
    fn purposes_read_and_write_the_strings_records_carry() {
        for (purpose, text) in [
            (Purpose::Measure, "measure"),
            (Purpose::FindCliffs, "find-cliffs"),
            (
                Purpose::Diagnose("TCP_NODELAY on the client".into()),
                "diagnose: TCP_NODELAY on the client",
            ),
            (Purpose::Other("later".into()), "later"),
        ] {
            let json = serde_json::to_string(&purpose).unwrap();
            assert_eq!(json, format!("\"{text}\""));
            assert_eq!(serde_json::from_str::<Purpose>(&json).unwrap(), purpose);
        }
    }
}
