//! What a mesh run leaves in its directory: the manifest (`manifest.json`:
//! the inventory, each agent's account of itself, the plan, the seed and
//! the versions) written before any traffic, and one line of
//! `results.jsonl` per pair-test, appended and flushed the moment the test
//! ends, so a killed controller loses at most the tests in flight.
//!
//! A line names its direction by agent (`from` sends, `to` receives) with
//! both hosts' labels, so a line read alone says where it was measured.
//! A `--bidir` test gives two lines, one a direction, with the same
//! `started`. With `--passes K` every pair-test is measured once a pass,
//! and each line names its pass (from 0), so the repeats of one cell can
//! be read together (two groups among them point to ECMP).

use crate::analysis::limits::{Factor, Verdict};
use crate::controller::resume::CellKey;
use crate::controller::rounds::Mode;
use crate::experiments::mesh::inventory::Agent;
use crate::record::Record;
use crate::record::testbed::AgentFacts;
use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The file names of a run directory.
pub const MANIFEST: &str = "manifest.json";
pub const RESULTS: &str = "results.jsonl";

/// How a pass was asked for: what `--resume` must repeat exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PassSpec {
    pub tests: Vec<MeshTest>,
    /// Each test's length, seconds.
    pub duration_s: f64,
    pub mode: Mode,
    pub max_pairs: Option<usize>,
    pub bidir: bool,
    pub seed: u64,
    /// The loss test's datagram rate, bits per second, and length.
    pub loss_rate_bps: u64,
    pub loss_length: usize,
    /// Passes over every pair, one after another (each its own run on the
    /// agents, so an agent's `--max-duration` bounds one pass).
    #[serde(default = "one_pass")]
    pub passes: usize,
    /// The probe test's calls each way of a pair (`--probe-calls`, or what
    /// the continuous mode's probe budget allows).
    #[serde(default = "probe_calls")]
    pub probe_calls: u32,
}

fn probe_calls() -> u32 {
    DEFAULT_PROBE_CALLS
}

/// A probe's calls when nothing else says: enough for a loss figure of
/// 5% steps and a round trip's median.
pub const DEFAULT_PROBE_CALLS: u32 = 20;
/// The most calls a probe makes.
pub const MAX_PROBE_CALLS: u32 = 100_000;

fn one_pass() -> usize {
    1
}

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub experiment: String,
    pub netlab_version: String,
    /// When the run began (RFC 3339), and who ran it.
    pub started: String,
    pub controller: String,
    /// `--agents` as given, and what it named, in inventory order (a
    /// host's index in the plan is its place here).
    pub agents_spec: String,
    pub inventory: Vec<Agent>,
    pub pass: PassSpec,
    /// Rounds and steps of the pass as planned over the whole inventory.
    pub rounds: usize,
    pub steps: usize,
    /// Each agent's account of itself at the handshake (its host, kernel,
    /// interfaces, node and labels), or why there was none; resumed runs
    /// add their own.
    pub agents: Vec<AgentState>,
}

/// The most a test may last: a day, as a stream's longest run.
pub const MAX_TEST_S: f64 = 86_400.0;
/// The least a test may last: 10 ms (a shorter one measures its own start).
pub const MIN_TEST_S: f64 = 0.01;
/// The loss test's fastest datagram rate: 100 Gbit/s.
pub const MAX_LOSS_RATE_BPS: u64 = 100_000_000_000;

impl PassSpec {
    /// A pass of `tests`, each `duration_s` long, with the command line's
    /// defaults for the rest: every pair once, one way at a time, in host
    /// mode, seed 1, the loss test at 10 Mbit/s of 1,200-byte datagrams,
    /// [`DEFAULT_PROBE_CALLS`] probe calls.
    pub fn new(tests: Vec<MeshTest>, duration_s: f64) -> PassSpec {
        PassSpec {
            tests,
            duration_s,
            mode: Mode::Host,
            max_pairs: None,
            bidir: false,
            seed: 1,
            loss_rate_bps: 10_000_000,
            loss_length: 1200,
            passes: 1,
            probe_calls: DEFAULT_PROBE_CALLS,
        }
    }

    /// Whether every field is one netlab would have written: the same
    /// checks as the command line's, so a hand-edited manifest fails here,
    /// naming the field, and not later as a panic.
    pub fn check(&self) -> Result<(), String> {
        if !(self.duration_s.is_finite()
            && self.duration_s >= MIN_TEST_S
            && self.duration_s <= MAX_TEST_S)
        {
            let shown = if self.duration_s.abs() < 1e9 {
                format!("{}", self.duration_s)
            } else {
                format!("{:e}", self.duration_s)
            };
            return Err(format!(
                "duration_s {shown}: give {MIN_TEST_S} to {MAX_TEST_S} seconds"
            ));
        }
        if self.tests.is_empty() {
            return Err("tests: none given".into());
        }
        // The command line's bound (--loss-rate's least is 1 kbit/s): a
        // slower sender would wait past its controller's watchdog.
        let min_rate = crate::testbed::link::MIN_RATE;
        if self.loss_rate_bps < min_rate || self.loss_rate_bps > MAX_LOSS_RATE_BPS {
            return Err(format!(
                "loss_rate_bps {}: give {min_rate} to {MAX_LOSS_RATE_BPS}",
                self.loss_rate_bps
            ));
        }
        let lengths =
            crate::endpoint::bulk::types::MIN_LENGTH..=crate::endpoint::bulk::types::MAX_LENGTH;
        if !lengths.contains(&self.loss_length) {
            return Err(format!(
                "loss_length {}: give {} to {} bytes",
                self.loss_length,
                lengths.start(),
                lengths.end()
            ));
        }
        let passes = MAX_PASSES;
        if self.passes == 0 || self.passes > passes {
            return Err(format!("passes {}: give 1 to {passes}", self.passes));
        }
        if self.max_pairs == Some(0) {
            return Err("max_pairs 0: give at least 1, or leave it out".into());
        }
        if self.probe_calls == 0 || self.probe_calls > MAX_PROBE_CALLS {
            return Err(format!(
                "probe_calls {}: give 1 to {MAX_PROBE_CALLS}",
                self.probe_calls
            ));
        }
        Ok(())
    }
}

impl Manifest {
    /// [`PassSpec::check`] and the inventory's invariant.
    pub fn check(&self) -> Result<(), String> {
        self.pass.check()?;
        crate::experiments::mesh::inventory::check("(the manifest's inventory)", &self.inventory)
            .map_err(|e| e.to_string())
    }

    /// Each agent of the inventory with its labels, as the matrices take them.
    pub fn hosts(&self) -> Vec<(String, BTreeMap<String, String>)> {
        self.inventory
            .iter()
            .map(|a| (a.name.clone(), a.labels.clone()))
            .collect()
    }
}

/// One agent as the run found it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentState {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub facts: Option<AgentFacts>,
    /// Why it takes no part (handshake refused, version, unreachable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// A pair-test of a pass: (from, to, test, pass).
pub type TestKey = (String, String, MeshTest, usize);

/// One direction of one test of one pair: the data of a line of
/// `results.jsonl`, a runner's record (`"experiment": "mesh"`, its cell
/// key that of [`PairTest::key`]). Lines of a netlab before that were this
/// alone; [`results_from`] and [`upgrade`] read them still.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "experiment", rename = "mesh")]
pub struct PairTest {
    pub test: MeshTest,
    /// The sending (calling) end and the receiving (serving) one, as the
    /// inventory names them, with their labels (the inventory's and the
    /// agent's own).
    pub from: String,
    pub to: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub from_labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub to_labels: BTreeMap<String, String>,
    /// The round of the plan it ran in (after a reschedule, of the new
    /// plan), and how many tests ran beside it.
    pub round: usize,
    pub alongside: usize,
    /// The pass it belongs to, from 0.
    #[serde(default)]
    pub pass: usize,
    /// Both directions at once (`--bidir`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bidir: bool,
    /// When the test started. A record carries it in its envelope (and
    /// [`results_from`] puts it back here); a line of an older netlab
    /// carried it here.
    #[serde(default, skip_serializing)]
    pub started: String,
    pub seconds: f64,
    /// None: measured; otherwise why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    #[serde(default)]
    pub figures: PairFigures,
    /// The whole result the test gave (a stream's or an RPC cell's), the
    /// evidence behind the figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<serde_json::Value>,
}

impl crate::record::profile::Profiled for PairTest {}

#[cfg(test)]
impl PairTest {
    /// A unit test's line: `test` from `from` to `to`, measured, one
    /// second long, alone in the first round of the first pass, with no
    /// labels and no figures.
    pub fn example(test: MeshTest, from: &str, to: &str) -> PairTest {
        PairTest {
            test,
            from: from.into(),
            to: to.into(),
            from_labels: BTreeMap::new(),
            to_labels: BTreeMap::new(),
            round: 0,
            alongside: 1,
            pass: 0,
            bidir: false,
            started: String::new(),
            seconds: 1.0,
            failed: None,
            figures: PairFigures::default(),
            detail: None,
        }
    }
}

impl PairTest {
    /// What identifies the test in its run: (from, to, test, pass). The
    /// run's manifest fixes the rest (lengths, mode, seed), and a resumed
    /// run takes them from it.
    pub fn key(&self) -> TestKey {
        (self.from.clone(), self.to.clone(), self.test, self.pass)
    }

    /// The runner's key of the test (`--resume` knows a finished test by it).
    pub fn cell_key(&self) -> CellKey {
        cell_key(&self.from, &self.to, self.test, self.pass)
    }
}

/// The runner's key of the test of `test` from `from` to `to` in `pass`.
pub fn cell_key(from: &str, to: &str, test: MeshTest, pass: usize) -> CellKey {
    CellKey::of("mesh", &(from, to, test, pass))
}

/// A line of `results.jsonl` as a runner's record: a line of a netlab that
/// wrote the test alone (no `schema`) gets the record's envelope, placement
/// `agents`, its `error` from `failed` and its cell key. A record, or a line
/// that is not a test, is given back as it was.
pub fn upgrade(line: serde_json::Value) -> serde_json::Value {
    if line.get("schema").is_some() {
        return line;
    }
    let mut test = line.clone();
    if let Some(fields) = test.as_object_mut() {
        fields.insert("experiment".into(), "mesh".into());
    }
    let Ok(test) = serde_json::from_value::<PairTest>(test) else {
        return line;
    };
    let mut record = Record::new(
        test.started.clone(),
        PLACEMENT,
        &crate::measure::host::HostFacts::default(),
        test.clone(),
        test.failed.clone(),
    );
    record.ended = record.started.clone();
    record.cell = Some(test.cell_key().to_string());
    serde_json::to_value(record).unwrap_or(line)
}

/// The placement a mesh's records name: between two agents of the fleet.
pub const PLACEMENT: &str = "agents";

/// The figures a heat map shows, each where its test gives it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PairFigures {
    /// stream: throughput, the sender's retransmitted segments and TCP's
    /// smoothed RTT at the end (TCP_INFO).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_mbit_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_rtt_ms: Option<f64>,
    /// stream: the share of the bytes (or, on an older kernel, of the
    /// segments) the sender retransmitted, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmitted_pct: Option<f64>,
    /// stream: what limited it (`analysis::limits`), and the verdict's line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited_by: Option<Factor>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<String>,
    /// rtt: an RPC call's round trip, percentiles, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_p99_us: Option<f64>,
    /// loss: datagrams lost, percent, and RFC 3550 jitter, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_ms: Option<f64>,
    /// rpm: round trips per minute under load, the working and idle round
    /// trips (ms), and the bufferbloat grade of the latency added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpm: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grade: Option<String>,
}

impl PairFigures {
    /// The figures in a few words, for the progress line.
    pub fn brief(&self) -> String {
        let mut parts = Vec::new();
        if let Some(t) = self.throughput_mbit_s {
            parts.push(format!("{t:.1} Mbit/s"));
        }
        if let Some(r) = self.retransmits {
            parts.push(format!("{r} retransmitted"));
        }
        if let Some(p50) = self.rtt_p50_us {
            parts.push(format!(
                "round trip p50 {p50:.0} µs, p99 {:.0} µs",
                self.rtt_p99_us.unwrap_or(f64::NAN)
            ));
        }
        if let Some(loss) = self.loss_pct {
            parts.push(format!("{loss:.3}% lost"));
        }
        if let Some(jitter) = self.jitter_ms {
            parts.push(format!("jitter {jitter:.3} ms"));
        }
        if let Some(rpm) = self.rpm {
            parts.push(format!(
                "{rpm:.0} RPM, grade {}, working {:.1} ms against {:.1} ms idle",
                self.grade.as_deref().unwrap_or("-"),
                self.working_ms.unwrap_or(f64::NAN),
                self.idle_ms.unwrap_or(f64::NAN)
            ));
        }
        if let Some(factor) = self.limited_by {
            parts.push(format!("limited by {}", factor.describe()));
        }
        parts.join(", ")
    }

    /// A flow's verdict, as the figures carry it.
    pub fn judged(mut self, verdict: Option<&Verdict>) -> PairFigures {
        if let Some(verdict) = verdict {
            self.limited_by = verdict.primary().map(|l| l.factor);
            self.verdict = Some(verdict.headline());
        }
        self
    }
}

/// The finished tests of `results.jsonl` lines (records, or tests alone as
/// older netlabs wrote them), and each line skipped with why (torn by a
/// killed controller, not UTF-8, not a test): one bad line costs that line.
pub fn results_from(
    lines: impl Iterator<Item = crate::record::files::Line>,
) -> (Vec<PairTest>, Vec<String>) {
    let mut results = Vec::new();
    let mut skipped = Vec::new();
    for (n, line) in lines {
        match line.and_then(|l| {
            let value = serde_json::from_str(&l).map_err(|e| format!("line {n}: {e}"))?;
            serde_json::from_value::<Record<PairTest>>(upgrade(value))
                .map_err(|e| format!("line {n}: {e}"))
        }) {
            Ok(record) => results.push(PairTest {
                started: record.started,
                ..record.data
            }),
            Err(why) => skipped.push(why),
        }
    }
    (results, skipped)
}

/// The most passes a run makes.
pub const MAX_PASSES: usize = 1000;

/// What one pair is measured for.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    clap::ValueEnum,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum MeshTest {
    /// TCP throughput, retransmissions, RTT and what limited it.
    Stream,
    /// Round-trip percentiles.
    Rtt,
    /// UDP loss and jitter.
    Loss,
    /// Responsiveness under load (`netlab rpm`, draft-ietf-ippm-
    /// responsiveness-06): `from` loads the path to `to` and probes it,
    /// for RPM and the bufferbloat grade.
    Rpm,
    /// A Pingmesh-style probe, cheap enough to run all the time: a few
    /// empty RPC calls over UDP (`--probe-calls`), for the round trip and
    /// the share of attempts lost (each retransmission a request or its
    /// reply that did not come back in time).
    Probe,
}

impl MeshTest {
    pub fn name(self) -> &'static str {
        match self {
            MeshTest::Stream => "stream",
            MeshTest::Rtt => "rtt",
            MeshTest::Loss => "loss",
            MeshTest::Rpm => "rpm",
            MeshTest::Probe => "probe",
        }
    }
}

/// The manifest of a run directory, checked as a new run's options are: a
/// manifest edited by hand or by an attacker is refused, naming the field.
pub fn read_manifest(dir: &Path) -> anyhow::Result<Manifest> {
    let path = dir.join(MANIFEST);
    let text = match crate::record::files::read_text(
        &path,
        crate::record::files::MAX_SMALL_FILE,
        "a mesh manifest",
    ) {
        Ok(text) => text,
        Err(e) if e.is_missing() => bail!(
            "{} has no mesh run to resume (no {MANIFEST})",
            dir.display()
        ),
        Err(e) => return Err(e.into()),
    };
    let manifest: Manifest =
        serde_json::from_str(&text).with_context(|| format!("reading {}", path.display()))?;
    manifest
        .check()
        .map_err(|why| anyhow::anyhow!("{}: {why}", path.display()))?;
    Ok(manifest)
}

/// The tests a run directory holds, and each line skipped with why.
pub fn results_of(dir: &Path) -> anyhow::Result<(Vec<PairTest>, Vec<String>)> {
    let path = dir.join(RESULTS);
    let lines = crate::record::files::record_lines(&path, "mesh results")?;
    Ok(results_from(lines))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The finished tests of `results.jsonl` text and how many lines were skipped.
    fn read_results(text: &str) -> (Vec<PairTest>, usize) {
        let (results, skipped) = results_from(crate::record::files::lines(text.as_bytes()));
        (results, skipped.len())
    }

    proptest::proptest! {
        #[test]
        fn a_pass_spec_s_check_never_panics_and_passes_only_sane_values(
            duration_s in proptest::num::f64::ANY,
            loss_rate_bps in proptest::num::u64::ANY,
            loss_length in 0usize..100_000,
            passes in 0usize..2000,
        ) {
            let spec = PassSpec {
                loss_rate_bps,
                loss_length,
                passes,
                ..PassSpec::new(vec![MeshTest::Stream], duration_s)
            };
            if spec.check().is_ok() {
                proptest::prop_assert!(duration_s > 0.0 && duration_s <= MAX_TEST_S);
                proptest::prop_assert!(loss_rate_bps > 0 && passes > 0);
                // What passes, the runner can turn into a Duration.
                let _ = std::time::Duration::from_secs_f64(duration_s);
            }
        }

        #[test]
        fn results_lines_never_panic_and_keep_what_parses(
            lines in proptest::collection::vec("\\PC{0,40}", 0..10)
        ) {
            let text = lines.join("\n");
            let (tests, skipped) = results_from(crate::record::files::lines(text.as_bytes()));
            proptest::prop_assert!(tests.len() + skipped.len() <= lines.len());
        }
    }

    #[test]
    fn a_result_line_round_trips_and_a_torn_one_is_counted() {
        let line = PairTest {
            test: MeshTest::Stream,
            from: "a:5310".into(),
            to: "b:5310".into(),
            from_labels: [("zone".to_string(), "z1".to_string())].into(),
            to_labels: BTreeMap::new(),
            round: 3,
            alongside: 4,
            pass: 2,
            bidir: false,
            started: "2026-11-26T15:00:00Z".into(),
            seconds: 2.5,
            failed: None,
            figures: PairFigures {
                throughput_mbit_s: Some(941.2),
                ..PairFigures::default()
            },
            detail: None,
        };
        let mut record = Record::new(
            line.started.clone(),
            PLACEMENT,
            &crate::measure::host::HostFacts::default(),
            line.clone(),
            None,
        );
        record.cell = Some(line.cell_key().to_string());
        let json = serde_json::to_string(&record).unwrap();
        assert!(json.contains(r#""experiment":"mesh""#), "{json}");
        let text = format!("{json}\n{}\n", &json[..json.len() / 2]);
        let (read, torn) = read_results(&text);
        assert_eq!(read, vec![line.clone()]);
        assert_eq!(torn, 1);
        // A line as a netlab before records wrote it: the test alone. It
        // reads as the same test, and as a record with the same cell key.
        let mut alone = serde_json::to_value(&line).unwrap();
        alone.as_object_mut().unwrap().remove("experiment");
        alone["started"] = line.started.clone().into();
        let (read, torn) = read_results(&alone.to_string());
        assert_eq!((read, torn), (vec![line.clone()], 0));
        let upgraded: Record<PairTest> = serde_json::from_value(upgrade(alone)).unwrap();
        assert_eq!(upgraded.cell, record.cell);
        assert_eq!(upgraded.started, line.started);
        assert_eq!(
            upgraded.data,
            PairTest {
                started: String::new(),
                ..line
            }
        );
        assert!(upgraded.error.is_none());
    }

    #[test]
    fn a_line_written_before_passes_existed_is_of_the_first_pass() {
        let old = r#"{"test":"stream","from":"a","to":"b","round":0,"alongside":1,"started":"x","seconds":1.0}"#;
        let (read, torn) = read_results(old);
        assert_eq!(torn, 0);
        assert_eq!(read[0].pass, 0);
        let spec: PassSpec = serde_json::from_str(
            r#"{"tests":["stream"],"duration_s":1.0,"mode":"host","max_pairs":null,"bidir":false,"seed":1,"loss_rate_bps":1,"loss_length":100}"#,
        )
        .unwrap();
        assert_eq!(spec.passes, 1);
    }
}
