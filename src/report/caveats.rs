//! What the page tells a reader to read with care: figures whose interval
//! is wider than [`WIDE_SHARE`] of themselves, so that a change smaller
//! than that cannot be told from noise, and records of one cell whose
//! figures disagree beyond their intervals, so that at least one of them
//! was measured on a host that was not the same host.
//!
//! Each experiment names its figures and the interval each is held to
//! ([`super::html::ReportSection::estimates`]): a median with its 95%
//! interval, or with too few runs for one, their range. Records without
//! either (older ones, single runs) are not judged here.

use crate::record::stats::Spread;

/// One figure of a record (or of a cell's records pooled) and its spread.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimated {
    /// The cell as people name it, with its placement: records of the
    /// same cell are compared with each other.
    pub cell: String,
    /// What was measured, with its unit ("ms per 100 calls").
    pub figure: String,
    pub spread: Spread,
}

/// An interval wider than this share of its median (the whole width,
/// both sides) is flagged: the benchmark scripts hold their medians to
/// +-5% and ask three invocations to agree within 10%, so a figure known
/// only to +-10% or worse is one whose change a reader cannot trust.
pub const WIDE_SHARE: f64 = 0.20;

/// Lines flagged of one experiment's figures, at most this many each
/// (the rest counted).
const MOST_LINES: usize = 3;

/// The interval's whole width over the median's size (0: no width).
fn width_share(s: &Spread) -> f64 {
    let [lo, hi] = s.bounds();
    if s.median == 0.0 {
        0.0
    } else {
        (hi - lo) / s.median.abs()
    }
}

/// `1.23 (95% 1.10-1.40, 8 runs)` or `1.23 (range 1.10-1.40 of 3 runs)`.
pub fn with_interval(s: &Spread) -> String {
    let n = |x: f64| crate::report::table::num(x);
    match s.interval {
        Some([lo, hi]) => format!("{} (95% {}-{}, {} runs)", n(s.median), n(lo), n(hi), s.n),
        None => format!(
            "{} (range {}-{} of {} run{})",
            n(s.median),
            n(s.min),
            n(s.max),
            s.n,
            if s.n == 1 { "" } else { "s" }
        ),
    }
}

/// Whether two spreads' intervals leave a gap between them.
fn apart(a: &Spread, b: &Spread) -> bool {
    let ([alo, ahi], [blo, bhi]) = (a.bounds(), b.bounds());
    ahi < blo || bhi < alo
}

/// `cell` as a line starts it: with its experiment's name first, once.
fn named(experiment: &str, cell: &str) -> String {
    if cell.starts_with(experiment) {
        cell.to_string()
    } else {
        format!("{experiment} {cell}")
    }
}

/// What to read with care in `experiment`'s figures, one line each.
pub fn caveats(experiment: &str, estimates: &[Estimated]) -> Vec<String> {
    let judged: Vec<&Estimated> = estimates
        .iter()
        .filter(|e| e.spread.n > 1 && e.spread.median.is_finite())
        .collect();
    let mut lines = Vec::new();
    let mut wide: Vec<&Estimated> = judged
        .iter()
        .copied()
        .filter(|e| width_share(&e.spread) > WIDE_SHARE)
        .collect();
    wide.sort_by(|a, b| width_share(&b.spread).total_cmp(&width_share(&a.spread)));
    for e in wide.iter().take(MOST_LINES) {
        lines.push(format!(
            "{}: {} {}: its interval is {:.0}% of it, wider than the {:.0}% the report holds a figure to; a change smaller than that is noise",
            named(experiment, &e.cell),
            e.figure,
            with_interval(&e.spread),
            100.0 * width_share(&e.spread),
            100.0 * WIDE_SHARE
        ));
    }
    if wide.len() > MOST_LINES {
        lines.push(format!(
            "{experiment}: {} more figures as wide (of {} with an interval)",
            wide.len() - MOST_LINES,
            judged.len()
        ));
    }
    // Records of one cell and figure, in the order they were recorded.
    let mut groups: Vec<(&str, &str, Vec<&Spread>)> = Vec::new();
    for e in &judged {
        match groups
            .iter_mut()
            .find(|g| g.0 == e.cell.as_str() && g.1 == e.figure.as_str())
        {
            Some(g) => g.2.push(&e.spread),
            None => groups.push((&e.cell, &e.figure, vec![&e.spread])),
        }
    }
    let mut disagreeing = 0;
    for (cell, figure, spreads) in &groups {
        // The two furthest apart: the lowest median's and the highest's.
        let low = spreads.iter().min_by(|a, b| a.median.total_cmp(&b.median));
        let high = spreads.iter().max_by(|a, b| a.median.total_cmp(&b.median));
        let (Some(low), Some(high)) = (low, high) else {
            continue;
        };
        if spreads.len() < 2 || !apart(low, high) {
            continue;
        }
        disagreeing += 1;
        if disagreeing <= MOST_LINES {
            lines.push(format!(
                "{}: {} records of this cell disagree beyond their intervals, {figure} {} against {}: the host was not the same host between them (or the cell differs in what its name does not say)",
                named(experiment, cell),
                spreads.len(),
                with_interval(low),
                with_interval(high)
            ));
        }
    }
    if disagreeing > MOST_LINES {
        lines.push(format!(
            "{experiment}: {} more cells whose records disagree",
            disagreeing - MOST_LINES
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(cell: &str, runs: &[f64]) -> Estimated {
        Estimated {
            cell: cell.into(),
            figure: "ms per call".into(),
            spread: Spread::of(runs).unwrap(),
        }
    }

    #[test]
    fn a_narrow_figure_and_agreeing_records_say_nothing() {
        let a = est("4096 B", &[10.0, 10.1, 10.2, 9.9, 10.0, 10.1]);
        let b = est("4096 B", &[10.1, 10.3, 10.2, 10.0, 10.1, 10.2]);
        assert!(caveats("rpc", &[a, b]).is_empty());
    }

    #[test]
    fn a_wide_interval_is_flagged_with_its_share() {
        let wide = est("4096 B", &[10.0, 14.0, 8.0, 12.0, 9.0, 13.0, 11.0]);
        let lines = caveats("rpc", &[wide]);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains("rpc 4096 B: ms per call 11.0 (95% 8.00-14.0, 7 runs)"),
            "{}",
            lines[0]
        );
        assert!(lines[0].contains("55% of it"), "{}", lines[0]);
    }

    #[test]
    fn records_of_one_cell_apart_beyond_their_intervals_are_named() {
        let a = est("rpc 8192 B", &[10.0, 10.1, 10.2, 9.9, 10.0, 10.1]);
        let b = est("rpc 8192 B", &[11.0, 11.1, 11.2, 10.9, 11.0, 11.1]);
        let other = est("4000 B", &[20.0, 20.1, 20.2, 19.9, 20.0, 20.1]);
        let lines = caveats("rpc", &[a, other, b]);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].starts_with("rpc 8192 B: 2 records"),
            "{}",
            lines[0]
        );
        assert!(
            lines[0].contains("10.1 (95% 9.90-10.2, 6 runs) against 11.1 (95% 10.9-11.2, 6 runs)"),
            "{}",
            lines[0]
        );
        // Overlapping ranges of few runs are not a disagreement.
        let c = est("8192 B", &[10.0, 10.5, 11.0]);
        let d = est("8192 B", &[10.4, 11.3, 10.8]);
        assert!(caveats("rpc", &[c, d]).is_empty());
    }

    #[test]
    fn single_runs_and_records_without_spread_are_not_judged() {
        let one = est("1 MB", &[5.0]);
        let old = Estimated {
            spread: Spread {
                median: 5.0,
                ..Spread::default()
            },
            ..one.clone()
        };
        assert!(caveats("cksum", &[one, old]).is_empty());
    }

    #[test]
    fn many_wide_figures_are_counted_past_the_first_few() {
        let many: Vec<Estimated> = (0..6)
            .map(|i| est(&format!("cell {i}"), &[1.0, 2.0, 3.0]))
            .collect();
        let lines = caveats("cksum", &many);
        assert_eq!(lines.len(), MOST_LINES + 1, "{lines:?}");
        assert!(
            lines
                .last()
                .unwrap()
                .contains("3 more figures as wide (of 6")
        );
    }
}
