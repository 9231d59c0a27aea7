//! `netlab ablate`'s text: the design, each combination's mean throughput,
//! the main effects and two-factor interactions with their intervals, and
//! the interactions large enough to make one-at-a-time verdicts wrong, in
//! words.

use crate::analysis::factorial::{Analysis, Effect, Factor, FactorialError};
use crate::experiments::ablate::cell::{AblatePlan, Preset};
use crate::experiments::stream::record::Record;
use crate::experiments::stream::record::StreamData;
use crate::report::figures::{Figure, Series, Style};
use crate::report::historical;
use crate::report::table::{markdown, num};

/// `netlab ablate --json`: the design, its analysis (or why there is
/// none) and the records.
pub fn doc(
    plan: &AblatePlan,
    preset: Option<Preset>,
    analysis: &Result<Analysis, FactorialError>,
    records: &[Record],
) -> serde_json::Value {
    serde_json::json!({
        "experiment": "ablate",
        "target": "stream",
        "description": plan.title(),
        "seed": plan.seed,
        "preset": preset
            .and_then(|p| clap::ValueEnum::to_possible_value(&p))
            .map(|v| v.get_name().to_string()),
        "analysis": analysis.as_ref().ok(),
        "analysis_error": analysis.as_ref().err().map(|e| e.to_string()),
        // The preset's own table, as the text prints it.
        "joy_ladder": match (preset, analysis) {
            (Some(Preset::Joy1981), Ok(a)) => joy_ladder_data(&plan.design(), a),
            _ => None,
        },
        "leave_one_out": match (preset, analysis) {
            (Some(Preset::Vj1988), Ok(a)) => Some(leave_one_out_data(&plan.design(), a)),
            _ => None,
        },
        "records": records,
    })
}

/// The text: [`text`], then a preset's own table.
pub fn full_text(
    plan: &AblatePlan,
    preset: Option<Preset>,
    analysis: &Result<Analysis, FactorialError>,
    records: &[Record],
) -> String {
    let design = plan.design();
    match analysis {
        Ok(a) => {
            let mut out = text(&plan.title(), &design, records, a);
            out.push_str(&zero_copy_by_combination(records));
            match preset {
                Some(Preset::Joy1981) => out.push_str(&joy_ladder(&design, a)),
                Some(Preset::Vj1988) => out.push_str(&leave_one_out(&design, a)),
                None => {}
            }
            out
        }
        Err(e) => format!(
            "netlab ablate: {}\nno analysis: {e} (a failed run leaves its combination short; see the records)\n",
            plan.title()
        ),
    }
}

/// Where zero-copy receive mapped pages, combination by combination: a
/// feature that works only when others line up (whole pages of payload
/// from the sender's own pages) is an interaction of more than two
/// factors, which the two-factor table cannot show. Empty when no run
/// received with it.
pub fn zero_copy_by_combination(records: &[Record]) -> String {
    let mut combos: Vec<(String, u64, u64)> = Vec::new();
    for record in records {
        let StreamData {
            params,
            result: Some(result),
        } = &record.data
        else {
            continue;
        };
        let (Some(design), Some(zc)) = (&params.design, &result.receiver.zerocopy_receive) else {
            continue;
        };
        let name = design
            .factors
            .iter()
            .map(|(f, l)| format!("{f}={l}"))
            .collect::<Vec<_>>()
            .join(" ");
        match combos.iter_mut().find(|c| c.0 == name) {
            Some(c) => {
                c.1 += zc.mapped;
                c.2 += zc.copied;
            }
            None => combos.push((name, zc.mapped, zc.copied)),
        }
    }
    if combos.is_empty() {
        return String::new();
    }
    let share = |mapped: u64, copied: u64| 100.0 * mapped as f64 / (mapped + copied).max(1) as f64;
    let mapping: Vec<_> = combos.iter().filter(|c| c.1 > 0).collect();
    if mapping.is_empty() {
        return format!(
            "zero-copy receive mapped nothing in any of its {} combinations: every byte was copied (only whole, page-aligned pages of payload map)\n",
            combos.len()
        );
    }
    let mut out = format!(
        "zero-copy receive mapped pages in {} of its {} combinations (elsewhere every byte was copied: only whole, page-aligned pages of payload map):\n",
        mapping.len(),
        combos.len()
    );
    for (name, mapped, copied) in mapping {
        out.push_str(&format!(
            "  {name}: {:.0}% of the bytes mapped\n",
            share(*mapped, *copied)
        ));
    }
    out
}

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

/// Each combination's runs (throughput, Mbit/s), keyed by its levels in
/// the factors' order, in the order of the factors' levels.
fn runs_by_combination(factors: &[Factor], records: &[Record]) -> Vec<(Vec<String>, Vec<f64>)> {
    let mut cells: Vec<(Vec<String>, Vec<f64>)> = Vec::new();
    for r in records {
        let StreamData {
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
    cells
}

/// The design's records as a table of combinations, then the analysis.
pub fn text(title: &str, factors: &[Factor], records: &[Record], analysis: &Analysis) -> String {
    let mut out = format!(
        "netlab ablate: {title}\n{} runs: {} combinations x {} randomised blocks; response: throughput, Mbit/s\n",
        analysis.runs,
        analysis.runs / analysis.runs_per_cell.max(1),
        analysis.runs_per_cell
    );
    let cells = runs_by_combination(factors, records);
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

/// `--preset joy1981`: Bill Joy's ladder beside today's. His projections
/// (004) are user-to-user Mbaud from his 1.2; each of his steps 2-5 has its
/// nearest feature today, in his order. Each step is read from the
/// factorial's own cells: added to every step before it (his order), and
/// alone on the baseline.
pub fn joy_ladder(factors: &[Factor], analysis: &Analysis) -> String {
    let Some(ladder) = joy_ladder_data(factors, analysis) else {
        return String::new();
    };
    let rows: Vec<Vec<String>> = ladder
        .steps
        .iter()
        .map(|s| {
            vec![
                s.step.clone(),
                s.nearest_today.clone(),
                format!("{:.2}", s.joy_x_step_before),
                s.model_x_step_before
                    .map_or("-".into(), |x| format!("{x:.2}")),
                s.now_x_step_before
                    .map_or("-".into(), |x| format!("{x:.2}")),
                s.now_alone_x_baseline
                    .map_or("-".into(), |x| format!("{x:.2}")),
                num(s.now_mbit_s),
            ]
        })
        .collect();
    let mut out = format!(
        "Bill Joy's 1981 ladder (004, from 1.2 Mbaud user to user) on today's stack, the baseline {}:\n",
        ladder.baseline
    );
    out.push_str(&markdown(
        &[
            "Joy's step",
            "nearest today",
            "Joy: x step before",
            "1981 model: x step before",
            "now: x step before",
            "now: alone x baseline",
            "now Mbit/s",
        ],
        &rows,
    ));
    out.push_str(&format!(
        "Joy projected x{:.1} from steps 2-5 together; today they give x{:.2}.\n",
        ladder.joy_projected_x, ladder.now_x
    ));
    out
}

/// Joy's ladder as data (the JSON's `joy_ladder`; [`joy_ladder`] prints it).
#[derive(Debug, Clone, serde::Serialize)]
pub struct JoyLadder {
    /// The baseline's levels, `name=level ...`.
    pub baseline: String,
    pub steps: Vec<JoyStep>,
    /// Joy's projection from steps 2-5 together, and today's.
    pub joy_projected_x: f64,
    pub now_x: f64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct JoyStep {
    pub step: String,
    pub nearest_today: String,
    pub joy_x_step_before: f64,
    /// The 1981 model's prediction for the step (`netlab stream --stack
    /// bsd41`), as a factor over the step before.
    pub model_x_step_before: Option<f64>,
    /// `None` for step 1, which has no counterpart today.
    pub now_x_step_before: Option<f64>,
    pub now_alone_x_baseline: Option<f64>,
    pub now_mbit_s: f64,
}

pub fn joy_ladder_data(factors: &[Factor], analysis: &Analysis) -> Option<JoyLadder> {
    let projections = &historical::figures().berkeley_vax.projections_mbaud;
    let model = model_ladder_x();
    let baseline = vec![0; factors.len()];
    let base = analysis.mean_of(&baseline)?;
    let mut steps = Vec::new();
    let mut previous = base;
    let mut joy_previous = projections.first().map_or(1.2, |p| p.1);
    let mut cumulative = baseline.clone();
    steps.push(JoyStep {
        step: format!("1. {} (Joy 1.9 Mbaud)", projections.first().map_or("", |p| p.0.as_str())),
        nearest_today: "no Linux counterpart: TCP sets DF and sizes segments to the path MTU; the ladder starts from today's baseline".into(),
        joy_x_step_before: joy_previous / 1.2,
        model_x_step_before: model.first().copied(),
        now_x_step_before: None,
        now_alone_x_baseline: None,
        now_mbit_s: base,
    });
    for (i, factor) in factors.iter().enumerate() {
        let Some((step, joy)) = projections.get(i + 1) else {
            break;
        };
        cumulative[i] = 1;
        let mut alone = baseline.clone();
        alone[i] = 1;
        let (Some(now), Some(by_itself)) =
            (analysis.mean_of(&cumulative), analysis.mean_of(&alone))
        else {
            continue;
        };
        steps.push(JoyStep {
            step: format!("{}. {step}", i + 2),
            nearest_today: format!("{}={}", factor.name, factor.levels[1]),
            joy_x_step_before: joy / joy_previous,
            model_x_step_before: model.get(i + 1).copied(),
            now_x_step_before: Some(now / previous),
            now_alone_x_baseline: Some(by_itself / base),
            now_mbit_s: now,
        });
        previous = now;
        joy_previous = *joy;
    }
    Some(JoyLadder {
        baseline: factors
            .iter()
            .map(|f| format!("{}={}", f.name, f.levels[0]))
            .collect::<Vec<_>>()
            .join(" "),
        steps,
        joy_projected_x: joy_previous / projections.first().map_or(1.2, |p| p.1),
        now_x: previous / base,
    })
}

/// The 1981 model's ladder as factors over the step before (the first
/// over its own 1981 row).
fn model_ladder_x() -> Vec<f64> {
    use crate::model::bsd41;
    let costs = bsd41::Costs::vax750();
    let inputs = bsd41::Inputs::default();
    let mut previous = bsd41::predict_1981(&costs, &inputs).mbaud;
    bsd41::ladder(&costs, &inputs)
        .iter()
        .map(|s| {
            let x = s.outcome.host_mbaud / previous;
            previous = s.outcome.host_mbaud;
            x
        })
        .collect()
}

/// `--preset vj1988`: each factor judged one at a time from the baseline
/// (leave-one-out, Van Jacobson's own method) beside the factorial's main
/// effect, and where the two verdicts differ.
pub fn leave_one_out(factors: &[Factor], analysis: &Analysis) -> String {
    let alone = analysis.one_at_a_time(factors);
    let rows: Vec<Vec<String>> = alone
        .iter()
        .zip(&analysis.main)
        .map(|(one, main)| {
            let differs = verdict(one) != verdict(main);
            vec![
                format!("{}={}", one.factors[0].0, one.factors[0].1),
                format!("{} ({})", interval(one), verdict(one)),
                format!("{} ({})", interval(main), verdict(main)),
                if differs { "differs" } else { "same" }.to_string(),
            ]
        })
        .collect();
    let mut out = String::from(
        "one factor at a time from the baseline (leave-one-out) against the full factorial's main effect, Mbit/s:\n",
    );
    out.push_str(&markdown(
        &[
            "change",
            "one at a time",
            "factorial (averaged over the others)",
            "verdicts",
        ],
        &rows,
    ));
    out
}

/// Leave-one-out as data (the JSON's `leave_one_out`): each change's
/// effect alone from the baseline beside its main effect in the factorial,
/// and whether the verdicts differ.
pub fn leave_one_out_data(factors: &[Factor], analysis: &Analysis) -> serde_json::Value {
    let alone = analysis.one_at_a_time(factors);
    serde_json::Value::Array(
        alone
            .iter()
            .zip(&analysis.main)
            .map(|(one, main)| {
                serde_json::json!({
                    "change": format!("{}={}", one.factors[0].0, one.factors[0].1),
                    "one_at_a_time": one,
                    "one_at_a_time_verdict": verdict(one),
                    "factorial": main,
                    "factorial_verdict": verdict(main),
                    "verdicts_differ": verdict(one) != verdict(main),
                })
            })
            .collect(),
    )
}

/// The factorial designs among `records` (grouped by design id), each
/// analysed from its records alone: the text, a reading (the flagged
/// interactions), and one interaction plot per pair of factors (the mean
/// response at each level of the first, a line per level of the second,
/// averaged over the other factors).
pub fn designs(records: &[Record]) -> (String, String, Vec<Figure>) {
    let mut ids: Vec<&str> = Vec::new();
    for r in records {
        if let StreamData { params, .. } = &r.data
            && let Some(d) = &params.design
            && !ids.contains(&d.id.as_str())
        {
            ids.push(&d.id);
        }
    }
    let (mut text, mut reading, mut plots) = (String::new(), String::new(), Vec::new());
    for (n, id) in ids.iter().enumerate() {
        let mine: Vec<Record> = records
            .iter()
            .filter(|r| matches!(&r.data, StreamData { params, .. } if params.design.as_ref().is_some_and(|d| d.id == *id)))
            .cloned()
            .collect();
        let Some(first) = mine.iter().find_map(|r| r.data.params.design.clone()) else {
            continue;
        };
        let factors: Vec<Factor> = first
            .design
            .iter()
            .map(|(name, levels)| Factor {
                name: name.clone(),
                levels: levels.clone(),
            })
            .collect();
        let title = format!("design {id} (seed {})", first.seed);
        match crate::experiments::ablate::cell::analyse_records(&factors, &mine, 0.95) {
            Err(e) => text.push_str(&format!("netlab ablate: {title}: no analysis: {e}\n")),
            Ok(a) => {
                text.push_str(&self::text(&title, &factors, &mine, &a));
                text.push_str(&zero_copy_by_combination(&mine));
                for flag in &a.flags {
                    reading.push_str(&format!(" In the factorial {title}, {flag}."));
                }
                plots.extend(interaction_plots(n, &factors, &a, &mine));
            }
        }
    }
    (text, reading, plots)
}

fn interaction_plots(
    n: usize,
    factors: &[Factor],
    a: &Analysis,
    records: &[Record],
) -> Vec<Figure> {
    let refs: Vec<&Record> = records.iter().collect();
    let mut plots = Vec::new();
    for i in 0..factors.len() {
        for j in 0..factors.len() {
            if i >= j {
                continue;
            }
            let (x, line) = (&factors[i], &factors[j]);
            let series = line
                .levels
                .iter()
                .enumerate()
                .map(|(l, level)| Series {
                    name: format!("{}={level}", line.name),
                    style: Style::Measured,
                    points: (0..x.levels.len())
                        .map(|k| {
                            let cells: Vec<f64> = a
                                .means
                                .iter()
                                .filter(|(levels, _)| levels[i] == k && levels[j] == l)
                                .map(|(_, m)| *m)
                                .collect();
                            (
                                k as f64,
                                cells.iter().sum::<f64>() / cells.len().max(1) as f64,
                            )
                        })
                        .collect(),
                })
                .collect();
            plots.push(Figure {
                id: format!("ablate-{}-{}-{}", n + 1, x.name, line.name),
                title: format!("{} x {}: interaction", x.name, line.name),
                x_label: x.name.clone(),
                y_label: "throughput (bit/s, mean over the other factors)".into(),
                log_x: false,
                log_y: false,
                x_unit: crate::report::figures::Unit::Plain,
                y_unit: crate::report::figures::Unit::Si {
                    scale: 1e6,
                    symbol: "bit/s".into(),
                },
                categories: x.levels.clone(),
                series,
                marks: Vec::new(),
                caption: format!(
                    "parallel lines: no interaction; crossing or diverging lines: {}'s effect depends on {}; {}",
                    x.name,
                    line.name,
                    crate::report::figures::caption(&refs)
                ),
            });
        }
    }
    plots
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::factorial::{analyse, combinations};

    fn two(name: &str, first: &str, second: &str) -> Factor {
        Factor {
            name: name.into(),
            levels: vec![first.into(), second.into()],
        }
    }

    #[test]
    fn leave_one_out_and_the_factorial_disagree_on_van_jacobsons_numbers() {
        let factors = [two("A", "off", "on"), two("B", "off", "on")];
        let means = [600.0, 530.0, 520.0, 700.0]; // (0,0) (0,1) (1,0) (1,1)
        let runs: Vec<(Vec<usize>, f64)> = combinations(&factors)
            .into_iter()
            .zip(means)
            .flat_map(|(l, y)| [(l.clone(), y - 5.0), (l, y + 5.0)])
            .collect();
        let a = analyse(&factors, &runs, 0.95).unwrap();
        let text = leave_one_out(&factors, &a);
        // A alone: -80, "lowers it"; averaged over B: +45, "raises it".
        let row = text.lines().find(|l| l.contains("A=on")).unwrap();
        assert!(row.contains("-80.0") && row.contains("lowers it"), "{row}");
        assert!(
            row.contains("raises it") && row.contains("differs"),
            "{row}"
        );
    }

    #[test]
    fn the_report_rebuilds_a_design_from_its_records_with_one_interaction_plot_a_pair() {
        let design = vec![
            ("A".to_string(), vec!["off".to_string(), "on".to_string()]),
            ("B".to_string(), vec!["off".to_string(), "on".to_string()]),
            ("C".to_string(), vec!["x".to_string(), "y".to_string()]),
        ];
        let mut records = Vec::new();
        for (levels, y) in combinations(&[
            two("A", "off", "on"),
            two("B", "off", "on"),
            two("C", "x", "y"),
        ])
        .into_iter()
        .zip([600.0, 600.0, 530.0, 530.0, 520.0, 520.0, 700.0, 700.0])
        {
            for block in 0..2 {
                let mut r = crate::experiments::stream::record::fixture_stream_run();
                if let StreamData {
                    params,
                    result: Some(result),
                } = &mut r.data
                {
                    result.figures.throughput_mbit_s = y + block as f64;
                    params.design = Some(crate::experiments::stream::record::DesignContext {
                        id: "d1".into(),
                        factors: design
                            .iter()
                            .zip(&levels)
                            .map(|((n, ls), &l)| (n.clone(), ls[l].clone()))
                            .collect(),
                        block,
                        seed: 1,
                        design: design.clone(),
                    });
                }
                records.push(r);
            }
        }
        let (text, reading, plots) = designs(&records);
        assert!(
            text.contains("16 runs: 8 combinations x 2 randomised blocks"),
            "{text}"
        );
        assert!(reading.contains("A=on and B=on interact"), "{reading}");
        assert_eq!(plots.len(), 3, "A x B, A x C, B x C");
        let ab = &plots[0];
        assert_eq!(ab.categories, ["off", "on"]);
        // B=off: A off 600.5, on 520.5; B=on: 530.5, 700.5 (over C and blocks).
        assert_eq!(ab.series[0].points, [(0.0, 600.5), (1.0, 520.5)]);
        assert_eq!(ab.series[1].points, [(0.0, 530.5), (1.0, 700.5)]);
    }

    #[test]
    fn zero_copy_receive_is_shown_where_it_mapped_pages() {
        let design = vec![("send".to_string(), vec!["write".into(), "zerocopy".into()])];
        let mut records = Vec::new();
        for (level, mapped, copied) in [
            ("write", 0, 400),
            ("zerocopy", 300, 100),
            ("zerocopy", 100, 100),
        ] {
            let mut r = crate::experiments::stream::record::fixture_stream_run();
            if let StreamData {
                params,
                result: Some(result),
            } = &mut r.data
            {
                result.receiver.zerocopy_receive =
                    Some(crate::endpoint::bulk::types::ZerocopyReceiveStats {
                        mapped,
                        copied,
                        calls: 1,
                        unavailable: None,
                    });
                params.design = Some(crate::experiments::stream::record::DesignContext {
                    id: "d".into(),
                    factors: vec![("send".into(), level.into())],
                    block: 0,
                    seed: 1,
                    design: design.clone(),
                });
            }
            records.push(r);
        }
        let text = zero_copy_by_combination(&records);
        assert!(
            text.starts_with("zero-copy receive mapped pages in 1 of its 2 combinations"),
            "{text}"
        );
        // (300 + 100) of (400 + 200) bytes, over both runs of the combination.
        assert!(
            text.contains("  send=zerocopy: 67% of the bytes mapped"),
            "{text}"
        );
        assert!(!text.contains("send=write:"), "{text}");
        assert_eq!(zero_copy_by_combination(&records[..1]).lines().count(), 1);
        assert!(zero_copy_by_combination(&records[..1]).contains("mapped nothing"));
    }

    #[test]
    fn joys_ladder_reads_each_step_added_and_alone_from_the_factorials_cells() {
        let factors = [two("recv", "read", "splice"), two("mtu", "1500", "4136")];
        // Baseline 100; splice alone 110; 4136 alone 150; both 180.
        let means = [100.0, 150.0, 110.0, 180.0];
        let runs: Vec<(Vec<usize>, f64)> = combinations(&factors).into_iter().zip(means).collect();
        let a = analyse(&factors, &runs, 0.95).unwrap();
        let text = joy_ladder(&factors, &a);
        let step2 = text.lines().find(|l| l.contains("recv=splice")).unwrap();
        let cells: Vec<&str> = step2.split('|').map(str::trim).collect();
        // Joy: 2.25 / 1.9; the 1981 model: 2.01 / 1.86; now: 110 / 100,
        // alone the same.
        assert_eq!(
            &cells[3..8],
            ["1.18", "1.08", "1.10", "1.10", "110"],
            "{step2}"
        );
        let step3 = text.lines().find(|l| l.contains("mtu=4136")).unwrap();
        let cells: Vec<&str> = step3.split('|').map(str::trim).collect();
        // Joy: 3.5 / 2.25; the model 3.10 / 2.01; now 180 / 110 added to
        // step 2, 150 / 100 alone.
        assert_eq!(
            &cells[3..8],
            ["1.56", "1.54", "1.64", "1.50", "180"],
            "{step3}"
        );
        assert!(text.contains("today they give x1.80"), "{text}");
        // The JSON carries the same table.
        let data = serde_json::to_value(joy_ladder_data(&factors, &a).unwrap()).unwrap();
        assert_eq!(data["steps"].as_array().unwrap().len(), 3);
        assert_eq!(data["steps"][2]["nearest_today"], "mtu=4136");
        assert_eq!(data["steps"][2]["now_mbit_s"], 180.0);
        assert!((data["now_x"].as_f64().unwrap() - 1.8).abs() < 1e-9);
        let loo = leave_one_out_data(&factors, &a);
        assert_eq!(loo.as_array().unwrap().len(), 2);
        assert_eq!(loo[0]["change"], "recv=splice");
    }
}
