//! A mesh's results as matrices, one a figure: rows the sending host,
//! columns the receiving one, hosts sorted by their labels (zone, then
//! rack, then name) so that a rack or a zone is a block. A cell is a
//! value, `failed` (the test ran and failed, or its host took no part), or
//! empty (never measured: the run was stopped before it). Pure, but for
//! [`write_all`], which writes one CSV a figure into the run directory.

use crate::analysis::limits::Factor;
use crate::experiments::mesh::record::MeshTest;
use crate::experiments::mesh::record::{PairFigures, PairTest};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// One figure a heat map shows.
pub struct Metric {
    /// The CSV's name and the figure's key.
    pub name: &'static str,
    pub test: MeshTest,
    pub unit: &'static str,
    /// Whether more is better (throughput) or worse (loss, delay).
    pub higher_is_better: bool,
    /// The smallest worsening that counts as a finding, in `unit`.
    pub floor: f64,
    /// The figure in words.
    pub describe: &'static str,
    pub value: fn(&PairFigures) -> Option<f64>,
    /// Whether a measurement is large enough in absolute terms to be a
    /// finding at all (besides beating the median by [`Metric::floor`]):
    /// a retransmission count must also be a share of what was sent.
    pub significant: fn(&PairFigures) -> bool,
    /// A word shown beside the cell's value (rpm's grade), from the pass
    /// nearest the median.
    pub tag: fn(&PairFigures) -> Option<String>,
}

/// A cell's retransmissions are a finding only from this share of the
/// bytes sent, percent (and [`Metric::floor`] segments): a clean LAN
/// retransmits a few segments in a million.
pub const RETRANSMITTED_FLOOR_PCT: f64 = 0.1;

fn always(_: &PairFigures) -> bool {
    true
}

fn untagged(_: &PairFigures) -> Option<String> {
    None
}

pub const METRICS: &[Metric] = &[
    Metric {
        name: "throughput_mbit_s",
        test: MeshTest::Stream,
        unit: "Mbit/s",
        higher_is_better: true,
        floor: 0.0,
        describe: "throughput",
        value: |f| f.throughput_mbit_s,
        significant: always,
        tag: untagged,
    },
    Metric {
        name: "retransmits",
        test: MeshTest::Stream,
        unit: "segments",
        higher_is_better: false,
        floor: 10.0,
        describe: "retransmission",
        value: |f| f.retransmits.map(|r| r as f64),
        significant: |f| {
            f.retransmitted_pct
                .is_none_or(|pct| pct >= RETRANSMITTED_FLOOR_PCT)
        },
        tag: untagged,
    },
    Metric {
        name: "tcp_rtt_ms",
        test: MeshTest::Stream,
        unit: "ms",
        higher_is_better: false,
        floor: 1.0,
        describe: "TCP's round trip",
        value: |f| f.tcp_rtt_ms,
        significant: always,
        tag: untagged,
    },
    Metric {
        name: "rtt_p50_us",
        test: MeshTest::Rtt,
        unit: "µs",
        higher_is_better: false,
        floor: 20.0,
        describe: "the median round trip",
        value: |f| f.rtt_p50_us,
        significant: always,
        tag: untagged,
    },
    Metric {
        name: "rtt_p99_us",
        test: MeshTest::Rtt,
        unit: "µs",
        higher_is_better: false,
        floor: 200.0,
        describe: "the 99th-percentile round trip",
        value: |f| f.rtt_p99_us,
        significant: always,
        tag: untagged,
    },
    Metric {
        name: "loss_pct",
        test: MeshTest::Loss,
        unit: "%",
        higher_is_better: false,
        floor: 0.1,
        describe: "loss",
        value: |f| f.loss_pct,
        significant: always,
        tag: untagged,
    },
    Metric {
        name: "jitter_ms",
        test: MeshTest::Loss,
        unit: "ms",
        higher_is_better: false,
        floor: 0.05,
        describe: "jitter",
        value: |f| f.jitter_ms,
        significant: always,
        tag: untagged,
    },
    Metric {
        name: "rpm",
        test: MeshTest::Rpm,
        unit: "RPM",
        higher_is_better: true,
        // The draft's tiers are a decade apart (300, 1000, 6000): a
        // hundred round trips a minute is the least worth a finding.
        floor: 100.0,
        describe: "responsiveness under load",
        value: |f| f.rpm,
        significant: always,
        tag: |f| f.grade.clone(),
    },
    Metric {
        name: "working_ms",
        test: MeshTest::Rpm,
        unit: "ms",
        higher_is_better: false,
        floor: 5.0,
        describe: "the working round trip",
        value: |f| f.working_ms,
        significant: always,
        tag: |f| f.grade.clone(),
    },
    Metric {
        name: "probe_rtt_p50_us",
        test: MeshTest::Probe,
        unit: "µs",
        higher_is_better: false,
        floor: 100.0,
        describe: "the probes' median round trip",
        value: |f| f.rtt_p50_us,
        significant: always,
        tag: untagged,
    },
    Metric {
        name: "probe_loss_pct",
        test: MeshTest::Probe,
        unit: "%",
        higher_is_better: false,
        // A probe of 20 calls sees loss in steps of about 5%.
        floor: 1.0,
        describe: "the probes' loss",
        value: |f| f.loss_pct,
        significant: always,
        tag: untagged,
    },
];

/// What one cell holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// Never measured.
    Missing,
    Failed(String),
    Value {
        /// The median over the passes that measured it.
        value: f64,
        /// The limits verdict of a stream cell (of the pass nearest the
        /// median), for its tooltip.
        verdict: Option<String>,
        /// Each measuring pass's value, in pass order.
        repeats: Vec<f64>,
        /// What limited each of those passes (stream), where it was judged.
        limits: Vec<Option<Factor>>,
        /// Whether the pattern findings read it: a stream cell whose
        /// passes were mostly limited by a host (its CPU, its buffers, its
        /// application) or undecided is evidence about its hosts, not
        /// about the path, and is shown as such.
        read: bool,
        /// Whether most passes were large enough to be a finding
        /// ([`Metric::significant`]).
        significant: bool,
        /// [`Metric::tag`] of the pass nearest the median.
        tag: Option<String>,
    },
}

/// Whether a stream cell's passes say the network limited it: most of
/// those judged were limited by the path, a link, loss or a queue. A cell
/// none of whose passes was judged (records from before the verdict) is
/// read as it always was.
pub fn network_bound(limits: &[Option<Factor>]) -> bool {
    let judged: Vec<Factor> = limits.iter().flatten().copied().collect();
    judged.is_empty() || 2 * judged.iter().filter(|f| f.is_network()).count() > judged.len()
}

/// One figure over every ordered pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Matrix {
    /// Hosts in display order.
    pub hosts: Vec<String>,
    /// Each host's labels, as its lines carried them.
    pub labels: Vec<BTreeMap<String, String>>,
    /// `cells[i][j]`: from `hosts[i]` to `hosts[j]` (the diagonal is
    /// always missing).
    pub cells: Vec<Vec<Cell>>,
}

/// The order hosts are shown in: zone, then rack, then name (hosts
/// without a label sort after those with one).
pub fn sort_hosts(hosts: &mut [(String, BTreeMap<String, String>)]) {
    let key = |labels: &BTreeMap<String, String>, k: &str| {
        labels.get(k).map_or((1, String::new()), |v| (0, v.clone()))
    };
    hosts.sort_by(|(a, la), (b, lb)| {
        key(la, "zone")
            .cmp(&key(lb, "zone"))
            .then(key(la, "rack").cmp(&key(lb, "rack")))
            .then(a.cmp(b))
    });
}

/// The hosts `results` name (and `inventory`'s, measured or not), with
/// their labels, in display order.
pub fn hosts_of(
    results: &[PairTest],
    inventory: &[(String, BTreeMap<String, String>)],
) -> Vec<(String, BTreeMap<String, String>)> {
    let mut hosts: BTreeMap<String, BTreeMap<String, String>> = inventory.iter().cloned().collect();
    for line in results {
        for (name, labels) in [(&line.from, &line.from_labels), (&line.to, &line.to_labels)] {
            let entry = hosts.entry(name.clone()).or_default();
            if entry.is_empty() {
                *entry = labels.clone();
            }
        }
    }
    let mut hosts: Vec<_> = hosts.into_iter().collect();
    sort_hosts(&mut hosts);
    hosts
}

impl Matrix {
    /// `metric` over `hosts` (in order) from `results`: a cell is the
    /// median of its passes' measurements, with each pass's value kept in
    /// pass order; a test written twice in a pass (failed, then measured on
    /// `--resume`) counts its measurement; a cell none of whose passes was
    /// measured shows its last failure.
    pub fn of(
        metric: &Metric,
        hosts: &[(String, BTreeMap<String, String>)],
        results: &[PairTest],
    ) -> Matrix {
        let index: HashMap<&str, usize> = hosts
            .iter()
            .enumerate()
            .map(|(i, (name, _))| (name.as_str(), i))
            .collect();
        let n = hosts.len();
        // Each cell's measurements by pass (value, verdict), and its last failure.
        type Measured = (f64, Option<String>, Option<Factor>, bool, Option<String>);
        let mut measured: Vec<Vec<BTreeMap<usize, Measured>>> = vec![vec![BTreeMap::new(); n]; n];
        let mut failures: Vec<Vec<Option<String>>> = vec![vec![None; n]; n];
        for line in results.iter().filter(|l| l.test == metric.test) {
            let (Some(&i), Some(&j)) = (index.get(line.from.as_str()), index.get(line.to.as_str()))
            else {
                continue;
            };
            match (&line.failed, (metric.value)(&line.figures)) {
                (Some(why), _) => failures[i][j] = Some(why.clone()),
                (None, Some(value)) => {
                    let judged = (
                        value,
                        line.figures.verdict.clone(),
                        line.figures.limited_by,
                        (metric.significant)(&line.figures),
                        (metric.tag)(&line.figures),
                    );
                    measured[i][j].insert(line.pass, judged);
                }
                (None, None) => {
                    failures[i][j] = Some("the test gave no such figure".into());
                }
            }
        }
        let cells = measured
            .into_iter()
            .zip(failures)
            .map(|(row, failed)| {
                row.into_iter()
                    .zip(failed)
                    .map(|(passes, failure)| {
                        let repeats: Vec<f64> = passes.values().map(|(v, ..)| *v).collect();
                        let limits: Vec<Option<Factor>> =
                            passes.values().map(|(_, _, f, ..)| *f).collect();
                        let significant =
                            2 * passes.values().filter(|p| p.3).count() >= passes.len();
                        let read = metric.test != MeshTest::Stream || network_bound(&limits);
                        match crate::record::stats::Spread::of(&repeats) {
                            Some(spread) => {
                                // The verdict of the pass nearest the median.
                                let nearest = passes.values().min_by(|a, b| {
                                    (a.0 - spread.median)
                                        .abs()
                                        .total_cmp(&(b.0 - spread.median).abs())
                                });
                                Cell::Value {
                                    value: spread.median,
                                    verdict: nearest.and_then(|(_, v, ..)| v.clone()),
                                    tag: nearest.and_then(|p| p.4.clone()),
                                    repeats,
                                    limits,
                                    read,
                                    significant,
                                }
                            }
                            None => failure.map_or(Cell::Missing, Cell::Failed),
                        }
                    })
                    .collect()
            })
            .collect();
        Matrix {
            hosts: hosts.iter().map(|(h, _)| h.clone()).collect(),
            labels: hosts.iter().map(|(_, l)| l.clone()).collect(),
            cells,
        }
    }

    /// The matrix as CSV (the report toolkit's): a header of receiving
    /// hosts, a row a sender.
    pub fn csv(&self) -> String {
        let mut rows = Vec::with_capacity(self.hosts.len() + 1);
        rows.push(
            std::iter::once("from\\to".to_string())
                .chain(self.hosts.iter().cloned())
                .collect::<Vec<_>>(),
        );
        for (i, row) in self.cells.iter().enumerate() {
            let mut line = vec![self.hosts[i].clone()];
            line.extend(row.iter().map(|cell| match cell {
                Cell::Missing => String::new(),
                Cell::Failed(_) => "failed".to_string(),
                Cell::Value { value, .. } => round3(*value),
            }));
            rows.push(line);
        }
        // Text in memory always renders.
        crate::export::Export::render(&crate::export::csv::Table { rows: &rows })
            .unwrap_or_default()
    }

    /// Whether any cell holds a value or a failure.
    pub fn is_empty(&self) -> bool {
        self.cells
            .iter()
            .flatten()
            .all(|c| matches!(c, Cell::Missing))
    }
}

/// `value` to three decimals, without trailing zeros.
fn round3(value: f64) -> String {
    let text = format!("{value:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_string()
}

/// Writes `<metric>.csv` into `dir` for every figure its results hold.
pub fn write_all(dir: &Path) -> anyhow::Result<()> {
    let manifest = crate::experiments::mesh::record::read_manifest(dir)?;
    let (results, _skipped) = crate::experiments::mesh::record::results_of(dir)?;
    let inventory = manifest.hosts();
    let hosts = hosts_of(&results, &inventory);
    for metric in METRICS {
        let matrix = Matrix::of(metric, &hosts, &results);
        if matrix.is_empty() {
            continue;
        }
        let path = dir.join(format!("{}.csv", metric.name));
        std::fs::write(&path, matrix.csv())
            .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn hosts_sort_by_zone_then_rack_then_name() {
        let mut hosts = vec![
            ("c".to_string(), labels(&[("zone", "b"), ("rack", "r1")])),
            ("a".to_string(), labels(&[])),
            ("b".to_string(), labels(&[("zone", "a"), ("rack", "r2")])),
            ("d".to_string(), labels(&[("zone", "a"), ("rack", "r1")])),
        ];
        sort_hosts(&mut hosts);
        let names: Vec<&str> = hosts.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["d", "b", "c", "a"]);
    }

    fn line(from: &str, to: &str, failed: Option<&str>, mbit: f64) -> PairTest {
        PairTest {
            failed: failed.map(String::from),
            figures: PairFigures {
                throughput_mbit_s: Some(mbit),
                ..PairFigures::default()
            },
            ..PairTest::example(MeshTest::Stream, from, to)
        }
    }

    #[test]
    fn a_matrix_tells_values_failures_and_missing_cells_apart() {
        let results = vec![
            line("a", "b", None, 900.0),
            line("b", "a", Some("agent b lost"), 0.0),
            line("a", "c", Some("refused"), 0.0),
            // Resumed: measured after all.
            line("a", "c", None, 850.5),
        ];
        let inventory: Vec<_> = ["a", "b", "c"]
            .iter()
            .map(|h| (h.to_string(), BTreeMap::new()))
            .collect();
        let hosts = hosts_of(&results, &inventory);
        let m = Matrix::of(&METRICS[0], &hosts, &results);
        assert_eq!(m.hosts, ["a", "b", "c"]);
        assert_eq!(m.csv(), "from\\to,a,b,c\na,,900,850.5\nb,failed,,\nc,,,\n");
        assert!(Matrix::of(&METRICS[3], &hosts, &results).is_empty());
    }

    #[test]
    fn a_cell_of_several_passes_is_their_median_with_each_pass_kept() {
        let at = |pass, failed, mbit| PairTest {
            pass,
            ..line("a", "b", failed, mbit)
        };
        let results = vec![
            at(0, None, 900.0),
            at(1, Some("refused"), 0.0),
            at(2, None, 100.0),
            at(3, None, 950.0),
            // Pass 1 measured on --resume.
            at(1, None, 880.0),
        ];
        let inventory: Vec<_> = ["a", "b"]
            .iter()
            .map(|h| (h.to_string(), BTreeMap::new()))
            .collect();
        let m = Matrix::of(&METRICS[0], &inventory, &results);
        match &m.cells[0][1] {
            Cell::Value { value, repeats, .. } => {
                assert_eq!(*value, 890.0);
                assert_eq!(repeats, &[900.0, 880.0, 100.0, 950.0]);
            }
            other => panic!("{other:?}"),
        }
    }
}
