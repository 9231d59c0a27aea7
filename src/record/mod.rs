//! The record: one measurement, self-describing, one line of a JSON Lines file.
//!
//! Every experiment writes [`Record`]s; reports are built from them alone. A
//! record carries what was run (experiment and parameters), where (placement
//! and host facts), when, with which netlab, and what was measured, or why
//! the measurement failed. [`SCHEMA`] is bumped whenever a field changes
//! meaning, so a reader can refuse or adapt to records of another version.
//!
//! [`RecordWriter`] appends and flushes each record as it completes, so an
//! interrupted sweep keeps everything it finished.

pub mod profile;
pub mod stats;
pub mod testbed;

use crate::experiments::{
    cksum::record as cksum, login::record as login, rpc::record as rpc, stream::record as stream,
};
use crate::measure::{host::HostFacts, procstat::SystemCpu};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};
use stream::{EndpointReport, RecvStrategy, SendStrategy, SocketOptions, StreamFigures};
use testbed::{CaptureReport, EmulatorReport, LinkFacts, Placement};

/// Version of the record layout.
pub const SCHEMA: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub schema: u32,
    pub netlab_version: String,
    /// RFC 3339 UTC times of the start and end of this measurement.
    pub started: String,
    pub ended: String,
    /// `loopback` (both ends on this host over 127.0.0.1), later `netns`, `remote`.
    pub placement: String,
    /// The controller's host (and, on loopback and netns, both ends').
    pub host: HostFacts,
    /// On a remote placement, each agent the run went through.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<testbed::AgentFacts>,
    #[serde(flatten)]
    pub data: RecordData,
    /// Why the measurement failed; its result is then absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Where the CPU went over the cell, by layer (`--profile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Box<profile::ProfileReport>>,
}

/// The experiment-specific part, tagged by the experiment's name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "experiment", rename_all = "snake_case")]
pub enum RecordData {
    Stream {
        params: StreamParams,
        result: Option<Box<StreamResult>>,
    },
    Rpc {
        params: rpc::RpcParams,
        result: Option<Box<rpc::RpcResult>>,
    },
    Cksum {
        params: cksum::CksumSpec,
        result: Option<Box<cksum::CksumResult>>,
    },
    Login {
        params: login::LoginParams,
        result: Option<Box<login::LoginResult>>,
    },
    Output {
        params: login::OutputParams,
        result: Option<Box<login::OutputResult>>,
    },
}

/// Where in a sweep a record belongs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepContext {
    /// Identifies the sweep (its start time), shared by all its records.
    pub id: String,
    /// The swept parameter (e.g. `record`).
    pub parameter: String,
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
    #[serde(default, skip_serializing_if = "stream::Flows::is_single")]
    pub flows: stream::Flows,
    /// `--interval`, seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_s: Option<f64>,
    /// `--udp`: the datagrams' length and rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<stream::UdpPace>,
}

impl Record {
    /// A record of this netlab version, ending now.
    pub fn new(
        started: String,
        placement: &str,
        host: &HostFacts,
        data: RecordData,
        error: Option<String>,
    ) -> Record {
        Record {
            schema: SCHEMA,
            netlab_version: env!("CARGO_PKG_VERSION").to_string(),
            started,
            ended: now_rfc3339(),
            placement: placement.into(),
            host: host.clone(),
            agents: Vec::new(),
            data,
            error,
            profile: None,
        }
    }
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
    pub flows: Vec<stream::FlowResult>,
    /// Jain's fairness index of the main direction's connections'
    /// throughputs: 1 when all are equal, 1/n when one takes everything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fairness: Option<f64>,
    /// `--bidir`: the reverse direction's connections summed likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverse: Option<StreamFigures>,
}

/// Current time as RFC 3339 UTC with microseconds.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string()
}

/// Appends records to a JSON Lines file, one flushed line each.
pub struct RecordWriter {
    path: PathBuf,
    file: std::fs::File,
}

impl RecordWriter {
    /// Opens `path` for appending, creating it (and its directory) if needed.
    pub fn append(path: &Path) -> std::io::Result<RecordWriter> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(RecordWriter {
            path: path.to_path_buf(),
            file,
        })
    }

    /// Writes one record as one line and flushes it to the file.
    pub fn write(&mut self, record: &Record) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(record).map_err(std::io::Error::other)?;
        line.push(b'\n');
        // One write per record: a crash never leaves half a line behind a whole one.
        self.file.write_all(&line)?;
        self.file.flush()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Reads every record of a JSON Lines file; lines that do not parse are
/// returned as errors with their line number, so a reader can skip them.
pub fn read_records(path: &Path) -> std::io::Result<Vec<Result<Record, String>>> {
    let text = std::fs::read_to_string(path)?;
    Ok(text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).map_err(|e| format!("line {}: {e}", i + 1)))
        .collect())
}

/// A recorded stream run (the report fixture's first), as a template for
/// unit tests that need a realistic record to vary.
#[cfg(test)]
pub fn fixture_stream_run() -> Record {
    include_str!("../../tests/fixtures/lab-records.jsonl")
        .lines()
        .filter_map(|line| serde_json::from_str::<Record>(line).ok())
        .find(|r| {
            matches!(
                &r.data,
                RecordData::Stream {
                    result: Some(_),
                    ..
                }
            )
        })
        .expect("the fixture has a stream run")
}
