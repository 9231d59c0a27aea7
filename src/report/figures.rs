//! The report's figure toolkit: a figure's data (series, marks, axes; each
//! experiment computes its own from records alone, in its folder's
//! `figures.rs`, which the snapshot tests pin down), drawn as SVG here and
//! rasterised to PNG with resvg, and written as CSV beside them.
//!
//! The drawing is laid out, not left to defaults:
//! - ticks fall on round values of the axis's unit and read in engineering
//!   units (64, 1K, 64K, 1M bytes; 10 µs, 1 ms; 1, 10 GB/s), thinned until
//!   their labels do not touch;
//! - the legend and the key to the marks sit below the plot, never over the
//!   data; long lines wrap, and nothing passes the figure's edges;
//! - a mark is a cross with a number placed where no line, point, other
//!   label or edge is (its words are in the key);
//! - one colour-blind-safe palette (Okabe and Ito's) runs through a report,
//!   and a series keeps its colour in every figure ([`Colours`]);
//! - a measured series of three points or fewer is drawn as points, not as
//!   a line that implies a trend between them.
//!
//! Every text, line and point carries a class (`title`, `tick`, `axis`,
//! `legend`, `mark-label`, `key`, `caption`; `data`, `grid`, `point`), so
//! a test can check the layout from the SVG alone. Every figure names its
//! units in its axis labels, and its caption names the host and the
//! placements its points came from.

use crate::export::Export;
use crate::export::html::escape;
use crate::record::Record;
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write;

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Style {
    /// Measured points joined by lines (points alone when there are few).
    Measured,
    /// A model or limit, or another time's figures: a dashed line.
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

/// What an axis's values are, for its ticks' words.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    /// Plain numbers, SI prefixes from a thousand (1k, 1M).
    #[default]
    Plain,
    /// Bytes: binary prefixes (1K = 1024), and a log axis ticks at powers
    /// of two.
    Bytes,
    /// A time, the values in seconds times `scale` (1e-3: milliseconds).
    Seconds { scale: f64 },
    /// A quantity of `symbol`, the values in `symbol` times `scale`
    /// (`B/s` at 1e6: MB/s), with SI prefixes.
    Si { scale: f64, symbol: String },
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figure {
    /// File stem: `stream-throughput` gives stream-throughput.svg, .png
    /// and .csv.
    pub id: String,
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub log_x: bool,
    pub log_y: bool,
    /// What the axes' values are (their ticks' words).
    pub x_unit: Unit,
    pub y_unit: Unit,
    /// When x is a category: the name of x = 0, 1, 2, ...
    pub categories: Vec<String>,
    pub series: Vec<Series>,
    pub marks: Vec<Mark>,
    /// Host facts and placements.
    pub caption: String,
}

impl Figure {
    /// `series` on linear axes of plain numbers, with no categories or
    /// marks; a figure that differs says so with `..Figure::plain(..)`.
    pub fn plain(
        id: &str,
        title: &str,
        (x_label, y_label): (&str, &str),
        series: Vec<Series>,
        caption: String,
    ) -> Figure {
        Figure {
            id: id.into(),
            title: title.into(),
            x_label: x_label.into(),
            y_label: y_label.into(),
            log_x: false,
            log_y: false,
            x_unit: Unit::Plain,
            y_unit: Unit::Plain,
            categories: Vec::new(),
            series,
            marks: Vec::new(),
            caption,
        }
    }
}

/// The host and placements of the records a figure draws.
pub fn caption<D>(records: &[&Record<D>]) -> String {
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

pub fn by_series(points: Vec<(String, f64, f64)>) -> Vec<Series> {
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

/// Variants per checksum panel (the limits are drawn beside them).
pub const PER_PANEL: usize = 4;

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
    for (i, m) in f.marks.iter().enumerate() {
        text.push_str(&format!(" Mark {}: {}.", i + 1, m.label));
    }
    text
}

/// A figure's data as CSV: a row per point (`series`, `style`, `x`, `y`,
/// and the category's name where x is one), then a row per mark.
pub fn csv(f: &Figure) -> String {
    let mut rows = vec![vec![
        "series".to_string(),
        "style".to_string(),
        f.x_label.clone(),
        f.y_label.clone(),
        "category".to_string(),
    ]];
    for s in &f.series {
        let style = match s.style {
            Style::Measured => "measured",
            Style::Model => "model",
            Style::Points => "points",
        };
        for &(x, y) in &s.points {
            let category = f.categories.get(x as usize).filter(|_| x >= 0.0);
            rows.push(vec![
                s.name.clone(),
                style.to_string(),
                x.to_string(),
                y.to_string(),
                category.cloned().unwrap_or_default(),
            ]);
        }
    }
    for (i, m) in f.marks.iter().enumerate() {
        rows.push(vec![
            format!("mark {}: {}", i + 1, m.label),
            "mark".to_string(),
            m.x.to_string(),
            m.y.to_string(),
            String::new(),
        ]);
    }
    // Text in memory always renders.
    crate::export::csv::Table { rows: &rows }
        .render()
        .unwrap_or_default()
}

/// Okabe and Ito's colour-blind-safe palette (2008), with grey in place
/// of yellow (too faint on white).
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#7F7F7F",
];

/// Each series' colour over a set of figures: a name keeps its colour in
/// every figure, and names drawn together never share one while the
/// palette lasts (greedy colouring in order of first appearance).
#[derive(Debug, Clone, Default)]
pub struct Colours(HashMap<String, usize>);

impl Colours {
    pub fn for_figures(figures: &[Figure]) -> Colours {
        let mut colours: HashMap<String, usize> = HashMap::new();
        let mut beside: HashMap<&str, Vec<&str>> = HashMap::new();
        for f in figures {
            for a in &f.series {
                for b in &f.series {
                    if a.name != b.name {
                        beside.entry(&a.name).or_default().push(&b.name);
                    }
                }
            }
        }
        for f in figures {
            for s in &f.series {
                if colours.contains_key(&s.name) {
                    continue;
                }
                let taken: Vec<usize> = beside
                    .get(s.name.as_str())
                    .into_iter()
                    .flatten()
                    .filter_map(|n| colours.get(*n).copied())
                    .collect();
                let free = (0..PALETTE.len())
                    .find(|c| !taken.contains(c))
                    .unwrap_or(colours.len() % PALETTE.len());
                colours.insert(s.name.clone(), free);
            }
        }
        Colours(colours)
    }

    fn of(&self, name: &str, fallback: usize) -> &'static str {
        PALETTE[self.0.get(name).copied().unwrap_or(fallback) % PALETTE.len()]
    }
}

// ---- Ticks ----------------------------------------------------------------

const SI: [(f64, &str); 7] = [
    (1e-9, "n"),
    (1e-6, "µ"),
    (1e-3, "m"),
    (1.0, ""),
    (1e3, "k"),
    (1e6, "M"),
    (1e9, "G"),
];

/// `v` with at most `decimals` decimals, trailing zeros dropped.
fn trimmed(v: f64, decimals: usize) -> String {
    let text = format!("{v:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// The decimals that tell ticks `step` apart.
fn decimals_for(step: f64) -> usize {
    if step <= 0.0 || !step.is_finite() {
        return 0;
    }
    (-(step.log10().floor())).clamp(0.0, 6.0) as usize
}

/// A tick's words: `v` in `unit`, its prefix chosen for the value, with
/// the decimals that tell ticks `step` apart (a linear axis), or up to two
/// (a log axis: `None`).
fn tick_label(unit: &Unit, v: f64, step: Option<f64>) -> String {
    if v == 0.0 {
        return "0".into();
    }
    match unit {
        Unit::Bytes => {
            let (scale, suffix) = [(1u64 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")]
                .into_iter()
                .map(|(s, p)| (s as f64, p))
                .find(|(s, _)| v.abs() >= *s)
                .unwrap_or((1.0, ""));
            let digits = step.map_or(2, |s| decimals_for(s / scale));
            format!("{}{suffix}", trimmed(v / scale, digits))
        }
        Unit::Plain => si(v, "", step, false),
        Unit::Seconds { scale } => si(v * scale, "s", step.map(|s| s * scale), true),
        Unit::Si { scale, symbol } => si(v * scale, symbol, step.map(|s| s * scale), true),
    }
}

/// `v` with an SI prefix (from a thousand up, or also below one when
/// `small`), `symbol` after a space when there is one.
fn si(v: f64, symbol: &str, step: Option<f64>, small: bool) -> String {
    let magnitude = v.abs();
    let (scale, prefix) = SI
        .iter()
        .rev()
        .copied()
        .find(|(s, _)| magnitude >= *s * 0.999_999 && (small || *s >= 1.0))
        .unwrap_or(if small { SI[0] } else { (1.0, "") });
    let digits = step.map_or(2, |s| decimals_for(s / scale));
    let number = trimmed(v / scale, digits);
    if symbol.is_empty() {
        format!("{number}{prefix}")
    } else {
        format!("{number} {prefix}{symbol}")
    }
}

/// One axis: its range in drawing space (log10 or log2 of the values on a
/// log axis) and how values map there.
#[derive(Debug, Clone)]
struct Axis {
    lo: f64,
    hi: f64,
    /// The logarithm's base on a log axis.
    base: Option<f64>,
    unit: Unit,
    categories: Vec<String>,
}

impl Axis {
    /// `from_zero`: a linear axis starts at zero when the data start
    /// nearer it than their span (a y axis, whose heights then compare as
    /// they should; an x axis keeps to its data).
    fn new(values: &[f64], log: bool, unit: &Unit, categories: &[String], from_zero: bool) -> Axis {
        if !categories.is_empty() {
            return Axis {
                lo: -0.5,
                hi: categories.len() as f64 - 0.5,
                base: None,
                unit: unit.clone(),
                categories: categories.to_vec(),
            };
        }
        let base = log.then_some(if *unit == Unit::Bytes { 2.0 } else { 10.0 });
        let usable: Vec<f64> = values
            .iter()
            .copied()
            .filter(|v| v.is_finite() && (!log || *v > 0.0))
            .collect();
        let (mut lo, mut hi) = usable
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
                (lo.min(v), hi.max(v))
            });
        if !lo.is_finite() {
            (lo, hi) = if log { (1.0, 10.0) } else { (0.0, 1.0) };
        }
        match base {
            Some(b) => {
                let (l, h) = (lo.log(b), hi.log(b));
                let pad = ((h - l) * 0.06).max(0.15);
                Axis {
                    lo: l - pad,
                    hi: h + pad,
                    base,
                    unit: unit.clone(),
                    categories: Vec::new(),
                }
            }
            None => {
                if from_zero && lo >= 0.0 && lo < (hi - lo) {
                    lo = 0.0;
                }
                if hi == lo {
                    hi = lo + lo.abs().max(1.0);
                }
                let step = nice_step((hi - lo) / 5.0);
                // Nothing drawn on the frame but a zero.
                let lo = if lo == 0.0 {
                    0.0
                } else {
                    (lo / step).floor() * step
                        - if (lo / step).fract() == 0.0 {
                            step * 0.5
                        } else {
                            0.0
                        }
                };
                let hi = (hi / step).ceil() * step
                    + if (hi / step).fract() == 0.0 {
                        step * 0.5
                    } else {
                        0.0
                    };
                Axis {
                    lo,
                    hi,
                    base: None,
                    unit: unit.clone(),
                    categories: Vec::new(),
                }
            }
        }
    }

    /// A value in drawing space (`None`: not drawable, as 0 on a log axis).
    fn place(&self, v: f64) -> Option<f64> {
        let t = match self.base {
            Some(b) if v > 0.0 => v.log(b),
            Some(_) => return None,
            None => v,
        };
        t.is_finite().then_some(t)
    }

    /// Candidate ticks, densest first: each a list of (drawing-space
    /// position, label).
    fn tick_sets(&self) -> Vec<Vec<(f64, String)>> {
        if !self.categories.is_empty() {
            return vec![
                self.categories
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (i as f64, c.clone()))
                    .collect(),
            ];
        }
        match self.base {
            Some(base) => {
                let (first, last) = (self.lo.ceil() as i64, self.hi.floor() as i64);
                let mut sets = Vec::new();
                // Within a decade or two, values between the decades too:
                // every digit, else the 2s and 5s.
                if base == 10.0 && last - first <= 2 {
                    for digits in [
                        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0][..],
                        &[1.0, 2.0, 5.0],
                    ] {
                        let mut set = Vec::new();
                        for e in (first - 1)..=last {
                            for &m in digits {
                                let v = m * 10f64.powi(e as i32);
                                let t = v.log10();
                                if t >= self.lo && t <= self.hi {
                                    set.push((t, tick_label(&self.unit, v, None)));
                                }
                            }
                        }
                        sets.push(set);
                    }
                }
                for every in [1, 2, 3, 4, 5, 10] {
                    let set: Vec<(f64, String)> = (first..=last)
                        .filter(|e| e.rem_euclid(every) == 0)
                        .map(|e| {
                            let v = base.powi(e as i32);
                            (e as f64, tick_label(&self.unit, v, None))
                        })
                        .collect();
                    if !set.is_empty() {
                        sets.push(set);
                    }
                }
                sets
            }
            None => {
                let mut sets = Vec::new();
                for parts in [10.0, 8.0, 6.0, 5.0, 4.0, 3.0, 2.0] {
                    let step = nice_step((self.hi - self.lo) / parts);
                    let mut set = Vec::new();
                    let mut i = (self.lo / step).ceil() as i64;
                    while (i as f64) * step <= self.hi + step * 1e-9 {
                        let v = i as f64 * step;
                        set.push((v, tick_label(&self.unit, v, Some(step))));
                        i += 1;
                    }
                    sets.push(set);
                }
                sets
            }
        }
    }
}

/// 1, 2, 2.5 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .find(|s| *s >= raw * 0.999_999)
        .unwrap_or(10.0 * magnitude)
}

// ---- Layout ---------------------------------------------------------------

const WIDTH: f64 = 900.0;
const PLOT_HEIGHT: f64 = 380.0;
const FONT: &str = "DejaVu Sans, Verdana, sans-serif";

/// A text's width at `size` px, from DejaVu Sans's advance widths
/// (generous: a layout that fits these fits the real glyphs).
fn text_width(text: &str, size: f64) -> f64 {
    let em: f64 = text
        .chars()
        .map(|c| match c {
            'i' | 'l' | 'j' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' => 0.32,
            ' ' | 'f' | 't' | 'r' | '(' | ')' | '[' | ']' | '-' => 0.42,
            'm' | 'w' | 'M' | 'W' | '%' | '@' => 0.92,
            c if c.is_ascii_uppercase() => 0.74,
            c if c.is_ascii_digit() => 0.64,
            _ => 0.62,
        })
        .sum();
    em * size
}

/// `text` broken at spaces into lines no wider than `width` at `size`.
fn wrap(text: &str, width: f64, size: f64) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let candidate = if line.is_empty() {
            word.to_string()
        } else {
            format!("{line} {word}")
        };
        if text_width(&candidate, size) > width && !line.is_empty() {
            lines.push(std::mem::take(&mut line));
            line = word.to_string();
        } else {
            line = candidate;
        }
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
}

/// An axis-aligned box, pixels.
#[derive(Debug, Clone, Copy)]
struct Box2 {
    x0: f64,
    y0: f64,
    x1: f64,
    y1: f64,
}

impl Box2 {
    fn hits(&self, o: &Box2) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }

    /// Whether the segment from `a` to `b` crosses the box.
    fn crossed_by(&self, a: (f64, f64), b: (f64, f64)) -> bool {
        // Liang-Barsky clipping: some part of the segment lies inside.
        let (dx, dy) = (b.0 - a.0, b.1 - a.1);
        let mut t0: f64 = 0.0;
        let mut t1: f64 = 1.0;
        for (p, q) in [
            (-dx, a.0 - self.x0),
            (dx, self.x1 - a.0),
            (-dy, a.1 - self.y0),
            (dy, self.y1 - a.1),
        ] {
            if p == 0.0 {
                if q < 0.0 {
                    return false;
                }
            } else {
                let r = q / p;
                if p < 0.0 {
                    t0 = t0.max(r);
                } else {
                    t1 = t1.min(r);
                }
            }
        }
        t0 <= t1
    }
}

struct Svg {
    body: String,
}

impl Svg {
    #[allow(clippy::too_many_arguments)]
    fn text(
        &mut self,
        class: &str,
        x: f64,
        y: f64,
        size: f64,
        anchor: &str,
        rotate: bool,
        text: &str,
        fill: &str,
    ) {
        let transform = if rotate {
            format!(" transform=\"rotate(-90 {x:.1} {y:.1})\"")
        } else {
            String::new()
        };
        let _ = write!(
            self.body,
            "<text class=\"{class}\" x=\"{x:.1}\" y=\"{y:.1}\" font-size=\"{size}\" text-anchor=\"{anchor}\" fill=\"{fill}\"{transform}>{}</text>",
            escape(text)
        );
    }

    fn line(&mut self, class: &str, a: (f64, f64), b: (f64, f64), stroke: &str, width: f64) {
        let _ = write!(
            self.body,
            "<line class=\"{class}\" x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{stroke}\" stroke-width=\"{width}\"/>",
            a.0, a.1, b.0, b.1
        );
    }
}

/// Draws `figure` as an SVG document, its series in `colours`: the plot's
/// layout, then its grid and ticks, the data, the marks, what goes under
/// the plot, and last the head (whose height is known only then).
pub fn render_svg(figure: &Figure, colours: &Colours) -> Result<String, String> {
    let layout = Layout::of(figure);
    let mut svg = Svg {
        body: String::new(),
    };
    layout.draw_grid(&mut svg);
    let drawn = draw_series(&mut svg, figure, colours, &layout);
    draw_marks(&mut svg, figure, &layout, &drawn)?;
    let height = draw_below(&mut svg, figure, &layout, &drawn.legend);
    Ok(format!(
        "{}{}</svg>\n",
        layout.head(figure, height),
        svg.body
    ))
}

/// Where everything of a figure's plot goes: its axes, the box the data
/// is drawn in, the ticks chosen and the sizes of its text.
struct Layout {
    x_axis: Axis,
    y_axis: Axis,
    plot: Box2,
    x_ticks: Vec<(f64, String)>,
    y_ticks: Vec<(f64, String)>,
    /// Category names stand upright under the plot; numbers lie flat.
    upright: bool,
    title_size: f64,
    y_title: Vec<String>,
    /// How far the x ticks' labels reach below the plot.
    x_tick_depth: f64,
}

const TICK_SIZE: f64 = 13.0;
const AXIS_SIZE: f64 = 14.0;

/// What the data left on the plot, for the marks to keep clear of, and the
/// legend's entries: name, colour, style, and whether drawn as a line.
struct Drawn {
    segments: Vec<((f64, f64), (f64, f64))>,
    dots: Vec<Box2>,
    legend: Vec<(String, &'static str, Style, bool)>,
}

impl Layout {
    fn of(f: &Figure) -> Layout {
        let xs: Vec<f64> = f
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .chain(f.marks.iter().map(|m| m.x))
            .collect();
        let ys: Vec<f64> = f
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .chain(f.marks.iter().map(|m| m.y))
            .collect();
        let x_axis = Axis::new(&xs, f.log_x, &f.x_unit, &f.categories, false);
        let y_axis = Axis::new(&ys, f.log_y, &f.y_unit, &[], true);
        // The title, shrunk to fit.
        let mut title_size: f64 = 19.0;
        while title_size > 12.0 && text_width(&f.title, title_size) > WIDTH - 24.0 {
            title_size -= 1.0;
        }
        let (tick_size, axis_size) = (TICK_SIZE, AXIS_SIZE);
        let top = 34.0 + title_size;
        // The y axis: its ticks the densest set whose labels have room.
        let y_ticks = pick_ticks(&y_axis, PLOT_HEIGHT, |_| tick_size + 6.0);
        let y_tick_width = y_ticks
            .iter()
            .map(|(_, l)| text_width(l, tick_size))
            .fold(0.0, f64::max);
        let y_title = wrap(&f.y_label, PLOT_HEIGHT - 8.0, axis_size);
        let left = 10.0 + y_title.len() as f64 * (axis_size + 4.0) + 8.0 + y_tick_width + 8.0;
        // The x axis: category names stand upright, numbers lie flat.
        let upright = !f.categories.is_empty();
        let mut right = WIDTH - 14.0;
        let room = |l: &str| {
            if upright {
                tick_size + 4.0
            } else {
                text_width(l, tick_size) + 14.0
            }
        };
        let first = pick_ticks(&x_axis, right - left, room);
        // The last label must not pass the figure's right edge.
        if let Some((t, l)) = first.last().filter(|_| !upright) {
            let at = left + (t - x_axis.lo) / (x_axis.hi - x_axis.lo) * (right - left);
            let overhang = at + text_width(l, tick_size) / 2.0 - (WIDTH - 6.0);
            if overhang > 0.0 {
                right -= overhang;
            }
        }
        let x_ticks = pick_ticks(&x_axis, right - left, room);
        let x_tick_depth = if upright {
            x_ticks
                .iter()
                .map(|(_, l)| text_width(l, tick_size - 1.0))
                .fold(0.0, f64::max)
        } else {
            tick_size
        };
        Layout {
            plot: Box2 {
                x0: left,
                y0: top,
                x1: right,
                y1: top + PLOT_HEIGHT,
            },
            x_axis,
            y_axis,
            x_ticks,
            y_ticks,
            upright,
            title_size,
            y_title,
            x_tick_depth,
        }
    }

    fn px(&self, t: f64) -> f64 {
        let (plot, axis) = (&self.plot, &self.x_axis);
        plot.x0 + (t - axis.lo) / (axis.hi - axis.lo) * (plot.x1 - plot.x0)
    }

    fn py(&self, t: f64) -> f64 {
        let (plot, axis) = (&self.plot, &self.y_axis);
        plot.y1 - (t - axis.lo) / (axis.hi - axis.lo) * (plot.y1 - plot.y0)
    }

    /// A value pair where the plot draws it; None off a log axis.
    fn place(&self, x: f64, y: f64) -> Option<(f64, f64)> {
        Some((
            self.px(self.x_axis.place(x)?),
            self.py(self.y_axis.place(y)?),
        ))
    }

    /// Grid, frame and ticks.
    fn draw_grid(&self, svg: &mut Svg) {
        let (plot, tick_size) = (&self.plot, TICK_SIZE);
        for (t, label) in &self.y_ticks {
            let y = self.py(*t);
            svg.line("grid", (plot.x0, y), (plot.x1, y), "#e4e4e4", 1.0);
            svg.text(
                "tick",
                plot.x0 - 8.0,
                y + tick_size * 0.35,
                tick_size,
                "end",
                false,
                label,
                "#333",
            );
        }
        for (t, label) in &self.x_ticks {
            let x = self.px(*t);
            svg.line("grid", (x, plot.y0), (x, plot.y1), "#e4e4e4", 1.0);
            if self.upright {
                svg.text(
                    "tick",
                    x + (tick_size - 1.0) * 0.35,
                    plot.y1 + 8.0,
                    tick_size - 1.0,
                    "end",
                    true,
                    label,
                    "#333",
                );
            } else {
                svg.text(
                    "tick",
                    x,
                    plot.y1 + 6.0 + tick_size,
                    tick_size,
                    "middle",
                    false,
                    label,
                    "#333",
                );
            }
        }
        let _ = write!(
            svg.body,
            "<rect class=\"frame\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"#888\" stroke-width=\"1\"/>",
            plot.x0,
            plot.y0,
            plot.x1 - plot.x0,
            plot.y1 - plot.y0
        );
    }

    /// The document's opening, its title, and the y axis' title upright
    /// beside the ticks, centred.
    fn head(&self, f: &Figure, height: f64) -> String {
        let mut header = String::new();
        let _ = write!(
            header,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" font-family=\"{FONT}\"><rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>"
        );
        let mut head = Svg { body: header };
        head.text(
            "title",
            WIDTH / 2.0,
            14.0 + self.title_size,
            self.title_size,
            "middle",
            false,
            &f.title,
            "#111",
        );
        let centre = (self.plot.y0 + self.plot.y1) / 2.0;
        for (k, line) in self.y_title.iter().enumerate() {
            let x = 12.0 + AXIS_SIZE + k as f64 * (AXIS_SIZE + 4.0) - 2.0;
            head.text("axis", x, centre, AXIS_SIZE, "middle", true, line, "#222");
        }
        head.body
    }
}

/// The data: lines, then points over them.
fn draw_series(svg: &mut Svg, f: &Figure, colours: &Colours, layout: &Layout) -> Drawn {
    let mut drawn = Drawn {
        segments: Vec::new(),
        dots: Vec::new(),
        legend: Vec::new(),
    };
    for (i, s) in f.series.iter().enumerate() {
        let colour = colours.of(&s.name, i);
        let placed: Vec<(f64, f64)> = s
            .points
            .iter()
            .filter_map(|&(x, y)| layout.place(x, y))
            .collect();
        let as_points =
            s.style == Style::Points || (s.style == Style::Measured && placed.len() <= 3);
        let joined = !as_points && placed.len() >= 2;
        if joined {
            let dash = if s.style == Style::Model {
                " stroke-dasharray=\"7 4\""
            } else {
                ""
            };
            let points: Vec<String> = placed
                .iter()
                .map(|(x, y)| format!("{x:.1},{y:.1}"))
                .collect();
            let _ = write!(
                svg.body,
                "<polyline class=\"data\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{dash} points=\"{}\"/>",
                points.join(" ")
            );
            drawn
                .segments
                .extend(placed.windows(2).map(|w| (w[0], w[1])));
        }
        if s.style != Style::Model || !joined {
            let r = if as_points { 4.5 } else { 3.0 };
            for &(x, y) in &placed {
                let _ = write!(
                    svg.body,
                    "<circle class=\"point\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{r}\" fill=\"{colour}\"/>"
                );
                drawn.dots.push(Box2 {
                    x0: x - r,
                    y0: y - r,
                    x1: x + r,
                    y1: y + r,
                });
            }
        }
        drawn.legend.push((s.name.clone(), colour, s.style, joined));
    }
    drawn
}

/// Marks: a cross each, and its number where nothing else is (clear of
/// the data where it can be, of the other numbers always).
fn draw_marks(svg: &mut Svg, f: &Figure, layout: &Layout, drawn: &Drawn) -> Result<(), String> {
    let (plot, segments, dots) = (&layout.plot, &drawn.segments, &drawn.dots);
    let mut taken: Vec<Box2> = Vec::new();
    let mark_size = 12.0;
    for (i, m) in f.marks.iter().enumerate() {
        let Some((x, y)) = layout.place(m.x, m.y) else {
            continue;
        };
        svg.line(
            "mark",
            (x - 6.0, y - 6.0),
            (x + 6.0, y + 6.0),
            "#b00020",
            2.5,
        );
        svg.line(
            "mark",
            (x - 6.0, y + 6.0),
            (x + 6.0, y - 6.0),
            "#b00020",
            2.5,
        );
        let number = (i + 1).to_string();
        let (w, h) = (text_width(&number, mark_size) + 4.0, mark_size + 2.0);
        // Clear of everything, else (a crowded plot) of the other labels.
        let fits = |b: &Box2, strict: bool| {
            b.x0 >= plot.x0 + 2.0
                && b.x1 <= plot.x1 - 2.0
                && b.y0 >= plot.y0 + 2.0
                && b.y1 <= plot.y1 - 2.0
                && !taken.iter().any(|t| t.hits(b))
                && (!strict
                    || (!dots.iter().any(|d| d.hits(b))
                        && !segments.iter().any(|(a, c)| b.crossed_by(*a, *c))))
        };
        let mut spot = None;
        'search: for strict in [true, false] {
            for radius in [12.0, 20.0, 30.0, 44.0, 60.0, 80.0, 110.0, 150.0] {
                for k in 0..16 {
                    let angle = std::f64::consts::PI * 2.0 * f64::from(k) / 16.0
                        - std::f64::consts::FRAC_PI_4;
                    let (cx, cy) = (x + radius * angle.cos(), y + radius * angle.sin());
                    let b = Box2 {
                        x0: cx - w / 2.0,
                        y0: cy - h / 2.0,
                        x1: cx + w / 2.0,
                        y1: cy + h / 2.0,
                    };
                    if fits(&b, strict) {
                        spot = Some(b);
                        break 'search;
                    }
                }
            }
        }
        let Some(b) = spot else {
            return Err(format!(
                "{}: no room for mark {} ({})",
                f.id,
                i + 1,
                m.label
            ));
        };
        taken.push(b);
        if (b.x0 + w / 2.0 - x).hypot(b.y0 + h / 2.0 - y) > 16.0 {
            // A leader from the cross to a number set further off.
            svg.line(
                "leader",
                (x, y),
                (b.x0 + w / 2.0, b.y0 + h / 2.0),
                "#b00020",
                0.6,
            );
        }
        svg.text(
            "mark-label",
            b.x0 + w / 2.0,
            b.y1 - 3.0,
            mark_size,
            "middle",
            false,
            &number,
            "#b00020",
        );
    }
    Ok(())
}

/// Under the plot: the x title, the legend, the key to the marks, the
/// caption. Returns the document's height.
fn draw_below(
    svg: &mut Svg,
    f: &Figure,
    layout: &Layout,
    legend: &[(String, &'static str, Style, bool)],
) -> f64 {
    let (plot, axis_size) = (&layout.plot, AXIS_SIZE);
    let mut y = plot.y1 + 8.0 + layout.x_tick_depth + 10.0;
    for line in wrap(&f.x_label, WIDTH - 40.0, axis_size) {
        y += axis_size + 2.0;
        svg.text(
            "axis",
            (plot.x0 + plot.x1) / 2.0,
            y,
            axis_size,
            "middle",
            false,
            &line,
            "#222",
        );
    }
    y += 10.0;
    let legend_size = 13.0;
    let entry_room = WIDTH - 24.0 - 36.0;
    let widest = legend
        .iter()
        .map(|(name, ..)| text_width(name, legend_size))
        .fold(0.0, f64::max);
    let columns = if widest <= entry_room / 2.0 - 24.0 {
        2
    } else {
        1
    };
    let column_width = (WIDTH - 24.0) / columns as f64;
    let mut row_height: f64 = 0.0;
    for (i, (name, colour, style, joined)) in legend.iter().enumerate() {
        let column = i % columns;
        if column == 0 && i > 0 {
            y += row_height;
            row_height = 0.0;
        }
        let x0 = 12.0 + column as f64 * column_width;
        let lines = wrap(name, column_width - 44.0, legend_size);
        let mid = y + legend_size * 0.6;
        if *joined {
            let dash = if *style == Style::Model {
                " stroke-dasharray=\"7 4\""
            } else {
                ""
            };
            let _ = write!(
                svg.body,
                "<line class=\"legend-line\" x1=\"{x0:.1}\" y1=\"{mid:.1}\" x2=\"{:.1}\" y2=\"{mid:.1}\" stroke=\"{colour}\" stroke-width=\"2\"{dash}/>",
                x0 + 26.0
            );
        } else {
            let _ = write!(
                svg.body,
                "<circle class=\"legend-point\" cx=\"{:.1}\" cy=\"{mid:.1}\" r=\"4.5\" fill=\"{colour}\"/>",
                x0 + 13.0
            );
        }
        for (k, line) in lines.iter().enumerate() {
            svg.text(
                "legend",
                x0 + 34.0,
                y + legend_size + k as f64 * (legend_size + 3.0),
                legend_size,
                "start",
                false,
                line,
                "#222",
            );
        }
        row_height = row_height.max(lines.len() as f64 * (legend_size + 3.0) + 5.0);
    }
    y += row_height;
    let key_size = 12.0;
    for (i, m) in f.marks.iter().enumerate() {
        let lines = wrap(&format!("{}: {}", i + 1, m.label), WIDTH - 36.0, key_size);
        for line in lines {
            y += key_size + 3.0;
            svg.text("key", 14.0, y, key_size, "start", false, &line, "#8a0018");
        }
    }
    y += 8.0;
    for line in wrap(&f.caption, WIDTH - 24.0, 11.0) {
        y += 14.0;
        svg.text("caption", 12.0, y, 11.0, "start", false, &line, "#666");
    }
    (y + 10.0).ceil()
}

/// The densest tick set of `axis` whose labels, each `room(label)` long
/// along an axis `length` px, do not touch.
fn pick_ticks(axis: &Axis, length: f64, room: impl Fn(&str) -> f64) -> Vec<(f64, String)> {
    let sets = axis.tick_sets();
    let span = axis.hi - axis.lo;
    for set in &sets {
        let fits = set.windows(2).all(|w| {
            let gap = (w[1].0 - w[0].0) / span * length;
            gap >= (room(&w[0].1) + room(&w[1].1)) / 2.0
        });
        if fits {
            return set.clone();
        }
    }
    sets.last().cloned().unwrap_or_default()
}

/// Rasterises an SVG document to PNG with resvg (system fonts for text).
pub fn render_png(svg: &str) -> Result<Vec<u8>, String> {
    use resvg::{tiny_skia, usvg};
    let mut options = usvg::Options::default();
    let fonts = options.fontdb_mut();
    fonts.load_system_fonts();
    // The figures ask for DejaVu Sans, else "sans-serif", which fontdb maps
    // to Arial, which a Debian machine lacks: map it to a sans face that
    // is installed.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_read_in_engineering_units() {
        assert_eq!(tick_label(&Unit::Bytes, 64.0, None), "64");
        assert_eq!(tick_label(&Unit::Bytes, 1024.0, None), "1K");
        assert_eq!(tick_label(&Unit::Bytes, 65536.0, None), "64K");
        assert_eq!(tick_label(&Unit::Bytes, 1048576.0, None), "1M");
        let ms = Unit::Seconds { scale: 1e-3 };
        assert_eq!(tick_label(&ms, 0.01, None), "10 µs");
        assert_eq!(tick_label(&ms, 1.0, None), "1 ms");
        assert_eq!(tick_label(&ms, 100.0, None), "100 ms");
        let mb_s = Unit::Si {
            scale: 1e6,
            symbol: "B/s".into(),
        };
        assert_eq!(tick_label(&mb_s, 1000.0, Some(1000.0)), "1 GB/s");
        assert_eq!(tick_label(&mb_s, 2500.0, Some(500.0)), "2.5 GB/s");
        let gbit = Unit::Si {
            scale: 1e9,
            symbol: "bit/s".into(),
        };
        assert_eq!(tick_label(&gbit, 10.0, None), "10 Gbit/s");
        assert_eq!(tick_label(&Unit::Plain, 1000000.0, None), "1M");
        assert_eq!(tick_label(&Unit::Plain, 20.0, Some(10.0)), "20");
        assert_eq!(tick_label(&Unit::Plain, 2.5, Some(0.5)), "2.5");
        assert_eq!(tick_label(&Unit::Plain, 0.0, Some(0.5)), "0");
    }

    #[test]
    fn a_byte_axis_ticks_at_powers_of_two_and_a_time_axis_at_decades() {
        let bytes = Axis::new(&[64.0, 1048576.0], true, &Unit::Bytes, &[], false);
        let ticks = pick_ticks(&bytes, 700.0, |l| text_width(l, 13.0) + 14.0);
        let labels: Vec<&str> = ticks.iter().map(|(_, l)| l.as_str()).collect();
        assert!(
            labels.contains(&"64") && labels.contains(&"1M"),
            "{labels:?}"
        );
        assert!(labels.iter().all(|l| !l.contains('.')), "{labels:?}");
        let ms = Axis::new(
            &[0.012, 200.0],
            true,
            &Unit::Seconds { scale: 1e-3 },
            &[],
            true,
        );
        let labels: Vec<String> = pick_ticks(&ms, 380.0, |_| 19.0)
            .into_iter()
            .map(|t| t.1)
            .collect();
        assert_eq!(labels, ["10 µs", "100 µs", "1 ms", "10 ms", "100 ms"]);
    }

    #[test]
    fn the_palette_keeps_a_series_colour_and_never_repeats_one_in_a_figure() {
        let figure = |names: &[&str]| Figure {
            id: "f".into(),
            title: "t".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            log_x: false,
            log_y: false,
            x_unit: Unit::Plain,
            y_unit: Unit::Plain,
            categories: Vec::new(),
            series: names
                .iter()
                .map(|n| Series {
                    name: n.to_string(),
                    style: Style::Measured,
                    points: vec![(1.0, 1.0)],
                })
                .collect(),
            marks: Vec::new(),
            caption: String::new(),
        };
        let figures = [
            figure(&["a", "b", "c"]),
            figure(&["d", "e", "f", "a"]),
            figure(&["b", "d", "g"]),
        ];
        let colours = Colours::for_figures(&figures);
        for f in &figures {
            let mut seen: Vec<&str> = f.series.iter().map(|s| colours.of(&s.name, 0)).collect();
            seen.sort_unstable();
            seen.dedup();
            assert_eq!(seen.len(), f.series.len(), "{:?}", f.series);
        }
        assert_eq!(colours.of("a", 7), PALETTE[0]);
    }

    #[test]
    fn a_segment_through_a_box_is_seen_and_one_beside_it_is_not() {
        let b = Box2 {
            x0: 10.0,
            y0: 10.0,
            x1: 20.0,
            y1: 20.0,
        };
        assert!(b.crossed_by((0.0, 15.0), (30.0, 15.0)));
        assert!(b.crossed_by((0.0, 0.0), (30.0, 30.0)));
        assert!(!b.crossed_by((0.0, 25.0), (30.0, 25.0)));
        assert!(!b.crossed_by((0.0, 0.0), (5.0, 30.0)));
    }
}
