//! A bulk transfer's parameters and results as records carry them: the
//! strategies and socket options each end used, what each end measured, and
//! the figures derived from them. Data only; `endpoint` runs the transfer and
//! `analysis` derives the figures.

use crate::analysis::limits::Verdict;
use crate::endpoint::bulk::types::{
    EndpointReport, RecvStrategy, SendStrategy, SocketOptions, UdpLossSites, UdpPace,
};
use crate::measure::procstat::SystemCpu;
use crate::record::testbed::{CaptureReport, EmulatorReport, LinkFacts, Placement};
use serde::{Deserialize, Serialize};

/// Which way the data goes between the ends: `--from` sends (forward),
/// `--to` sends (`--reverse`), or both at once (`--bidir`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    #[default]
    Forward,
    Reverse,
    Both,
}

/// How many connections a run opens and which way each carries data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flows {
    /// Connections each way (`-P N`), each between its own pair of endpoint
    /// processes, so the scheduler spreads them over the cores.
    pub parallel: u32,
    pub direction: Direction,
}

impl Default for Flows {
    fn default() -> Self {
        Flows {
            parallel: 1,
            direction: Direction::Forward,
        }
    }
}

impl Flows {
    /// One connection forward: the classic run, recorded as before.
    pub fn is_single(&self) -> bool {
        *self == Flows::default()
    }

    /// Each connection's direction, forward ones first (`true`: reverse).
    pub fn each(&self) -> Vec<bool> {
        let n = self.parallel.max(1) as usize;
        match self.direction {
            Direction::Forward => vec![false; n],
            Direction::Reverse => vec![true; n],
            Direction::Both => [vec![false; n], vec![true; n]].concat(),
        }
    }
}

/// One connection of a run with several (`-P`, `--reverse`, `--bidir`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowResult {
    /// The `--to` end sent.
    pub reverse: bool,
    pub sender: EndpointReport,
    pub receiver: EndpointReport,
    pub figures: StreamFigures,
    /// What limited this connection, ranked (TCP; see `analysis::limits`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Verdict>,
}

/// Which side limited the transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bottleneck {
    Sender,
    Receiver,
    /// Neither endpoint kept its CPU busy: the path, the window or latency limited it.
    Neither,
}

impl Bottleneck {
    pub fn describe(&self) -> &'static str {
        match self {
            Bottleneck::Sender => "sender CPU",
            Bottleneck::Receiver => "receiver CPU",
            Bottleneck::Neither => "neither CPU (path, window or waiting)",
        }
    }
}

/// What the tables print for one transfer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamFigures {
    /// User-to-user throughput: bytes delivered over the receiver's time from
    /// first byte to end of stream.
    pub throughput_mb_s: f64,
    pub throughput_mbit_s: f64,
    /// CPU seconds over wall seconds, percent, per side.
    pub sender_cpu_pct: f64,
    pub receiver_cpu_pct: f64,
    /// Service demand: µs of CPU (user + system) per KB moved, per side.
    pub sender_us_per_kb: f64,
    pub receiver_us_per_kb: f64,
    pub bottleneck: Bottleneck,
    /// Data segments the sender's TCP emitted, when TCP_INFO says.
    pub data_segments: Option<u64>,
    /// Mean payload bytes per data segment.
    pub mean_segment_bytes: Option<f64>,
    /// Wall time per record at the sender, µs (for the cost model).
    pub us_per_record: f64,
}

/// Where in a sweep a record belongs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepContext {
    /// Identifies the sweep (its start time), shared by all its records.
    pub id: String,
    /// The swept parameter (e.g. `record`); `record-check` marks the
    /// sweep's 1-byte run that checks its cost model's per-call term, not
    /// a point of the curve.
    pub parameter: String,
    /// A copy's cost on the controller's host, timed once before the
    /// sweep's runs: what the cost model's per-byte term is checked against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy: Option<crate::checksum::copy::CopyCost>,
}

/// Where in a factorial design (`netlab ablate`) a record belongs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DesignContext {
    /// Identifies the design (its start time), shared by all its records.
    pub id: String,
    /// Each factor's name and the level this run had, in the design's order.
    pub factors: Vec<(String, String)>,
    /// The repetition (block) this run belongs to: every combination runs
    /// once per block, in a random order of its own.
    pub block: u32,
    /// The seed of the design's random order, to run it again.
    pub seed: u64,
    /// Every factor with its levels in the design's order, the first the
    /// baseline: the records alone rebuild the analysis.
    #[serde(default)]
    pub design: Vec<(String, Vec<String>)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamParams {
    /// Total bytes to send, or `None` when the run is timed.
    pub bytes: Option<u64>,
    /// Sending time, seconds, when the run is timed.
    pub duration_s: Option<f64>,
    pub record: u64,
    pub send: SendStrategy,
    pub recv: RecvStrategy,
    pub options: SocketOptions,
    /// Whether the receiver was asked to verify every byte.
    pub verify: bool,
    /// 0-based index of this run among `--repeat` runs.
    pub repeat_index: u32,
    pub sweep: Option<SweepContext>,
    /// Where the endpoints ran, with the link profile asked for.
    pub placement: Placement,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design: Option<DesignContext>,
    /// Connections and direction (absent: one, forward).
    #[serde(default, skip_serializing_if = "Flows::is_single")]
    pub flows: Flows,
    /// `--interval`, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_s: Option<f64>,
    /// `--udp`: the datagrams' length and rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpPace>,
    /// `--tls`: the cipher and record size asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<crate::endpoint::tls::TlsChoice>,
    /// `--quic`: the cipher and GSO asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<crate::endpoint::quic::QuicChoice>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    pub sender: EndpointReport,
    pub receiver: EndpointReport,
    /// Machine-wide CPU over the data path (from `/proc/stat`, sampled by the controller).
    pub system: SystemCpu,
    pub figures: StreamFigures,
    /// The link between the namespaces and how it was built (netns placement).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<LinkFacts>,
    /// The wire emulator's own counts and costs, when it carried the link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator: Option<EmulatorReport>,
    /// The wire view, with `--capture`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureReport>,
    /// With several connections or `--reverse`: each connection's own
    /// reports and figures. `sender`, `receiver` and `figures` above then
    /// sum the main direction's connections (forward; reverse when only
    /// reverse): bytes, calls and CPU added, wall time the longest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowResult>,
    /// Jain's fairness index of the main direction's connections'
    /// throughputs: 1 when all are equal, 1/n when one takes everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fairness: Option<f64>,
    /// `--bidir`: the reverse direction's connections summed likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverse: Option<StreamFigures>,
    /// What limited the transfer, ranked, primary first (TCP: the main
    /// direction's first connection, or with `--mptcp` all its
    /// connections together; see `analysis::limits`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Verdict>,
    /// `--udp`: where the lost datagrams were lost, by every counter that
    /// saw them, and what the jitter came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_loss: Option<UdpLossSites>,
}

/// A stream record's own part: the transfer asked for and what it gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "experiment", rename = "stream")]
pub struct StreamData {
    pub params: StreamParams,
    pub result: Option<Box<StreamResult>>,
}

/// A stream record.
pub type Record = crate::record::Record<StreamData>;

impl crate::record::profile::Profiled for StreamData {
    fn role_of(&self, pid: u32) -> Option<&'static str> {
        let result = self.result.as_ref()?;
        if result.sender.pid == pid {
            Some("sender")
        } else if result.receiver.pid == pid {
            Some("receiver")
        } else {
            None
        }
    }

    fn data_path(&self) -> Option<crate::record::profile::DataPath> {
        let result = self.result.as_ref()?;
        let segments = result.figures.data_segments?;
        Some(crate::record::profile::DataPath {
            record: self.params.record,
            segments,
            mean_segment_bytes: result.figures.mean_segment_bytes.unwrap_or(0.0),
            fast_path_hits: result.receiver.counters.get("TcpExt.TCPHPHits"),
            variant: match (self.params.tls, self.params.quic) {
                (_, Some(q)) => q.describe(),
                (Some(t), None) => t.describe(),
                (None, None) => String::new(),
            },
        })
    }
}

/// A recorded stream run (the report fixture's first), as a template for
/// unit tests that need a realistic record to vary.
#[cfg(test)]
pub fn fixture_stream_run() -> Record {
    include_str!("../../../tests/fixtures/lab-records.jsonl")
        .lines()
        .filter_map(|line| serde_json::from_str::<crate::experiments::Record>(line).ok())
        .find_map(|r| match &r.data {
            crate::experiments::RecordData::Stream(data) if data.result.is_some() => {
                Some(r.with(data.clone()))
            }
            _ => None,
        })
        .expect("the fixture has a stream run")
}
