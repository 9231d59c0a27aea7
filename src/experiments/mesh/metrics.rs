//! The continuous mesh's Prometheus metrics: what each cycle measured, in
//! base units (seconds, bits a second, ratios), `_total` on counters, with
//! the labels `from`, `to`, `zone`, `rack` (and `limit`, the limits
//! verdict's primary factor: a closed set, [`Factor`]).
//!
//! Cardinality is bounded by construction:
//! - per host, always: its row (`from`, the paths it sends on) and its
//!   column (`to`, the paths it receives on), each with its zone and rack;
//!   per zone, always; per agent, its reachability: O(hosts);
//! - per path, only the worst `--metrics-pairs K` paths and those in
//!   breach of the SLO, the latter at most [`MAX_BREACH_FACTOR`] × K (what
//!   was left out is counted in `netlab_mesh_path_series_dropped`): O(K),
//!   whatever the number of hosts. Each cycle replaces the last cycle's
//!   path series, so a path that recovered leaves the exposition.

use crate::analysis::limits::Factor;
use crate::controller::sink::{RunEvent, Sink, SinkError};
use crate::experiments::mesh::record::{MeshTest, PairTest, results_from};
use crate::fleet::HostLabels;
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

/// Breaches exposed per path at most, as a multiple of `--metrics-pairs`.
pub const MAX_BREACH_FACTOR: usize = 10;

type FloatGauge = Gauge<f64, AtomicU64>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PathLabels {
    from: String,
    to: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ThroughputLabels {
    from: String,
    to: String,
    limit: Limit,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RowLabels {
    from: String,
    zone: String,
    rack: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ColumnLabels {
    to: String,
    zone: String,
    rack: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ZoneLabels {
    zone: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AgentLabels {
    agent: String,
    zone: String,
    rack: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabels {
    limit: Limit,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: Kind,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TestLabels {
    test: String,
    outcome: Outcome,
}

/// A cycle's kind: the probes, or the slower throughput pass.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum Kind {
    probe,
    stream,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
enum Outcome {
    measured,
    failed,
}

/// The limits verdict's primary factor as a label value: [`Factor`]'s
/// names, and `none` for a test without a verdict.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
struct Limit(Option<Factor>);

impl EncodeLabelValue for Limit {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelValueEncoder,
    ) -> Result<(), std::fmt::Error> {
        use std::fmt::Write;
        let name = match self.0 {
            Some(factor) => serde_json::to_value(factor)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_else(|| "undecided".into()),
            None => "none".into(),
        };
        encoder.write_str(&name)
    }
}

/// What makes a path bad: its probes failed, lost more than the SLO, or
/// (when given) took longer than the round-trip SLO at the median.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slo {
    /// The share of probe attempts lost, 0 to 1.
    pub loss_ratio: f64,
    /// The probes' median round trip, seconds.
    pub rtt_s: Option<f64>,
}

/// A cycle as the metrics take it.
pub struct Cycle<'a> {
    pub kind: Kind,
    /// Every host of the inventory, and whether it answered this cycle.
    pub hosts: &'a [(HostLabels, bool)],
    pub results: &'a [PairTest],
    pub seconds: f64,
    /// When it ended, seconds since the epoch.
    pub ended_s: f64,
}

/// The metrics' sink on a cycle's runner: each test the runner keeps,
/// read from its record's line as it is kept. The cycle's figures are set
/// from them when it ends ([`MeshMetrics::record`]), all at once, so a
/// scrape sees one cycle or the other, never a mix.
#[derive(Debug, Default)]
pub struct CycleTests {
    pub tests: Vec<PairTest>,
    /// Kept lines that were not a mesh test (none, from a mesh's runner).
    pub unread: Vec<String>,
}

impl Sink for CycleTests {
    fn event(&mut self, event: &RunEvent<'_>) -> Result<(), SinkError> {
        if let RunEvent::Kept { line } = event {
            let n = self.tests.len() + self.unread.len() + 1;
            let (tests, unread) = results_from(std::iter::once((n, Ok(line.to_string()))));
            self.tests.extend(tests);
            self.unread.extend(unread);
        }
        Ok(())
    }
}

/// A host's probed paths one way (its row: the paths it sends on; its
/// column: those it receives on): how many, how many in breach and their
/// share, their median loss ratio and median round trip.
struct Side<L> {
    paths: Family<L, Gauge>,
    bad: Family<L, Gauge>,
    bad_ratio: Family<L, FloatGauge>,
    loss: Family<L, FloatGauge>,
    rtt: Family<L, FloatGauge>,
}

impl<L> Default for Side<L>
where
    L: Clone + std::hash::Hash + Eq,
{
    fn default() -> Self {
        Side {
            paths: Family::default(),
            bad: Family::default(),
            bad_ratio: Family::default(),
            loss: Family::default(),
            rtt: Family::default(),
        }
    }
}

impl<L> Side<L>
where
    L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static,
{
    /// Registers `netlab_mesh_SIDE_*`, the paths `way` ("from" or "to")
    /// the host.
    fn register(&self, r: &mut Registry, side: &str, way: &str) {
        r.register(
            format!("netlab_mesh_{side}_paths"),
            format!("Paths {way} the host probed this cycle"),
            self.paths.clone(),
        );
        r.register(
            format!("netlab_mesh_{side}_bad_paths"),
            format!("Paths {way} the host in breach of the SLO (or failed)"),
            self.bad.clone(),
        );
        r.register(
            format!("netlab_mesh_{side}_bad_ratio"),
            format!("Share of the paths {way} the host in breach of the SLO"),
            self.bad_ratio.clone(),
        );
        r.register(
            format!("netlab_mesh_{side}_loss_ratio"),
            format!("Median share of probe attempts lost on the paths {way} the host"),
            self.loss.clone(),
        );
        r.register(
            format!("netlab_mesh_{side}_rtt_seconds"),
            format!("Median of the probes' median round trips on the paths {way} the host"),
            self.rtt.clone(),
        );
    }

    fn clear(&self) {
        self.paths.clear();
        self.bad.clear();
        self.bad_ratio.clear();
        self.loss.clear();
        self.rtt.clear();
    }

    fn set(
        &self,
        labels: &L,
        paths: usize,
        bad: usize,
        losses: impl Iterator<Item = f64>,
        rtts: impl Iterator<Item = f64>,
    ) {
        self.paths.get_or_create(labels).set(paths as i64);
        self.bad.get_or_create(labels).set(bad as i64);
        self.bad_ratio
            .get_or_create(labels)
            .set(bad as f64 / paths.max(1) as f64);
        if let Some(m) = median(&mut losses.collect::<Vec<_>>()) {
            self.loss.get_or_create(labels).set(m);
        }
        if let Some(m) = median(&mut rtts.collect::<Vec<_>>()) {
            self.rtt.get_or_create(labels).set(m);
        }
    }
}

/// The metric families, registered once; each cycle sets them anew.
pub struct MeshMetrics {
    slo: Slo,
    pairs: usize,
    path_loss: Family<PathLabels, FloatGauge>,
    path_rtt_median: Family<PathLabels, FloatGauge>,
    path_rtt_p99: Family<PathLabels, FloatGauge>,
    path_failed: Family<PathLabels, Gauge>,
    path_throughput: Family<ThroughputLabels, FloatGauge>,
    path_series: Gauge,
    path_series_dropped: Gauge,
    row: Side<RowLabels>,
    row_throughput: Family<RowLabels, FloatGauge>,
    column: Side<ColumnLabels>,
    zone_paths: Family<ZoneLabels, Gauge>,
    zone_bad: Family<ZoneLabels, Gauge>,
    agent_up: Family<AgentLabels, Gauge>,
    paths_limited: Family<LimitLabels, Gauge>,
    cycles: Family<KindLabels, Counter>,
    tests: Family<TestLabels, Counter>,
    probe_calls: Counter,
    cycle_seconds: Family<KindLabels, FloatGauge>,
    last_cycle: Family<KindLabels, FloatGauge>,
    loss_slo: FloatGauge,
}

fn median(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    crate::experiments::mesh::analysis::median(values)
}

impl MeshMetrics {
    /// Registers every family in `registry`.
    pub fn new(registry: &mut Registry, slo: Slo, pairs: usize) -> MeshMetrics {
        let m = MeshMetrics {
            slo,
            pairs,
            path_loss: Family::default(),
            path_rtt_median: Family::default(),
            path_rtt_p99: Family::default(),
            path_failed: Family::default(),
            path_throughput: Family::default(),
            path_series: Gauge::default(),
            path_series_dropped: Gauge::default(),
            row: Side::default(),
            row_throughput: Family::default(),
            column: Side::default(),
            zone_paths: Family::default(),
            zone_bad: Family::default(),
            agent_up: Family::default(),
            paths_limited: Family::default(),
            cycles: Family::default(),
            tests: Family::default(),
            probe_calls: Counter::default(),
            cycle_seconds: Family::default(),
            last_cycle: Family::default(),
            loss_slo: FloatGauge::default(),
        };
        let r = registry;
        r.register(
            "netlab_mesh_path_loss_ratio",
            "Share of probe attempts lost on the path (worst --metrics-pairs paths and those in breach)",
            m.path_loss.clone(),
        );
        r.register(
            "netlab_mesh_path_rtt_median_seconds",
            "The probes' median round trip on the path (worst paths and those in breach)",
            m.path_rtt_median.clone(),
        );
        r.register(
            "netlab_mesh_path_rtt_p99_seconds",
            "The probes' 99th-percentile round trip on the path (worst paths and those in breach)",
            m.path_rtt_p99.clone(),
        );
        r.register(
            "netlab_mesh_path_failed",
            "1 when the path's probe failed this cycle (shown paths only)",
            m.path_failed.clone(),
        );
        r.register(
            "netlab_mesh_path_throughput_bytes_per_second",
            "TCP throughput (payload bytes a second) of the slowest --metrics-pairs paths, labelled with what limited it",
            m.path_throughput.clone(),
        );
        r.register(
            "netlab_mesh_path_series",
            "Paths exposed with series of their own this cycle",
            m.path_series.clone(),
        );
        r.register(
            "netlab_mesh_path_series_dropped",
            "Paths in breach left out of the per-path series (over the cap)",
            m.path_series_dropped.clone(),
        );
        m.row.register(r, "row", "from");
        r.register(
            "netlab_mesh_row_throughput_bytes_per_second",
            "Median TCP throughput (payload bytes a second) of the paths from the host (last throughput pass)",
            m.row_throughput.clone(),
        );
        m.column.register(r, "column", "to");
        r.register(
            "netlab_mesh_zone_paths",
            "Paths from the zone's hosts probed this cycle",
            m.zone_paths.clone(),
        );
        r.register(
            "netlab_mesh_zone_bad_paths",
            "Paths from the zone's hosts in breach of the SLO",
            m.zone_bad.clone(),
        );
        r.register(
            "netlab_mesh_agent_up",
            "1 when the agent answered the last cycle's handshake, 0 when it did not",
            m.agent_up.clone(),
        );
        r.register(
            "netlab_mesh_paths_limited",
            "Paths of the last throughput pass by what limited them (the limits verdict's primary factor)",
            m.paths_limited.clone(),
        );
        r.register(
            "netlab_mesh_cycles",
            "Cycles finished, by kind",
            m.cycles.clone(),
        );
        r.register(
            "netlab_mesh_tests",
            "Pair tests run, by test and outcome",
            m.tests.clone(),
        );
        r.register(
            "netlab_mesh_probe_calls",
            "Probe calls asked of the agents (each way of each path, each cycle)",
            m.probe_calls.clone(),
        );
        r.register(
            "netlab_mesh_cycle_duration_seconds",
            "How long the last cycle of the kind took",
            m.cycle_seconds.clone(),
        );
        r.register(
            "netlab_mesh_last_cycle_timestamp_seconds",
            "When the last cycle of the kind ended (Unix time)",
            m.last_cycle.clone(),
        );
        r.register(
            "netlab_mesh_loss_slo_ratio",
            "The loss SLO a path is judged against (--loss-slo)",
            m.loss_slo.clone(),
        );
        m.loss_slo.set(slo.loss_ratio);
        m
    }

    /// Whether a probe's line breaches the SLO.
    pub fn in_breach(&self, line: &PairTest) -> bool {
        if line.failed.is_some() {
            return true;
        }
        let lost = line.figures.loss_pct.unwrap_or(0.0) / 100.0;
        let slow = match (self.slo.rtt_s, line.figures.rtt_p50_us) {
            (Some(slo), Some(p50)) => p50 / 1e6 > slo,
            _ => false,
        };
        lost > self.slo.loss_ratio || slow
    }

    /// Sets every family from one finished cycle.
    pub fn record(&self, cycle: &Cycle<'_>) {
        let kind = KindLabels { kind: cycle.kind };
        self.cycles.get_or_create(&kind).inc();
        self.cycle_seconds.get_or_create(&kind).set(cycle.seconds);
        self.last_cycle.get_or_create(&kind).set(cycle.ended_s);
        self.agent_up.clear();
        for (host, up) in cycle.hosts {
            self.agent_up
                .get_or_create(&AgentLabels {
                    agent: host.name.clone(),
                    zone: host.zone.clone(),
                    rack: host.rack.clone(),
                })
                .set(i64::from(*up));
        }
        for line in cycle.results {
            let outcome = if line.failed.is_some() {
                Outcome::failed
            } else {
                Outcome::measured
            };
            self.tests
                .get_or_create(&TestLabels {
                    test: line.test.name().into(),
                    outcome,
                })
                .inc();
        }
        match cycle.kind {
            Kind::probe => self.record_probes(cycle),
            Kind::stream => self.record_streams(cycle),
        }
    }

    fn record_probes(&self, cycle: &Cycle<'_>) {
        let probes: Vec<&PairTest> = cycle
            .results
            .iter()
            .filter(|l| l.test == MeshTest::Probe)
            .collect();
        let host = |name: &str| cycle.hosts.iter().map(|(h, _)| h).find(|h| h.name == name);
        // Per host and zone, every cycle.
        self.row.clear();
        self.column.clear();
        self.zone_paths.clear();
        self.zone_bad.clear();
        for (h, _) in cycle.hosts {
            for row in [true, false] {
                let lines: Vec<&&PairTest> = probes
                    .iter()
                    .filter(|l| {
                        if row {
                            l.from == h.name
                        } else {
                            l.to == h.name
                        }
                    })
                    .collect();
                if lines.is_empty() {
                    continue;
                }
                let bad = lines.iter().filter(|l| self.in_breach(l)).count();
                let losses = lines
                    .iter()
                    .filter_map(|l| l.figures.loss_pct.map(|p| p / 100.0));
                let rtts = lines
                    .iter()
                    .filter_map(|l| l.figures.rtt_p50_us.map(|us| us / 1e6));
                let (zone, rack) = (h.zone.clone(), h.rack.clone());
                if row {
                    let labels = RowLabels {
                        from: h.name.clone(),
                        zone,
                        rack,
                    };
                    self.row.set(&labels, lines.len(), bad, losses, rtts);
                } else {
                    let labels = ColumnLabels {
                        to: h.name.clone(),
                        zone,
                        rack,
                    };
                    self.column.set(&labels, lines.len(), bad, losses, rtts);
                }
            }
        }
        for line in &probes {
            let zone = host(&line.from).map(|h| h.zone.clone()).unwrap_or_default();
            let labels = ZoneLabels { zone };
            self.zone_paths.get_or_create(&labels).inc();
            if self.in_breach(line) {
                self.zone_bad.get_or_create(&labels).inc();
            }
        }
        // Per path: the worst K, and those in breach up to the cap.
        let mut ranked = probes.clone();
        ranked.sort_by(|a, b| {
            let key = |l: &PairTest| {
                (
                    l.failed.is_some(),
                    l.figures.loss_pct.unwrap_or(0.0),
                    l.figures.rtt_p50_us.unwrap_or(0.0),
                )
            };
            let (ka, kb) = (key(a), key(b));
            kb.0.cmp(&ka.0)
                .then(kb.1.total_cmp(&ka.1))
                .then(kb.2.total_cmp(&ka.2))
        });
        let cap = self.pairs.max(1) * MAX_BREACH_FACTOR;
        let breaches = ranked.iter().filter(|l| self.in_breach(l)).count();
        let shown = ranked.len().min(self.pairs.max(breaches.min(cap)));
        self.path_loss.clear();
        self.path_rtt_median.clear();
        self.path_rtt_p99.clear();
        self.path_failed.clear();
        for line in &ranked[..shown] {
            let path = PathLabels {
                from: line.from.clone(),
                to: line.to.clone(),
            };
            self.path_failed
                .get_or_create(&path)
                .set(i64::from(line.failed.is_some()));
            if let Some(p) = line.figures.loss_pct {
                self.path_loss.get_or_create(&path).set(p / 100.0);
            }
            if let Some(us) = line.figures.rtt_p50_us {
                self.path_rtt_median.get_or_create(&path).set(us / 1e6);
            }
            if let Some(us) = line.figures.rtt_p99_us {
                self.path_rtt_p99.get_or_create(&path).set(us / 1e6);
            }
        }
        self.path_series.set(shown as i64);
        self.path_series_dropped
            .set(breaches.saturating_sub(shown) as i64);
    }

    /// Counts the probe calls a cycle asked for.
    pub fn count_probe_calls(&self, calls: u64) {
        self.probe_calls.inc_by(calls);
    }

    fn record_streams(&self, cycle: &Cycle<'_>) {
        let streams: Vec<&PairTest> = cycle
            .results
            .iter()
            .filter(|l| l.test == MeshTest::Stream && l.failed.is_none())
            .collect();
        self.paths_limited.clear();
        for line in &streams {
            self.paths_limited
                .get_or_create(&LimitLabels {
                    limit: Limit(line.figures.limited_by),
                })
                .inc();
        }
        self.row_throughput.clear();
        for (h, _) in cycle.hosts {
            let mut rates: Vec<f64> = streams
                .iter()
                .filter(|l| l.from == h.name)
                .filter_map(|l| l.figures.throughput_mbit_s.map(|m| m * 1e6 / 8.0))
                .collect();
            if let Some(m) = median(&mut rates) {
                self.row_throughput
                    .get_or_create(&RowLabels {
                        from: h.name.clone(),
                        zone: h.zone.clone(),
                        rack: h.rack.clone(),
                    })
                    .set(m);
            }
        }
        let mut slowest = streams.clone();
        slowest.sort_by(|a, b| {
            a.figures
                .throughput_mbit_s
                .unwrap_or(0.0)
                .total_cmp(&b.figures.throughput_mbit_s.unwrap_or(0.0))
        });
        self.path_throughput.clear();
        for line in slowest.iter().take(self.pairs) {
            if let Some(mbit) = line.figures.throughput_mbit_s {
                self.path_throughput
                    .get_or_create(&ThroughputLabels {
                        from: line.from.clone(),
                        to: line.to.clone(),
                        limit: Limit(line.figures.limited_by),
                    })
                    .set(mbit * 1e6 / 8.0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::mesh::record::PairFigures;
    use std::collections::BTreeMap;

    #[test]
    fn the_cycle_takes_each_kept_test_from_its_line() {
        let test = probe("a", "b", 2.0, false);
        let record = crate::record::Record::new(
            "2026-12-04T00:00:00Z".into(),
            "remote",
            &crate::measure::host::HostFacts::default(),
            test.clone(),
            None,
        );
        let line = serde_json::to_string(&record).unwrap();
        let mut kept = CycleTests::default();
        for event in [
            RunEvent::Measuring { label: "a->b" },
            RunEvent::Kept { line: &line },
            RunEvent::Said("a line"),
            RunEvent::Kept {
                line: "{\"experiment\":\"rpc\"}",
            },
        ] {
            kept.event(&event).unwrap();
        }
        assert_eq!(kept.tests.len(), 1);
        assert_eq!(kept.tests[0].figures, test.figures);
        assert_eq!(kept.tests[0].started, "2026-12-04T00:00:00Z");
        assert_eq!(kept.unread.len(), 1, "{:?}", kept.unread);
    }

    fn probe(from: &str, to: &str, loss_pct: f64, failed: bool) -> PairTest {
        PairTest {
            seconds: 0.1,
            failed: failed.then(|| "timed out".into()),
            figures: PairFigures {
                loss_pct: (!failed).then_some(loss_pct),
                rtt_p50_us: (!failed).then_some(100.0),
                rtt_p99_us: (!failed).then_some(300.0),
                ..PairFigures::default()
            },
            ..PairTest::example(MeshTest::Probe, from, to)
        }
    }

    fn hosts(n: usize) -> Vec<(HostLabels, bool)> {
        (0..n)
            .map(|i| {
                (
                    HostLabels {
                        name: format!("h{i}"),
                        zone: format!("z{}", i / 4),
                        rack: format!("r{}", i / 2),
                    },
                    i != 7,
                )
            })
            .collect()
    }

    /// Every ordered pair of `n` hosts, host 1's paths lossy both ways.
    fn mesh(n: usize) -> Vec<PairTest> {
        let mut lines = Vec::new();
        for a in 0..n {
            for b in 0..n {
                if a != b {
                    let lossy = a == 1 || b == 1;
                    lines.push(probe(
                        &format!("h{a}"),
                        &format!("h{b}"),
                        if lossy { 30.0 } else { 0.0 },
                        false,
                    ));
                }
            }
        }
        lines
    }

    fn exposition(hosts_n: usize, pairs: usize) -> String {
        let mut registry = Registry::default();
        let metrics = MeshMetrics::new(
            &mut registry,
            Slo {
                loss_ratio: 0.01,
                rtt_s: None,
            },
            pairs,
        );
        let hosts = hosts(hosts_n);
        let results = mesh(hosts_n);
        metrics.record(&Cycle {
            kind: Kind::probe,
            hosts: &hosts,
            results: &results,
            seconds: 3.0,
            ended_s: 1e9,
        });
        crate::export::openmetrics::OpenMetrics(&registry).text()
    }

    fn series(text: &str, name: &str) -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn a_lossy_host_is_bad_in_its_row_and_its_column_and_no_other() {
        let text = exposition(8, 3);
        let rows = series(&text, "netlab_mesh_row_bad_ratio");
        assert_eq!(rows.len(), 8, "{text}");
        let bad: Vec<&String> = rows.iter().filter(|l| l.ends_with(" 1.0")).collect();
        assert_eq!(bad.len(), 1, "{rows:?}");
        assert!(bad[0].contains("from=\"h1\""), "{bad:?}");
        assert!(bad[0].contains("zone=\"z0\""), "{bad:?}");
        assert!(bad[0].contains("rack=\"r0\""), "{bad:?}");
        let columns = series(&text, "netlab_mesh_column_bad_ratio");
        assert!(
            columns
                .iter()
                .any(|l| l.contains("to=\"h1\"") && l.ends_with(" 1.0")),
            "{columns:?}"
        );
        // The unreachable agent says so.
        assert!(
            text.contains("netlab_mesh_agent_up{agent=\"h7\",zone=\"z1\",rack=\"r3\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("netlab_mesh_cycles_total{kind=\"probe\"} 1"),
            "{text}"
        );
    }

    #[test]
    fn per_path_series_are_the_worst_and_the_breaches_up_to_a_cap() {
        // 8 hosts: 14 paths touch host 1, all in breach; K = 3 shows all 14.
        let text = exposition(8, 3);
        let paths = series(&text, "netlab_mesh_path_loss_ratio");
        assert_eq!(paths.len(), 14, "{paths:?}");
        // 40 hosts: 78 breaches, over the cap of 10 K = 20 with K = 2.
        let text = exposition(40, 2);
        let paths = series(&text, "netlab_mesh_path_loss_ratio");
        assert_eq!(paths.len(), 20, "{paths:?}");
        assert!(
            text.contains("netlab_mesh_path_series_dropped 58"),
            "{text}"
        );
        // Per host: one row and one column series a family, whatever the paths.
        assert_eq!(series(&text, "netlab_mesh_row_loss_ratio").len(), 40);
    }

    #[test]
    fn a_failed_probe_is_a_breach_and_shown_first() {
        let mut registry = Registry::default();
        let metrics = MeshMetrics::new(
            &mut registry,
            Slo {
                loss_ratio: 0.5,
                rtt_s: None,
            },
            1,
        );
        let results = vec![probe("a", "b", 10.0, false), probe("b", "a", 0.0, true)];
        assert!(metrics.in_breach(&results[1]));
        assert!(!metrics.in_breach(&results[0]));
        let hosts = vec![
            (HostLabels::of("a", &BTreeMap::new()), true),
            (HostLabels::of("b", &BTreeMap::new()), true),
        ];
        metrics.record(&Cycle {
            kind: Kind::probe,
            hosts: &hosts,
            results: &results,
            seconds: 1.0,
            ended_s: 1e9,
        });
        let text = crate::export::openmetrics::OpenMetrics(&registry).text();
        assert!(
            text.contains("netlab_mesh_path_failed{from=\"b\",to=\"a\"} 1"),
            "{text}"
        );
        assert!(
            !text.contains("netlab_mesh_path_failed{from=\"a\""),
            "{text}"
        );
    }

    #[test]
    fn a_throughput_pass_labels_each_path_with_what_limited_it() {
        let mut registry = Registry::default();
        let metrics = MeshMetrics::new(
            &mut registry,
            Slo {
                loss_ratio: 0.01,
                rtt_s: None,
            },
            5,
        );
        let mut line = probe("a", "b", 0.0, false);
        line.test = MeshTest::Stream;
        line.figures = PairFigures {
            throughput_mbit_s: Some(30.0),
            limited_by: Some(Factor::Link),
            ..PairFigures::default()
        };
        let hosts = vec![(HostLabels::of("a", &BTreeMap::new()), true)];
        metrics.record(&Cycle {
            kind: Kind::stream,
            hosts: &hosts,
            results: &[line],
            seconds: 1.0,
            ended_s: 1e9,
        });
        let text = crate::export::openmetrics::OpenMetrics(&registry).text();
        assert!(
            text.contains(
                "netlab_mesh_path_throughput_bytes_per_second{from=\"a\",to=\"b\",limit=\"link\"} 3750000.0"
            ),
            "{text}"
        );
        assert!(
            text.contains("netlab_mesh_paths_limited{limit=\"link\"} 1"),
            "{text}"
        );
    }
}
