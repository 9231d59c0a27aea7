//! The mesh's section of `netlab report` and the lab's page: a mesh run's
//! records (each test a runner's record, `"experiment": "mesh"`) as a
//! table of each figure over its pairs, what the matrices show in words,
//! and the heat maps of the run's own page ([`super::report::matrices`]).

use crate::experiments::mesh::analysis::median;
use crate::experiments::mesh::matrix::{Cell, METRICS, Matrix, hosts_of};
use crate::experiments::mesh::record::PairTest;
use crate::experiments::mesh::report::{STYLE, findings, matrices};
use crate::record::Record;
use crate::report::html::{Parts, ReportSection};

/// The mesh section of the report page.
pub struct MeshSection;

/// The records' tests as the matrices read them: each with its start
/// from the record's envelope, where a record keeps it.
fn tests(records: &[Record<PairTest>]) -> Vec<PairTest> {
    records
        .iter()
        .map(|r| PairTest {
            started: r.started.clone(),
            ..r.data.clone()
        })
        .collect()
}

/// Each figure measured: its pairs measured and failed, and the median,
/// best and worst of its cells (each cell the median of its passes).
fn figures_table(tests: &[PairTest]) -> String {
    let hosts = hosts_of(tests, &[]);
    let mut rows = Vec::new();
    for metric in METRICS {
        let matrix = Matrix::of(metric, &hosts, tests);
        if matrix.is_empty() {
            continue;
        }
        let cells = matrix.cells.iter().flatten();
        let mut values: Vec<f64> = cells
            .clone()
            .filter_map(|c| match c {
                Cell::Value { value, .. } => Some(*value),
                _ => None,
            })
            .collect();
        let failed = cells.filter(|c| matches!(c, Cell::Failed(_))).count();
        values.sort_by(f64::total_cmp);
        let (best, worst) = if metric.higher_is_better {
            (values.last(), values.first())
        } else {
            (values.first(), values.last())
        };
        let shown = |v: Option<&f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
        rows.push(vec![
            format!("{} ({})", metric.name, metric.unit),
            values.len().to_string(),
            failed.to_string(),
            shown(median(&values).as_ref()),
            shown(best),
            shown(worst),
        ]);
    }
    crate::report::table::markdown(
        &["figure", "pairs", "failed", "median", "best", "worst"],
        &rows,
    )
}

impl ReportSection for MeshSection {
    type Data = PairTest;
    const EXPERIMENT: &'static str = "mesh";
    const STYLE: &'static str = STYLE;

    fn parts(records: &[Record<PairTest>]) -> Parts {
        let tests = tests(records);
        let hosts = hosts_of(&tests, &[]);
        let passes = tests.iter().map(|t| t.pass + 1).max().unwrap_or(0);
        let failed = tests.iter().filter(|t| t.failed.is_some()).count();
        let mut said = Vec::new();
        for metric in METRICS {
            let matrix = Matrix::of(metric, &hosts, &tests);
            said.extend(
                findings(&matrix, metric)
                    .iter()
                    .map(|f| format!("{}: {}", metric.name, f.words())),
            );
        }
        let mut text = figures_table(&tests);
        for line in &said {
            text.push_str(line);
            text.push('\n');
        }
        let mut reading = format!(
            "{} tests between {} hosts' agents over {passes} pass(es), in rounds of disjoint pairs; {} measured, {failed} failed.",
            tests.len(),
            hosts.len(),
            tests.len() - failed
        );
        match said.first() {
            Some(first) => reading.push_str(&format!(" First of what stands out: {first}.")),
            None if failed < tests.len() => {
                reading.push_str(
                    " Nothing stands out: every measured pair is within reach of the typical one.",
                );
            }
            None => {}
        }
        (
            format!("mesh: every pair of {} hosts", hosts.len()),
            text,
            reading,
            Vec::new(),
        )
    }

    fn cell(data: &PairTest) -> String {
        format!(
            "mesh {} -> {} {} pass {}",
            data.from,
            data.to,
            data.test.name(),
            data.pass
        )
    }

    fn html(records: &[Record<PairTest>]) -> String {
        let tests = tests(records);
        matrices(&hosts_of(&tests, &[]), &tests, 3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::mesh::record::{MeshTest, PairFigures};

    fn record(from: &str, to: &str, mbit: Option<f64>) -> Record<PairTest> {
        let test = PairTest {
            failed: mbit.is_none().then(|| "refused".to_string()),
            figures: PairFigures {
                throughput_mbit_s: mbit,
                ..Default::default()
            },
            ..PairTest::example(MeshTest::Stream, from, to)
        };
        let error = test.failed.clone();
        Record::new(
            "2026-12-04T00:00:00Z".into(),
            "agents",
            &crate::measure::host::HostFacts::default(),
            test,
            error,
        )
    }

    /// Every pair's figure is in the table, a failed pair is counted and
    /// named, and the heat maps come with the rules they need.
    #[test]
    fn the_section_tables_each_figure_and_maps_the_pairs() {
        let records = vec![
            record("a", "b", Some(900.0)),
            record("b", "a", Some(940.0)),
            record("a", "c", Some(100.0)),
            record("c", "a", None),
            record("b", "c", Some(930.0)),
            record("c", "b", Some(910.0)),
        ];
        let section = crate::report::html::section_of::<MeshSection>(&records).unwrap();
        assert_eq!(section.title, "mesh: every pair of 3 hosts");
        let row = section
            .tables
            .lines()
            .find(|l| l.contains("throughput_mbit_s"))
            .unwrap();
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        // Five measured pairs, one failed, median 910, best 940, worst 100.
        assert_eq!(cells[2..7], ["5", "1", "910.0", "940.0", "100.0"], "{row}");
        assert!(section.reading.contains("6 tests between 3 hosts"));
        assert!(section.reading.contains("5 measured, 1 failed"));
        assert_eq!(section.missing.len(), 1);
        assert!(section.missing[0].starts_with("mesh c -> a stream pass 0 (agents): refused"));
        assert!(section.html.contains("<h3>"), "{}", section.html);
        assert!(section.html.contains("<table"));
        assert_eq!(section.style, STYLE);
    }
}
