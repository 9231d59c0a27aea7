//! rpm's records: the test as asked, every probe's raw time, every
//! interval's goodput and connections, and what the analysis made of them
//! (`analysis`). Data only; `client` and `server` measure.

use crate::analysis::responsiveness::Params as DraftParams;
use crate::endpoint::rpm::types::{ClientReport, Direction, LoadSockets, ServerReport};
use crate::record::testbed::{EmulatorReport, LinkFacts, Placement};
use serde::{Deserialize, Serialize};

/// One cell: the test as asked and where.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpmParams {
    pub placement: Placement,
    pub direction: Direction,
    pub max_connections: usize,
    pub probe_rate: u32,
    pub max_duration_s: f64,
    pub idle_probes: u32,
    pub sockets: LoadSockets,
    /// A label for the cell (the lab's "droptail", "fq_codel"; an
    /// ablation's combination).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The factorial design this run belongs to (`netlab ablate rpm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub design: Option<RpmDesign>,
    /// Run irtt beside the probes (`--irtt`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub irtt: bool,
}

/// A run's place in an `ablate rpm` design.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpmDesign {
    /// The design's start time, shared by its runs.
    pub id: String,
    /// Each factor's level in this run.
    pub factors: Vec<(String, String)>,
    /// The repetition (block) it ran in.
    pub block: u32,
    pub seed: u64,
}

/// What one cell measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpmResult {
    pub draft: DraftParams,
    pub client: ClientReport,
    pub server: ServerReport,
    pub link: Option<LinkFacts>,
    pub emulator: Option<EmulatorReport>,
    pub summary: Summary,
    /// Where the working latency built up, with the verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<DelaySplit>,
    /// irtt beside netlab over the same path (`--irtt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irtt: Option<SideBySide>,
}

/// An rpm record's own part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "experiment", rename = "rpm")]
pub struct RpmData {
    pub params: RpmParams,
    pub result: Option<Box<RpmResult>>,
}

pub type Record = crate::record::Record<RpmData>;

impl crate::record::profile::Profiled for RpmData {}

/// What the analysis made of one run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The draft implemented.
    pub draft: String,
    pub formula: String,
    /// Intervals (first, last) the result is taken over.
    pub window: Option<(usize, usize)>,
    /// Trimmed means, ms: TM(tcp_f), TM(http_f), TM(http_l).
    pub tm_tcp_f_ms: Option<f64>,
    pub tm_http_f_ms: Option<f64>,
    pub tm_http_l_ms: Option<f64>,
    pub rpm_foreign: Option<f64>,
    pub rpm_self: Option<f64>,
    pub rpm: Option<f64>,
    /// RPM's 95% interval over bootstrap resamples of the window's probes
    /// (records before 2026-12-02: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm_interval: Option<[f64; 2]>,
    pub tier: Option<String>,
    pub confidence: String,
    /// Whether the figure may be read as the path's result (false: the
    /// load never saturated the path, or too few intervals ran).
    pub is_final: bool,
    /// Idle round trip: the trimmed mean of the idle probes' requests, ms.
    pub idle_ms: Option<f64>,
    /// Working round trip: 60000 / RPM, ms.
    pub working_ms: Option<f64>,
    pub added_ms: Option<f64>,
    /// DSLReports' grade of the added latency (A+ .. F): the working
    /// round trip (all probes, 60000 / RPM) less the idle one.
    pub grade: Option<String>,
    /// The same grade of the loaded connections alone: TM(http_l), the
    /// self probes' round trip, less the idle one.
    #[serde(default)]
    pub grade_loaded: Option<String>,
    /// Goodput at the end, moving average of the last MAD intervals, bit/s.
    pub goodput_down_bps: f64,
    pub goodput_up_bps: f64,
    pub connections: usize,
    pub samples: (usize, usize, usize),
    /// What the reader must know (saturation not reached, few samples).
    pub notes: Vec<String>,
}

/// One part of the working round trip.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    pub name: String,
    pub ms: f64,
    /// Share of the self probes' working round trip, 0..1.
    pub share: f64,
    pub evidence: String,
}

/// The split and its verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DelaySplit {
    /// The self probes' working round trip, TM(http_l), ms.
    pub working_ms: f64,
    pub parts: Vec<Part>,
    /// The queue that held the delay, when one explains at least half the
    /// delay added under load; None: undecided.
    pub queue: Option<String>,
    pub verdict: String,
    pub fix: Option<String>,
}

/// One figure's samples in brief: how many, their median and its 95%
/// distribution-free confidence interval (order statistics).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MedianSpread {
    pub n: usize,
    pub median_ms: f64,
    pub ci_low_ms: f64,
    pub ci_high_ms: f64,
}

/// netlab's round trip and irtt's over the same path and the same time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Compared {
    /// netlab's foreign probes' 1-byte request round trips (TCP, a new
    /// connection each: the path's queue, not a socket's).
    pub netlab: MedianSpread,
    /// irtt's UDP round trips sent in the same span.
    pub irtt: MedianSpread,
    /// irtt's round trips themselves, ms (its raw samples).
    pub irtt_samples: Vec<f64>,
    pub irtt_lost: usize,
    /// Whether the two medians agree within their noise: their intervals
    /// overlap, or they differ by under [`AGREE_FLOOR_MS`].
    pub agree: bool,
}

/// Two medians this close agree however narrow their intervals: the
/// difference of a TCP exchange's wake-ups from a UDP echo's.
pub const AGREE_FLOOR_MS: f64 = 0.5;

/// `--irtt`: the idle path and the loaded one, each measured by both.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SideBySide {
    /// Idle: netlab's idle probes, and irtt for 2 s just before them.
    pub idle: Compared,
    /// Working: the probes of the result's window, and irtt's packets
    /// sent in the same seconds.
    pub working: Compared,
    /// What irtt measures that netlab's probes do not, over the working
    /// window: each way's delay (one clock within one host's namespaces),
    /// IPDV (the mean change between successive round trips) and loss
    /// each way.
    pub send_delay_ms: Option<f64>,
    pub receive_delay_ms: Option<f64>,
    /// The same one-way delays with their 95% intervals (absent from
    /// records made before they were kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_delay: Option<MedianSpread>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive_delay: Option<MedianSpread>,
    pub ipdv_ms: Option<f64>,
    pub upstream_loss_percent: f64,
    pub downstream_loss_percent: f64,
}
