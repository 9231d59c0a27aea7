//! What a mesh's matrices show, in words: which hosts, racks and paths
//! are slow, and which paths are slow one way only. Pure functions over a
//! [`Matrix`].
//!
//! Only cells whose limit is the network are read: a stream cell whose
//! limits verdict named a host (its CPU, its buffers, its application) or
//! was undecided is evidence about its hosts, not about the path, and is
//! shown as host-bound instead: no worse than the median it still says its
//! path is fine (the path carried at least that much), worse it says
//! nothing. A read cell is *bad* when it is worse than the matrix's
//! median by more than [`WORSE_BY`] of the median and by more
//! than the figure's own floor (a loss of 0.01% beside a median of 0 is
//! not a finding), and large enough to be a finding at all (a
//! retransmission count must also be
//! [`crate::experiments::mesh::matrix::RETRANSMITTED_FLOOR_PCT`] of the
//! bytes sent). Then, in order,
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
//! held back.
//!
//! With repeated passes (`--passes`, at least [`MIN_REPEATS`]), a cell
//! whose repeats fall into two groups is read on its own. Its sorted
//! repeats are cut at their widest gap with two or more on each side (on
//! a log scale, since figures vary by ratio); the two groups count when
//! that gap is wider than either group's own spread (a split of one
//! spread-out group never is: its gaps are narrower than its halves) and
//! their means differ as a bad cell does from the median ([`WORSE_BY`]
//! and the figure's floor, so ±15% noise is never two groups). A single
//! straggler is not a group. Groups that alternate across the passes are flow
//! by flow: each new connection (new ports) hashed onto one of two
//! equal-cost paths, one worse: ECMP. Groups that split the run in two
//! (the first passes one way, the rest the other) are a change during the
//! run instead: a route moved, or load came or went. And when the limits
//! analysis found most of the worse passes held back by a host (its CPU,
//! its buffers, its application), the two groups are the hosts' (where
//! the two ends ran, what else ran there), not the path's.

use crate::analysis::limits::Factor;
use crate::experiments::mesh::matrix::{Cell, Matrix, Metric};
use serde::Serialize;
use std::collections::BTreeMap;

/// How much worse than the median a bad cell is (a share of the median).
pub const WORSE_BY: f64 = 0.3;
/// The share of a row, column or block's cells that must be bad.
pub const MOSTLY: f64 = 0.75;
/// The ratio between a pair's directions that makes it asymmetric.
pub const ASYMMETRIC: f64 = 1.5;
/// The fewest repeats of a cell read for two groups (two a group).
pub const MIN_REPEATS: usize = 6;
/// How much wider than either group's own spread the gap between two
/// groups must be.
pub const SEPARATED: f64 = 1.0;

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
    /// A cell whose repeats fall into two groups.
    Bimodal {
        from: String,
        to: String,
        modes: Modes,
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
            | Finding::Bimodal { words, .. }
            | Finding::Asymmetric { words, .. } => words,
        }
    }
}

/// The median of `values` (None when empty).
pub fn median(values: &[f64]) -> Option<f64> {
    crate::record::stats::Spread::of(values).map(|s| s.median)
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

fn value(cell: &Cell) -> Option<f64> {
    match cell {
        Cell::Value { value, .. } => Some(*value),
        _ => None,
    }
}

/// Each measured cell's badness (`None`: not measured, or not known).
/// The median is every measured cell's. A cell the network limited is bad
/// when worse than it and large enough to be a finding at all; a cell a
/// host limited (or undecided) is a lower bound on its path (it carried
/// at least that much): no worse than the median it says the path is
/// fine, worse it says nothing about the path.
fn badness(matrix: &Matrix, metric: &Metric) -> Option<Vec<Vec<Option<bool>>>> {
    let all: Vec<f64> = matrix.cells.iter().flatten().filter_map(value).collect();
    let typical = median(&all)?;
    Some(
        matrix
            .cells
            .iter()
            .map(|row| {
                row.iter()
                    .map(|c| match c {
                        Cell::Value {
                            value,
                            read,
                            significant,
                            ..
                        } => {
                            let bad = *significant && worse(metric, *value, typical);
                            match (read, bad) {
                                (true, bad) => Some(bad),
                                (false, true) => None,
                                (false, false) => Some(false),
                            }
                        }
                        _ => None,
                    })
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

/// Two groups among a cell's repeats.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Modes {
    /// Each group's mean and its passes (places in the repeats), the
    /// worse group first.
    pub worse: f64,
    pub worse_passes: Vec<usize>,
    pub better: f64,
    pub better_passes: Vec<usize>,
    /// The gap between the groups over the wider group's own spread (on
    /// the log scale): at least [`SEPARATED`].
    pub separation: f64,
    /// Whether the groups alternate across the passes (flow by flow), not
    /// one run of passes then the other (a change during the run).
    pub interleaved: bool,
}

/// A figure on the scale its noise is even on: figures vary by ratio, so
/// the logarithm, counted from the figure's floor (a loss of 0 is a
/// value, the floor's).
fn log_scale(metric: &Metric, value: f64) -> f64 {
    (value.max(0.0) + metric.floor.max(1e-9)).ln()
}

/// The two groups among `repeats` (in pass order), if they stand apart.
pub fn two_modes(metric: &Metric, repeats: &[f64]) -> Option<Modes> {
    if repeats.len() < MIN_REPEATS || repeats.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut order: Vec<usize> = (0..repeats.len()).collect();
    order.sort_by(|&a, &b| repeats[a].total_cmp(&repeats[b]));
    let scaled: Vec<f64> = order
        .iter()
        .map(|&i| log_scale(metric, repeats[i]))
        .collect();
    let n = scaled.len();
    // The widest gap with two repeats or more on each side.
    let k = (2..=n - 2)
        .max_by(|&a, &b| (scaled[a] - scaled[a - 1]).total_cmp(&(scaled[b] - scaled[b - 1])))?;
    let gap = scaled[k] - scaled[k - 1];
    let own = (scaled[k - 1] - scaled[0]).max(scaled[n - 1] - scaled[k]);
    let separation = if own > 0.0 { gap / own } else { f64::INFINITY };
    let mean =
        |places: &[usize]| places.iter().map(|&i| repeats[i]).sum::<f64>() / places.len() as f64;
    let (low, high) = (order[..k].to_vec(), order[k..].to_vec());
    let (low_mean, high_mean) = (mean(&low), mean(&high));
    let ((worse, mut worse_passes), (better, mut better_passes)) = if metric.higher_is_better {
        ((low_mean, low), (high_mean, high))
    } else {
        ((high_mean, high), (low_mean, low))
    };
    if separation < SEPARATED || !self::worse(metric, worse, better) {
        return None;
    }
    worse_passes.sort_unstable();
    better_passes.sort_unstable();
    // How often the group changes from one pass to the next.
    let mut in_worse = vec![false; n];
    for &p in &worse_passes {
        in_worse[p] = true;
    }
    let changes = in_worse.windows(2).filter(|w| w[0] != w[1]).count();
    Some(Modes {
        worse,
        worse_passes,
        better,
        better_passes,
        separation,
        interleaved: changes > 1,
    })
}

/// The host's own factor that limited most of `passes` (of `limits`), if
/// one did: a figure set by a host says nothing of the path.
fn host_limit(passes: &[usize], limits: &[Option<Factor>]) -> Option<Factor> {
    let by_host = |f: &Factor| {
        f.is_cpu()
            || matches!(
                f,
                Factor::ReceiveWindow | Factor::SendBuffer | Factor::Application | Factor::Emulator
            )
    };
    let factors: Vec<Factor> = passes
        .iter()
        .filter_map(|&p| limits.get(p).copied().flatten())
        .collect();
    let hosts: Vec<Factor> = factors.iter().copied().filter(by_host).collect();
    (2 * hosts.len() > passes.len()).then(|| {
        // The most frequent of them.
        *hosts
            .iter()
            .max_by_key(|f| hosts.iter().filter(|g| g == f).count())
            .expect("a majority is not empty")
    })
}

/// The cells whose repeats fall into two groups, each in words.
pub fn bimodal_cells(matrix: &Matrix, metric: &Metric) -> Vec<Finding> {
    let mut findings = Vec::new();
    let number = |v: f64| {
        if v.abs() >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.3}")
                .trim_end_matches('0')
                .trim_end_matches('.')
                .to_string()
        }
    };
    for (i, row) in matrix.cells.iter().enumerate() {
        for (j, cell) in row.iter().enumerate() {
            let Cell::Value {
                repeats, limits, ..
            } = cell
            else {
                continue;
            };
            let Some(modes) = two_modes(metric, repeats) else {
                continue;
            };
            let (from, to) = (&matrix.hosts[i], &matrix.hosts[j]);
            let groups = format!(
                "{} of its {} passes near {} {unit} and {} near {} {unit}",
                modes.worse_passes.len(),
                repeats.len(),
                number(modes.worse),
                modes.better_passes.len(),
                number(modes.better),
                unit = metric.unit
            );
            let host_bound = host_limit(&modes.worse_passes, limits);
            let words = if let Some(factor) = host_bound {
                format!(
                    "path {from} -> {to}: {} falls in two groups, {groups}, and the worse passes were limited by {}: the two groups are the hosts' (which cores the two ends ran on, what else ran there), not the path's",
                    metric.describe,
                    factor.describe()
                )
            } else if modes.interleaved {
                format!(
                    "path {from} -> {to}: {} falls in two groups, {groups}, alternating from pass to pass: each connection (its own ports) takes one of two paths, as ECMP hashes a flow's addresses and ports onto equal-cost links, and one of them is worse (a link, a switch or a port on that path)",
                    metric.describe
                )
            } else {
                format!(
                    "path {from} -> {to}: {} falls in two groups, {groups}, one run of passes and then the other: the path changed once during the run (a route moved, or load came or went), not flow by flow",
                    metric.describe
                )
            };
            findings.push(Finding::Bimodal {
                from: from.clone(),
                to: to.clone(),
                modes,
                words,
            });
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
                                    repeats: vec![value(i, j)],
                                    limits: vec![None],
                                    read: true,
                                    significant: true,
                                    tag: None,
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

    /// Marks every cell of `m` that `which` picks as judged `factor`.
    fn judged(m: &mut Matrix, factor: Factor, which: impl Fn(usize, usize) -> bool) {
        for (i, row) in m.cells.iter_mut().enumerate() {
            for (j, cell) in row.iter_mut().enumerate() {
                if let Cell::Value { limits, read, .. } = cell
                    && which(i, j)
                {
                    *limits = vec![Some(factor)];
                    *read = crate::experiments::mesh::matrix::network_bound(limits);
                }
            }
        }
    }

    #[test]
    fn cells_a_hosts_cpu_limited_are_not_read_as_the_network() {
        // Every stream CPU-bound on a 2-core host, one host's cells slower
        // because its CPU is busier: the cells' own verdicts say so, and
        // the reading finds nothing about hosts' links or paths.
        let base = noisy(4);
        let mut m = matrix(6, |i, j| if i == 2 || j == 2 { 300.0 } else { base(i, j) });
        judged(&mut m, Factor::SenderCpu, |_, _| true);
        assert_eq!(read(&m, THROUGHPUT), vec![]);
        assert_eq!(asymmetric_pairs(&m, THROUGHPUT), vec![]);
        // The same slow cells limited by the path are that host's.
        judged(&mut m, Factor::Path, |i, j| i == 2 || j == 2);
        judged(&mut m, Factor::Link, |i, j| i != 2 && j != 2);
        let findings = read(&m, THROUGHPUT);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        assert!(matches!(&findings[0], Finding::Host { host, .. } if host == "h2"));
        // Undecided cells are not read either.
        judged(&mut m, Factor::Undecided, |i, j| i == 2 || j == 2);
        assert_eq!(read(&m, THROUGHPUT), vec![]);
    }

    #[test]
    fn retransmissions_are_a_finding_only_as_a_share_of_what_was_sent() {
        let retransmits = &METRICS[1];
        // A clean fleet: a few dozen retransmissions here and there, far
        // above the median of 0 but a trace of what was sent.
        let mut m = matrix(6, |i, j| if (i + j) % 4 == 0 { 40.0 } else { 0.0 });
        for row in &mut m.cells {
            for cell in row {
                if let Cell::Value {
                    value, significant, ..
                } = cell
                {
                    *significant = *value < 10.0;
                }
            }
        }
        assert_eq!(read(&m, retransmits), vec![]);
        // The same counts as a real share of the bytes are findings.
        for row in &mut m.cells {
            for cell in row {
                if let Cell::Value { significant, .. } = cell {
                    *significant = true;
                }
            }
        }
        assert!(!read(&m, retransmits).is_empty());
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
        assert!(
            asymmetric
                .iter()
                .all(|f| matches!(f, Finding::Asymmetric { slow_from, .. } if slow_from == "h5"))
        );
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
        let m = matrix(8, |i, j| {
            if in_r1(i) != in_r1(j) {
                250.0
            } else {
                base(i, j)
            }
        });
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

    /// `matrix(n, noisy(seed))` with `passes` repeats a cell, each its
    /// own noise, but the cell (1, 6) whose repeat is `odd(pass)`.
    fn repeated(seed: u64, passes: usize, odd: impl Fn(usize) -> f64) -> Matrix {
        let mut m = matrix(8, noisy(seed));
        for (i, row) in m.cells.iter_mut().enumerate() {
            for (j, cell) in row.iter_mut().enumerate() {
                if i == j {
                    continue;
                }
                let repeats: Vec<f64> = (0..passes)
                    .map(|p| {
                        if (i, j) == (1, 6) {
                            odd(p)
                        } else {
                            noisy(seed.wrapping_mul(31) + p as u64)(i, j)
                        }
                    })
                    .collect();
                *cell = Cell::Value {
                    value: median(&repeats).unwrap(),
                    verdict: None,
                    limits: vec![Some(Factor::Link); repeats.len()],
                    read: true,
                    significant: true,
                    tag: None,
                    repeats,
                };
            }
        }
        m
    }

    #[test]
    fn repeats_that_alternate_between_two_groups_are_ecmp_and_noise_is_not() {
        for seed in 0..20 {
            // Flows hashed onto a good path (1000) or a bad one (400), by
            // pass: 3 of 8 on the bad one, scattered.
            let bad = [1, 4, 6];
            let m = repeated(seed, 8, |p| {
                let base = noisy(seed + p as u64)(1, 6);
                if bad.contains(&p) { 0.4 * base } else { base }
            });
            let found = bimodal_cells(&m, THROUGHPUT);
            assert_eq!(found.len(), 1, "seed {seed}: {found:#?}");
            let Finding::Bimodal {
                from,
                to,
                modes,
                words,
            } = &found[0]
            else {
                panic!("{found:?}");
            };
            assert_eq!((from.as_str(), to.as_str()), ("h1", "h6"));
            assert_eq!(modes.worse_passes, bad);
            assert!(modes.interleaved);
            assert!(modes.worse < 0.5 * modes.better, "{modes:?}");
            assert!(words.contains("ECMP"), "{words}");
            assert!(words.contains("3 of its 8 passes"), "{words}");
            // The same cells without the bad path: ±15% noise over 6 to 20
            // passes is never two groups.
            for passes in [6, 8, 20] {
                let m = repeated(seed, passes, |p| noisy(seed + p as u64)(1, 6));
                assert_eq!(
                    bimodal_cells(&m, THROUGHPUT),
                    vec![],
                    "seed {seed}, {passes} passes"
                );
            }
        }
    }

    #[test]
    fn two_groups_set_by_a_hosts_cpu_are_the_hosts_not_the_paths() {
        let mut m = repeated(3, 8, |p| if p % 2 == 0 { 1000.0 } else { 600.0 });
        let Cell::Value { limits, .. } = &mut m.cells[1][6] else {
            unreachable!()
        };
        for p in [1, 3, 5] {
            limits[p] = Some(Factor::ReceiverCpu);
        }
        let found = bimodal_cells(&m, THROUGHPUT);
        assert_eq!(found.len(), 1, "{found:#?}");
        let words = found[0].words();
        assert!(words.contains("limited by the receiver's CPU"), "{words}");
        assert!(!words.contains("ECMP"), "{words}");
    }

    #[test]
    fn a_change_midway_is_read_as_a_change_not_as_ecmp() {
        let m = repeated(7, 8, |p| if p < 5 { 1000.0 } else { 300.0 });
        let found = bimodal_cells(&m, THROUGHPUT);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(
            matches!(&found[0], Finding::Bimodal { modes, .. } if !modes.interleaved && modes.worse_passes == [5, 6, 7])
        );
        assert!(found[0].words().contains("changed once during the run"));
    }

    #[test]
    fn too_few_repeats_one_outlier_or_close_groups_are_not_two_modes() {
        // Five passes: not read.
        assert_eq!(
            two_modes(THROUGHPUT, &[1000.0, 300.0, 1000.0, 300.0, 1000.0]),
            None
        );
        // One straggler among eight is not a group.
        assert_eq!(
            two_modes(
                THROUGHPUT,
                &[1000.0, 990.0, 1010.0, 300.0, 1005.0, 995.0, 1000.0, 1002.0]
            ),
            None
        );
        // Two tight groups 20% apart: within what a bad cell must exceed.
        assert_eq!(
            two_modes(THROUGHPUT, &[1000.0, 800.0, 1001.0, 801.0, 999.0, 799.0]),
            None
        );
        // Two groups 30% apart whose spread overlaps them: D below 2.
        assert_eq!(
            two_modes(THROUGHPUT, &[1000.0, 600.0, 700.0, 1300.0, 900.0, 500.0]),
            None
        );
        // A figure where higher is worse: the high group is the worse one,
        // and loss against none counts from the floor.
        let modes = two_modes(LOSS, &[0.0, 3.0, 0.0, 2.9, 0.0, 3.1]).unwrap();
        assert_eq!(modes.worse_passes, [1, 3, 5]);
        assert!(modes.interleaved);
        assert_eq!(two_modes(LOSS, &[0.0, 0.05, 0.0, 0.06, 0.0, 0.05]), None);
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
