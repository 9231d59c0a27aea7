//! What a mesh's matrices show, in words: which hosts, racks and paths
//! are slow, and which paths are slow one way only. Pure functions over a
//! [`Matrix`].
//!
//! A cell is *bad* when it is worse than the matrix's median by more than
//! [`WORSE_BY`] of the median and by more than the figure's own floor (a
//! loss of 0.01% beside a median of 0 is not a finding). Then, in order,
//! each explaining the bad cells the next does not:
//! 1. a block: a group of hosts (a rack, else a zone) whose cells to and
//!    from the other groups are bad while its own are not points to the
//!    group's uplink;
//! 2. a host: a row of bad cells points to the sending host, a column to
//!    the receiving host, both to the host's own link or NIC;
//! 3. a path: a bad cell nothing above explains points to that path alone.
//!
//! A row or column counts when at least [`MOSTLY`] of its measured cells
//! are bad (a straggler among them is noise, not a second cause).
//! Separately, a pair whose two directions differ by [`ASYMMETRIC`] or
//! more, the worse one bad, is asymmetric: one direction of that path is
//! held back. Bimodal repeats (ECMP) need repeated passes, which a run
//! does not make yet.

use crate::experiments::mesh::matrix::{Cell, Matrix, Metric};
use serde::Serialize;
use std::collections::BTreeMap;

/// How much worse than the median a bad cell is (a share of the median).
pub const WORSE_BY: f64 = 0.3;
/// The share of a row, column or block's cells that must be bad.
pub const MOSTLY: f64 = 0.75;
/// The ratio between a pair's directions that makes it asymmetric.
pub const ASYMMETRIC: f64 = 1.5;

/// One thing the matrix shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "pattern", rename_all = "snake_case")]
pub enum Finding {
    /// A rack's (or zone's) cells to and from the others are bad.
    Block {
        label: String,
        group: String,
        hosts: Vec<String>,
        words: String,
    },
    /// A host's row (it sends), column (it receives), or both.
    Host {
        host: String,
        sending: bool,
        receiving: bool,
        words: String,
    },
    /// One path, one way.
    Path {
        from: String,
        to: String,
        words: String,
    },
    /// A pair whose directions differ.
    Asymmetric {
        slow_from: String,
        slow_to: String,
        ratio: f64,
        words: String,
    },
}

impl Finding {
    pub fn words(&self) -> &str {
        match self {
            Finding::Block { words, .. }
            | Finding::Host { words, .. }
            | Finding::Path { words, .. }
            | Finding::Asymmetric { words, .. } => words,
        }
    }
}

/// The median of `values` (None when empty).
pub fn median(values: &[f64]) -> Option<f64> {
    crate::record::stats::Spread::of(values).map(|s| s.median)
}

fn value(cell: &Cell) -> Option<f64> {
    match cell {
        Cell::Value { value, .. } => Some(*value),
        _ => None,
    }
}

/// Whether `v` is worse than `typical` by more than [`WORSE_BY`] and the
/// metric's floor.
fn worse(metric: &Metric, v: f64, typical: f64) -> bool {
    let margin = (WORSE_BY * typical.abs()).max(metric.floor);
    if metric.higher_is_better {
        v < typical - margin
    } else {
        v > typical + margin
    }
}

/// Each measured cell's badness (`None`: not measured).
fn badness(matrix: &Matrix, metric: &Metric) -> Option<Vec<Vec<Option<bool>>>> {
    let all: Vec<f64> = matrix.cells.iter().flatten().filter_map(value).collect();
    let typical = median(&all)?;
    Some(
        matrix
            .cells
            .iter()
            .map(|row| {
                row.iter()
                    .map(|c| value(c).map(|v| worse(metric, v, typical)))
                    .collect()
            })
            .collect(),
    )
}

/// Whether at least [`MOSTLY`] of `cells` (measured ones) are bad, and at
/// least two were measured.
fn mostly_bad(cells: impl Iterator<Item = Option<bool>>) -> bool {
    let (mut measured, mut bad) = (0usize, 0usize);
    for cell in cells.flatten() {
        measured += 1;
        bad += usize::from(cell);
    }
    measured >= 2 && bad as f64 >= MOSTLY * measured as f64
}

/// The groups of hosts by `label` (hosts without it are left out), when
/// there are at least two.
fn groups(matrix: &Matrix, label: &str) -> Option<BTreeMap<String, Vec<usize>>> {
    let mut groups: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, labels) in matrix.labels.iter().enumerate() {
        if let Some(g) = labels.get(label) {
            groups.entry(g.clone()).or_default().push(i);
        }
    }
    (groups.len() >= 2).then_some(groups)
}

/// What `matrix` of `metric` shows, most general first.
pub fn read(matrix: &Matrix, metric: &Metric) -> Vec<Finding> {
    let Some(bad) = badness(matrix, metric) else {
        return Vec::new();
    };
    let n = matrix.hosts.len();
    let mut explained = vec![vec![false; n]; n];
    let mut findings = Vec::new();
    let what = metric.describe;
    // 1. Blocks: a rack's, else a zone's, uplink.
    for label in ["rack", "zone"] {
        let Some(groups) = groups(matrix, label) else {
            continue;
        };
        for (group, members) in &groups {
            let inside = |i: usize| members.contains(&i);
            let grouped = |k: usize| matrix.labels[k].contains_key(label);
            let cross: Vec<(usize, usize)> = (0..n)
                .flat_map(|i| (0..n).map(move |j| (i, j)))
                .filter(|&(i, j)| i != j && inside(i) != inside(j) && grouped(i) && grouped(j))
                .collect();
            let within: Vec<(usize, usize)> = members
                .iter()
                .flat_map(|&i| members.iter().map(move |&j| (i, j)))
                .filter(|(i, j)| i != j)
                .collect();
            let within_fine = !mostly_bad(within.iter().map(|&(i, j)| bad[i][j]))
                && within.iter().any(|&(i, j)| bad[i][j] == Some(false));
            if mostly_bad(cross.iter().map(|&(i, j)| bad[i][j])) && within_fine {
                for &(i, j) in &cross {
                    explained[i][j] = true;
                }
                let hosts: Vec<String> = members.iter().map(|&i| matrix.hosts[i].clone()).collect();
                findings.push(Finding::Block {
                    label: label.to_string(),
                    group: group.clone(),
                    hosts: hosts.clone(),
                    words: format!(
                        "{label} {group} ({}): {what} is worse to and from every other {label} while inside it is not: {label} {group}'s uplink",
                        hosts.join(", ")
                    ),
                });
            }
        }
        if findings.iter().any(|f| matches!(f, Finding::Block { .. })) {
            break;
        }
    }
    // 2. Hosts: rows and columns of what is not yet explained.
    let open = |i: usize, j: usize| if explained[i][j] { None } else { bad[i][j] };
    let mut host_findings = Vec::new();
    for h in 0..n {
        let sending = mostly_bad((0..n).filter(|&j| j != h).map(|j| open(h, j)));
        let receiving = mostly_bad((0..n).filter(|&i| i != h).map(|i| open(i, h)));
        if !(sending || receiving) {
            continue;
        }
        let name = &matrix.hosts[h];
        let words = match (sending, receiving) {
            (true, true) => format!(
                "host {name}: {what} is worse in its row and its column, whatever the peer: the host itself (its link, NIC or CPU)"
            ),
            (true, false) => format!(
                "host {name}: {what} is worse in its row (it sends) but not its column: its sending side (egress shaping, its transmit path)"
            ),
            _ => format!(
                "host {name}: {what} is worse in its column (it receives) but not its row: its receiving side (ingress policing, its receive path)"
            ),
        };
        host_findings.push((h, sending, receiving));
        findings.push(Finding::Host {
            host: name.clone(),
            sending,
            receiving,
            words,
        });
    }
    for &(h, sending, receiving) in &host_findings {
        if sending {
            explained[h].fill(true);
        }
        if receiving {
            explained.iter_mut().for_each(|row| row[h] = true);
        }
    }
    // 3. Paths nothing above explains.
    for i in 0..n {
        for j in 0..n {
            if i != j && bad[i][j] == Some(true) && !explained[i][j] {
                let (from, to) = (&matrix.hosts[i], &matrix.hosts[j]);
                findings.push(Finding::Path {
                    from: from.clone(),
                    to: to.clone(),
                    words: format!(
                        "path {from} -> {to} alone: {what} is worse there and nowhere else in its row or column: that path (a link, a switch port or a rule between the two)"
                    ),
                });
            }
        }
    }
    findings
}

/// `(a -> b) / (b -> a)` for each measured pair, as better-over-worse
/// (at least 1) with the slow direction: the asymmetry map's cells.
pub fn asymmetry(matrix: &Matrix, metric: &Metric) -> Vec<Vec<Option<f64>>> {
    let n = matrix.hosts.len();
    let mut map = vec![vec![None; n]; n];
    for (i, row) in map.iter_mut().enumerate() {
        for (j, slot) in row.iter_mut().enumerate() {
            if let (Some(a), Some(b)) = (value(&matrix.cells[i][j]), value(&matrix.cells[j][i])) {
                // Ratio of this direction against the other, > 1 when this
                // one is the better (a figure that is worse when higher
                // counts from its floor: 3% loss one way and none the
                // other is asymmetric).
                let ratio = if metric.higher_is_better {
                    a / b
                } else {
                    (b.max(0.0) + metric.floor) / (a.max(0.0) + metric.floor)
                };
                if ratio.is_finite() && ratio > 0.0 {
                    *slot = Some(ratio);
                }
            }
        }
    }
    map
}

/// The pairs whose two directions differ by [`ASYMMETRIC`] or more, the
/// slow direction bad, each once.
pub fn asymmetric_pairs(matrix: &Matrix, metric: &Metric) -> Vec<Finding> {
    let Some(bad) = badness(matrix, metric) else {
        return Vec::new();
    };
    let map = asymmetry(matrix, metric);
    let mut findings = Vec::new();
    let what = metric.describe;
    for (i, row) in map.iter().enumerate() {
        for (j, ratio) in row.iter().enumerate() {
            // (i, j) is the slow direction when its ratio is below 1.
            let Some(ratio) = ratio else { continue };
            let better_by = 1.0 / ratio;
            if better_by >= ASYMMETRIC && bad[i][j] == Some(true) {
                let (from, to) = (&matrix.hosts[i], &matrix.hosts[j]);
                findings.push(Finding::Asymmetric {
                    slow_from: from.clone(),
                    slow_to: to.clone(),
                    ratio: better_by,
                    words: format!(
                        "{from} -> {to} is {better_by:.1}x worse than {to} -> {from} in {what}: one direction of that path is held back (shaping or policing one way, a duplex mismatch)"
                    ),
                });
            }
        }
    }
    findings
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::mesh::matrix::METRICS;

    const THROUGHPUT: &Metric = &METRICS[0];
    const LOSS: &Metric = &METRICS[5];

    /// An `n`-host matrix of `value(from, to)`; host `i` in rack `i / 2`.
    fn matrix(n: usize, value: impl Fn(usize, usize) -> f64) -> Matrix {
        Matrix {
            hosts: (0..n).map(|i| format!("h{i}")).collect(),
            labels: (0..n)
                .map(|i| [("rack".to_string(), format!("r{}", i / 2))].into())
                .collect(),
            cells: (0..n)
                .map(|i| {
                    (0..n)
                        .map(|j| {
                            if i == j {
                                Cell::Missing
                            } else {
                                Cell::Value {
                                    value: value(i, j),
                                    verdict: None,
                                }
                            }
                        })
                        .collect()
                })
                .collect(),
        }
    }

    /// ±15% of noise, the same for a seed.
    fn noisy(seed: u64) -> impl Fn(usize, usize) -> f64 {
        move |i, j| {
            let mut rng = fastrand::Rng::with_seed(seed ^ (i as u64 * 131 + j as u64));
            1000.0 * (0.85 + 0.3 * rng.f64())
        }
    }

    #[test]
    fn noise_alone_is_no_finding() {
        for seed in 0..20 {
            let m = matrix(8, noisy(seed));
            assert_eq!(read(&m, THROUGHPUT), vec![], "seed {seed}");
            assert_eq!(asymmetric_pairs(&m, THROUGHPUT), vec![], "seed {seed}");
        }
    }

    #[test]
    fn a_slow_host_is_its_row_and_its_column_and_nothing_else() {
        let base = noisy(1);
        let m = matrix(8, |i, j| if i == 3 || j == 3 { 100.0 } else { base(i, j) });
        let findings = read(&m, THROUGHPUT);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        assert!(matches!(
            &findings[0],
            Finding::Host { host, sending: true, receiving: true, .. } if host == "h3"
        ));
        assert!(findings[0].words().contains("its row and its column"));
        // Both directions slow: not asymmetric.
        assert_eq!(asymmetric_pairs(&m, THROUGHPUT), vec![]);
    }

    #[test]
    fn a_host_that_only_sends_slowly_is_its_row_and_every_pair_of_it_is_asymmetric() {
        let base = noisy(2);
        let m = matrix(8, |i, j| if i == 5 { 90.0 } else { base(i, j) });
        let findings = read(&m, THROUGHPUT);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        assert!(matches!(
            &findings[0],
            Finding::Host { host, sending: true, receiving: false, .. } if host == "h5"
        ));
        let asymmetric = asymmetric_pairs(&m, THROUGHPUT);
        assert_eq!(asymmetric.len(), 7);
        assert!(asymmetric.iter().all(
            |f| matches!(f, Finding::Asymmetric { slow_from, .. } if slow_from == "h5")
        ));
    }

    #[test]
    fn one_slow_cell_is_that_path_and_shows_in_the_asymmetry_map() {
        let base = noisy(3);
        let m = matrix(8, |i, j| if (i, j) == (1, 6) { 50.0 } else { base(i, j) });
        let findings = read(&m, THROUGHPUT);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        assert!(matches!(
            &findings[0],
            Finding::Path { from, to, .. } if from == "h1" && to == "h6"
        ));
        let asymmetric = asymmetric_pairs(&m, THROUGHPUT);
        assert_eq!(asymmetric.len(), 1);
        let map = asymmetry(&m, THROUGHPUT);
        assert!(map[1][6].unwrap() < 0.1 && map[6][1].unwrap() > 10.0);
    }

    #[test]
    fn a_slow_rack_uplink_is_a_block_not_two_slow_hosts() {
        let base = noisy(4);
        // Rack r1 is hosts 2 and 3: slow to and from every other rack.
        let in_r1 = |h: usize| h / 2 == 1;
        let m = matrix(8, |i, j| if in_r1(i) != in_r1(j) { 250.0 } else { base(i, j) });
        let findings = read(&m, THROUGHPUT);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        assert!(matches!(
            &findings[0],
            Finding::Block { label, group, hosts, .. }
                if label == "rack" && group == "r1" && hosts == &["h2", "h3"]
        ));
        assert!(findings[0].words().contains("uplink"));
    }

    #[test]
    fn loss_on_one_path_is_that_cell_and_a_trace_of_loss_is_none() {
        let m = matrix(8, |i, j| match (i, j) {
            (4, 0) => 2.1,
            (2, 5) => 0.05,
            _ => 0.0,
        });
        let findings = read(&m, LOSS);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        assert!(matches!(
            &findings[0],
            Finding::Path { from, to, .. } if from == "h4" && to == "h0"
        ));
        // Loss one way and none the other: asymmetric, counted from the floor.
        let asymmetric = asymmetric_pairs(&m, LOSS);
        assert_eq!(asymmetric.len(), 1, "{asymmetric:#?}");
        assert!(matches!(
            &asymmetric[0],
            Finding::Asymmetric { slow_from, ratio, .. } if slow_from == "h4" && (*ratio - 22.0).abs() < 0.01
        ));
    }

    #[test]
    fn failed_and_missing_cells_are_not_read_as_slow() {
        let base = noisy(5);
        let mut m = matrix(8, base);
        for j in 0..8 {
            if j != 2 {
                m.cells[2][j] = Cell::Failed("agent h2 lost".into());
                m.cells[j][2] = Cell::Missing;
            }
        }
        assert_eq!(read(&m, THROUGHPUT), vec![]);
    }
}
