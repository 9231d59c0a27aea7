//! The terminal's text as the report's HTML: every markdown table (a
//! header row, a `|---|` rule, rows; what [`crate::report::table::markdown`]
//! prints) becomes a `<table>`, numbers right-aligned, the columns of the
//! source documents' figures ("then": headers naming 1981-1990, a source,
//! Joy or Van Jacobson) grouped apart from today's; every other line stays
//! as written, wrapped at the page's edge instead of cut off. Each cell
//! carries its column's header, so a narrow window can show a row as a
//! list of `header: value` lines (the page's stylesheet, `page.css`, does).

use crate::export::html::escape;

/// Whether a header names the source documents' figures.
fn is_then(header: &str) -> bool {
    let h = header.to_ascii_lowercase();
    [
        "1981",
        "1987",
        "1988",
        "1989",
        "1990",
        "then",
        "joy",
        "vj ",
        "van jacobson",
        "source",
    ]
    .iter()
    .any(|w| h.contains(w))
        || h.starts_with("vj")
}

/// Whether a cell reads as a number (with its unit signs): right-aligned.
fn is_number(cell: &str) -> bool {
    let cell = cell.trim();
    let mut digits = 0;
    let mut letters = 0;
    for c in cell.chars() {
        if c.is_ascii_digit() {
            digits += 1;
        } else if c.is_alphabetic() {
            letters += 1;
        }
    }
    digits > 0 && letters <= 2 && !cell.contains(':')
}

fn cells(line: &str) -> Vec<&str> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(str::trim).collect()
}

fn is_rule(line: &str) -> bool {
    let t = line.trim();
    t.starts_with('|') && t.chars().all(|c| matches!(c, '|' | '-' | ':' | ' '))
}

fn table(header: &[&str], rows: &[Vec<&str>]) -> String {
    let then: Vec<bool> = header.iter().map(|h| is_then(h)).collect();
    let class = |i: usize, number: bool| {
        let mut classes = Vec::new();
        if number {
            classes.push("n");
        }
        if then[i] {
            classes.push("then");
            if i == 0 || !then[i - 1] {
                classes.push("then-first");
            }
        }
        if classes.is_empty() {
            String::new()
        } else {
            format!(" class=\"{}\"", classes.join(" "))
        }
    };
    let mut out = String::from("<div class=\"tw\"><table>\n<thead><tr>");
    for (i, h) in header.iter().enumerate() {
        out.push_str(&format!("<th{}>{}</th>", class(i, false), escape(h)));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in rows {
        out.push_str("<tr>");
        for (i, cell) in row.iter().enumerate() {
            let label = header.get(i).copied().unwrap_or("");
            let c = if i < then.len() {
                class(i, is_number(cell))
            } else {
                String::new()
            };
            out.push_str(&format!(
                "<td{c} data-label=\"{}\">{}</td>",
                escape(label),
                escape(cell)
            ));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table></div>\n");
    out
}

/// `text` as HTML: tables as tables; a line or two between them as
/// paragraphs; longer runs (TCP_INFO lines, counters, link and emulator
/// lines) folded into a `<details>` behind their first line, so the page
/// reads as tables and words and the evidence is a click away.
pub fn text_to_html(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut prose: Vec<&str> = Vec::new();
    let flush = |prose: &mut Vec<&str>, out: &mut String| {
        let kept: Vec<&str> = prose
            .iter()
            .copied()
            .filter(|l| !l.trim().is_empty())
            .collect();
        prose.clear();
        if kept.len() < FOLDED_FROM {
            for line in kept {
                out.push_str(&format!("<p class=\"text\">{}</p>\n", escape(line.trim())));
            }
            return;
        }
        out.push_str(&format!(
            "<details class=\"text\"><summary>{} <span class=\"more\">({} more lines)</span></summary><pre class=\"text\">{}</pre></details>\n",
            escape(kept[0].trim()),
            kept.len() - 1,
            escape(&kept[1..].join("\n"))
        ));
    };
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim_start().starts_with('|') && i + 1 < lines.len() && is_rule(lines[i + 1]) {
            flush(&mut prose, &mut out);
            let header = cells(line);
            let mut rows = Vec::new();
            let mut j = i + 2;
            while j < lines.len() && lines[j].trim_start().starts_with('|') {
                rows.push(cells(lines[j]));
                j += 1;
            }
            out.push_str(&table(&header, &rows));
            i = j;
        } else {
            prose.push(line);
            i += 1;
        }
    }
    flush(&mut prose, &mut out);
    out
}

/// Runs of this many lines or more are folded.
const FOLDED_FROM: usize = 3;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::table::markdown;

    #[test]
    fn a_markdown_table_becomes_a_table_with_numbers_right_and_then_apart() {
        let text = format!(
            "netlab rpc: calls\n{}a closing line, long enough to wrap\n",
            markdown(
                &["size", "1989 ms/call", "now ms/call", "verdict"],
                &[
                    vec![
                        "4096".into(),
                        "56.2".into(),
                        "0.04".into(),
                        "a cliff: Nagle".into()
                    ],
                    vec![
                        "8000".into(),
                        "12".into(),
                        "1,204 ± 3".into(),
                        "fine".into()
                    ],
                ],
            )
        );
        let html = text_to_html(&text);
        assert!(
            html.starts_with("<p class=\"text\">netlab rpc: calls</p>"),
            "{html}"
        );
        assert!(
            html.contains("<th class=\"then then-first\">1989 ms/call</th><th>now ms/call</th>"),
            "{html}"
        );
        assert!(
            html.contains("<td class=\"n then then-first\" data-label=\"1989 ms/call\">56.2</td>"),
            "{html}"
        );
        assert!(
            html.contains("<td class=\"n\" data-label=\"now ms/call\">1,204 ± 3</td>"),
            "{html}"
        );
        assert!(
            html.contains("<td data-label=\"verdict\">a cliff: Nagle</td>"),
            "{html}"
        );
        assert_eq!(html.matches("<tr>").count(), 3);
        assert!(html.ends_with("<p class=\"text\">a closing line, long enough to wrap</p>\n"));
        // Nothing of the text is lost, and nothing is unescaped.
        let plain = text_to_html("a <b> & c\n");
        assert_eq!(plain, "<p class=\"text\">a &lt;b&gt; &amp; c</p>\n");
        // A longer run is folded behind its first line.
        let folded = text_to_html("tcp_info of the sender:\nrtt 12 µs\ncwnd 10\nretrans 0\n");
        assert_eq!(
            folded,
            "<details class=\"text\"><summary>tcp_info of the sender: <span class=\"more\">(3 more lines)</span></summary><pre class=\"text\">rtt 12 µs\ncwnd 10\nretrans 0</pre></details>\n"
        );
    }

    #[test]
    fn numbers_are_told_from_words() {
        for n in ["12", "-3.5", "1,204", "0.9 ± 0.5", "x1.48", "45%", "12 µs"] {
            assert!(is_number(n), "{n}");
        }
        for w in ["fork", "sender CPU", "-", "1989: 4096 B", "recv=zerocopy"] {
            assert!(!is_number(w), "{w}");
        }
    }
}
