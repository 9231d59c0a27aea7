//! The report's figure toolkit: a figure's data (series, marks, axes; each
//! experiment computes its own from records alone, in its folder's
//! `figures.rs`, which the snapshot tests pin down), drawn with plotters'
//! SVG backend and rasterised to PNG with resvg.
//!
//! Every figure names its units in its axis labels, and its caption names
//! the host and the placements its points came from.

use crate::record::Record;
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
    text
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
