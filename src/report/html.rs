//! The report: from a records file alone, one self-contained `report.html`
//! (figures inline as SVG, no scripts, no fetches) with each experiment's
//! table in its source document's shape, the historical figures beside
//! today's, a paragraph reading the records, and the figures; plus one SVG
//! and one PNG per figure, and the three most notable findings.
//!
//! Bad input is reported, not fatal: lines that do not parse, records of a
//! future schema and experiments this netlab does not know are listed as
//! skipped, with why; failed cells are listed as missing.

use super::caveats::Estimated;
use super::figures::{self, Figure};
use crate::export::Export;
use crate::export::html::escape;
use crate::record::profile::Profiled;
use crate::record::{Record, SCHEMA};
use serde::de::DeserializeOwned;
use std::path::{Path, PathBuf};

/// What the page is made of, given by the registry: it names no
/// experiment here. `D` is the data of any record the page reads.
pub trait Page<D> {
    /// The experiments whose records it reads, in report order.
    fn experiments(&self) -> &'static [&'static str];
    /// Each experiment's section the records allow, in report order.
    fn sections(&self, records: &[Record<D>]) -> Vec<Section>;
    /// The most notable findings, most striking first (at most three).
    fn notable(&self, records: &[Record<D>]) -> Vec<String>;
    /// One cell as people name it (its varied parameters, its placement).
    fn cell_name(&self, record: &Record<D>) -> String;
}

/// One experiment's section of the page, from its own records: each
/// experiment (or, for stream and its variants, the registry) implements
/// it, and the registry's [`Page::sections`] loops over them.
pub trait ReportSection {
    /// The experiment's record data.
    type Data;
    /// The section's anchor on the page: the experiment's name.
    const EXPERIMENT: &'static str;
    /// Title, tables, reading and figures.
    fn parts(records: &[Record<Self::Data>]) -> Parts;
    /// One cell as people name it from its data, without its placement.
    fn cell(data: &Self::Data) -> String;
    /// One line naming what limited the experiment's runs, for the page's
    /// first screen (`None`: it does not say yet).
    fn limited(records: &[Record<Self::Data>]) -> Option<String> {
        let _ = records;
        None
    }
    /// The section in one row of the page's first screen: today's
    /// headline figure, the source document's beside it, and what limited
    /// the runs, in a few words (`None`: it does not say yet).
    fn headline(records: &[Record<Self::Data>]) -> Option<Headline> {
        let _ = records;
        None
    }
    /// Its figures with the spread each is held to, one per record (or
    /// per cell, where a cell's runs are records of their own), for what
    /// the page tells a reader to read with care ([`super::caveats`]).
    fn estimates(records: &[Record<Self::Data>]) -> Vec<Estimated> {
        let _ = records;
        Vec::new()
    }
    /// The links its cells ran over (an emulated or shaped link's account
    /// of itself), for the first screen; none on loopback.
    fn links(records: &[Record<Self::Data>]) -> Vec<String> {
        let _ = records;
        Vec::new()
    }
    /// What the section shows beyond its figures, as HTML of its own (the
    /// mesh's heat maps), placed after them; empty for most.
    fn html(records: &[Record<Self::Data>]) -> String {
        let _ = records;
        String::new()
    }
    /// The stylesheet rules [`ReportSection::html`] needs, added to the
    /// page's once when the section is on it.
    const STYLE: &'static str = "";
}

/// Each cell's link as it accounts for itself (for [`ReportSection::links`]):
/// `link` finds an experiment's link facts in its record data.
pub fn link_details<D>(
    records: &[Record<D>],
    link: impl Fn(&D) -> Option<&crate::record::testbed::LinkFacts>,
) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| Some(link(&r.data)?.detail.clone()))
        .collect()
}

/// One experiment on the first screen.
#[derive(Debug, Clone, PartialEq)]
pub struct Headline {
    /// Today's figure, with what it was measured on.
    pub now: String,
    /// The source document's figure for the same thing, with its machine.
    pub then: Option<String>,
    /// What limited the runs, in a few words.
    pub limit: String,
}

/// The section `S` makes of its experiment's records (`None`: there are none).
pub fn section_of<S: ReportSection>(records: &[Record<S::Data>]) -> Option<Section> {
    if records.is_empty() {
        return None;
    }
    let (title, tables, reading, figures) = S::parts(records);
    Some(Section {
        experiment: S::EXPERIMENT,
        title,
        tables,
        reading,
        figures,
        limited: S::limited(records),
        headline: S::headline(records),
        caveats: super::caveats::caveats(S::EXPERIMENT, &S::estimates(records)),
        links: {
            let mut links = S::links(records);
            links.sort();
            links.dedup();
            links
        },
        missing: records
            .iter()
            .filter(|r| r.error.is_some())
            .map(|r| {
                format!(
                    "{} ({}): {}",
                    S::cell(&r.data),
                    r.placement,
                    r.error.as_deref().unwrap_or("")
                )
            })
            .collect(),
        html: S::html(records),
        style: S::STYLE,
        records: records.len(),
    })
}

/// A records file as read for a report.
#[derive(Debug)]
pub struct Loaded<D> {
    pub records: Vec<Record<D>>,
    /// What could not be used, and why (one line each).
    pub skipped: Vec<String>,
}

/// Reads `path`, keeping every record this netlab understands.
/// A line that is not UTF-8 or is too long is skipped and named, as is one
/// that does not parse; a file that is not a regular file or is larger
/// than [`crate::record::files::MAX_RECORDS_FILE`] is refused whole.
pub fn load<D: DeserializeOwned>(path: &Path, known: &[&str]) -> std::io::Result<Loaded<D>> {
    let lines =
        crate::record::files::record_lines(path, "records").map_err(std::io::Error::other)?;
    Ok(parse_lines(lines, known))
}

/// Sorts each line into a record or a reason to skip it.
pub fn parse<D: DeserializeOwned>(text: &str, known: &[&str]) -> Loaded<D> {
    parse_lines(crate::record::files::lines(text.as_bytes()), known)
}

fn parse_lines<D: DeserializeOwned>(
    lines: impl Iterator<Item = crate::record::files::Line>,
    known: &[&str],
) -> Loaded<D> {
    let mut loaded = Loaded {
        records: Vec::new(),
        skipped: Vec::new(),
    };
    for (n, line) in lines {
        let line = match line {
            Ok(line) => line,
            Err(why) => {
                loaded.skipped.push(why);
                continue;
            }
        };
        let value: serde_json::Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => {
                loaded.skipped.push(format!(
                    "line {n}: not a whole JSON record (truncated?): {e}"
                ));
                continue;
            }
        };
        let schema = value["schema"].as_u64();
        let version = value["netlab_version"].as_str().unwrap_or("?");
        match schema {
            Some(s) if s > u64::from(SCHEMA) => {
                loaded.skipped.push(format!(
                    "line {n}: from a future netlab (record schema {s}, netlab {version}); this netlab {} reads schema {SCHEMA}: use a newer netlab to report it",
                    env!("CARGO_PKG_VERSION")
                ));
                continue;
            }
            None => {
                loaded
                    .skipped
                    .push(format!("line {n}: not a netlab record (no schema)"));
                continue;
            }
            _ => {}
        }
        let experiment = value["experiment"].as_str().unwrap_or("").to_string();
        if !known.contains(&experiment.as_str()) {
            loaded.skipped.push(format!(
                "line {n}: unknown experiment \"{experiment}\" (this netlab reports {})",
                known.join(", ")
            ));
            continue;
        }
        match serde_json::from_value::<Record<D>>(value) {
            Ok(record) => loaded.records.push(record),
            Err(e) => loaded.skipped.push(format!(
                "line {n}: a {experiment} record this netlab cannot read: {e}"
            )),
        }
    }
    drop_superseded(&mut loaded);
    loaded
}

/// A resumed run measures again the cells whose records failed: the
/// failure is then history, not a missing cell, and is left out (and
/// counted) when the same cell has a measured record in the file.
fn drop_superseded<D>(loaded: &mut Loaded<D>) {
    let measured: std::collections::HashSet<String> = loaded
        .records
        .iter()
        .filter(|r| r.error.is_none())
        .filter_map(|r| r.cell.clone())
        .collect();
    let before = loaded.records.len();
    loaded
        .records
        .retain(|r| r.error.is_none() || r.cell.as_ref().is_none_or(|key| !measured.contains(key)));
    let superseded = before - loaded.records.len();
    if superseded > 0 {
        loaded.skipped.push(format!(
            "{superseded} failed record(s) left out: a resumed run measured the same cell(s) later"
        ));
    }
}

/// One experiment's part of the report.
#[derive(Debug, Clone)]
pub struct Section {
    pub experiment: &'static str,
    pub title: String,
    /// The tables in the source's shape, historical figures beside.
    pub tables: String,
    /// What the records say, in a paragraph.
    pub reading: String,
    pub figures: Vec<Figure>,
    /// What limited its runs, in one line (see [`ReportSection::limited`]).
    pub limited: Option<String>,
    /// Its row of the first screen (see [`ReportSection::headline`]).
    pub headline: Option<Headline>,
    /// What to read with care in its figures ([`super::caveats`]).
    pub caveats: Vec<String>,
    /// The links its cells ran over (see [`ReportSection::links`]).
    pub links: Vec<String>,
    /// Cells that failed: what and why.
    pub missing: Vec<String>,
    /// Its own HTML after its figures (see [`ReportSection::html`]), and
    /// the rules that HTML needs.
    pub html: String,
    pub style: &'static str,
    pub records: usize,
}

/// A section's title, tables, reading and figures.
pub type Parts = (String, String, String, Vec<Figure>);

/// `svg` with `role="img"`, a `<title>` and a `<desc>` (the figure's text
/// alternative) as its first children.
fn accessible(svg: &str, title: &str, description: &str) -> String {
    match svg.find('>') {
        Some(end) if svg.starts_with("<svg") => format!(
            "<svg role=\"img\" aria-label=\"{}\"{}><title>{}</title><desc>{}</desc>{}",
            escape(title),
            &svg[4..end],
            escape(title),
            escape(description),
            &svg[end + 1..]
        ),
        _ => svg.to_string(),
    }
}

/// What `write` produced.
#[derive(Debug)]
pub struct Written {
    pub html: PathBuf,
    pub figures: Vec<PathBuf>,
    pub notable: Vec<String>,
    /// What limited each experiment, one line each (`experiment: line`).
    pub limited: Vec<String>,
    /// Figures to read with care: intervals wider than a set share of
    /// them, records of one cell that disagree ([`super::caveats`]).
    pub caveats: Vec<String>,
    pub skipped: Vec<String>,
    /// Figures that could not be drawn or rasterised, and why.
    pub figure_errors: Vec<String>,
}

impl Written {
    /// Where the report is, its figures' count and, under `heading`, the
    /// most notable findings, numbered.
    pub fn summary_text(&self, heading: &str) -> String {
        let mut text = format!(
            "report: {} ({} figures)\n{heading}",
            self.html.display(),
            self.figures.len()
        );
        for (i, finding) in self.notable.iter().enumerate() {
            text.push_str(&format!("{}. {finding}\n", i + 1));
        }
        if !self.limited.is_empty() {
            text.push_str("what limited each experiment:\n");
            for line in &self.limited {
                text.push_str(&format!("- {line}\n"));
            }
        }
        if !self.caveats.is_empty() {
            text.push_str("read with care:\n");
            for line in &self.caveats {
                text.push_str(&format!("- {line}\n"));
            }
        }
        text
    }
}

/// The page's first line: how many records, from where, on which host
/// (and whether a virtual machine) and netlab version.
fn records_line<D>(records: &[Record<D>], records_link: &str) -> String {
    let first = records.first();
    format!(
        "<p>{} records from <a href=\"{}\">{}</a>{}.</p>\n",
        records.len(),
        escape(records_link),
        escape(records_link),
        first.map_or(String::new(), |r| format!(
            "; host {} ({}, {} cores, Linux {}{}); netlab {}",
            escape(&r.host.hostname),
            escape(&r.host.cpu_model),
            r.host.cores,
            escape(&r.host.kernel),
            if r.host.virtualized {
                ", a virtual machine: the real host's interrupt time is invisible"
            } else {
                ""
            },
            escape(&r.netlab_version)
        ))
    )
}

/// Writes report.html and every figure's SVG and PNG into `dir`.
/// `records_link` is how the page links to the raw records.
pub fn write<D: Profiled>(
    loaded: &Loaded<D>,
    page: &dyn Page<D>,
    records_link: &str,
    dir: &Path,
) -> std::io::Result<Written> {
    std::fs::create_dir_all(dir)?;
    let sections = page.sections(&loaded.records);
    let notable = page.notable(&loaded.records);
    let mut written = Written {
        html: dir.join("report.html"),
        figures: Vec::new(),
        notable: notable.clone(),
        limited: sections
            .iter()
            .filter_map(|s| Some(format!("{}: {}", s.experiment, s.limited.as_ref()?)))
            .collect(),
        caveats: sections.iter().flat_map(|s| s.caveats.clone()).collect(),
        skipped: loaded.skipped.clone(),
        figure_errors: Vec::new(),
    };
    let mut styles: Vec<&str> = sections
        .iter()
        .map(|s| s.style)
        .filter(|s| !s.is_empty())
        .collect();
    styles.dedup();
    let mut html = String::new();
    html.push_str(&records_line(&loaded.records, records_link));
    html.push_str(&what_ran(&loaded.records, &sections));
    html.push_str(&first_screen(&sections));
    html.push_str(&under_the_first_screen(
        &sections,
        &written.caveats,
        &notable,
    ));
    if loaded.records.is_empty() {
        html.push_str("<p class=\"missing\">No records to report.</p>\n");
    }
    if !loaded.skipped.is_empty() {
        html.push_str("<h2>Skipped</h2>\n<ul class=\"skipped\">\n");
        for s in &loaded.skipped {
            html.push_str(&format!("<li>{}</li>\n", escape(s)));
        }
        html.push_str("</ul>\n");
    }
    // One colour a series, through every figure of the page.
    let all: Vec<Figure> = sections.iter().flat_map(|s| s.figures.clone()).collect();
    let colours = figures::Colours::for_figures(&all);
    for section in &sections {
        html.push_str(&format!(
            "<section id=\"{}\">\n<h2>{}</h2>\n<p class=\"reading\">{}</p>\n",
            section.experiment,
            escape(&section.title),
            escape(&section.reading)
        ));
        for figure in &section.figures {
            match figures::render_svg(figure, &colours) {
                Ok(svg) => html.push_str(&figure_files(figure, &svg, dir, &mut written)?),
                Err(e) => written.figure_errors.push(e),
            }
        }
        html.push_str(&section.html);
        html.push_str(&format!(
            "{}<p>{} records; raw: <a href=\"{}\">{}</a> (experiment \"{}\").</p>\n",
            super::htmltext::text_to_html(&section.tables),
            section.records,
            escape(records_link),
            escape(records_link),
            section.experiment
        ));
        if !section.missing.is_empty() {
            html.push_str(
                "<p class=\"missing\">Missing (failed cells):</p>\n<ul class=\"missing\">\n",
            );
            for m in &section.missing {
                html.push_str(&format!("<li>{}</li>\n", escape(m)));
            }
            html.push_str("</ul>\n");
        }
        html.push_str("</section>\n");
    }
    profile_section(&loaded.records, page, dir, &mut html, &mut written)?;
    let absent: Vec<&str> = page
        .experiments()
        .iter()
        .copied()
        .filter(|e| !sections.iter().any(|s| s.experiment == *e))
        .collect();
    if !absent.is_empty() && !loaded.records.is_empty() {
        html.push_str(&format!(
            "<p>No records of: {}.</p>\n",
            escape(&absent.join(", "))
        ));
    }
    crate::export::html::Page {
        title: "netlab report".into(),
        own_css: styles.join("\n"),
        body: html,
    }
    .write_to(&written.html)
    .map_err(std::io::Error::other)?;
    Ok(written)
}

/// Writes one figure's SVG, data (CSV) and PNG into `dir`, and gives its
/// `<figure>` for the page: the SVG inline, titled and described for
/// readers that cannot see it, with links to the files. A PNG that cannot
/// be drawn is named among the figure errors; the page goes on.
fn figure_files(
    figure: &Figure,
    svg: &str,
    dir: &Path,
    written: &mut Written,
) -> std::io::Result<String> {
    let svg_path = dir.join(format!("{}.svg", figure.id));
    std::fs::write(&svg_path, svg)?;
    written.figures.push(svg_path);
    let csv_path = dir.join(format!("{}.csv", figure.id));
    std::fs::write(&csv_path, figures::csv(figure))?;
    match figures::render_png(svg) {
        Ok(png) => {
            let png_path = dir.join(format!("{}.png", figure.id));
            std::fs::write(&png_path, png)?;
            written.figures.push(png_path);
        }
        Err(e) => written
            .figure_errors
            .push(format!("{}.png: {e}", figure.id)),
    }
    // Inline: the SVG document without its XML prologue.
    let body = svg.find("<svg").map_or(svg, |start| &svg[start..]);
    let body = accessible(body, &figure.title, &figures::describe(figure));
    Ok(format!(
        "<figure id=\"{id}\">{body}<figcaption>{}. {} Data: <a href=\"{id}.csv\">{id}.csv</a>; drawn as <a href=\"{id}.svg\">SVG</a> and <a href=\"{id}.png\">PNG</a>.</figcaption></figure>\n",
        escape(&figure.title),
        escape(&figure.caption),
        id = figure.id,
    ))
}

/// What ran: the cells of each placement, the hosts (this one and any
/// agents), and the time from the first cell's start to the last one's end.
fn what_ran<D>(records: &[Record<D>], sections: &[Section]) -> String {
    if records.is_empty() {
        return String::new();
    }
    let mut placements: Vec<(&str, usize)> = Vec::new();
    for r in records {
        match placements.iter_mut().find(|(p, _)| *p == r.placement) {
            Some((_, n)) => *n += 1,
            None => placements.push((&r.placement, 1)),
        }
    }
    let mut agents: Vec<String> = records
        .iter()
        .flat_map(|r| {
            r.agents
                .iter()
                .map(|a| format!("{} ({})", a.agent, a.host.hostname))
        })
        .collect();
    agents.sort();
    agents.dedup();
    // The first start and the last end, each with its text as recorded.
    fn time(t: &str) -> Option<(std::time::SystemTime, &str)> {
        Some((humantime::parse_rfc3339_weak(t).ok()?, t))
    }
    let start = records.iter().filter_map(|r| time(&r.started)).min();
    let end = records.iter().filter_map(|r| time(&r.ended)).max();
    let span = match (start, end) {
        (Some((s, from)), Some((e, to))) => e.duration_since(s).ok().map(|d| {
            format!(
                ", from {from} to {to} ({})",
                humantime::format_duration(std::time::Duration::from_secs(d.as_secs()))
            )
        }),
        _ => None,
    };
    let places: Vec<String> = placements
        .iter()
        .map(|(p, n)| format!("{n} on {p}"))
        .collect();
    let mut links: Vec<String> = Vec::new();
    for s in sections {
        for link in &s.links {
            if !links.contains(link) {
                links.push(link.clone());
            }
        }
    }
    let over = if links.is_empty() {
        String::new()
    } else {
        format!("; links made for them: {}", links.join("; "))
    };
    format!(
        "<p class=\"ran\">What ran: {} cells ({}){}{}{}.</p>\n",
        records.len(),
        escape(&places.join(", ")),
        escape(&span.unwrap_or_default()),
        if agents.is_empty() {
            String::new()
        } else {
            format!("; through agents on {}", escape(&agents.join(", ")))
        },
        escape(&over),
    )
}

/// What follows the first screen's table: what limited each experiment in
/// full (folded), the figures to read with care, the most notable findings.
fn under_the_first_screen(sections: &[Section], caveats: &[String], notable: &[String]) -> String {
    let mut html = String::new();
    let limited: Vec<&Section> = sections.iter().filter(|s| s.limited.is_some()).collect();
    if !limited.is_empty() {
        html.push_str("<details class=\"limited\"><summary>What limited each experiment, in full</summary>\n<ul class=\"limited\">\n");
        for section in limited {
            html.push_str(&format!(
                "<li><a href=\"#{}\">{}</a>: {}</li>\n",
                section.experiment,
                section.experiment,
                escape(section.limited.as_deref().unwrap_or(""))
            ));
        }
        html.push_str("</ul></details>\n");
    }
    if !caveats.is_empty() {
        html.push_str("<h2>Read with care</h2>\n<ul class=\"caveats\">\n");
        for c in caveats {
            html.push_str(&format!("<li>{}</li>\n", escape(c)));
        }
        html.push_str("</ul>\n");
    }
    if !notable.is_empty() {
        html.push_str("<h2>Most notable</h2>\n<ol>\n");
        for n in notable {
            html.push_str(&format!("<li>{}</li>\n", escape(n)));
        }
        html.push_str("</ol>\n");
    }
    html
}

/// The first screen: an experiment a row, today's headline figure beside
/// the source document's and what limited the runs, each linking to its
/// section.
fn first_screen(sections: &[Section]) -> String {
    if sections.is_empty() {
        return String::new();
    }
    let mut html = String::from(
        "<table class=\"first\"><thead><tr><th>experiment</th><th>today</th><th class=\"then-first\">then (the source)</th><th>what limited it</th></tr></thead><tbody>\n",
    );
    for s in sections {
        let (now, then, limit) = match &s.headline {
            Some(h) => (
                h.now.clone(),
                h.then.clone().unwrap_or_else(|| "—".into()),
                h.limit.clone(),
            ),
            None => (
                format!("{} records", s.records),
                "—".into(),
                s.limited.clone().unwrap_or_else(|| "not judged".into()),
            ),
        };
        html.push_str(&format!(
            "<tr><td data-label=\"experiment\"><a href=\"#{id}\">{}</a></td><td data-label=\"today\">{}</td><td class=\"then-first\" data-label=\"then\">{}</td><td class=\"limit\" data-label=\"limited by\">{}</td></tr>\n",
            escape(&s.title),
            escape(&now),
            escape(&then),
            escape(&limit),
            id = s.experiment,
        ));
    }
    html.push_str("</tbody></table>\n<nav class=\"sections\">Sections:");
    for s in sections {
        html.push_str(&format!(
            " <a href=\"#{}\">{}</a>",
            s.experiment, s.experiment
        ));
    }
    html.push_str("</nav>\n");
    html
}

/// With `--profile`: the layer tables over every profiled cell, and a
/// flame graph per cell (`flame-N.svg`, N its line among the records),
/// linked.
fn profile_section<D: Profiled>(
    records: &[Record<D>],
    page: &dyn Page<D>,
    dir: &Path,
    html: &mut String,
    written: &mut Written,
) -> std::io::Result<()> {
    let mut links = Vec::new();
    for (i, record) in records.iter().enumerate() {
        let Some(profile) = &record.profile else {
            continue;
        };
        let name = page.cell_name(record);
        match super::profile::flame_svg(profile, &name) {
            None => {}
            Some(Err(e)) => written.figure_errors.push(format!("{name}: {e}")),
            Some(Ok(svg)) => {
                let file = format!("flame-{}.svg", i + 1);
                let path = dir.join(&file);
                std::fs::write(&path, svg)?;
                written.figures.push(path);
                let busy = profile.system.samples - profile.system.idle;
                links.push(format!(
                    "<li><a href=\"{file}\">{}</a> ({busy} busy samples)</li>\n",
                    escape(&name)
                ));
            }
        }
    }
    let text = super::profile::text(records);
    if text.is_empty() && links.is_empty() {
        return Ok(());
    }
    html.push_str(&format!(
        "<section id=\"profile\">\n<h2>Where the CPU went, by layer (--profile)</h2>\n{}",
        super::htmltext::text_to_html(&text)
    ));
    if !links.is_empty() {
        html.push_str("<p>Flame graphs, one per profiled cell (kernel call chains; each process's user-space time is one [user] frame):</p>\n<ul>\n");
        links.iter().for_each(|l| html.push_str(l));
        html.push_str("</ul>\n");
    }
    html.push_str("</section>\n");
    Ok(())
}

/// The directory beside a records file (`.` for a bare file name).
pub fn beside(records: &Path) -> PathBuf {
    records
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// How the report links to the records: relative when beside it.
pub fn records_link(records: &Path, dir: &Path) -> String {
    let records_dir = records.parent().unwrap_or(Path::new(""));
    let same = std::fs::canonicalize(if records_dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        records_dir
    })
    .ok()
        == std::fs::canonicalize(dir).ok();
    match (same, records.file_name()) {
        (true, Some(name)) => name.to_string_lossy().into_owned(),
        _ => std::fs::canonicalize(records)
            .unwrap_or_else(|_| records.to_path_buf())
            .display()
            .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
    #[serde(tag = "experiment", rename = "example")]
    struct Example {
        size: u32,
    }

    fn line(size: u32, cell: Option<&str>, error: Option<&str>) -> String {
        let mut record = Record::new(
            "t".into(),
            "loopback",
            &crate::measure::host::HostFacts::default(),
            Example { size },
            error.map(String::from),
        );
        record.cell = cell.map(String::from);
        serde_json::to_string(&record).unwrap()
    }

    #[test]
    fn a_failure_a_resumed_run_measured_again_is_left_out_and_counted() {
        let text = [
            line(1, Some("k1"), Some("refused")),
            line(2, Some("k2"), Some("timed out")),
            line(3, None, Some("no key")),
            line(1, Some("k1"), None),
        ]
        .join("\n");
        let loaded = parse::<Example>(&text, &["example"]);
        let kept: Vec<(u32, bool)> = loaded
            .records
            .iter()
            .map(|r| (r.data.size, r.error.is_some()))
            .collect();
        assert_eq!(kept, [(2, true), (3, true), (1, false)]);
        assert_eq!(loaded.skipped.len(), 1, "{:?}", loaded.skipped);
        assert!(loaded.skipped[0].starts_with("1 failed record(s) left out"));
    }
}
