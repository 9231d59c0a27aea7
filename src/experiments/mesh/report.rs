//! A mesh run's `report.html`: one self-contained page (no script, no
//! fetch) with, for each figure measured, what the matrix shows in words,
//! its heat map (hosts sorted by zone, rack and name; row and column
//! medians; a failed cell marked apart from one never measured; each
//! cell's verdict and reason in its tooltip) and, for each test's main
//! figure, the asymmetry map of its two directions.

use crate::experiments::mesh::analysis::{self, Finding};
use crate::experiments::mesh::matrix::{Cell, METRICS, Matrix, Metric, hosts_of};
use crate::experiments::mesh::record::{Manifest, PairTest};
use crate::export::Export;
use crate::export::html::{Page, escape};
use std::collections::BTreeMap;
use std::fmt::Write;

/// The figure of each test whose asymmetry is mapped.
const MAPPED: &[&str] = &["throughput_mbit_s", "rtt_p50_us", "loss_pct"];

/// What the page says a matrix shows: its findings and asymmetric pairs.
pub fn findings(matrix: &Matrix, metric: &Metric) -> Vec<Finding> {
    let mut found = analysis::read(matrix, metric);
    if MAPPED.contains(&metric.name) {
        found.extend(analysis::asymmetric_pairs(matrix, metric));
        found.extend(analysis::bimodal_cells(matrix, metric));
    }
    found
}

/// How good `value` is beside the typical one, 0 (worst) to 1.
fn goodness(metric: &Metric, value: f64, typical: f64) -> f64 {
    let g = if metric.higher_is_better {
        if typical > 0.0 { value / typical } else { 1.0 }
    } else {
        let floor = metric.floor.max(1e-9);
        (typical.max(0.0) + floor) / (value.max(0.0) + floor)
    };
    g.clamp(0.0, 1.0)
}

fn number(value: f64) -> String {
    if value.fract() == 0.0 || value.abs() >= 100.0 {
        format!("{value:.0}")
    } else if value.abs() >= 1.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.3}")
    }
}

fn label_line(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A header row for each of zone and rack that any host has: runs of
/// equal values over the columns, so a zone or a rack reads as a block.
fn group_rows(matrix: &Matrix) -> String {
    let mut html = String::new();
    for key in ["zone", "rack"] {
        if !matrix.labels.iter().any(|l| l.contains_key(key)) {
            continue;
        }
        let _ = write!(html, "<tr><th class=\"group\">{key}</th>");
        let mut j = 0;
        while j < matrix.hosts.len() {
            let value = matrix.labels[j].get(key);
            let run = matrix.labels[j..]
                .iter()
                .take_while(|l| l.get(key) == value)
                .count();
            let _ = write!(
                html,
                "<th class=\"group\" colspan=\"{run}\">{}</th>",
                escape(value.map_or("", String::as_str))
            );
            j += run;
        }
        html.push_str("<th></th></tr>");
    }
    html
}

/// One heat map as an HTML table.
fn heat_map(matrix: &Matrix, metric: &Metric) -> String {
    let n = matrix.hosts.len();
    let values = |cells: &mut dyn Iterator<Item = &Cell>| -> Vec<f64> {
        cells
            .filter_map(|c| match c {
                Cell::Value { value, .. } => Some(*value),
                _ => None,
            })
            .collect()
    };
    let typical = analysis::median(&values(&mut matrix.cells.iter().flatten())).unwrap_or(0.0);
    let mut html = String::from("<table class=\"heat\">");
    html.push_str(&group_rows(matrix));
    html.push_str("<tr><th>from \\ to</th>");
    for (host, labels) in matrix.hosts.iter().zip(&matrix.labels) {
        let _ = write!(
            html,
            "<th class=\"col\" title=\"{}\">{}</th>",
            escape(&label_line(labels)),
            escape(host)
        );
    }
    html.push_str("<th>median</th></tr>");
    for i in 0..n {
        let _ = write!(
            html,
            "<tr><th title=\"{}\">{}</th>",
            escape(&label_line(&matrix.labels[i])),
            escape(&matrix.hosts[i])
        );
        for j in 0..n {
            let (from, to) = (&matrix.hosts[i], &matrix.hosts[j]);
            match &matrix.cells[i][j] {
                Cell::Missing if i == j => html.push_str("<td class=\"self\"></td>"),
                Cell::Missing => {
                    let _ = write!(
                        html,
                        "<td class=\"missing\" title=\"{} → {}: not measured (the run stopped before it)\">·</td>",
                        escape(from),
                        escape(to)
                    );
                }
                Cell::Failed(why) => {
                    let _ = write!(
                        html,
                        "<td class=\"failed\" title=\"{} → {}: failed: {}\">✕</td>",
                        escape(from),
                        escape(to),
                        escape(why)
                    );
                }
                Cell::Value {
                    value,
                    verdict,
                    repeats,
                    read,
                    tag,
                    ..
                } => {
                    let hue = 120.0 * goodness(metric, *value, typical);
                    let modes = analysis::two_modes(metric, repeats);
                    let passes = if repeats.len() > 1 {
                        format!(
                            " (median of {} passes: {})",
                            repeats.len(),
                            repeats
                                .iter()
                                .map(|v| number(*v))
                                .collect::<Vec<_>>()
                                .join(", ")
                        )
                    } else {
                        String::new()
                    };
                    let tip = format!(
                        "{from} → {to}: {} {}{passes}{}{}{}",
                        number(*value),
                        metric.unit,
                        if *read {
                            ""
                        } else {
                            "\nhost-bound: its limits verdict names a host (or is undecided), not the network, so the findings do not read it"
                        },
                        modes.as_ref().map_or(String::new(), |m| format!(
                            "\ntwo groups: {} passes near {} and {} near {}",
                            m.worse_passes.len(),
                            number(m.worse),
                            m.better_passes.len(),
                            number(m.better)
                        )),
                        verdict
                            .as_deref()
                            .map_or(String::new(), |v| format!("\n{v}"))
                    );
                    let class = match (modes.is_some(), *read) {
                        (true, true) => " class=\"modes\"",
                        (true, false) => " class=\"modes host\"",
                        (false, false) => " class=\"host\"",
                        (false, true) => "",
                    };
                    let _ = write!(
                        html,
                        "<td{} style=\"background:hsl({hue:.0},65%,78%)\" title=\"{}\">{}{}{}</td>",
                        class,
                        escape(&tip),
                        number(*value),
                        tag.as_deref()
                            .map_or(String::new(), |t| format!(" {}", escape(t))),
                        if modes.is_some() { " ⁑" } else { "" }
                    );
                }
            }
        }
        let row = analysis::median(&values(&mut matrix.cells[i].iter()));
        let _ = write!(
            html,
            "<td class=\"median\">{}</td></tr>",
            row.map_or(String::new(), number)
        );
    }
    html.push_str("<tr><th>median</th>");
    for j in 0..n {
        let column = analysis::median(&values(&mut matrix.cells.iter().map(|row| &row[j])));
        let _ = write!(
            html,
            "<td class=\"median\">{}</td>",
            column.map_or(String::new(), number)
        );
    }
    let _ = write!(
        html,
        "<td class=\"median\">{}</td></tr></table>",
        number(typical)
    );
    html
}

/// Hosts past which a page shows each host's medians, not the N×N matrix
/// (whose cells grow as the square: 1000 agents are a million cells).
pub const MAX_MATRIX_HOSTS: usize = 64;
/// Findings listed per metric; the rest are counted.
pub const MAX_FINDINGS_SHOWN: usize = 50;
/// Hosts listed in a summary, the worst first; the rest are counted.
const MAX_SUMMARY_ROWS: usize = 100;

/// A large mesh's metric: each host's median as sender and as receiver,
/// the worst first (by how far the worse of the two is from typical).
fn host_summary(matrix: &Matrix, metric: &Metric) -> String {
    let n = matrix.hosts.len();
    let of = |cells: &mut dyn Iterator<Item = &Cell>| -> (Vec<f64>, usize) {
        let mut values = Vec::new();
        let mut failed = 0;
        for c in cells {
            match c {
                Cell::Value { value, .. } => values.push(*value),
                Cell::Failed(_) => failed += 1,
                _ => {}
            }
        }
        (values, failed)
    };
    let typical = analysis::median(&of(&mut matrix.cells.iter().flatten()).0).unwrap_or(0.0);
    let mut rows: Vec<(f64, String)> = (0..n)
        .map(|i| {
            let (sent, sent_failed) = of(&mut matrix.cells[i].iter());
            let (received, received_failed) = of(&mut matrix.cells.iter().map(|row| &row[i]));
            let (row, column) = (analysis::median(&sent), analysis::median(&received));
            let worst = [row, column]
                .into_iter()
                .flatten()
                .map(|v| goodness(metric, v, typical))
                .fold(f64::INFINITY, f64::min);
            let cell = |v: Option<f64>| v.map_or("·".to_string(), number);
            let html = format!(
                "<tr><th>{}</th><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&matrix.hosts[i]),
                cell(row),
                cell(column),
                sent.len() + received.len(),
                sent_failed + received_failed
            );
            (worst, html)
        })
        .collect();
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut html = format!(
        "<p>{n} hosts: the {n}×{n} matrix is summarized here, each host's median as sender (its row) and as receiver (its column), the hosts furthest from the typical {} {} first; every cell is in {}.csv.</p><table class=\"heat\"><tr><th>host</th><th>median sending</th><th>median receiving</th><th>cells</th><th>failed</th></tr>",
        number(typical),
        escape(metric.unit),
        metric.name
    );
    for (_, row) in rows.iter().take(MAX_SUMMARY_ROWS) {
        html.push_str(row);
    }
    html.push_str("</table>");
    if rows.len() > MAX_SUMMARY_ROWS {
        let _ = write!(
            html,
            "<p>and {} more hosts, nearer the typical.</p>",
            rows.len() - MAX_SUMMARY_ROWS
        );
    }
    html
}

/// The asymmetry map: each cell the ratio of its direction to the other
/// (above 1, this direction is the better).
fn asymmetry_map(matrix: &Matrix, metric: &Metric) -> String {
    let map = analysis::asymmetry(matrix, metric);
    let mut html = String::from("<table class=\"heat\"><tr><th>from \\ to</th>");
    for host in &matrix.hosts {
        let _ = write!(html, "<th class=\"col\">{}</th>", escape(host));
    }
    html.push_str("</tr>");
    for (i, row) in map.iter().enumerate() {
        let _ = write!(html, "<tr><th>{}</th>", escape(&matrix.hosts[i]));
        for (j, ratio) in row.iter().enumerate() {
            match ratio {
                _ if i == j => html.push_str("<td class=\"self\"></td>"),
                None => html.push_str("<td class=\"missing\">·</td>"),
                Some(r) => {
                    // Even is white; the slow direction red, the fast blue.
                    let strength = (r.ln().abs() / 3f64.ln()).min(1.0);
                    let hue = if *r < 1.0 { 0 } else { 210 };
                    let light = 100.0 - 30.0 * strength;
                    let _ = write!(
                        html,
                        "<td style=\"background:hsl({hue},70%,{light:.0}%)\" title=\"{} → {} is {:.2}x {} → {}\">{r:.2}</td>",
                        escape(&matrix.hosts[i]),
                        escape(&matrix.hosts[j]),
                        r,
                        escape(&matrix.hosts[j]),
                        escape(&matrix.hosts[i]),
                    );
                }
            }
        }
        html.push_str("</tr>");
    }
    html.push_str("</table>");
    html
}

/// The heat maps' own rules, after the stylesheet every page shares
/// (`heat.css`).
pub const STYLE: &str = include_str!("heat.css");

/// The page for a run directory's manifest and results.
pub fn page(manifest: &Manifest, results: &[PairTest]) -> Page {
    let inventory = manifest.hosts();
    let hosts = hosts_of(results, &inventory);
    let measured = results.iter().filter(|r| r.failed.is_none()).count();
    let failed = results.len() - measured;
    let mut html = String::new();
    let pass = &manifest.pass;
    let _ = write!(
        html,
        "<p>Started {} by {} (netlab {}); agents {}; tests {} of {} s each; {} mode{}; seed {}{}. {measured} tests measured, {failed} failed.</p>",
        escape(&manifest.started),
        escape(&manifest.controller),
        escape(&manifest.netlab_version),
        escape(&manifest.agents_spec),
        pass.tests
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join(", "),
        pass.duration_s,
        pass.mode.name(),
        if pass.bidir {
            ", both directions at once"
        } else {
            ""
        },
        pass.seed,
        if pass.passes > 1 {
            format!(
                "; {} passes, each cell the median of its passes",
                pass.passes
            )
        } else {
            String::new()
        }
    );
    let lost: Vec<String> = manifest
        .agents
        .iter()
        .filter_map(|a| a.failed.as_ref().map(|why| format!("{}: {why}", a.name)))
        .collect();
    if !lost.is_empty() {
        html.push_str("<p>Agents that took no part:</p><ul>");
        for line in lost {
            let _ = write!(html, "<li>{}</li>", escape(&line));
        }
        html.push_str("</ul>");
    }
    html.push_str(&matrices(&hosts, results, 2));
    // The report's page and stylesheet, with the heat maps' rules.
    Page {
        title: format!("netlab mesh: {} hosts", hosts.len()),
        own_css: STYLE.into(),
        body: html,
    }
}

/// For each figure measured over `hosts`: its findings in words, its
/// heat map (or, over [`MAX_MATRIX_HOSTS`], each host's summary) and, for
/// each test's main figure, the asymmetry map: the body a mesh run's page
/// and the report's mesh section share; `level` is the heading level of each metric.
pub fn matrices(
    hosts: &[(String, BTreeMap<String, String>)],
    results: &[PairTest],
    level: u8,
) -> String {
    let mut html = String::from(
        "<p class=\"legend\"><span style=\"background:hsl(120,65%,78%)\">typical or better</span><span style=\"background:hsl(0,65%,78%)\">worse than typical</span><span class=\"failed\" style=\"background:#333;color:#fff\">✕ failed</span><span style=\"background:repeating-linear-gradient(45deg,#fff,#fff 4px,#eee 4px,#eee 8px)\">· not measured</span> <span style=\"outline:2px dashed #a33;outline-offset:-3px\">⁑ two groups among its passes</span> <span style=\"font-style:italic;background-image:repeating-linear-gradient(135deg,transparent,transparent 5px,rgba(0,0,0,.12) 5px,rgba(0,0,0,.12) 7px)\">host-bound: limited by a host, not read for the findings</span> Hover a cell for its value, its passes, its limits verdict or why it failed.</p>",
    );
    for metric in METRICS {
        let matrix = Matrix::of(metric, hosts, results);
        if matrix.is_empty() {
            continue;
        }
        let _ = write!(
            html,
            "<h{level}>{} ({}, {} test)</h{level}>",
            escape(metric.describe),
            escape(metric.unit),
            metric.test.name()
        );
        let found = findings(&matrix, metric);
        if found.is_empty() {
            html.push_str("<p>Nothing stands out: every measured cell is within reach of the typical one.</p>");
        } else {
            html.push_str("<ul class=\"findings\">");
            for f in found.iter().take(MAX_FINDINGS_SHOWN) {
                let _ = write!(html, "<li>{}</li>", escape(f.words()));
            }
            html.push_str("</ul>");
            if found.len() > MAX_FINDINGS_SHOWN {
                let _ = write!(
                    html,
                    "<p>and {} more findings (`netlab mesh report` prints them all).</p>",
                    found.len() - MAX_FINDINGS_SHOWN
                );
            }
        }
        if hosts.len() > MAX_MATRIX_HOSTS {
            html.push_str(&host_summary(&matrix, metric));
            continue;
        }
        html.push_str(&heat_map(&matrix, metric));
        if MAPPED.contains(&metric.name) {
            let _ = write!(
                html,
                "<h{sub}>Asymmetry of {}: each direction against the other</h{sub}>",
                escape(metric.describe),
                sub = level + 1
            );
            html.push_str(&asymmetry_map(&matrix, metric));
        }
    }
    html
}

/// Writes the CSV matrices and `report.html` of the run in `dir`, and
/// returns what the matrices show, a line each (`figure: words`).
pub fn write_dir(dir: &std::path::Path) -> anyhow::Result<Vec<String>> {
    crate::experiments::mesh::matrix::write_all(dir)?;
    let manifest = crate::experiments::mesh::record::read_manifest(dir)?;
    let (results, skipped) = crate::experiments::mesh::record::results_of(dir)?;
    let path = dir.join("report.html");
    page(&manifest, &results).write_to(&path)?;
    let inventory = manifest.hosts();
    let hosts = hosts_of(&results, &inventory);
    let mut lines = Vec::new();
    for metric in METRICS {
        let matrix = Matrix::of(metric, &hosts, &results);
        for f in findings(&matrix, metric) {
            lines.push(format!("{}: {}", metric.name, f.words()));
        }
    }
    for why in crate::record::files::skipped_summary(&skipped, 5) {
        lines.push(format!(
            "{} {why}: skipped",
            crate::experiments::mesh::record::RESULTS
        ));
    }
    Ok(lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::mesh::inventory::Agent;
    use crate::experiments::mesh::record::MeshTest;
    use crate::experiments::mesh::record::{PairFigures, PassSpec};

    /// A one-pass stream mesh's manifest over agents `names` (`HOST:PORT`
    /// or a bare name, given a loopback address).
    fn manifest_of(names: &[String]) -> Manifest {
        Manifest {
            experiment: "mesh".into(),
            netlab_version: "0".into(),
            started: "now".into(),
            controller: "me".into(),
            agents_spec: names.join(","),
            inventory: names
                .iter()
                .map(|h| Agent {
                    name: h.clone(),
                    addr: h
                        .parse()
                        .unwrap_or_else(|_| "127.0.0.1:5310".parse().unwrap()),
                    labels: BTreeMap::new(),
                })
                .collect(),
            pass: PassSpec {
                loss_rate_bps: 1,
                loss_length: 100,
                ..PassSpec::new(vec![MeshTest::Stream], 1.0)
            },
            rounds: names.len().saturating_sub(1),
            steps: names.len().saturating_sub(1),
            agents: Vec::new(),
        }
    }

    #[test]
    fn a_thousand_agents_page_stays_readable() {
        let n = 1000;
        let name = |i: usize| format!("10.1.{}.{}:5310", i / 250, i % 250);
        let mut results = Vec::new();
        for i in 0..n {
            // Each host to its next 20: 20,000 measured cells.
            for k in 1..=20 {
                let j = (i + k) % n;
                results.push(PairTest {
                    figures: PairFigures {
                        throughput_mbit_s: Some(if i == 7 { 50.0 } else { 940.0 }),
                        verdict: Some("limited by the link".into()),
                        ..PairFigures::default()
                    },
                    ..PairTest::example(MeshTest::Stream, &name(i), &name(j))
                });
            }
        }
        let names: Vec<String> = (0..n).map(name).collect();
        let manifest = manifest_of(&names);
        let html = page(&manifest, &results).render().unwrap();
        assert!(html.len() < 1 << 20, "{} bytes", html.len());
        assert!(html.contains("1000 hosts: the 1000×1000 matrix is summarized"));
        // The slow sender heads its summary.
        let summary = &html[html.find("<th>host</th>").unwrap()..];
        let first = summary.find("<tr><th>").unwrap();
        assert!(
            summary[first..].starts_with("<tr><th>10.1.0.7:5310</th>"),
            "{}",
            &summary[first..first + 200]
        );
    }

    #[test]
    fn the_page_marks_failed_and_missing_cells_apart_and_says_what_it_sees() {
        let hosts = ["a", "b", "c"];
        let mut results = Vec::new();
        for from in hosts {
            for to in hosts {
                if from == to || (from, to) == ("c", "b") {
                    continue;
                }
                results.push(PairTest {
                    failed: ((from, to) == ("c", "a")).then(|| "agent c <lost>".to_string()),
                    figures: PairFigures {
                        throughput_mbit_s: Some(if from == "a" { 90.0 } else { 940.0 }),
                        verdict: Some("limited by the link".into()),
                        ..PairFigures::default()
                    },
                    ..PairTest::example(MeshTest::Stream, from, to)
                });
            }
        }
        let manifest = manifest_of(&hosts.map(String::from));
        let html = page(&manifest, &results).render().unwrap();
        assert!(html.contains("class=\"failed\" title=\"c → a: failed: agent c &lt;lost&gt;\""));
        assert!(html.contains("class=\"missing\" title=\"c → b: not measured"));
        assert!(html.contains("limited by the link"));
        assert!(
            html.contains("host a: throughput is worse in its row"),
            "{html}"
        );
        assert!(!html.contains("<script"));
    }
}
