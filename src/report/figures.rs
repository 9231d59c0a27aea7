//! The report's figures: first their data, computed from records alone by
//! pure functions (what the snapshot tests pin down), then drawn with
//! plotters' SVG backend and rasterised to PNG with resvg.
//!
//! Every figure names its units in its axis labels, and its caption names
//! the host and the placements its points came from.

use crate::experiments::rpc::analysis::{self as rpc, diagnosis_reruns};
use crate::experiments::sweep::cell::summarize;
use crate::record::{Record, RecordData};
use plotters::prelude::*;
use serde::Serialize;

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Style {
    /// Measured points joined by lines.
    Measured,
    /// A model or limit: a dashed line, no points.
    Model,
    /// Points only (categories).
    Points,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Series {
    pub name: String,
    pub style: Style,
    pub points: Vec<(f64, f64)>,
}

/// A labelled point drawn over the series: a knee, a cliff.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mark {
    pub x: f64,
    pub y: f64,
    pub label: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    /// File stem: `stream-throughput` gives stream-throughput.svg and .png.
    pub id: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub log_y: bool,
    /// When x is a category: the name of x = 0, 1, 2, ...
    pub categories: Vec<String>,
    pub series: Vec<Series>,
    pub marks: Vec<Mark>,
    /// Host facts and placements.
    pub caption: String,
}

/// The host and placements of the records a figure draws.
pub fn caption(records: &[&Record]) -> String {
    let mut placements: Vec<&str> = records.iter().map(|r| r.placement.as_str()).collect();
    placements.sort_unstable();
    placements.dedup();
    let host = records.first().map_or(String::new(), |r| {
        format!(
            "{}, {} cores, Linux {}",
            r.host.cpu_model, r.host.cores, r.host.kernel
        )
    });
    format!("host: {host}; placement: {}", placements.join(", "))
}

/// The stream records of size sweeps (not single runs).
pub fn sweep_records(records: &[Record]) -> Vec<Record> {
    records
        .iter()
        .filter(|r| matches!(&r.data, RecordData::Stream { params, .. } if params.sweep.is_some()))
        .cloned()
        .collect()
}

/// Throughput vs record size, the fitted cost model drawn through it and
/// the model's knee marked (`netlab sweep stream` records).
pub fn stream_throughput(records: &[Record]) -> Option<Figure> {
    let sweep = sweep_records(records);
    let summary = summarize(&sweep, crate::analysis::knee::DEFAULT_FRACTION);
    if summary.points.is_empty() {
        return None;
    }
    let measured: Vec<(f64, f64)> = summary
        .points
        .iter()
        .map(|p| (p.record as f64, p.throughput_mb_s.median))
        .collect();
    let mut series = vec![Series {
        name: "measured (median of runs)".into(),
        style: Style::Measured,
        points: measured.clone(),
    }];
    if let Some(model) = &summary.model {
        series.push(Series {
            name: format!(
                "model: {:.2} µs + {:.3} ns/B per record",
                model.fixed * 1e6,
                model.per_byte * 1e9
            ),
            style: Style::Model,
            points: measured
                .iter()
                .map(|&(size, _)| (size, size / model.time(size) / 1e6))
                .collect(),
        });
    }
    // The model's knee, which uses every size's runs, where there is one;
    // the threshold knee (which one outlying point can move) otherwise.
    let model_knee = summary.model_knee.as_ref().zip(summary.model.as_ref());
    let marks = match model_knee {
        Some((k, model)) => vec![Mark {
            x: k.size,
            y: k.size / model.time(k.size) / 1e6,
            label: format!(
                "knee (model) {:.0} B, 95% {:.0}-{:.0}",
                k.size, k.low, k.high
            ),
        }],
        None => summary
            .knee
            .iter()
            .map(|k| Mark {
                x: k.size,
                y: k.throughput,
                label: format!("knee {} B ({:.0}% of plateau)", k.size, k.fraction * 100.0),
            })
            .collect(),
    };
    Some(Figure {
        id: "stream-throughput".into(),
        title: "Throughput vs record size (one TCP stream)".into(),
        x_label: "record size (bytes, log)".into(),
        y_label: "throughput (MB/s)".into(),
        log_x: true,
        log_y: false,
        categories: Vec::new(),
        series,
        marks,
        caption: caption(&sweep.iter().collect::<Vec<_>>()),
    })
}

/// Time per call vs argument size per column (TCP/UDP, local/remote),
/// cliffs marked with their diagnosis reruns' times where recorded.
pub fn rpc_time(records: &[Record]) -> Vec<Figure> {
    let measured = rpc::measured_records(records);
    if measured.is_empty() {
        return Vec::new();
    }
    let mut series: Vec<Series> = Vec::new();
    for r in &measured {
        if let RecordData::Rpc {
            params,
            result: Some(result),
        } = &r.data
        {
            // Log axes cannot show 0 bytes: it is drawn at 1.
            let point = (
                (params.size as f64).max(1.0),
                result.ms_per_100_calls.median / 100.0,
            );
            match series.iter_mut().find(|s| s.name == params.column()) {
                Some(s) => s.points.push(point),
                None => series.push(Series {
                    name: params.column(),
                    style: Style::Measured,
                    points: vec![point],
                }),
            }
        }
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    // The cliffs `netlab rpc` flags (by the median call), with the best
    // time a diagnosis rerun reached.
    let marks: Vec<(String, Mark)> = rpc::flag_cliffs(&measured)
        .into_iter()
        .map(|(column, cliff, params, result)| {
            let fixed = diagnosis_reruns(records, &column, params.size);
            let label = match fixed.iter().map(|r| r.ms_per_call).min_by(f64::total_cmp) {
                Some(ms) => format!(
                    "{column} {} B: {:.1} -> {ms:.2} ms/call fixed",
                    cliff.size, cliff.measured
                ),
                None => format!("{column} {} B: {:.1} ms/call", cliff.size, cliff.measured),
            };
            let mark = Mark {
                x: cliff.size.max(1.0),
                y: result.ms_per_100_calls.median / 100.0,
                label,
            };
            (column, mark)
        })
        .collect();
    let used: Vec<&Record> = measured.iter().collect();
    // One panel per protocol: today's local and remote columns beside
    // 1989's (the document's figures read as ms per call, the one reading
    // its own Ethernet allows), four lines a panel.
    let h = &super::historical::figures().rpc_size_sweep;
    let then = |proto: &str, place: &str| -> Option<Series> {
        let column = format!("{}_{place}", proto.to_ascii_lowercase());
        let index = h.columns.iter().position(|c| *c == column)?;
        Some(Series {
            name: format!("1989 {proto} {place} (Sun-3/60)"),
            style: Style::Model,
            points: h
                .rows
                .iter()
                .filter_map(|row| Some((row.first()?.max(1.0), *row.get(index)?)))
                .collect(),
        })
    };
    ["TCP", "UDP"]
        .into_iter()
        .filter_map(|proto| {
            let now: Vec<Series> = series
                .iter()
                .filter(|s| s.name.starts_with(proto))
                .cloned()
                .collect();
            if now.is_empty() {
                return None;
            }
            let then_series: Vec<Series> = ["local", "remote"]
                .iter()
                .filter_map(|place| then(proto, place))
                .collect();
            Some(Figure {
                id: if proto == "TCP" {
                    "rpc-time".into()
                } else {
                    "rpc-time-udp".into()
                },
                title: format!(
                    "Sun RPC over {proto}: time per call vs argument size, 1989 and now"
                ),
                x_label: "argument size (bytes, log; 0 drawn at 1)".into(),
                y_label: "time per call (ms, log)".into(),
                log_x: true,
                log_y: true,
                categories: Vec::new(),
                series: now.into_iter().chain(then_series).collect(),
                marks: marks
                    .iter()
                    .filter(|(column, _)| column.starts_with(proto))
                    .map(|(_, m)| m.clone())
                    .collect(),
                caption: caption(&used),
            })
        })
        .collect()
}

/// A login-load cell: series name, users, result, record.
type LoginPoint<'a> = (
    String,
    f64,
    &'a crate::experiments::login::cell::LoginResult,
    &'a Record,
);

/// The login-load cells.
fn login_points(records: &[Record]) -> Vec<LoginPoint<'_>> {
    records
        .iter()
        .filter_map(|r| match &r.data {
            RecordData::Login {
                params,
                result: Some(result),
            } => Some((
                format!(
                    "{} {} {}",
                    params.relay.name(),
                    params.protocol.name(),
                    params.placement.name()
                ),
                params.users as f64,
                result.as_ref(),
                r,
            )),
            _ => None,
        })
        .collect()
}

fn by_series(points: Vec<(String, f64, f64)>) -> Vec<Series> {
    let mut series: Vec<Series> = Vec::new();
    for (name, x, y) in points {
        match series.iter_mut().find(|s| s.name == name) {
            Some(s) => s.points.push((x, y)),
            None => series.push(Series {
                name,
                style: Style::Measured,
                points: vec![(x, y)],
            }),
        }
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    series
}

/// CPU busy (user + system, % of all CPUs) and the 99th-percentile echo
/// vs users, per server.
pub fn login_figures(records: &[Record]) -> Vec<Figure> {
    let points = login_points(records);
    if points.is_empty() {
        return Vec::new();
    }
    let used: Vec<&Record> = points.iter().map(|p| p.3).collect();
    let cpu = by_series(
        points
            .iter()
            .map(|(name, users, r, _)| {
                let busy = r.cpu.user_pct + r.cpu.system_pct + r.cpu.irq_pct + r.cpu.softirq_pct;
                (name.clone(), *users, busy)
            })
            .collect(),
    );
    let echo = by_series(
        points
            .iter()
            .map(|(name, users, r, _)| (name.clone(), *users, r.typist.echo_p99_ms.max(1e-3)))
            .collect(),
    );
    let per_key = by_series(
        points
            .iter()
            .map(|(name, users, r, _)| (name.clone(), *users, r.server_cpu_per_keystroke_us))
            .collect(),
    );
    let figure = |id: &str, title: &str, y_label: &str, log_y: bool, series| Figure {
        id: id.into(),
        title: title.into(),
        x_label: "users typing 5 chars/s".into(),
        y_label: y_label.into(),
        log_x: false,
        log_y,
        categories: Vec::new(),
        series,
        marks: Vec::new(),
        caption: caption(&used),
    };
    // 1989 beside now, where the units match: the busy CPU of rlogind (a
    // process per session: today's fork design) and of the kernel-assisted
    // relay (today's splice design) at 16 and 48 users.
    let h = &super::historical::figures().login_relay_load;
    let column = |name: &str| h.columns.iter().position(|c| c == name);
    let then = |relay: &str, name: &str| -> Option<Series> {
        let (r, u, us, sy) = (
            column("relay")?,
            column("users")?,
            column("cpu_us")?,
            column("cpu_sy")?,
        );
        let number = |v: &toml::Value| v.as_float().or_else(|| v.as_integer().map(|i| i as f64));
        Some(Series {
            name: name.into(),
            style: Style::Model,
            points: h
                .rows
                .iter()
                .filter(|row| row.get(r).and_then(|v| v.as_str()) == Some(relay))
                .filter_map(|row| {
                    Some((
                        number(row.get(u)?)?,
                        number(row.get(us)?)? + number(row.get(sy)?)?,
                    ))
                })
                .collect(),
        })
    };
    let now_then: Vec<Series> = cpu
        .iter()
        .filter(|s| s.name == "fork rlogin loopback" || s.name == "splice rlogin loopback")
        .cloned()
        .chain(then(
            "user",
            "1989 rlogind, a process per session (Sun-3/260)",
        ))
        .chain(then("kernel", "1989 kernel-assisted relay (Sun-3/260)"))
        .collect();
    let mut figures = vec![
        figure(
            "login-cpu",
            "Login load: CPU busy vs users",
            "CPU user + system (% of all CPUs)",
            false,
            cpu,
        ),
        figure(
            "login-echo",
            "Login load: 99th-percentile echo vs users",
            "echo p99 (ms, log; 100 ms = perceptible)",
            true,
            echo,
        ),
        figure(
            "login-cost",
            "Login load: server CPU per keystroke vs users",
            "server CPU per keystroke (µs)",
            false,
            per_key,
        ),
    ];
    if now_then.iter().any(|s| s.style == Style::Measured) {
        figures.push(figure(
            "login-then",
            "Login load over rlogin: CPU busy vs users, 1989 and now",
            "CPU user + system (% of all CPUs; 1989: the one CPU of a Sun-3/260)",
            false,
            now_then,
        ));
    }
    figures
}

/// Server CPU per KB and mean segment size per server and protocol.
pub fn output_figures(records: &[Record]) -> Vec<Figure> {
    let cells: Vec<(
        &Record,
        String,
        &crate::experiments::output::cell::OutputResult,
    )> = records
        .iter()
        .filter_map(|r| match &r.data {
            RecordData::Output {
                params,
                result: Some(result),
            } => Some((
                r,
                format!(
                    "{} {}{}{}",
                    params.relay.name(),
                    params.protocol.name(),
                    if params.nodelay { " nodelay" } else { "" },
                    if params.placement.name() == "loopback" {
                        ""
                    } else {
                        " netns"
                    }
                ),
                result.as_ref(),
            )),
            _ => None,
        })
        .collect();
    if cells.is_empty() {
        return Vec::new();
    }
    let categories: Vec<String> = cells.iter().map(|c| c.1.clone()).collect();
    let used: Vec<&Record> = cells.iter().map(|c| c.0).collect();
    let index = |i: usize| i as f64;
    let cost = vec![
        Series {
            name: "server µs/KB".into(),
            style: Style::Points,
            points: cells
                .iter()
                .enumerate()
                .map(|(i, c)| (index(i), c.2.server_cpu_us_per_kb))
                .collect(),
        },
        Series {
            name: "client µs/KB".into(),
            style: Style::Points,
            points: cells
                .iter()
                .enumerate()
                .map(|(i, c)| (index(i), c.2.client_cpu_us_per_kb))
                .collect(),
        },
    ];
    let size = vec![Series {
        name: "mean TCP segment (bytes)".into(),
        style: Style::Points,
        points: cells
            .iter()
            .enumerate()
            .map(|(i, c)| (index(i), c.2.mean_segment_bytes.max(1.0)))
            .collect(),
    }];
    vec![
        Figure {
            id: "output-cpu".into(),
            title: "Terminal output: CPU per KB by server".into(),
            x_label: "server and protocol".into(),
            y_label: "CPU per KB of terminal output (µs)".into(),
            log_x: false,
            log_y: false,
            categories: categories.clone(),
            series: cost,
            marks: Vec::new(),
            caption: caption(&used),
        },
        Figure {
            id: "output-segments".into(),
            title: "Terminal output: mean segment size by server (1987: ~100 B)".into(),
            x_label: "server and protocol".into(),
            y_label: "mean TCP segment payload (bytes, log)".into(),
            log_x: false,
            log_y: true,
            categories,
            series: size,
            marks: Vec::new(),
            caption: caption(&used),
        },
    ]
}

/// GB/s of every checksum and copy variant vs buffer size (hot buffers),
/// with the read limit and memcpy as the limits they are judged against.
pub fn cksum_speed(records: &[Record]) -> Vec<Figure> {
    let mut points: Vec<(String, f64, f64)> = Vec::new();
    let mut used = Vec::new();
    for record in records {
        let RecordData::Cksum {
            result: Some(result),
            ..
        } = &record.data
        else {
            continue;
        };
        used.push(record);
        for row in result.rows.iter().filter(|r| !r.cold) {
            points.push((row.variant.clone(), result.size as f64, row.gb_s));
        }
    }
    if points.is_empty() {
        return Vec::new();
    }
    let (mut limits, variants): (Vec<Series>, Vec<Series>) = by_series(points)
        .into_iter()
        .partition(|s| s.name.contains("read") || s.name == "memcpy");
    for s in &mut limits {
        s.style = Style::Model;
        s.name = format!("{} (limit)", s.name);
    }
    // Small multiples: one panel per kind (checksum alone, copy and
    // checksum fused, copy alone), at most four variants each, every one
    // beside the machine's limits: no panel holds more than six lines.
    let kind = |name: &str| {
        if name.starts_with("fused") {
            "copy and checksum fused"
        } else if name.starts_with("copy") {
            "copy"
        } else {
            "checksum"
        }
    };
    let mut panels: Vec<(&str, Vec<Series>)> = Vec::new();
    for s in variants {
        let k = kind(&s.name);
        match panels.last_mut() {
            Some((last, group)) if *last == k && group.len() < PER_PANEL => group.push(s),
            _ => panels.push((k, vec![s])),
        }
    }
    panels
        .into_iter()
        .enumerate()
        .map(|(i, (k, group))| Figure {
            id: if i == 0 {
                "cksum-speed".into()
            } else {
                format!("cksum-speed-{}", i + 1)
            },
            title: format!("Speed vs buffer size (hot): {k}"),
            x_label: "buffer size (bytes, log)".into(),
            y_label: "GB/s (10^9 bytes per second)".into(),
            log_x: true,
            log_y: false,
            categories: Vec::new(),
            series: group.into_iter().chain(limits.iter().cloned()).collect(),
            marks: Vec::new(),
            caption: caption(&used),
        })
        .collect()
}

/// Variants per checksum panel (the limits are drawn beside them).
const PER_PANEL: usize = 4;

/// A figure in words, for readers who cannot see it: its axes, and each
/// series' range of values.
pub fn describe(f: &Figure) -> String {
    let mut text = format!("{}: {} against {}.", f.title, f.y_label, f.x_label);
    for s in &f.series {
        let ys = s.points.iter().map(|p| p.1).filter(|y| y.is_finite());
        let (lo, hi) = ys.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), y| {
            (lo.min(y), hi.max(y))
        });
        if lo.is_finite() {
            text.push_str(&format!(
                " {}: {} points, from {} to {}.",
                s.name,
                s.points.len(),
                crate::report::table::num(lo),
                crate::report::table::num(hi)
            ));
        }
    }
    text
}

/// Every figure the records allow, in report order.
pub fn all(records: &[Record]) -> Vec<Figure> {
    let mut figures = Vec::new();
    figures.extend(stream_throughput(records));
    figures.extend(rpc_time(records));
    figures.extend(cksum_speed(records));
    figures.extend(login_figures(records));
    figures.extend(output_figures(records));
    figures
}

/// The range a set of values needs on an axis, padded, positive on log axes.
fn axis_range(values: impl Iterator<Item = f64>, log: bool) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.filter(|v| v.is_finite() && (!log || *v > 0.0)) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return if log { (1.0, 10.0) } else { (0.0, 1.0) };
    }
    if log {
        (lo / 1.5, hi * 1.5)
    } else {
        let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.05).max(1e-9);
        ((lo - pad).min(0.0_f64.max(lo - pad)), hi + pad)
    }
}

const WIDTH: u32 = 900;
const HEIGHT: u32 = 540;

/// Draws `figure` as an SVG document.
pub fn render_svg(figure: &Figure) -> Result<String, String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, HEIGHT)).into_drawing_area();
        draw(&root, figure).map_err(|e| format!("{}: {e}", figure.id))?;
        root.present().map_err(|e| format!("{}: {e}", figure.id))?;
    }
    Ok(svg)
}

type DrawResult = Result<(), Box<dyn std::error::Error>>;

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    f: &Figure,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let (body, foot) = root.split_vertically(HEIGHT - 28);
    foot.draw(&Text::new(
        f.caption.clone(),
        (10, 8),
        ("sans-serif", 12).into_font().color(&BLACK.mix(0.7)),
    ))?;
    let xs = f
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .chain(f.marks.iter().map(|m| m.x));
    let ys = f
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .chain(f.marks.iter().map(|m| m.y));
    let (x0, x1) = if f.categories.is_empty() {
        axis_range(xs, f.log_x)
    } else {
        (-0.5, f.categories.len() as f64 - 0.5)
    };
    let (y0, y1) = axis_range(ys, f.log_y);
    let mut builder = ChartBuilder::on(&body);
    builder
        .caption(&f.title, ("sans-serif", 24))
        .margin(12)
        .x_label_area_size(if f.categories.is_empty() { 40 } else { 110 })
        .y_label_area_size(70);
    // Four axis kinds; the drawing is the same for each.
    macro_rules! plot {
        ($chart:expr) => {{
            let mut chart = $chart;
            let categories = f.categories.clone();
            let category_label = |x: &f64| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    categories.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            };
            let mut mesh = chart.configure_mesh();
            mesh.x_desc(f.x_label.as_str())
                .y_desc(f.y_label.as_str())
                .label_style(("sans-serif", 15))
                .axis_desc_style(("sans-serif", 16));
            if !categories.is_empty() {
                mesh.x_labels(categories.len())
                    .x_label_formatter(&category_label)
                    .x_label_style(
                        ("sans-serif", 14)
                            .into_font()
                            .transform(FontTransform::Rotate90),
                    );
            }
            mesh.draw()?;
            for (i, s) in f.series.iter().enumerate() {
                let color = Palette99::pick(i).to_rgba();
                let style = ShapeStyle::from(&color).stroke_width(2);
                match s.style {
                    Style::Measured => {
                        chart
                            .draw_series(LineSeries::new(s.points.iter().copied(), style))?
                            .label(s.name.as_str())
                            .legend(move |(x, y)| {
                                PathElement::new(vec![(x, y), (x + 18, y)], style)
                            });
                        chart.draw_series(
                            s.points
                                .iter()
                                .map(|&p| Circle::new(p, 3, ShapeStyle::from(&color).filled())),
                        )?;
                    }
                    Style::Model => {
                        chart
                            .draw_series(DashedLineSeries::new(
                                s.points.iter().copied(),
                                6,
                                4,
                                style,
                            ))?
                            .label(s.name.as_str())
                            .legend(move |(x, y)| {
                                PathElement::new(vec![(x, y), (x + 18, y)], style)
                            });
                    }
                    Style::Points => {
                        chart
                            .draw_series(
                                s.points
                                    .iter()
                                    .map(|&p| Circle::new(p, 5, ShapeStyle::from(&color).filled())),
                            )?
                            .label(s.name.as_str())
                            .legend(move |(x, y)| {
                                Circle::new((x + 9, y), 4, ShapeStyle::from(&color).filled())
                            });
                    }
                }
            }
            // Labels stagger downwards so neighbouring marks stay legible,
            // and sit left of marks in the right half of the plot.
            let right_half = |x: f64| {
                if f.log_x {
                    x.ln() > (x0.ln() + x1.ln()) / 2.0
                } else {
                    x > (x0 + x1) / 2.0
                }
            };
            for (i, m) in f.marks.iter().enumerate() {
                let width = (m.label.chars().count() as f64 * 6.6) as i32;
                let dx = if right_half(m.x) { -width - 10 } else { 10 };
                let dy = 10 + 15 * (i as i32 % 5);
                chart.draw_series(std::iter::once(
                    EmptyElement::at((m.x, m.y))
                        + Cross::new((0, 0), 7, ShapeStyle::from(&RED).stroke_width(2))
                        + Text::new(
                            m.label.clone(),
                            (dx, dy),
                            ("sans-serif", 12).into_font().color(&RED),
                        ),
                ))?;
            }
            if !f.series.is_empty() {
                chart
                    .configure_series_labels()
                    .background_style(WHITE.mix(0.85))
                    .border_style(BLACK.mix(0.4))
                    .label_font(("sans-serif", 15))
                    .position(legend_position(f))
                    .draw()?;
            }
        }};
    }
    match (f.log_x, f.log_y) {
        (false, false) => plot!(builder.build_cartesian_2d(x0..x1, y0..y1)?),
        (true, false) => plot!(builder.build_cartesian_2d((x0..x1).log_scale(), y0..y1)?),
        (false, true) => plot!(builder.build_cartesian_2d(x0..x1, (y0..y1).log_scale())?),
        (true, true) => {
            plot!(builder.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())?)
        }
    }
    Ok(())
}

/// Upper left when the curves rise, upper right when they fall, so the
/// legend sits where the data is not.
fn legend_position(f: &Figure) -> SeriesLabelPosition {
    let falling = f
        .series
        .iter()
        .filter(|s| s.points.len() >= 2)
        .filter(|s| s.points[0].1 > s.points[s.points.len() - 1].1)
        .count();
    let rising = f.series.iter().filter(|s| s.points.len() >= 2).count() - falling;
    if falling > rising {
        SeriesLabelPosition::UpperRight
    } else {
        SeriesLabelPosition::UpperLeft
    }
}

/// Rasterises an SVG document to PNG with resvg (system fonts for text).
pub fn render_png(svg: &str) -> Result<Vec<u8>, String> {
    use resvg::{tiny_skia, usvg};
    let mut options = usvg::Options::default();
    let fonts = options.fontdb_mut();
    fonts.load_system_fonts();
    // The figures ask for "sans-serif"; fontdb maps it to Arial, which a
    // Debian machine lacks: map it to a sans face that is installed.
    let installed: Vec<String> = fonts
        .faces()
        .flat_map(|f| f.families.iter().map(|(name, _)| name.clone()))
        .collect();
    if let Some(sans) = ["DejaVu Sans", "Liberation Sans", "Noto Sans", "FreeSans"]
        .into_iter()
        .find(|want| installed.iter().any(|have| have == want))
        .map(String::from)
        .or_else(|| installed.first().cloned())
    {
        fonts.set_sans_serif_family(sans);
    }
    let tree = usvg::Tree::from_str(svg, &options).map_err(|e| e.to_string())?;
    let size = tree.size().to_int_size();
    let mut pixmap =
        tiny_skia::Pixmap::new(size.width(), size.height()).ok_or("an empty figure")?;
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap.encode_png().map_err(|e| e.to_string())
}
