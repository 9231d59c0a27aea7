//! The report: from a records file alone, one self-contained `report.html`
//! (figures inline as SVG, no scripts, no fetches) with each experiment's
//! table in its source document's shape, the historical figures beside
//! today's, a paragraph reading the records, and the figures; plus one SVG
//! and one PNG per figure, and the three most notable findings.
//!
//! Bad input is reported, not fatal: lines that do not parse, records of a
//! future schema and experiments this netlab does not know are listed as
//! skipped, with why; failed cells are listed as missing.

use super::figures::{self, Figure};
use crate::experiments::stream::report as tables;
use crate::experiments::sweep::cell::summarize;
use crate::record::{Record, RecordData, SCHEMA};
use std::path::{Path, PathBuf};

/// The experiments this netlab reports, in report order.
pub const EXPERIMENTS: [&str; 5] = ["stream", "rpc", "cksum", "login", "output"];

/// A records file as read for a report.
#[derive(Debug, Default)]
pub struct Loaded {
    pub records: Vec<Record>,
    /// What could not be used, and why (one line each).
    pub skipped: Vec<String>,
}

/// Reads `path`, keeping every record this netlab understands.
pub fn load(path: &Path) -> std::io::Result<Loaded> {
    let text = std::fs::read(path)?;
    Ok(parse(&String::from_utf8_lossy(&text)))
}

/// Sorts each line into a record or a reason to skip it.
pub fn parse(text: &str) -> Loaded {
    let mut loaded = Loaded::default();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value = match serde_json::from_str(line) {
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
        if !EXPERIMENTS.contains(&experiment.as_str()) {
            loaded.skipped.push(format!(
                "line {n}: unknown experiment \"{experiment}\" (this netlab reports {})",
                EXPERIMENTS.join(", ")
            ));
            continue;
        }
        match serde_json::from_value::<Record>(value) {
            Ok(record) => loaded.records.push(record),
            Err(e) => loaded.skipped.push(format!(
                "line {n}: a {experiment} record this netlab cannot read: {e}"
            )),
        }
    }
    loaded
}

fn experiment_of(record: &Record) -> &'static str {
    match record.data {
        RecordData::Stream { .. } => "stream",
        RecordData::Rpc { .. } => "rpc",
        RecordData::Cksum { .. } => "cksum",
        RecordData::Login { .. } => "login",
        RecordData::Output { .. } => "output",
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
    /// Cells that failed: what and why.
    pub missing: Vec<String>,
    pub records: usize,
}

/// One cell as people name it: its experiment's varied parameters and its
/// placement.
fn cell_name(r: &Record) -> String {
    let what = match &r.data {
        RecordData::Stream { params, .. } => format!("stream {} B records", params.record),
        RecordData::Rpc { params, .. } => format!("rpc {} {} B", params.column(), params.size),
        RecordData::Cksum { params, .. } => format!("cksum {} B", params.size),
        RecordData::Login { params, .. } => format!(
            "login {} {} {} users",
            params.relay.name(),
            params.protocol.name(),
            params.users
        ),
        RecordData::Output { params, .. } => {
            format!("output {} {}", params.relay.name(), params.protocol.name())
        }
    };
    format!("{what} ({})", r.placement)
}

fn missing_cells(records: &[&Record]) -> Vec<String> {
    records
        .iter()
        .filter(|r| r.error.is_some())
        .map(|r| format!("{}: {}", cell_name(r), r.error.as_deref().unwrap_or("")))
        .collect()
}

/// The sections the records allow, in report order.
pub fn sections(records: &[Record]) -> Vec<Section> {
    let mut out = Vec::new();
    for experiment in EXPERIMENTS {
        let mine: Vec<Record> = records
            .iter()
            .filter(|r| experiment_of(r) == experiment)
            .cloned()
            .collect();
        if mine.is_empty() {
            continue;
        }
        let refs: Vec<&Record> = mine.iter().collect();
        let (title, tables, reading, figures) = match experiment {
            "stream" => stream_section(&mine),
            "rpc" => rpc_section(&mine),
            "cksum" => {
                let (title, mut tables, reading, figures) = cksum_section(&mine);
                if let Some(budget) = packet_budget(records) {
                    tables.push_str(&budget);
                }
                (title, tables, reading, figures)
            }
            "login" => login_section(&mine),
            _ => output_section(&mine),
        };
        out.push(Section {
            experiment,
            title,
            tables,
            reading,
            figures,
            missing: missing_cells(&refs),
            records: mine.len(),
        });
    }
    out
}

type Parts = (String, String, String, Vec<Figure>);

fn stream_section(records: &[Record]) -> Parts {
    let (designed, records): (Vec<Record>, Vec<Record>) = records.iter().cloned().partition(
        |r| matches!(&r.data, RecordData::Stream { params, .. } if params.design.is_some()),
    );
    let records = &records[..];
    let (sweep, single): (Vec<Record>, Vec<Record>) = records.iter().cloned().partition(
        |r| matches!(&r.data, RecordData::Stream { params, .. } if params.sweep.is_some()),
    );
    let mut text = String::new();
    // Factorial designs (`netlab ablate`): their analysis and one
    // interaction plot per pair of factors.
    let (design_text, design_reading, design_figures) =
        crate::experiments::ablate::report::designs(&designed);
    text.push_str(&design_text);
    if !single.is_empty() {
        text.push_str(&tables::stream_table("netlab stream", &single));
        if let Some(line) = tables::berkeley_then_now(&single) {
            text.push_str(&line);
            text.push('\n');
        }
        if let Some(barrier) = tables::barrier_text(&single) {
            text.push_str(&barrier);
        }
    }
    let summary = summarize(&sweep, crate::analysis::knee::DEFAULT_FRACTION);
    let mut reading = String::new();
    if !summary.points.is_empty() {
        text.push_str(&crate::experiments::sweep::report::sweep_table(
            "netlab sweep stream",
            &summary,
            &sweep,
        ));
        let first = &summary.points[0];
        let best = summary
            .points
            .iter()
            .max_by(|a, b| {
                a.throughput_mb_s
                    .median
                    .total_cmp(&b.throughput_mb_s.median)
            })
            .expect("not empty");
        reading.push_str(&format!(
            "Throughput rises from {:.0} MB/s with {}-byte records to {:.0} MB/s with {}-byte records. ",
            first.throughput_mb_s.median, first.record, best.throughput_mb_s.median, best.record
        ));
        // The model's knee uses every size; the first size to clear the
        // threshold can be moved by one outlier.
        match (&summary.model_knee, &summary.knee) {
            (Some(m), Some(k)) => reading.push_str(&format!(
                "The knee ({:.0}% of the peak) is at about {:.0} bytes by the cost model (95% interval {:.0}-{:.0} over the repetitions); the first measured size within {:.0}% of the best is {} bytes. ",
                m.fraction * 100.0,
                m.size,
                m.low,
                m.high,
                (1.0 - k.fraction) * 100.0,
                k.size
            )),
            (None, Some(k)) => reading.push_str(&format!(
                "The knee ({:.0}% of the plateau) is at {} bytes. ",
                k.fraction * 100.0,
                k.size
            )),
            _ => {}
        }
        if let Some(m) = &summary.model {
            reading.push_str(&format!(
                "The fitted cost per record is {:.2} µs fixed plus {:.3} ns per byte (r² {:.3}): below about {:.0} bytes the fixed cost (system calls, wake-ups, per-packet work) dominates, above it the per-byte cost (copies) does. ",
                m.fixed * 1e6,
                m.per_byte * 1e9,
                m.r_squared,
                m.fixed / m.per_byte.max(1e-15)
            ));
        }
        reading.push_str(&format!(
            "At the plateau the bottleneck was {}.",
            best.bottleneck.describe()
        ));
    } else if !single.is_empty() {
        reading.push_str(
            "Single runs only (no size sweep): the table gives each run's throughput and CPU.",
        );
    }
    reading.push_str(&design_reading);
    let mut figures: Vec<Figure> = figures::stream_throughput(records).into_iter().collect();
    figures.extend(design_figures);
    (
        "stream: bulk transfer, throughput vs record size (1981, 1988)".into(),
        text,
        reading,
        figures,
    )
}

fn rpc_section(records: &[Record]) -> Parts {
    let findings = crate::experiments::rpc::analysis::findings_from_records(records);
    let text = crate::experiments::rpc::report::table(
        &crate::experiments::rpc::analysis::measured_records(records),
        &findings,
    );
    let reading = if findings.is_empty() {
        "No cliffs: every size's median call is within 3x of what its neighbours predict.".into()
    } else {
        let cells: Vec<String> = findings
            .iter()
            .map(|f| {
                format!(
                    "{} {} B ({:.1} ms per call, {:.0}x)",
                    f.column,
                    f.size,
                    f.ms_per_100_calls / 100.0,
                    f.ratio
                )
            })
            .collect();
        let mut s = format!(
            "Cliffs, far above what their neighbours predict: {}.",
            cells.join(", ")
        );
        // Each kind of diagnosis once (the same cause with other numbers
        // is the same finding; the table below has every cell's).
        let mut causes: Vec<String> = Vec::new();
        for f in &findings {
            let Some(d) = &f.diagnosis else { continue };
            let kind: String = d.cause.chars().filter(|c| !c.is_ascii_digit()).collect();
            if !causes.contains(&kind) {
                causes.push(kind);
                s.push_str(&format!(" {} {} B: {}", f.column, f.size, d.cause));
            }
        }
        s
    };
    (
        "rpc: Sun RPC over TCP and UDP, the 4096-byte cliff (1989)".into(),
        text,
        reading,
        figures::rpc_time(records).into_iter().collect(),
    )
}

fn cksum_section(records: &[Record]) -> Parts {
    let text = crate::experiments::cksum::report::table(records);
    let results: Vec<&crate::experiments::cksum::record::CksumResult> = records
        .iter()
        .filter_map(|r| match &r.data {
            RecordData::Cksum {
                result: Some(r), ..
            } => Some(r.as_ref()),
            _ => None,
        })
        .collect();
    let mut reading = String::new();
    if let Some(largest) = results.iter().max_by_key(|r| r.size) {
        let hot: Vec<_> = largest.rows.iter().filter(|r| !r.cold).collect();
        let best_sum = hot
            .iter()
            .filter(|r| r.kind == crate::experiments::cksum::record::Kind::Checksum)
            .max_by(|a, b| a.gb_s.total_cmp(&b.gb_s));
        let memcpy = hot.iter().find(|r| r.variant == "memcpy");
        if let (Some(sum), Some(copy)) = (best_sum, memcpy) {
            reading = format!(
                "At {} bytes (hot) the fastest checksum ({}) runs at {:.1} GB/s, {:.0}% of the read limit, and memcpy at {:.1} GB/s: a checksum now costs less than a copy, where in 1988 each was a pass over the bytes at about the same cost. The per-packet budget below puts both beside the rest of a packet's cost.",
                largest.size,
                sum.variant,
                sum.gb_s,
                100.0 / sum.fraction_of_limit.max(1e-9),
                copy.gb_s
            );
        }
    }
    (
        "cksum: the Internet checksum and copy costs per KB (1988)".into(),
        text,
        reading,
        figures::cksum_speed(records).into_iter().collect(),
    )
}

/// Van Jacobson's per-packet budget for today's host: the stream sweep's
/// fitted cost of one packet-sized record (fixed + per byte), split into
/// copies and checksum by the cksum experiment's per-byte costs, and the
/// packet rate it allows, beside his 1988 Sun-3/60 figures. `None` unless
/// the records hold both a fitted sweep and checksum timings.
pub fn packet_budget(records: &[Record]) -> Option<String> {
    let sweep = figures::sweep_records(records);
    let model = summarize(&sweep, crate::analysis::knee::DEFAULT_FRACTION).model?;
    let h = &crate::report::historical::figures().bsd_speedups;
    let bytes = h.packet_data_bytes as f64;
    let (copy_ns_per_byte, sum_ns_per_byte) =
        crate::experiments::cksum::analysis::per_byte_costs(records, bytes as usize)?;
    let total_us = (model.fixed + model.per_byte * bytes) * 1e6;
    let fixed_us = model.fixed * 1e6;
    // On loopback a byte is copied twice (into the sender's socket buffer,
    // out of the receiver's) and never checksummed in software.
    let copies_us = 2.0 * copy_ns_per_byte * bytes / 1e3;
    let checksum_us = sum_ns_per_byte * bytes / 1e3;
    let rest_us = (total_us - fixed_us - copies_us).max(0.0);
    let then = |key: &str| h.per_packet_us.get(key).copied().unwrap_or(f64::NAN);
    Some(format!(
        "\nper-packet budget in Van Jacobson's form, {bytes:.0} B of data per packet (today: the stream sweep's fit on this host's placement, the cksum experiment's hot per-byte costs):\n\
         | per packet | today µs | 1988 Sun-3/60 µs |\n\
         |---|---|---|\n\
         | copy (x2 on loopback) | {copies_us:.3} | {:.0} (one copy) |\n\
         | checksum (software, if done: loopback skips it) | {checksum_us:.3} | {:.0} |\n\
         | other per-byte work | {rest_us:.3} | {:.0} (LANCE DMA) |\n\
         | fixed (system calls, protocol, wake-ups) | {fixed_us:.3} | {:.0} (budget) |\n\
         | total | {total_us:.3} | {:.0} observed, {:.0} budget at 10 Mbit/s |\n\
         packets per second the budget allows: today {:.0} ({:.0} MB/s of data), 1988 {:.0} at the 1200 µs budget.\n",
        then("copy"),
        then("checksum"),
        then("lance_dma"),
        then("fixed_budget"),
        then("observed"),
        then("budget_at_10mbit"),
        1e6 / total_us,
        bytes / total_us,
        1e6 / then("budget_at_10mbit"),
    ))
}

fn login_section(all: &[Record]) -> Parts {
    // Cells on a preset 1989-class host (a limit search) are their own table.
    let (budgeted, free): (Vec<Record>, Vec<Record>) = all.iter().cloned().partition(
        |r| matches!(&r.data, RecordData::Login { params, .. } if params.host_cpu_preset.is_some()),
    );
    let records = &free[..];
    let mut text = crate::experiments::login::report::table(records);
    let limits = crate::experiments::login::report::design_limits(&budgeted);
    if !limits.is_empty() {
        text.push('\n');
        text.push_str(&limits);
    }
    let mut reading = String::new();
    let mut counts: Vec<usize> = records
        .iter()
        .filter_map(|r| match &r.data {
            RecordData::Login {
                params,
                result: Some(_),
            } => Some(params.users),
            _ => None,
        })
        .collect();
    counts.sort_unstable();
    counts.dedup();
    for users in counts {
        let cells: Vec<(&str, &str, f64, &str)> = records
            .iter()
            .filter_map(|r| match &r.data {
                RecordData::Login {
                    params,
                    result: Some(res),
                } if params.users == users => Some((
                    params.relay.name(),
                    params.protocol.name(),
                    res.server_cpu_per_keystroke_us,
                    res.verdict.as_str(),
                )),
                _ => None,
            })
            .collect();
        let cheapest = cells.iter().min_by(|a, b| a.2.total_cmp(&b.2));
        let dearest = cells.iter().max_by(|a, b| a.2.total_cmp(&b.2));
        let all_normal = cells.iter().all(|c| c.3 == "normal");
        if let (Some(c), Some(d)) = (cheapest, dearest) {
            reading.push_str(&format!(
                "At {users} users the cheapest server per keystroke is {} ({}, {:.0} µs) and the dearest {} ({}, {:.0} µs, {:.1}x); {}. ",
                c.0,
                c.1,
                c.2,
                d.0,
                d.1,
                d.2,
                d.2 / c.2.max(1e-9),
                if all_normal {
                    "every cell's echo stayed normal (p99 at most 100 ms)".to_string()
                } else {
                    let bad: Vec<String> = cells
                        .iter()
                        .filter(|c| c.3 != "normal")
                        .map(|c| format!("{} {} {}", c.0, c.1, c.3))
                        .collect();
                    format!("not normal: {}", bad.join(", "))
                }
            ));
        }
    }
    reading.push_str("In 1989 the normal rlogind was unusable at 48 users on a Sun-3; today the echo path costs tens to hundreds of microseconds, mostly kernel work every design pays alike.");
    if let Some(line) = limits.lines().rev().find(|l| l.starts_with("Here ")) {
        reading.push_str(&format!(" On a 1989-class host (a CPU budget): {line}"));
    }
    (
        "login: users typing through each relay design (1989)".into(),
        text,
        reading,
        figures::login_figures(records),
    )
}

fn output_section(records: &[Record]) -> Parts {
    let text = crate::experiments::login::report::output_table(records);
    let cells: Vec<(String, &crate::experiments::output::cell::OutputResult)> = records
        .iter()
        .filter_map(|r| match &r.data {
            RecordData::Output {
                params,
                result: Some(res),
            } => Some((
                format!("{} {}", params.relay.name(), params.protocol.name()),
                res.as_ref(),
            )),
            _ => None,
        })
        .collect();
    let mut reading = String::new();
    let fastest = cells
        .iter()
        .max_by(|a, b| a.1.kbytes_per_s.total_cmp(&b.1.kbytes_per_s));
    let cheapest = cells.iter().min_by(|a, b| {
        a.1.server_cpu_us_per_kb
            .total_cmp(&b.1.server_cpu_us_per_kb)
    });
    if let (Some(f), Some(c)) = (fastest, cheapest) {
        let segment = cells
            .iter()
            .map(|c| c.1.mean_segment_bytes)
            .fold(f64::INFINITY, f64::min);
        reading = format!(
            "The fastest path was {} at {:.0} KB/s of terminal output; the cheapest server per KB {} at {:.1} µs/KB, where 1987's telnet host spent a whole VAX on under 1 KB/s. The smallest mean segment was {:.0} bytes, against 1987's ~100. On loopback Nagle's algorithm and the client's delayed ACK, not the relay, set the pace (netlab output --nodelay).",
            f.0, f.1.kbytes_per_s, c.0, c.1.server_cpu_us_per_kb, segment
        );
    }
    (
        "output: typing files to a terminal through a remote login (1987)".into(),
        text,
        reading,
        figures::output_figures(records),
    )
}

/// The most notable findings, most striking first (at most three).
pub fn notable(records: &[Record]) -> Vec<String> {
    let mut found = Vec::new();
    let rpc: Vec<Record> = records
        .iter()
        .filter(|r| matches!(r.data, RecordData::Rpc { .. }))
        .cloned()
        .collect();
    for f in crate::experiments::rpc::analysis::findings_from_records(&rpc)
        .iter()
        .take(1)
    {
        let mut s = format!(
            "RPC over {} stalls at {} bytes ({:.0}x what its neighbours predict, {:.1} ms per call)",
            f.column,
            f.size,
            f.ratio,
            f.ms_per_100_calls / 100.0
        );
        if let Some(d) = &f.diagnosis {
            let cause = d.cause.split(". ").next().unwrap_or(&d.cause);
            s.push_str(&format!(": {}", cause.trim_end_matches('.')));
            if let Some((change, before, after)) = d.fixes.iter().min_by(|a, b| a.2.total_cmp(&b.2))
            {
                s.push_str(&format!(
                    "; fixed by {change} ({before:.2} -> {after:.3} ms per call)"
                ));
            }
        }
        found.push(s);
    }
    let sections = sections(records);
    for section in &sections {
        let sentences: Vec<&str> = section.reading.split_inclusive(". ").collect();
        // The stream's knee and cost split say more than its first sentence.
        let pick = if section.experiment == "stream" {
            sentences
                .iter()
                .find(|s| s.contains("fitted cost"))
                .or(sentences.first())
        } else {
            sentences.first()
        };
        let first_sentence = pick.map_or(String::new(), |s| s.trim().to_string());
        match section.experiment {
            "login" | "output" | "stream" if !first_sentence.is_empty() => {
                found.push(format!("{}: {first_sentence}", section.experiment));
            }
            _ => {}
        }
    }
    found.truncate(3);
    found
}

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

pub(crate) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// What `write` produced.
#[derive(Debug)]
pub struct Written {
    pub html: PathBuf,
    pub figures: Vec<PathBuf>,
    pub notable: Vec<String>,
    pub skipped: Vec<String>,
    /// Figures that could not be drawn or rasterised, and why.
    pub figure_errors: Vec<String>,
}

/// Writes report.html and every figure's SVG and PNG into `dir`.
/// `records_link` is how the page links to the raw records.
pub fn write(loaded: &Loaded, records_link: &str, dir: &Path) -> std::io::Result<Written> {
    std::fs::create_dir_all(dir)?;
    let sections = sections(&loaded.records);
    let notable = notable(&loaded.records);
    let mut written = Written {
        html: dir.join("report.html"),
        figures: Vec::new(),
        notable: notable.clone(),
        skipped: loaded.skipped.clone(),
        figure_errors: Vec::new(),
    };
    let mut html = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>netlab report</title>\n<style>\nbody{{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}}\npre{{background:#f6f6f6;padding:.8em;white-space:pre-wrap;overflow-wrap:anywhere;font-size:12px}}\nfigure{{margin:1.5em 0;max-width:100%}}figcaption{{font-size:13px;color:#555}}\n.reading{{font-size:15px;line-height:1.5}}\n.skipped,.missing{{color:#a40}}\nsvg{{max-width:100%;height:auto}}\n{}\n</style></head><body>\n<h1>netlab report</h1>\n",
        super::htmltext::CSS
    );
    let first = loaded.records.first();
    html.push_str(&format!(
        "<p>{} records from <a href=\"{}\">{}</a>{}.</p>\n",
        loaded.records.len(),
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
    ));
    if !notable.is_empty() {
        html.push_str("<h2>Most notable</h2>\n<ol>\n");
        for n in &notable {
            html.push_str(&format!("<li>{}</li>\n", escape(n)));
        }
        html.push_str("</ol>\n");
    }
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
    for section in &sections {
        html.push_str(&format!(
            "<section id=\"{}\">\n<h2>{}</h2>\n<p class=\"reading\">{}</p>\n",
            section.experiment,
            escape(&section.title),
            escape(&section.reading)
        ));
        for figure in &section.figures {
            match figures::render_svg(figure) {
                Ok(svg) => {
                    let svg_path = dir.join(format!("{}.svg", figure.id));
                    std::fs::write(&svg_path, &svg)?;
                    written.figures.push(svg_path);
                    match figures::render_png(&svg) {
                        Ok(png) => {
                            let png_path = dir.join(format!("{}.png", figure.id));
                            std::fs::write(&png_path, png)?;
                            written.figures.push(png_path);
                        }
                        Err(e) => written
                            .figure_errors
                            .push(format!("{}.png: {e}", figure.id)),
                    }
                    // Inline: the SVG document without its XML prologue,
                    // with its title and a text alternative for readers
                    // that cannot see it.
                    let body = svg.find("<svg").map_or(svg.as_str(), |start| &svg[start..]);
                    let body = accessible(body, &figure.title, &figures::describe(figure));
                    html.push_str(&format!(
                        "<figure id=\"{}\">{body}<figcaption>{} ({}.svg, {}.png)</figcaption></figure>\n",
                        figure.id,
                        escape(&figure.caption),
                        figure.id,
                        figure.id
                    ));
                }
                Err(e) => written.figure_errors.push(e),
            }
        }
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
    profile_section(&loaded.records, dir, &mut html, &mut written)?;
    let absent: Vec<&str> = EXPERIMENTS
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
    html.push_str("</body></html>\n");
    std::fs::write(&written.html, html)?;
    Ok(written)
}
/// With `--profile`: the layer tables over every profiled cell, and a
/// flame graph per cell (`flame-N.svg`, N its line among the records),
/// linked.
fn profile_section(
    records: &[Record],
    dir: &Path,
    html: &mut String,
    written: &mut Written,
) -> std::io::Result<()> {
    let mut links = Vec::new();
    for (i, record) in records.iter().enumerate() {
        let Some(profile) = &record.profile else {
            continue;
        };
        let name = cell_name(record);
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
        text
    }
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
