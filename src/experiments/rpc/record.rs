//! The 1989 RPC experiment's cells and results as records carry them: the
//! protocol, the client's write strategy and options, the server's options,
//! what each end measured. Data only; `endpoint::rpc` implements them.

use crate::endpoint::rpc::client::{ClientOptions, Strategy};
use crate::endpoint::rpc::server::{ServerOptions, ServerReport};
use crate::endpoint::rpc::{Proto, RpcClientReport};
use crate::record::stats::Spread;
use crate::record::testbed::{CaptureReport, EmulatorReport, LinkFacts, Placement};
use serde::{Deserialize, Serialize};

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
    /// Where each call's time went (`analysis::call_split`), as measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_split: Option<CallSplit>,
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

/// A part of a call's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallPart {
    /// Serialization and propagation on the path.
    Wire,
    /// Both kernels' CPU: system calls, TCP/IP or UDP/IP, copies.
    Stack,
    /// Both ends runnable but waiting for a CPU (schedstat's run delay).
    WakeUps,
    /// The server's procedure: decoding the call, running it, encoding the reply.
    Server,
    /// The client's own user-space work, and any busy-poll spinning.
    Client,
    /// Neither end running, queued for a CPU nor on the wire: both asleep,
    /// waiting on a timer (a delayed ACK) or on a wake-up's way to a
    /// sleeping core.
    Waiting,
}

impl CallPart {
    pub fn name(self) -> &'static str {
        match self {
            CallPart::Wire => "the wire",
            CallPart::Stack => "the kernels' stack",
            CallPart::WakeUps => "waiting for a CPU",
            CallPart::Server => "the server's work",
            CallPart::Client => "the client's work",
            CallPart::Waiting => "both ends asleep",
        }
    }
}

/// Where one call's time went: each part in µs per call (means over every
/// call of the cell), set against the measured call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallSplit {
    /// The measured call, µs (mean over all calls).
    pub call_us: f64,
    pub wire_us: f64,
    /// The part of the wire that is propagation (both ways); the rest is
    /// serialization (and an emulator's own delay).
    pub propagation_us: f64,
    /// How the wire was counted.
    pub wire_from: String,
    pub stack_us: f64,
    /// Run delay of both ends per call; none where an end's schedstat
    /// could not be read.
    pub wakeup_us: Option<f64>,
    /// Context switches of both ends per call, voluntary and involuntary.
    pub switches_per_call: f64,
    /// Of those, the voluntary ones: each a sleep (0 in a record from
    /// before they were told apart).
    #[serde(default)]
    pub sleeps_per_call: f64,
    /// None in a record from before the server timed its work.
    pub server_us: Option<f64>,
    pub client_us: f64,
    /// What is left: the call minus every part counted (0 when they overlap).
    pub waiting_us: f64,
    /// By how much the counted parts exceed the call (both ends' CPU ran
    /// at once, or the wire's figure is a bound that holds kernel time).
    pub overlap_us: f64,
    pub system_calls_per_call: f64,
    /// The largest part.
    pub bound: CallPart,
    /// The fix an engineer would try for it.
    pub fix: String,
    /// What could not be counted, and so sits in `waiting_us`.
    pub missing: Vec<String>,
}

impl CallSplit {
    pub fn parts(&self) -> [(CallPart, f64); 6] {
        [
            (CallPart::Wire, self.wire_us),
            (CallPart::Stack, self.stack_us),
            (CallPart::WakeUps, self.wakeup_us.unwrap_or(0.0)),
            (CallPart::Server, self.server_us.unwrap_or(0.0)),
            (CallPart::Client, self.client_us),
            (CallPart::Waiting, self.waiting_us),
        ]
    }

    /// The bound's share of the call, or of the parts counted where they
    /// overlap and add up to more than the call.
    pub fn share(&self) -> f64 {
        let part = self
            .parts()
            .iter()
            .find(|(p, _)| *p == self.bound)
            .map_or(0.0, |(_, us)| *us);
        let whole = self.call_us + self.overlap_us;
        if whole > 0.0 { part / whole } else { 0.0 }
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

/// An rpc record's own part: the cell asked for and what it gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "experiment", rename = "rpc")]
pub struct RpcData {
    pub params: RpcParams,
    pub result: Option<Box<RpcResult>>,
}

/// A rpc record.
pub type Record = crate::record::Record<RpcData>;

/// Nothing of a rpc cell is read by the profile report beyond its profile.
impl crate::record::profile::Profiled for RpcData {}
