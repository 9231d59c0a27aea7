//! rpm's table and report section: RPM (foreign, self, combined), the
//! confidence, idle against working latency, the tier and the grade, with
//! the formula and the protocol said beside the figure.

use super::figures::short_name;
use super::record::{Record, RpmData};
use crate::analysis::responsiveness::GRADE_BOUNDS_MS;
use crate::report::html::{Headline, Parts, ReportSection, link_details};
use crate::report::table::{markdown, num};

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

fn whole(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.0}"))
}

/// Where a cell ran: its placement and link, and its label.
pub fn cell_name(data: &RpmData) -> String {
    let link = data
        .result
        .as_ref()
        .and_then(|r| r.link.as_ref())
        .map(|l| l.profile.describe());
    format!(
        "{}{}{}",
        data.params.placement.name(),
        link.map(|l| format!(" ({l})")).unwrap_or_default(),
        data.params
            .label
            .as_ref()
            .map(|l| format!(" [{l}]"))
            .unwrap_or_default()
    )
}

/// The grade thresholds, as the table's footnote gives them.
fn grade_scale() -> String {
    let bounds: Vec<String> = GRADE_BOUNDS_MS
        .iter()
        .map(|(g, b)| format!("{} < {b} ms", g.name()))
        .collect();
    format!(
        "{}, F beyond (latency added under load; DSLReports' bufferbloat grades, dslreports.com/faq/17930)",
        bounds.join(", ")
    )
}

/// What a cell's notes say of where its delay built up: the split of
/// the round trip and its verdict and fix, and each emulated queue that
/// held packets.
fn where_the_delay_was(r: &Record, result: &super::record::RpmResult) -> Vec<String> {
    let mut notes = Vec::new();
    if let Some(split) = &result.split {
        let parts: Vec<String> = split
            .parts
            .iter()
            .map(|p| {
                if p.ms < 0.0 {
                    // The parts sum past the round trip itself.
                    format!(
                        "{} {:.1} ms (the parts above overlap or were read at other moments than the probes: they sum past the round trip)",
                        p.name, p.ms
                    )
                } else {
                    format!("{} {:.1} ms", p.name, p.ms)
                }
            })
            .collect();
        notes.push(format!(
            "{}: where the delay built up: {}. {}{}",
            cell_name(&r.data),
            parts.join(", "),
            split.verdict,
            split
                .fix
                .as_ref()
                .map(|f| format!(". Fix: {f}"))
                .unwrap_or_default()
        ));
    }
    if let Some(b) = result.emulator.as_ref().and_then(|e| e.bottleneck.as_ref()) {
        for (dir, q) in b.iter().enumerate() {
            if q.sent > 0 && q.sojourn_ms_max > 1.0 {
                notes.push(format!(
                    "{}: the link's {} queue ({}) held packets {} ms at the median, {} ms at p99 (dropped {}, marked {})",
                    cell_name(&r.data),
                    if dir == 0 { "A→B" } else { "B→A" },
                    q.discipline,
                    num(q.sojourn_ms_p50),
                    num(q.sojourn_ms_p99),
                    q.dropped,
                    q.marked
                ));
            }
        }
    }
    notes
}

pub fn table(records: &[Record]) -> String {
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for r in records {
        let Some(result) = r.data.result.as_ref() else {
            rows.push(vec![cell_name(&r.data), "failed".into()]);
            continue;
        };
        let s = &result.summary;
        rows.push(vec![
            cell_name(&r.data),
            r.data.params.direction.name().into(),
            whole(s.rpm),
            whole(s.rpm_foreign),
            whole(s.rpm_self),
            format!(
                "{}{}",
                s.confidence,
                if s.is_final { "" } else { " (not final)" }
            ),
            ms(s.idle_ms),
            ms(s.working_ms),
            format!(
                "{} / {}",
                s.grade.as_deref().unwrap_or("-"),
                s.grade_loaded.as_deref().unwrap_or("-")
            ),
            s.tier.clone().unwrap_or("-".into()),
            format!(
                "{} / {}",
                num(s.goodput_down_bps / 1e6),
                num(s.goodput_up_bps / 1e6)
            ),
            s.connections.to_string(),
        ]);
        for note in &s.notes {
            notes.push(format!("{}: {note}", cell_name(&r.data)));
        }
        notes.extend(where_the_delay_was(r, result));
    }
    let mut out = String::from(
        "netlab rpm: responsiveness under working conditions (draft-ietf-ippm-responsiveness-06)\n",
    );
    out.push_str(&markdown(
        &[
            "cell",
            "load",
            "RPM",
            "foreign",
            "self",
            "confidence",
            "idle ms",
            "working ms",
            "grade (all / loaded)",
            "tier",
            "goodput Mbit/s down / up",
            "connections",
        ],
        &rows,
    ));
    out.push_str(&format!("\n{}\n", super::analysis::FORMULA));
    out.push_str("Probes speak netlab's own framing over TCP, not HTTP/2 over TLS: a foreign probe is a new connection (its handshake timed, then, once the server serves it, a 1-byte request and answer), a self probe is a 1-byte request on a loaded connection, answered behind the data queued there. Working ms = 60000 / RPM; the grade of all probes reads the working round trip, the loaded one the self probes' round trip alone (TM(http_l)), each less the idle one.\n");
    out.push_str(&format!("Grades: {}\n", grade_scale()));
    for note in notes {
        out.push_str(&format!("- {note}\n"));
    }
    if let Some(irtt) = irtt_table(records) {
        out.push_str(&irtt);
    }
    out
}

/// The measured cells, named as the figures name them, in record order.
fn measured(records: &[Record]) -> Vec<(String, &super::record::RpmResult)> {
    records
        .iter()
        .filter_map(|r| {
            let result = r.data.result.as_deref()?;
            let name = short_name(&r.data);
            Some((name, result))
        })
        .collect()
}

/// The section's reading: the best and the worst cell side by side, and
/// what the worst one's delay was made of.
fn reading(records: &[Record]) -> String {
    let cells = measured(records);
    let by_rpm = |a: &&(String, &super::record::RpmResult),
                  b: &&(String, &super::record::RpmResult)| {
        a.1.summary
            .rpm
            .unwrap_or(0.0)
            .total_cmp(&b.1.summary.rpm.unwrap_or(0.0))
    };
    let (Some(best), Some(worst)) = (cells.iter().max_by(by_rpm), cells.iter().min_by(by_rpm))
    else {
        return String::new();
    };
    let mut text = String::new();
    let describe = |(name, r): &(String, &super::record::RpmResult)| {
        format!(
            "{name} keeps {} RPM (working round trip {} ms against {} ms idle, grade {}, {} confidence)",
            whole(r.summary.rpm),
            ms(r.summary.working_ms),
            ms(r.summary.idle_ms),
            r.summary.grade.as_deref().unwrap_or("-"),
            r.summary.confidence
        )
    };
    if cells.len() > 1 && best.0 != worst.0 {
        text.push_str(&format!("{}; {}. ", describe(best), describe(worst)));
    } else {
        text.push_str(&format!("{}. ", describe(worst)));
    }
    if let Some(split) = &worst.1.split {
        text.push_str(&format!("In {}: {}", worst.0, split.verdict));
        if let Some(fix) = &split.fix {
            text.push_str(&format!("; the fix: {fix}"));
        }
        text.push('.');
    }
    text.push_str(" The figures put the round trip and the goodput on one time axis, as flent's RRUL plot does: a fix that works keeps the latency line low while the goodput line stays as high.");
    text
}

/// `--irtt`: netlab's round trips and irtt's over the same path and the
/// same seconds, idle and working, and what irtt measures beside them.
pub fn irtt_table(records: &[Record]) -> Option<String> {
    let spread = |m: &super::record::MedianSpread| {
        format!(
            "{:.2} [{:.2}, {:.2}] (n {})",
            m.median_ms, m.ci_low_ms, m.ci_high_ms, m.n
        )
    };
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for r in records {
        let Some(side) = r.data.result.as_ref().and_then(|res| res.irtt.as_ref()) else {
            continue;
        };
        for (when, c) in [("idle", &side.idle), ("working", &side.working)] {
            rows.push(vec![
                short_name(&r.data),
                when.into(),
                spread(&c.netlab),
                spread(&c.irtt),
                format!("{:+.2}", c.netlab.median_ms - c.irtt.median_ms),
                if c.agree { "yes" } else { "no" }.into(),
                c.irtt_lost.to_string(),
            ]);
        }
        let opt = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2} ms"));
        notes.push(format!(
            "{}: irtt alone, over the working window: one-way delay out {} and back {} (one clock: both namespaces are this host's), IPDV {} (the mean change between successive round trips), loss {:.2}% out and {:.2}% back",
            short_name(&r.data),
            opt(side.send_delay_ms),
            opt(side.receive_delay_ms),
            opt(side.ipdv_ms),
            side.upstream_loss_percent,
            side.downstream_loss_percent
        ));
    }
    if rows.is_empty() {
        return None;
    }
    let mut out = String::from(
        "\nirtt beside netlab over the same path (median round trip, ms, [95% interval]): netlab's foreign probes (a TCP 1-byte request on a new connection each: the path's queue, no socket's) against irtt's UDP packets every 10 ms sent in the same seconds; idle is irtt's 2 s just before the test\n",
    );
    out.push_str(&markdown(
        &[
            "cell",
            "path",
            "netlab ms",
            "irtt ms",
            "netlab - irtt",
            "agree",
            "irtt lost",
        ],
        &rows,
    ));
    out.push_str(&format!("Agree: the two medians' intervals overlap, or the medians are within {} ms. irtt measures what netlab's probes do not: each way's delay, IPDV and loss each way; netlab measures what irtt does not: a new connection's handshake, the loaded connections' own queues (self probes), goodput and where the delay built up.\n", super::record::AGREE_FLOOR_MS));
    for note in notes {
        out.push_str(&format!("- {note}\n"));
    }
    Some(out)
}

/// rpm's section of the report.
pub struct RpmSection;

impl ReportSection for RpmSection {
    type Data = RpmData;
    const EXPERIMENT: &'static str = "rpm";

    fn parts(records: &[Record]) -> Parts {
        (
            "rpm: responsiveness under working conditions".into(),
            table(records),
            reading(records),
            super::figures::rpm_figures(records),
        )
    }

    fn headline(records: &[Record]) -> Option<Headline> {
        let cells = measured(records);
        if cells.is_empty() {
            return None;
        }
        let now: Vec<String> = cells
            .iter()
            .take(3)
            .map(|(name, r)| {
                format!(
                    "{name}: {} RPM{}, grade {}",
                    whole(r.summary.rpm),
                    r.summary
                        .rpm_interval
                        .map_or(String::new(), |[lo, hi]| format!(
                            " (95% {}-{}, {} probes)",
                            whole(Some(lo)),
                            whole(Some(hi)),
                            r.summary.samples.0 + r.summary.samples.1 + r.summary.samples.2
                        )),
                    r.summary.grade.as_deref().unwrap_or("-")
                )
            })
            .collect();
        let worst = cells
            .iter()
            .min_by(|a, b| {
                a.1.summary
                    .rpm
                    .unwrap_or(0.0)
                    .total_cmp(&b.1.summary.rpm.unwrap_or(0.0))
            })
            .map(|(_, r)| r)?;
        let limit = match (&worst.split, worst.summary.is_final) {
            (_, false) => format!(
                "not saturated in its time: {} confidence, not final",
                worst.summary.confidence
            ),
            (Some(split), true) => match split.parts.iter().max_by(|a, b| a.ms.total_cmp(&b.ms)) {
                Some(p) if split.queue.is_some() => {
                    format!(
                        "{} held {:.0}% of the working round trip",
                        p.name,
                        p.share * 100.0
                    )
                }
                _ => "where the delay built up is undecided".into(),
            },
            (None, true) => "where the delay built up was not read".into(),
        };
        Some(Headline {
            now: now.join("; "),
            then: None,
            limit,
        })
    }

    fn links(records: &[Record]) -> Vec<String> {
        link_details(records, |d: &RpmData| {
            d.result.as_ref().and_then(|r| r.link.as_ref())
        })
    }

    fn cell(data: &RpmData) -> String {
        cell_name(data)
    }

    /// Each record's RPM with its bootstrap interval (records before
    /// 2026-12-02 have none and are not judged).
    fn estimates(records: &[Record]) -> Vec<crate::report::caveats::Estimated> {
        records
            .iter()
            .filter_map(|r| {
                let summary = &r.data.result.as_ref()?.summary;
                let [lo, hi] = summary.rpm_interval?;
                Some(crate::report::caveats::Estimated {
                    cell: format!("{} ({})", cell_name(&r.data), r.placement),
                    figure: "RPM".into(),
                    spread: crate::record::stats::Spread {
                        min: lo,
                        median: summary.rpm?,
                        max: hi,
                        n: summary.samples.0 + summary.samples.1 + summary.samples.2,
                        interval: Some([lo, hi]),
                    },
                })
            })
            .collect()
    }
}
