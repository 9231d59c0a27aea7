//! `netlab report`: snapshots of the tables and figure data built from a
//! fixed records file (a real `netlab lab` run on this project's machine),
//! the page rendered by headless Chromium, CSV export, and records files
//! that are empty, truncated, mixed with other versions or experiments, or
//! hold failed cells.

use crate::common;
use crate::common::words;
use common::netlab;
use netlab::experiments::page::{self, Report};
use netlab::experiments::{RECORDED, RecordData};
use netlab::report::html::{self, Page};
use std::path::{Path, PathBuf};

const FIXTURE: &str = "tests/fixtures/lab-records.jsonl";

fn fixture() -> html::Loaded<RecordData> {
    let loaded = page::load(Path::new(FIXTURE)).unwrap();
    assert!(loaded.skipped.is_empty(), "{:?}", loaded.skipped);
    loaded
}

#[test]
fn tables_and_readings_match_their_snapshots() {
    let loaded = fixture();
    let sections = Report.sections(&loaded.records);
    let names: Vec<&str> = sections.iter().map(|s| s.experiment).collect();
    assert_eq!(
        names,
        ["stream", "rpc", "cksum", "login", "output", "broadcast"]
    );
    for section in &sections {
        insta::assert_snapshot!(
            format!("tables-{}", section.experiment),
            format!("{}\n\n{}", section.reading, section.tables)
        );
    }
    insta::assert_snapshot!("notable", Report.notable(&loaded.records).join("\n"));
}

#[test]
fn figure_data_matches_its_snapshots() {
    let loaded = fixture();
    let all = page::figures(&loaded.records);
    let ids: Vec<&str> = all.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "stream-throughput",
            "rpc-time",
            "rpc-time-udp",
            "cksum-speed",
            "cksum-speed-2",
            "cksum-speed-3",
            "login-cpu",
            "login-echo",
            "login-cost",
            "login-then",
            "output-cpu",
            "output-segments",
            "broadcast-storm"
        ]
    );
    for figure in &all {
        // Small multiples: no panel holds more than six lines.
        assert!(
            figure.series.len() <= 6,
            "{}: {}",
            figure.id,
            figure.series.len()
        );
        // Every figure names its units and where its points came from.
        assert!(
            figure.y_label.contains('('),
            "{}: {}",
            figure.id,
            figure.y_label
        );
        assert!(figure.caption.contains("placement:"), "{}", figure.id);
        insta::assert_json_snapshot!(format!("figure-{}", figure.id), figure);
    }
    // The RPC figure marks the loopback cliffs the lab found.
    let rpc = all.iter().find(|f| f.id == "rpc-time").unwrap();
    assert!(
        rpc.marks
            .iter()
            .any(|m| m.label.starts_with("TCP local 4096 B")),
        "{:?}",
        rpc.marks
    );
}

fn chromium() -> &'static str {
    let path = "/usr/bin/chromium";
    assert!(
        Path::new(path).exists(),
        "{path} is missing (apt-get install chromium; .ci/run installs it)"
    );
    path
}

/// Loads `page` in headless Chromium: its DOM, and the console messages
/// it logged.
fn render(page: &Path, screenshot: Option<&Path>) -> (String, Vec<String>) {
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let mut cmd = std::process::Command::new(chromium());
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--enable-logging=stderr",
        "--log-level=0",
        "--window-size=1280,900",
    ]);
    match screenshot {
        Some(path) => cmd.arg(format!("--screenshot={}", path.display())),
        None => cmd.arg("--dump-dom"),
    };
    let run = cmd.arg(&url).output().unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let console = String::from_utf8_lossy(&run.stderr)
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(String::from)
        .collect();
    (String::from_utf8_lossy(&run.stdout).into_owned(), console)
}

#[test]
fn chromium_renders_every_figure_without_console_errors() {
    let dir = tempfile::tempdir().unwrap();
    let run = netlab()
        .args(["report", FIXTURE, "-o"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let page = dir.path().join("report.html");
    let text = std::fs::read_to_string(&page).unwrap();
    // Self-contained: nothing to fetch, nothing to run.
    for forbidden in ["<script", "<link", "src=", "url("] {
        assert!(!text.contains(forbidden), "the page contains {forbidden}");
    }
    let (dom, console) = render(&page, None);
    assert!(console.is_empty(), "console: {console:?}");
    let figures = page::figures(&fixture().records);
    for figure in &figures {
        assert!(
            dom.contains(&format!("<figure id=\"{}\"><svg", figure.id)),
            "{} not in the rendered page",
            figure.id
        );
        for ext in ["svg", "png"] {
            let file = dir.path().join(format!("{}.{ext}", figure.id));
            assert!(std::fs::metadata(&file).unwrap().len() > 1000, "{file:?}");
        }
    }
    // A screenshot of the first screen for the CI's artifacts (and the
    // README's docs/report.png).
    let artifacts = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let shot = artifacts.join("report.png");
    render(&page, Some(&shot));
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000);
    // On paper, through the print stylesheet: every fold open, so the
    // printed page holds the evidence the screen folds away.
    assert!(text.contains("@media print{"), "a print stylesheet");
    assert!(text.contains("details::details-content{content-visibility:visible"));
    let pdf = dir.path().join("report.pdf");
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let run = std::process::Command::new(chromium())
        .args(words(
            "--headless --no-sandbox --disable-gpu --no-pdf-header-footer",
        ))
        .arg(format!("--print-to-pdf={}", pdf.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let printed = std::fs::read(&pdf).unwrap();
    assert!(
        printed.starts_with(b"%PDF") && printed.len() > 50_000,
        "{} bytes",
        printed.len()
    );
}

#[test]
fn the_console_check_catches_a_failing_page() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("bad.html");
    std::fs::write(
        &page,
        "<html><body><script>undefinedFn();</script></body></html>",
    )
    .unwrap();
    let (_, console) = render(&page, None);
    assert!(
        console.iter().any(|l| l.contains("undefinedFn")),
        "{console:?}"
    );
}

#[test]
fn csv_has_a_row_per_record_and_a_column_per_field() {
    let dir = tempfile::tempdir().unwrap();
    let run = netlab()
        .args(["report", FIXTURE, "--csv", "-o"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let loaded = fixture();
    let of = |experiment: &str| {
        loaded
            .records
            .iter()
            .filter(|r| serde_json::to_value(r).unwrap()["experiment"] == experiment)
            .count()
    };
    for &experiment in RECORDED {
        let path = dir.path().join(format!("{experiment}.csv"));
        if of(experiment) == 0 {
            // An experiment the fixture has no records of gets no file.
            assert!(!path.exists(), "{experiment}");
            continue;
        }
        let mut reader = csv::Reader::from_path(&path).unwrap();
        let header = reader.headers().unwrap().clone();
        assert!(header.iter().any(|h| h == "experiment"), "{experiment}");
        assert!(header.iter().any(|h| h == "host.cpu_model"), "{experiment}");
        let rows = reader.records().count();
        assert_eq!(rows, of(experiment), "{experiment}");
    }
    let mut login = csv::Reader::from_path(dir.path().join("login.csv")).unwrap();
    let header = login.headers().unwrap().clone();
    let column = header
        .iter()
        .position(|h| h == "result.server_cpu_per_keystroke_us")
        .expect("a nested result field is a column");
    let first = login.records().next().unwrap().unwrap();
    assert!(first[column].parse::<f64>().unwrap() > 0.0);
}

#[test]
fn bad_records_files_render_what_they_can_and_say_what_they_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let lines: Vec<String> = std::fs::read_to_string(FIXTURE)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let login = lines
        .iter()
        .find(|l| l.contains("\"experiment\":\"login\""))
        .unwrap();
    // A failed cell: no result, an error.
    let mut failed: serde_json::Value = serde_json::from_str(login).unwrap();
    failed["result"] = serde_json::Value::Null;
    failed["error"] = "the server refused the sessions".into();
    failed["params"]["users"] = 4096.into();
    // A record of a future netlab, another experiment, a truncated line.
    let mut future: serde_json::Value = serde_json::from_str(login).unwrap();
    future["schema"] = 99.into();
    future["netlab_version"] = "9.0.0".into();
    let mut unknown: serde_json::Value = serde_json::from_str(login).unwrap();
    unknown["experiment"] = "quic".into();
    let truncated = &lines[0][..lines[0].len() / 2];
    let text = [
        login.clone(),
        failed.to_string(),
        future.to_string(),
        unknown.to_string(),
        truncated.to_string(),
    ]
    .join("\n");
    let mixed = dir.path().join("mixed.jsonl");
    std::fs::write(&mixed, text).unwrap();
    let run = netlab()
        .args(["report"])
        .arg(&mixed)
        .arg("-o")
        .arg(dir.path().join("mixed"))
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    let page = std::fs::read_to_string(dir.path().join("mixed/report.html")).unwrap();
    for said in [
        "line 3: from a future netlab (record schema 99, netlab 9.0.0)",
        "line 4: unknown experiment \"quic\"",
        "line 5: not a whole JSON record (truncated?)",
    ] {
        assert!(stderr.contains(said), "stderr lacks {said:?}: {stderr}");
        assert!(
            page.contains(&said.replace('"', "&quot;")),
            "page lacks {said:?}"
        );
    }
    assert!(page.contains("4096 users (loopback): the server refused the sessions"));
    assert!(page.contains("<figure id=\"login-cpu\"><svg"));
    let (_, console) = render(&dir.path().join("mixed/report.html"), None);
    assert!(console.is_empty(), "{console:?}");

    // A byte-order mark before the first record does not cost that record.
    let bom = dir.path().join("bom.jsonl");
    std::fs::write(&bom, format!("\u{feff}{login}\n")).unwrap();
    let run = netlab()
        .args(["report"])
        .arg(&bom)
        .arg("-o")
        .arg(dir.path().join("bom"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    assert!(!stderr.contains("line 1"), "{stderr}");

    // Nothing usable: the page says so, the exit status is non-zero.
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let run = netlab()
        .args(["report"])
        .arg(&empty)
        .arg("-o")
        .arg(dir.path().join("empty"))
        .output()
        .unwrap();
    assert!(!run.status.success());
    assert!(String::from_utf8_lossy(&run.stderr).contains("holds no record"));
    let page = std::fs::read_to_string(dir.path().join("empty/report.html")).unwrap();
    assert!(page.contains("No records to report."));

    // A file that is not there.
    let run = netlab()
        .args(["report", "/nonexistent/results.jsonl"])
        .output()
        .unwrap();
    assert!(!run.status.success());
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("cannot read /nonexistent/results.jsonl")
    );
}

/// Runs `script` (which ends the page's `</body>`) over a copy of `page`
/// in headless Chromium at `width` px, and returns the findings it left in
/// the body's `attribute`, `; `-separated.
fn run_probe(page: &Path, script: &str, width: u32, attribute: &str) -> Vec<String> {
    let html = std::fs::read_to_string(page).unwrap();
    let probed = page.with_file_name(format!("probe-{attribute}-{width}.html"));
    std::fs::write(&probed, html.replace("</body>", script)).unwrap();
    let url = format!("file://{}", probed.canonicalize().unwrap().display());
    let run = std::process::Command::new(chromium())
        .args(words(
            "--headless --no-sandbox --disable-gpu --hide-scrollbars",
        ))
        .arg(format!("--window-size={width},3000"))
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let dom = String::from_utf8_lossy(&run.stdout);
    let marker = format!("{attribute}=\"");
    let start = dom.find(&marker).expect("the probe ran") + marker.len();
    let found = &dom[start..start + dom[start..].find('"').unwrap()];
    found
        .split("; ")
        .filter(|s| !s.is_empty())
        .map(|s| s.replace("&quot;", "\""))
        .collect()
}

/// What overflows its container in `page` at `width` px: each table,
/// figure, SVG and text block whose right edge passes its parent's, and
/// the page itself when it is wider than the window. The check runs as a
/// script added to a copy of the page (the report itself has none).
fn overflows(page: &Path, width: u32) -> Vec<String> {
    let probe = r#"<script>
const bad = [];
const w = document.documentElement.clientWidth;
for (const el of document.querySelectorAll('table, figure, svg, pre, .tw')) {
  const parent = el.parentElement.getBoundingClientRect();
  const r = el.getBoundingClientRect();
  if (r.right > parent.right + 1 || r.left < parent.left - 1) {
    bad.push(el.tagName + '#' + (el.id || el.closest('[id]')?.id || '?') + ' ' + Math.round(r.width) + '>' + Math.round(parent.width));
  }
}
if (document.documentElement.scrollWidth > w + 1) bad.push('page ' + document.documentElement.scrollWidth + '>' + w);
document.body.setAttribute('data-overflow', bad.join('; '));
</script></body>"#;
    run_probe(page, probe, width, "data-overflow")
}

#[test]
fn no_table_or_figure_overflows_at_desktop_or_phone_width() {
    let dir = tempfile::tempdir().unwrap();
    let run = netlab()
        .args(["report", FIXTURE, "-o"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(run.status.success());
    let page = dir.path().join("report.html");
    let text = std::fs::read_to_string(&page).unwrap();
    // Tables are tables now, with the source's columns apart.
    assert!(text.matches("<table>").count() >= 5, "few tables");
    assert!(text.contains("class=\"n"), "right-aligned numbers");
    assert!(text.contains("then-first"), "then columns grouped");
    // Each figure has a title and a text alternative.
    let figures = text.matches("<figure id=").count();
    assert_eq!(
        text.matches("<svg role=\"img\" aria-label=").count(),
        figures
    );
    assert_eq!(text.matches("<desc>").count(), figures);
    assert!(
        text.contains("points, from "),
        "the alternative gives each series' range"
    );
    for width in [1400, 1280, 400] {
        let found = overflows(&page, width);
        assert!(found.is_empty(), "at {width} px: {found:?}");
    }
}

#[test]
fn the_overflow_check_catches_a_table_wider_than_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("wide.html");
    let cells = "<td>wide-cell-that-does-not-wrap</td>".repeat(30);
    std::fs::write(
        &page,
        format!("<html><body><div><table><tr>{cells}</tr></table></div></body></html>"),
    )
    .unwrap();
    let found = overflows(&page, 400);
    assert!(found.iter().any(|f| f.starts_with("TABLE")), "{found:?}");
    assert!(found.iter().any(|f| f.starts_with("page")), "{found:?}");
}

/// What collides in `page`'s figures, as Chromium lays them out: two
/// texts whose boxes overlap, a text passing its figure's edge, and a
/// mark's number over a data line or point. The check runs as a script
/// added to a copy of the page.
fn collisions(page: &Path) -> Vec<String> {
    let probe = r#"<script>
const bad = [];
const overlap = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5;
const crosses = (box, p, q) => {
  // Liang-Barsky: does the segment p-q enter the box?
  let t0 = 0, t1 = 1; const dx = q.x - p.x, dy = q.y - p.y;
  for (const [pp, qq] of [[-dx, p.x - box.x], [dx, box.x + box.width - p.x], [-dy, p.y - box.y], [dy, box.y + box.height - p.y]]) {
    if (pp === 0) { if (qq < 0) return false; } else { const r = qq / pp; if (pp < 0) t0 = Math.max(t0, r); else t1 = Math.min(t1, r); }
  }
  return t0 <= t1;
};
for (const svg of document.querySelectorAll('figure > svg')) {
  const id = svg.parentElement.id;
  const edge = svg.getBoundingClientRect();
  const texts = [...svg.querySelectorAll('text')].map(t => [t, t.getBoundingClientRect()]);
  for (let i = 0; i < texts.length; i++) {
    const [t, r] = texts[i];
    if (r.left < edge.left - 0.5 || r.right > edge.right + 0.5 || r.top < edge.top - 0.5 || r.bottom > edge.bottom + 0.5) bad.push(id + ': "' + t.textContent + '" passes the edge');
    for (let j = i + 1; j < texts.length; j++) {
      if (overlap(r, texts[j][1])) bad.push(id + ': "' + t.textContent + '" overlaps "' + texts[j][0].textContent + '"');
    }
  }
  for (const label of svg.querySelectorAll('text.mark-label')) {
    const box = label.getBBox();
    for (const line of svg.querySelectorAll('polyline.data')) {
      const pts = [...line.points];
      for (let k = 1; k < pts.length; k++) if (crosses(box, pts[k - 1], pts[k])) { bad.push(id + ': mark ' + label.textContent + ' is on a line'); break; }
    }
    for (const dot of svg.querySelectorAll('circle.point')) {
      const c = {x: dot.cx.baseVal.value, y: dot.cy.baseVal.value}, r = dot.r.baseVal.value;
      if (c.x + r > box.x && c.x - r < box.x + box.width && c.y + r > box.y && c.y - r < box.y + box.height) bad.push(id + ': mark ' + label.textContent + ' is on a point');
    }
  }
}
// The first screen: a row an experiment, its limit named, all of it
// above the fold of a 1280 x 900 window.
const rows = [...document.querySelectorAll('table.first tbody tr')];
if (rows.length === 0) bad.push('no first-screen table');
for (const row of rows) {
  const limit = row.querySelector('td.limit');
  const name = row.querySelector('a')?.textContent || '?';
  if (!limit || limit.textContent.trim().length < 5) bad.push('first screen: ' + name + ' names no limit');
  if (row.getBoundingClientRect().bottom > 900) bad.push('first screen: ' + name + ' is below the fold');
}
document.body.setAttribute('data-first-rows', rows.length);
document.body.setAttribute('data-collisions', bad.join('; '));
</script></body>"#;
    run_probe(page, probe, 1280, "data-collisions")
}

#[test]
fn every_figure_keeps_its_words_apart_inside_its_edges_and_off_its_data_and_has_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let run = netlab()
        .args(["report", FIXTURE, "-o"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let page = dir.path().join("report.html");
    let found = collisions(&page);
    assert!(found.is_empty(), "{found:#?}");
    // The first screen says what ran, for how long and over which links,
    // and has a row for each section, with its limit.
    let text = std::fs::read_to_string(&page).unwrap();
    assert!(
        text.contains("What ran: 132 cells (104 on loopback, 23 on netns, 5 on local), from "),
        "what ran"
    );
    assert!(
        text.contains("(2m 44s); links made for them: veth pair, tbf 10 Mbit/s"),
        "its links"
    );
    let sections = Report.sections(&fixture().records);
    assert_eq!(
        text.matches("<td class=\"limit\" data-label=\"limited by\">")
            .count(),
        sections.len(),
        "a first-screen row a section"
    );
    for s in &sections {
        assert!(
            text.contains(&format!(
                "<td data-label=\"experiment\"><a href=\"#{}\">",
                s.experiment
            )),
            "{}",
            s.experiment
        );
    }
    // Each figure: a caption linking its data, and the data there, a row
    // per point of every series.
    let figures = page::figures(&fixture().records);
    for figure in &figures {
        assert!(
            text.contains(&format!("<a href=\"{}.csv\">", figure.id)),
            "{}: no link to its data",
            figure.id
        );
        let mut data =
            csv::Reader::from_path(dir.path().join(format!("{}.csv", figure.id))).unwrap();
        let rows = data.records().count();
        let points: usize = figure.series.iter().map(|s| s.points.len()).sum();
        assert_eq!(rows, points + figure.marks.len(), "{}", figure.id);
    }
    assert_eq!(
        text.matches("<figcaption>").count(),
        text.matches("<figure id=").count()
    );
}

#[test]
fn the_collision_check_catches_overlapping_words_and_a_mark_on_a_line() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("crowded.html");
    std::fs::write(
        &page,
        r#"<html><body><figure id="f"><svg xmlns="http://www.w3.org/2000/svg" width="300" height="100">
<text x="10" y="20" font-size="14">overlapping words</text><text x="20" y="24" font-size="14">more words</text>
<text x="280" y="60" font-size="14">cut off</text>
<polyline class="data" points="0,80 300,80" stroke="black"/><text class="mark-label" x="100" y="84" font-size="12">1</text>
</svg></figure></body></html>"#,
    )
    .unwrap();
    let found = collisions(&page);
    assert!(found.iter().any(|f| f.contains("overlaps")), "{found:?}");
    assert!(
        found.iter().any(|f| f.contains("passes the edge")),
        "{found:?}"
    );
    assert!(
        found.iter().any(|f| f.contains("is on a line")),
        "{found:?}"
    );
}

/// A second record of one RPC cell, measured on a host a third slower,
/// disagrees beyond both records' intervals: the page, and the summary
/// the lab prints, say so by the cell's name; the fixture alone does not
/// have that disagreement.
#[test]
fn records_of_one_cell_that_disagree_are_named_on_the_first_screen() {
    let fixture = std::fs::read_to_string(FIXTURE).unwrap();
    let rpc = fixture
        .lines()
        .find(|l| l.contains("\"experiment\":\"rpc\"") && l.contains("\"ms_per_100_calls\""))
        .unwrap();
    let mut first: serde_json::Value = serde_json::from_str(rpc).unwrap();
    let spread = serde_json::json!({"min": 1.40, "median": 1.43, "max": 1.45, "n": 3});
    first["result"]["ms_per_100_calls"] = spread;
    let mut slower = first.clone();
    slower["result"]["ms_per_100_calls"] =
        serde_json::json!({"min": 1.90, "median": 1.95, "max": 2.00, "n": 3});
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("records.jsonl");
    let write = |records: &[&serde_json::Value]| {
        let text: Vec<String> = records.iter().map(|r| r.to_string()).collect();
        std::fs::write(&path, text.join("\n") + "\n").unwrap();
        let loaded = page::load(&path).unwrap();
        html::write(&loaded, &Report, "records.jsonl", &dir.path().join("out")).unwrap()
    };
    let agreeing = write(&[&first, &first]);
    assert!(agreeing.caveats.is_empty(), "{:?}", agreeing.caveats);
    let written = write(&[&first, &slower]);
    assert_eq!(written.caveats.len(), 1, "{:?}", written.caveats);
    let line = &written.caveats[0];
    assert!(line.starts_with("rpc "), "{line}");
    assert!(
        line.contains("2 records of this cell disagree beyond their intervals, ms per 100 calls 1.43 (range 1.40-1.45 of 3 runs) against 1.95 (range 1.90-2.00 of 3 runs)"),
        "{line}"
    );
    let page = std::fs::read_to_string(&written.html).unwrap();
    assert!(
        page.contains("<h2>Read with care</h2>"),
        "no caveats on the page"
    );
    assert!(written.summary_text("").contains("read with care:\n- rpc "));
}
