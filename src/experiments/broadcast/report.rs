//! The storm's table (one row a fix: the storm's size, the bound that
//! stopped it, the heartbeat, the document's words), its reading, its
//! figure (frames on the wire over time, a series a fix) and its row on
//! the report's first screen.

use super::record::{BroadcastData, BroadcastResult, BroadcastSpec, Fix, Reading};
use crate::report::figures::{Figure, Series, Style, Unit, caption};
use crate::report::html::{Headline, Parts, ReportSection};
use crate::report::table::markdown;

pub type Record = crate::record::Record<BroadcastData>;

fn pct(f: f64) -> String {
    format!("{:.0}%", 100.0 * f)
}

/// Frames on the wire per `step_ms`, from just before the probe to the
/// end of the run, in one line.
pub fn timeline(model: &super::wire::ModelReport, step_ms: u64) -> String {
    let per = (step_ms / model.bin_ms.max(1)).max(1) as usize;
    let first = ((model.probe_ms as u64).saturating_sub(step_ms) / model.bin_ms.max(1)) as usize;
    let counts: Vec<String> = model
        .bins
        .iter()
        .skip(first)
        .collect::<Vec<_>>()
        .chunks(per)
        .take(40)
        .map(|chunk| chunk.iter().map(|b| b.frames).sum::<u64>().to_string())
        .collect();
    format!(
        "frames on the wire per {step_ms} ms from {} ms (the probe at {:.0} ms): {}",
        first as u64 * model.bin_ms,
        model.probe_ms,
        counts.join(" ")
    )
}

/// Under no fix: the storm's timeline, what the heartbeat's far end took
/// in and dropped, and what today's Linux hosts did with the broadcast.
fn unfixed_lines(p: &BroadcastSpec, result: &BroadcastResult, r: &Reading) -> Vec<String> {
    let mut lines = vec![timeline(&result.model, 100)];
    if let Some((name, vax)) = result.model.hosts.get(1) {
        lines.push(format!(
            "{name} (the heartbeat's far end): took in {} frames, its ipintrq (50 deep, 800 µs a frame) dropped {} ({:.0}%); hellos received {} of {} sent",
            vax.taken_in,
            vax.input_drops,
            100.0 * vax.input_drops as f64 / vax.taken_in.max(1) as f64,
            vax.hellos,
            result.model.hellos_sent[0]
        ));
    }
    if !result.linux.is_empty() {
        lines.push(format!(
            "today's Linux hosts ({}, forwarding on, given the Suns' broadcast {}): took in {} broadcast datagrams, forwarded {} (Ip ForwDatagrams), put {} frames on the wire{}",
            result.linux.len(),
            p.sun_broadcast,
            r.linux_received,
            r.linux_forwarded,
            r.linux_frames,
            match (r.ip_forward_drops, result.stray) {
                (Some(n), Some(stray)) => format!(
                    "; the datagram to {stray} sent as a link-level broadcast: ip_forward dropped {n} (skb:kfree_skb, reason {})",
                    result
                        .kernel_drops
                        .iter()
                        .flatten()
                        .find(|d| d.function == "ip_forward")
                        .map_or("-", |d| d.reason.as_str())
                ),
                _ => String::new(),
            }
        ));
        for note in &result.notes {
            lines.push(format!("note: {note}"));
        }
    }
    lines
}

/// The results table, a row a run.
pub fn table(records: &[Record]) -> String {
    let mut rows = Vec::new();
    let mut linux_lines = Vec::new();
    for record in records {
        let p = &record.data.params;
        let mut row = vec![p.fix.name().to_string()];
        match &record.data.result {
            Some(result) => {
                let r = result.reading(p);
                row.extend([
                    r.copies.to_string(),
                    r.gain.map_or("-".into(), |g| format!("{g:.1}")),
                    if r.copies == 0 {
                        format!("{} / -", pct(r.peak_utilisation))
                    } else {
                        format!("{} / {}", pct(r.peak_utilisation), pct(r.storm_utilisation))
                    },
                    if r.copies == 0 {
                        "-".into()
                    } else {
                        format!("{:.0}", r.storm_ms)
                    },
                    result.model.stopped_by.describe().to_string(),
                    format!(
                        "{:.0} ms (timeout {} ms): {}",
                        r.longest_gap_ms,
                        p.timeout(),
                        if r.survived {
                            "survived"
                        } else {
                            "lost contact"
                        }
                    ),
                    format!("{:.0} ms", r.longest_gap_ms),
                    r.linux_forwarded.to_string(),
                ]);
                if p.fix == Fix::None {
                    linux_lines.extend(unfixed_lines(p, result, &r));
                }
            }
            None => {
                crate::report::table::failed_row(&mut row, 7, record.error.as_deref());
            }
        }
        row.push(p.fix.words().to_string());
        rows.push(row);
    }
    let mut text = markdown(
        &[
            "fix",
            "copies of 1 probe",
            "gain/hop",
            "wire peak / storm",
            "storm ms",
            "stopped by",
            "heartbeat (longest gap)",
            "shortest timeout to survive",
            "Linux forwarded",
            "the document",
        ],
        &rows,
    );
    for line in linux_lines {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// Frames on the wire per 10 ms, a series a fix.
pub fn figures(records: &[Record]) -> Vec<Figure> {
    let mut series = Vec::new();
    for record in records {
        let Some(result) = &record.data.result else {
            continue;
        };
        let m = &result.model;
        let per_s = 1000.0 / m.bin_ms as f64;
        series.push(Series {
            name: record.data.params.fix.name().to_string(),
            style: Style::Measured,
            points: m
                .bins
                .iter()
                .enumerate()
                .map(|(i, b)| {
                    (
                        (i as u64 * m.bin_ms) as f64 / 1000.0,
                        b.frames as f64 * per_s,
                    )
                })
                .collect(),
        });
    }
    if series.is_empty() {
        return Vec::new();
    }
    let refs: Vec<&Record> = records.iter().collect();
    vec![Figure {
        id: "broadcast-storm".into(),
        title: "Frames on the emulated 10 Mbit/s Ethernet, one probe".into(),
        x_label: "time since the run began (s)".into(),
        y_label: "frames on the wire (per second, 10 ms bins)".into(),
        log_x: false,
        log_y: false,
        x_unit: Unit::Seconds { scale: 1.0 },
        y_unit: Unit::Plain,
        categories: Vec::new(),
        series,
        marks: Vec::new(),
        caption: caption(&refs),
    }]
}

/// The broadcast section of the report page.
pub struct BroadcastSection;

impl ReportSection for BroadcastSection {
    type Data = BroadcastData;
    const EXPERIMENT: &'static str = "broadcast";

    fn parts(records: &[Record]) -> Parts {
        let mut reading = String::new();
        if let Some(base) = records
            .iter()
            .find(|r| r.data.params.fix == Fix::None && r.data.result.is_some())
        {
            let p = &base.data.params;
            let result = base.data.result.as_ref().expect("found with a result");
            let r = result.reading(p);
            reading = format!(
                "One RIP supply to the all-1's broadcast, among {} Suns that take the 0's broadcast for theirs and forward with one interface, came back as {} copies (hop by hop {}), each hop multiplying by {}; the wire peaked at {} of 10 Mbit/s and the storm lasted {:.0} ms, stopped by {}. The heartbeat went {:.0} ms without a hello: a timeout of {} ms {}. Today's Linux hosts, given the same wrong broadcast address and forwarding on, forwarded {} of it: their kernel keeps a broadcast route for the all-1's address whatever the configured one (fib_add_ifaddr), and ip_forward drops whatever arrived as a link-level broadcast (skb->pkt_type != PACKET_HOST; RFC 1122 §3.3.6, RFC 1812 §5.3.4). The 1990 hosts' rules and costs are the model's, each read from the BSD sources or from source 003 (see EXPERIMENTS.md); ICMP errors and redirects are left out.",
                p.suns,
                r.copies,
                r.hops
                    .iter()
                    .take(6)
                    .map(|h| h.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                r.gain.map_or("-".into(), |g| format!("{g:.1}")),
                pct(r.peak_utilisation),
                r.storm_ms,
                result.model.stopped_by.describe(),
                r.longest_gap_ms,
                p.timeout(),
                if r.survived {
                    "survived it"
                } else {
                    "lost contact"
                },
                r.linux_forwarded,
            );
        }
        (
            "broadcast: the 1990 broadcast storm and its fixes".into(),
            table(records),
            reading,
            figures(records),
        )
    }

    fn cell(data: &BroadcastData) -> String {
        format!("broadcast, fix: {}", data.params.fix.name())
    }

    /// The emulated Ethernet each run built.
    fn links(records: &[Record]) -> Vec<String> {
        records
            .iter()
            .filter(|r| r.data.result.is_some())
            .map(|r| {
                let p = &r.data.params;
                format!(
                    "bridge of {} ports at 10 Mbit/s ({} TAP for 1990 hosts, {} veth for Linux)",
                    p.hosts,
                    p.hosts - p.linux,
                    p.linux
                )
            })
            .collect()
    }

    fn headline(records: &[Record]) -> Option<Headline> {
        let base = records
            .iter()
            .find(|r| r.data.params.fix == Fix::None && r.data.result.is_some())?;
        let result = base.data.result.as_ref()?;
        let r = result.reading(&base.data.params);
        let stopping: Vec<&str> = records
            .iter()
            .filter(|rec| rec.data.params.fix != Fix::None)
            .filter(|rec| {
                rec.data.result.as_ref().is_some_and(|res| {
                    res.reading(&rec.data.params).survived || res.model.copies == 0
                })
            })
            .map(|rec| rec.data.params.fix.name())
            .collect();
        Some(Headline {
            now: format!(
                "1 probe, {} copies (x{} a hop), heartbeat {}; Linux forwarded {}",
                r.copies,
                r.gain.map_or("-".into(), |g| format!("{g:.1}")),
                if r.survived { "survived" } else { "lost" },
                r.linux_forwarded
            ),
            then: Some("1990: \"feedback loops quite capable of destroying the network\"; VAXclusters left the cluster".into()),
            limit: format!(
                "stopped by {}; fixes that held: {}",
                result.model.stopped_by.describe(),
                if stopping.is_empty() { "none measured".into() } else { stopping.join(", ") }
            ),
        })
    }
}
