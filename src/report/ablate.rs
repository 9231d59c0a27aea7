//! `netlab ablate`'s text: the design, each combination's mean throughput,
//! the main effects and two-factor interactions with their intervals, and
//! the interactions large enough to make one-at-a-time verdicts wrong, in
//! words.

use super::tables::{markdown, num};
use crate::analysis::factorial::{Analysis, Effect, Factor};
use crate::record::{Record, RecordData};

fn interval(e: &Effect) -> String {
    match e.half_width {
        Some(h) => format!("{} ± {}", num(e.estimate), num(h)),
        None => format!("{} (one run a cell: no interval)", num(e.estimate)),
    }
}

fn verdict(e: &Effect) -> &'static str {
    match (e.significant(), e.estimate > 0.0) {
        _ if e.half_width.is_none() => "no interval",
        (false, _) => "within the noise",
        (true, true) => "raises it",
        (true, false) => "lowers it",
    }
}

/// The design's records as a table of combinations, then the analysis.
pub fn text(title: &str, factors: &[Factor], records: &[Record], analysis: &Analysis) -> String {
    let mut out = format!(
        "netlab ablate: {title}\n{} runs: {} combinations x {} randomised blocks; response: throughput, Mbit/s\n",
        analysis.runs,
        analysis.runs / analysis.runs_per_cell.max(1),
        analysis.runs_per_cell
    );
    // Each combination's runs, in the factors' order.
    let mut cells: Vec<(Vec<String>, Vec<f64>)> = Vec::new();
    for r in records {
        let RecordData::Stream {
            params,
            result: Some(result),
        } = &r.data
        else {
            continue;
        };
        let Some(design) = &params.design else {
            continue;
        };
        let key: Vec<String> = factors
            .iter()
            .map(|f| {
                design
                    .factors
                    .iter()
                    .find(|(n, _)| n == &f.name)
                    .map_or(String::new(), |(_, l)| l.clone())
            })
            .collect();
        match cells.iter_mut().find(|(k, _)| *k == key) {
            Some((_, values)) => values.push(result.figures.throughput_mbit_s),
            None => cells.push((key, vec![result.figures.throughput_mbit_s])),
        }
    }
    cells.sort_by_key(|(key, _)| {
        factors
            .iter()
            .zip(key)
            .map(|(f, l)| f.levels.iter().position(|x| x == l).unwrap_or(0))
            .collect::<Vec<usize>>()
    });
    let mut header: Vec<&str> = factors.iter().map(|f| f.name.as_str()).collect();
    header.extend(["runs", "mean Mbit/s", "min", "max"]);
    let rows: Vec<Vec<String>> = cells
        .iter()
        .map(|(key, values)| {
            let mean = values.iter().sum::<f64>() / values.len() as f64;
            let min = values.iter().copied().fold(f64::INFINITY, f64::min);
            let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let mut row = key.clone();
            row.extend([values.len().to_string(), num(mean), num(min), num(max)]);
            row
        })
        .collect();
    out.push_str(&markdown(&header, &rows));
    out.push_str(&format!(
        "main effects (each level against its factor's first, averaged over every other factor's levels); {:.0}% t intervals from the pooled within-combination spread{}:\n",
        analysis.level * 100.0,
        analysis
            .sigma
            .map_or(String::new(), |s| format!(" (σ {} Mbit/s, {} df)", num(s), analysis.df))
    ));
    let rows: Vec<Vec<String>> = analysis
        .main
        .iter()
        .map(|e| {
            let (name, level) = &e.factors[0];
            let first = factors
                .iter()
                .find(|f| &f.name == name)
                .and_then(|f| f.levels.first())
                .cloned()
                .unwrap_or_default();
            vec![
                name.clone(),
                format!("{level} vs {first}"),
                interval(e),
                verdict(e).to_string(),
            ]
        })
        .collect();
    out.push_str(&markdown(
        &["factor", "levels", "effect, Mbit/s", "verdict"],
        &rows,
    ));
    if !analysis.interactions.is_empty() {
        out.push_str("two-factor interactions (how much the first's effect changes when the second moves off its first level):\n");
        let rows: Vec<Vec<String>> = analysis
            .interactions
            .iter()
            .map(|e| {
                vec![
                    format!("{}={}", e.factors[0].0, e.factors[0].1),
                    format!("{}={}", e.factors[1].0, e.factors[1].1),
                    interval(e),
                    match (e.half_width, e.significant()) {
                        (None, _) => "no interval",
                        (_, true) => "interacts",
                        (_, false) => "within the noise",
                    }
                    .to_string(),
                ]
            })
            .collect();
        out.push_str(&markdown(
            &["factor", "with", "interaction, Mbit/s", "verdict"],
            &rows,
        ));
    }
    if analysis.flags.is_empty() {
        if !analysis.interactions.is_empty() {
            out.push_str("no interaction as large as the main effects: each factor's effect can be read on its own here.\n");
        }
    } else {
        for flag in &analysis.flags {
            out.push_str(&format!("note: {flag}.\n"));
        }
        out.push_str("Van Jacobson (1988, 003), on four such runs: \"any statement of the form \"feature A/B is good/bad\" is bogus\"; the full factorial measures what leave-one-out cannot.\n");
    }
    out
}
