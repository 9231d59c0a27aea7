//! The 1989 RPC table in its own shape (rows of argument sizes, columns TCP
//! and UDP, local and remote, the 1989 figures beside), the cliffs and their
//! causes, and the stall ranges of `--find-cliffs`.

use crate::experiments::rpc::analysis::call_split;
use crate::experiments::rpc::analysis::rpc_below_bound;
use crate::experiments::rpc::analysis::{self as rpc, diagnosis_reruns};
use crate::experiments::rpc::analysis::{Finding, StallRange, mean_ms_per_100, results};
use crate::experiments::rpc::record::{CallPart, CallSplit};
use crate::experiments::rpc::record::{Record, RpcData, RpcParams, RpcResult};
use crate::model::sunos4;
use crate::report::figures::{Figure, Mark, Series, Style, caption};
use crate::report::historical;
use crate::report::html::{Parts, ReportSection};
use crate::report::table::{hosts_text, markdown, num};

/// The 1989 Ethernet's rate.
const ETHER10_BITS_PER_S: f64 = 10e6;

use crate::record::testbed::Placement;

/// The source document's table: rows of argument sizes, columns TCP/UDP local/remote.
/// `netlab rpc --json`: the grid's records, its findings, the diagnosis
/// reruns and what the plan left out.
pub fn doc(
    records: &[Record],
    findings: &[Finding],
    reruns: &[Record],
    skipped: &[String],
) -> serde_json::Value {
    serde_json::json!({
        "experiment": "rpc",
        "findings": findings,
        "records": records,
        "diagnosis_records": reruns,
        "skipped": skipped,
    })
}

/// `netlab rpc --find-cliffs --json`.
pub fn cliffs_doc(
    strategy: &str,
    range: (usize, usize),
    ranges: &[StallRange],
) -> serde_json::Value {
    serde_json::json!({
        "experiment": "rpc-find-cliffs",
        "strategy": strategy,
        "range": [range.0, range.1],
        "stall_ranges": ranges,
        "historical_slow_ranges": historical::figures().rpc_size_sweep.slow_ranges_bytes,
    })
}

/// `netlab rpc --stack sunos4 --json`.
pub fn model_doc(predictions: &[sunos4::Prediction]) -> serde_json::Value {
    serde_json::json!({
        "experiment": "rpc-model",
        "stack": "sunos4",
        "predictions": predictions,
        "mechanism": MODEL_MECHANISM,
        "caveats": MODEL_CAVEATS,
    })
}

/// `netlab rpc --stack sunos4 --find-cliffs --json`.
pub fn model_ranges_doc(lo: u64, hi: u64, ranges: &[sunos4::SlowRanges]) -> serde_json::Value {
    serde_json::json!({
        "experiment": "rpc-model-find-cliffs",
        "stack": "sunos4",
        "range": [lo, hi],
        "stall_ranges": ranges.iter().map(|(p, r)| serde_json::json!({"placement": p, "ranges": r})).collect::<Vec<_>>(),
        "historical_slow_ranges": historical::figures().rpc_size_sweep.slow_ranges_bytes,
    })
}

/// `--connect-per-call` (netperf's TCP_CRR): connections per second and
/// each call's time, handshake and close included, per placement and
/// size. Empty when no cell opened a connection per call.
pub fn connect_per_call_text(records: &[Record]) -> String {
    let rows: Vec<Vec<String>> = results(records)
        .into_iter()
        .filter(|(p, r)| p.client.connect_per_call && r.client.connections.is_some())
        .map(|(p, r)| {
            let seconds: f64 = r.client.rep_seconds.iter().sum();
            let calls = u64::from(p.calls) * u64::from(p.reps);
            vec![
                p.placement.name().to_string(),
                p.size.to_string(),
                num(if seconds > 0.0 {
                    calls as f64 / seconds
                } else {
                    0.0
                }),
                num(r.client.latency_us_p50),
                num(r.client.latency_us_p90),
                num(r.client.latency_us_p99),
                num(r.client.latency_us_max),
            ]
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    let mut text = "a new TCP connection per call (netperf's TCP_CRR: connect, call, reply, close; each call's time holds all four):\n".to_string();
    text.push_str(&markdown(
        &[
            "placement",
            "bytes",
            "connections/s",
            "p50, µs",
            "p90, µs",
            "p99, µs",
            "max, µs",
        ],
        &rows,
    ));
    text
}

pub fn table(records: &[Record], findings: &[Finding]) -> String {
    let measured = results(records);
    // The source document's order: TCP local, TCP remote, UDP local, UDP remote.
    let columns: Vec<String> = ["TCP local", "TCP remote", "UDP local", "UDP remote"]
        .into_iter()
        .map(String::from)
        .filter(|c| measured.iter().any(|(p, _)| &p.column() == c))
        .collect();
    let mut sizes: Vec<usize> = measured.iter().map(|(p, _)| p.size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let h = &historical::figures().rpc_size_sweep;
    let mut header: Vec<String> = vec!["arg bytes".into()];
    header.extend(columns.iter().map(|c| format!("{c} ms/call")));
    header.extend(columns.iter().map(|c| format!("1989 {c} ms/call")));
    let model_columns: Vec<(&String, sunos4::Placement)> = columns
        .iter()
        .filter_map(|c| match c.as_str() {
            "TCP local" => Some((c, sunos4::Placement::Local)),
            "TCP remote" => Some((c, sunos4::Placement::Remote)),
            _ => None,
        })
        .collect();
    header.extend(
        model_columns
            .iter()
            .map(|(c, _)| format!("1989 model {c} ms/call")),
    );
    let rows: Vec<Vec<String>> = sizes
        .iter()
        .map(|&size| size_row(size, &columns, &model_columns, &measured, findings))
        .collect();
    let mut out = String::new();
    if let Some(first) = records.first() {
        out.push_str(&hosts_text(first, &placements_text(records)));
        out.push('\n');
    }
    let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
    out.push_str(&markdown(&header_refs, &rows));
    out.push_str(&format!(
        "ms/call: mean over the repetitions (min–max); ! marks a cliff. 1989: {}.\n{}\n",
        h.what,
        unit_note(h)
    ));
    if !model_columns.is_empty() {
        out.push_str(&format!("{MODEL_MECHANISM}\n{MODEL_CAVEATS}\n"));
    }
    for (params, result) in measured
        .iter()
        .filter(|(p, _)| p.size == *sizes.last().unwrap_or(&0))
    {
        out.push_str(&format!(
            "per-call latency, {} {} B: p50 {} µs, p99 {} µs, max {} µs\n",
            params.column(),
            params.size,
            num(result.client.latency_us_p50),
            num(result.client.latency_us_p99),
            num(result.client.latency_us_max)
        ));
    }
    out.push_str(&cliffs_text(findings));
    out.push_str(&call_time_table(&measured));
    out.push_str(&format!(
        "1989: TCP slow ranges {:?} bytes; {}\n",
        h.slow_ranges_bytes, h.profile_note
    ));
    for record in records.iter().filter(|r| r.error.is_some()) {
        out.push_str(&format!(
            "failed cell: {}\n",
            record.error.as_deref().unwrap_or("")
        ));
    }
    out
}

/// One size's row: each column's time a call measured (min–max, `!` on
/// a cliff), the 1989 figure, and the 1989 model's.
fn size_row(
    size: usize,
    columns: &[String],
    model_columns: &[(&String, sunos4::Placement)],
    measured: &[(&RpcParams, &RpcResult)],
    findings: &[Finding],
) -> Vec<String> {
    let h = &historical::figures().rpc_size_sweep;
    let mut row = vec![size.to_string()];
    for column in columns {
        let cell = measured
            .iter()
            .find(|(p, _)| p.size == size && &p.column() == column);
        row.push(match cell {
            Some((p, r)) => {
                let cliff = findings
                    .iter()
                    .any(|f| &f.column == column && f.size == size);
                format!(
                    "{} ({}–{}){}",
                    num(mean_ms_per_100(r, p.calls) / 100.0),
                    num(r.ms_per_100_calls.min / 100.0),
                    num(r.ms_per_100_calls.max / 100.0),
                    if cliff { " !" } else { "" }
                )
            }
            None => "-".into(),
        });
    }
    for column in columns {
        let index = h
            .columns
            .iter()
            .position(|c| c.replace('_', " ").eq_ignore_ascii_case(column));
        let then = h.rows.iter().find(|r| r[0] as usize == size);
        row.push(match (index, then) {
            (Some(i), Some(r)) => num(r[i]),
            _ => "".into(),
        });
    }
    for (_, placement) in model_columns {
        row.push(model_cell(size as u64, *placement));
    }
    row
}

/// The placements these records were measured on, each once.
fn placements_text(records: &[Record]) -> String {
    let mut placements: Vec<String> = Vec::new();
    for (params, _) in results(records) {
        let text = match &params.placement {
            Placement::Loopback => "loopback (local)".to_string(),
            Placement::Netns { link, .. } => format!("netns over {} (remote)", link.describe()),
            Placement::Remote { from, to } if from == to => format!("{to} (local)"),
            Placement::Remote { from, to } => format!("{from} -> {to} (remote)"),
        };
        if !placements.contains(&text) {
            placements.push(text);
        }
    }
    placements.join(", ")
}

/// Each cliff with its cause and one stalled call on the wire, or that
/// there were none.
fn cliffs_text(findings: &[Finding]) -> String {
    let mut out = String::new();
    for finding in findings {
        out.push_str(&format!(
            "cliff: {} at {} bytes, {} ms per call, its median call {:.0}x what the other sizes predict\n",
            finding.column,
            finding.size,
            num(finding.ms_per_100_calls / 100.0),
            finding.ratio
        ));
        if let Some(d) = &finding.diagnosis {
            out.push_str(&format!("  cause: {}\n", d.cause));
        }
        if !finding.timeline.is_empty() {
            out.push_str("  one stalled call on the wire (client side):\n");
            for line in &finding.timeline {
                out.push_str(&format!("    {line}\n"));
            }
        }
    }
    if findings.is_empty() {
        out.push_str("no cliffs: every size within 3x of what the others predict\n");
    }
    out
}

/// Each cell's split, as recorded or (older records) computed now.
pub fn split_of(params: &RpcParams, result: &RpcResult) -> Option<CallSplit> {
    result
        .call_split
        .clone()
        .or_else(|| call_split(params, result))
}

/// Where each call's time went, cell by cell (µs per call), and the fix for
/// each part that bounds a cell, with the cells it applies to.
pub fn call_time_table(measured: &[(&RpcParams, &RpcResult)]) -> String {
    let mut rows = Vec::new();
    let mut fixes: Vec<(String, Vec<String>)> = Vec::new();
    let mut wires: Vec<String> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    for (params, result) in measured {
        let Some(split) = split_of(params, result) else {
            continue;
        };
        let cell = format!("{} {} B", params.column(), params.size);
        rows.push(vec![
            cell.clone(),
            num(split.call_us),
            num(split.wire_us),
            num(split.stack_us),
            split.wakeup_us.map_or("-".into(), num),
            split.server_us.map_or("-".into(), num),
            num(split.client_us),
            num(split.waiting_us),
            format!("{:.1}", split.switches_per_call),
            format!("{:.2}", result.delayed_acks_per_call),
            format!("{} ({:.0}%)", split.bound.name(), split.share() * 100.0),
        ]);
        match fixes.iter_mut().find(|(fix, _)| *fix == split.fix) {
            Some((_, cells)) => cells.push(cell),
            None => fixes.push((split.fix.clone(), vec![cell])),
        }
        if !wires.contains(&split.wire_from) {
            wires.push(split.wire_from.clone());
        }
        for m in split.missing {
            if !missing.contains(&m) {
                missing.push(m);
            }
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    let mut out =
        String::from("\nwhere each call's time went (µs per call, mean over every call):\n");
    out.push_str(&markdown(
        &[
            "cell",
            "call",
            "wire",
            "stack (both kernels)",
            "waiting for a CPU",
            "server's work",
            "client's work",
            "both asleep",
            "switches/call",
            "delayed ACKs/call",
            "largest part",
        ],
        &rows,
    ));
    out.push_str("stack: both ends' kernel CPU; waiting for a CPU: both ends' run delay (schedstat); server's work: decoding, running and encoding each call; both asleep: the call less every part counted. The share is of the call, or of the parts where both ends ran at once and they add up to more.\n");
    out.push_str(&format!("wire: {}\n", wires.join("; ")));
    if !missing.is_empty() {
        out.push_str(&format!(
            "not counted (left in \"both asleep\"): {}\n",
            missing.join("; ")
        ));
    }
    for (fix, cells) in fixes {
        out.push_str(&format!("fix ({}): {fix}\n", cells.join(", ")));
    }
    out
}

/// What `--find-cliffs` found on each placement, with 1989's ranges.
pub fn stall_ranges_text(
    strategy: &str,
    placements: &[Placement],
    ranges: &[StallRange],
    (lo, hi): (usize, usize),
    probe_calls: u32,
) -> String {
    let h = &historical::figures().rpc_size_sweep;
    let mut out = format!(
        "netlab rpc --find-cliffs: TCP, {strategy} strategy, argument sizes {lo}..{hi}, {probe_calls} calls per probe\n"
    );
    for placement in placements {
        let column = format!(
            "TCP {}",
            if matches!(placement, Placement::Loopback) {
                "local"
            } else {
                "remote"
            }
        );
        if !ranges.iter().any(|r| r.placement == column) {
            out.push_str(&format!(
                "{column}: no stalls (every probe's mean call within 3x, or 1 ms, of the model)\n"
            ));
        }
    }
    for r in ranges {
        out.push_str(&format!(
            "{}: calls stall from {} to {} bytes{} ({:.1} ms per call)\n",
            r.placement,
            r.from,
            r.to,
            if r.open_ended { " and beyond" } else { "" },
            r.ms_per_call
        ));
    }
    out.push_str(&format!(
        "1989 (Sun-3/60, SunOS 4.0.1): TCP slow from {:?} bytes\n",
        h.slow_ranges_bytes
    ));
    out
}

/// The 1989 table's unit, as derived, and the physical check behind it:
/// read either way, how many of its over-the-Ethernet figures fall below
/// the wire time of their own call on a 10 Mbit/s Ethernet.
pub fn unit_note(h: &historical::RpcSizeSweep) -> String {
    let below = |read: &dyn Fn(f64) -> f64| {
        rpc_below_bound(&h.columns, &h.rows, read, 1500, ETHER10_BITS_PER_S).len()
    };
    let remote = h.rows.len() * h.columns.iter().filter(|c| c.ends_with("remote")).count();
    format!(
        "1989 unit: the document says \"{}\"; read as {}: as ms per 100 calls {} of its {remote} figures over the Ethernet would beat the wire time of their own call (10 Mbit/s, every frame's bytes counted), as ms per call {} do ({}).",
        h.unit,
        h.unit_derived.as_deref().unwrap_or("stated"),
        below(&|v| v / 100.0),
        below(&|v| v),
        h.unit_derivation.as_deref().unwrap_or("")
    )
}

/// The model's cell for `size` in a TCP column: ms per call, and "stall"
/// when its calls wait for the delayed-ACK timer.
fn model_cell(size: u64, placement: sunos4::Placement) -> String {
    match sunos4::predict(size, placement) {
        Ok(p) if p.stalls() => format!("{} stall", num(p.ms_per_call)),
        Ok(p) => num(p.ms_per_call),
        Err(e) => format!("({e})"),
    }
}

/// The mechanism the model finds, in one paragraph, for the tables and
/// the report.
pub const MODEL_MECHANISM: &str = "1989 model (netlab rpc --stack sunos4: SunOS 4.1.3's sosend, tcp_output and tcp_input, xdrrec's 4000-byte fragments): a call's last write that does not fit the 4096-byte send buffer behind the 4000-byte fragment in flight, and is under a 1024-byte cluster, is split by sosend; the window update releases the part that fit, Nagle holds the rest (under a segment, data unacknowledged), and the server, which needs the rest to finish the record, owes only a delayed ACK: the call waits for the 200 ms timer. The same pair (a sub-MSS tail held by Nagle, a receiver delaying its ACK because it waits for that tail) is what stalls today's kernel where it stalls.";

/// What the model leaves out, beside its figures.
pub const MODEL_CAVEATS: &str = "the model's ms/call counts Van Jacobson's 1988 Sun-3 costs (800 µs fixed per packet at each end, checksum 490 µs/KB, copy 200 µs/KB) and the 10 Mbit/s wire; not the RPC library's own CPU (XDR, select, scheduling), so its fast rows sit below 1989's.";

/// `netlab rpc --stack sunos4`: the 1989 table's TCP columns beside the
/// model's, size by size.
pub fn model_table(sizes: &[usize]) -> String {
    let h = &historical::figures().rpc_size_sweep;
    let column = |name: &str| h.columns.iter().position(|c| c == name);
    let header = [
        "arg bytes",
        "writes",
        "1989 TCP local ms/call",
        "model local ms/call",
        "1989 TCP remote ms/call",
        "model remote ms/call",
    ];
    let mut rows = Vec::new();
    for &size in sizes {
        let then = h.rows.iter().find(|r| r[0] as usize == size);
        let figure = |name: &str| match (then, column(name)) {
            (Some(r), Some(i)) => num(r[i]),
            _ => String::new(),
        };
        let writes = sunos4::call_writes(size as u64)
            .iter()
            .map(|w| w.to_string())
            .collect::<Vec<_>>()
            .join("+");
        rows.push(vec![
            size.to_string(),
            writes,
            figure("tcp_local"),
            model_cell(size as u64, sunos4::Placement::Local),
            figure("tcp_remote"),
            model_cell(size as u64, sunos4::Placement::Remote),
        ]);
    }
    let mut out = String::from(
        "netlab rpc --stack sunos4: the 1989 stack as a deterministic model (no sockets), Sun-3/60s, SunOS 4, 10 Mbit/s Ethernet\n",
    );
    out.push_str(&markdown(&header, &rows));
    out.push_str(&format!(
        "writes: the client's write()s of one call (xdrrec fragments with their record marks). stall: the calls wait for the delayed-ACK timer.\n{MODEL_MECHANISM}\n{MODEL_CAVEATS}\n1989: {}; TCP slow ranges {:?}.\n",
        h.what, h.slow_ranges_bytes
    ));
    out
}

/// `netlab rpc --stack sunos4 --find-cliffs`: the model's slow ranges on
/// each placement, against 1989's, boundary by boundary.
pub fn model_ranges_text(lo: u64, hi: u64, ranges: &[sunos4::SlowRanges]) -> String {
    let h = &historical::figures().rpc_size_sweep;
    let mut out = format!(
        "netlab rpc --stack sunos4 --find-cliffs: argument sizes {lo}..{hi}, every size simulated\n"
    );
    for (placement, found) in ranges {
        if found.is_empty() {
            out.push_str(&format!("model {}: no stalls\n", placement.name()));
        }
        for (from, to) in found {
            out.push_str(&format!(
                "model {}: calls stall from {from} to {to} bytes\n",
                placement.name()
            ));
        }
    }
    out.push_str(&format!(
        "1989 (Sun-3/60, SunOS 4.0.1): TCP slow from {:?} bytes\n",
        h.slow_ranges_bytes
    ));
    if let Some((_, found)) = ranges.first() {
        for (then, now) in h.slow_ranges_bytes.iter().zip(found) {
            if let [from, to] = then[..] {
                let residual = |model: u64, measured: u64| match model as i64 - measured as i64 {
                    0 => "to the byte".to_string(),
                    d => format!("{d:+} bytes"),
                };
                out.push_str(&format!(
                    "residual: {from}-{to} measured, {}-{} modelled: start {}, end {}\n",
                    now.0,
                    now.1,
                    residual(now.0, from),
                    residual(now.1, to)
                ));
            }
        }
    }
    out.push_str(MODEL_RESIDUAL);
    out.push('\n');
    out
}

/// What would account for the residual, as far as the sources allow.
pub const MODEL_RESIDUAL: &str = "what would account for it: the model's boundaries are where a last write stops fitting the 96 bytes left behind a 4000-byte fragment (start) and where it reaches a cluster, 1024 bytes, so sosend stops splitting it (end). 1989's first range ends at a last write of 1004 bytes, 16 before the cluster, and its second starts at 148, 48 after the room the model leaves; SunOS 4.0.1's own sosend and mbuf accounting (not published; the model reads 4.1.3's) would have to give a last write 48 more bytes of room after two fragments and stop splitting 16 bytes before a cluster.";

/// The rpc section of the report page.
pub struct RpcSection;

impl ReportSection for RpcSection {
    type Data = RpcData;
    const EXPERIMENT: &'static str = "rpc";

    fn parts(records: &[Record]) -> Parts {
        let findings = crate::experiments::rpc::analysis::findings_from_records(records);
        let text = crate::experiments::rpc::report::table(
            &crate::experiments::rpc::analysis::measured_records(records),
            &findings,
        );
        let reading = if findings.is_empty() {
            "No cliffs: every size's median call is within 3x of what its neighbours predict."
                .into()
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
            crate::experiments::rpc::report::rpc_time(records)
                .into_iter()
                .collect(),
        )
    }

    fn cell(data: &RpcData) -> String {
        format!("rpc {} {} B", data.params.column(), data.params.size)
    }

    fn links(records: &[Record]) -> Vec<String> {
        crate::report::html::link_details(records, |d| d.result.as_ref()?.link.as_ref())
    }

    /// Each record's time for 100 calls over its repetitions.
    fn estimates(records: &[Record]) -> Vec<crate::report::caveats::Estimated> {
        records
            .iter()
            .filter_map(|r| {
                Some(crate::report::caveats::Estimated {
                    cell: format!("{} ({})", Self::cell(&r.data), r.placement),
                    figure: "ms per 100 calls".into(),
                    spread: r.data.result.as_ref()?.ms_per_100_calls,
                })
            })
            .collect()
    }

    /// The fastest null call, beside 1989's on a Sun-3/60, and the stalls.
    fn headline(records: &[Record]) -> Option<crate::report::html::Headline> {
        use crate::experiments::rpc::analysis::{findings_from_records, measured_records, results};
        let measured = measured_records(records);
        let cells = results(&measured);
        let (params, result) = cells
            .iter()
            .filter(|(p, _)| p.size == 0)
            .min_by(|a, b| {
                a.1.client
                    .latency_us_p50
                    .total_cmp(&b.1.client.latency_us_p50)
            })
            .or_else(|| cells.iter().min_by_key(|(p, _)| p.size))?;
        let h = &crate::report::historical::figures().rpc_size_sweep;
        let then = h.rows.first().map(|row| {
            format!(
                "1989: {} ms a null call over TCP, {} ms at 4096 B (Sun-3/60, SunOS 4.0.1)",
                row.get(1).copied().unwrap_or(f64::NAN),
                h.rows
                    .iter()
                    .find(|r| r[0] == 4096.0)
                    .and_then(|r| r.get(1))
                    .copied()
                    .unwrap_or(f64::NAN)
            )
        });
        let findings = findings_from_records(records);
        let limit = match findings.first() {
            Some(first) => format!(
                "{} cells stall; {} B ({}) takes {:.0}x its neighbours' time{}",
                findings.len(),
                first.size,
                first.column,
                first.ratio,
                if first.diagnosis.is_some() {
                    ", diagnosed below"
                } else {
                    ""
                }
            ),
            None => "no call stalls".into(),
        };
        Some(crate::report::html::Headline {
            now: format!(
                "{:.0} µs a {}-byte call, median ({}); µs a call over its repetitions: {}",
                result.client.latency_us_p50,
                params.size,
                params.column(),
                crate::report::caveats::with_interval(&result.ms_per_100_calls.scaled(10.0))
            ),
            then,
            limit,
        })
    }

    /// The cells whose calls stall, with the diagnosed cause of the first;
    /// or, with none, the range of median calls.
    fn limited(records: &[Record]) -> Option<String> {
        use crate::experiments::rpc::analysis::{findings_from_records, measured_records, results};
        let findings = findings_from_records(records);
        if let Some(first) = findings.first() {
            let cause = first
                .diagnosis
                .as_ref()
                .map_or(" (not diagnosed: no reruns recorded)".to_string(), |d| {
                    format!(": {}", d.cause)
                });
            return Some(format!(
                "{} of the measured cells stall; {} bytes ({}) takes {:.1}x what its neighbours predict{cause}",
                findings.len(),
                first.size,
                first.column,
                first.ratio
            ));
        }
        let measured = measured_records(records);
        let cells = results(&measured);
        let calls: Vec<f64> = cells.iter().map(|(_, r)| r.client.latency_us_p50).collect();
        let fastest = calls.iter().copied().fold(f64::INFINITY, f64::min);
        let slowest = calls.iter().copied().fold(0.0, f64::max);
        // The part that bounds most cells, and how many.
        let mut tally: Vec<(CallPart, usize)> = Vec::new();
        for (params, result) in &cells {
            if let Some(split) = split_of(params, result) {
                match tally.iter_mut().find(|(part, _)| *part == split.bound) {
                    Some((_, n)) => *n += 1,
                    None => tally.push((split.bound, 1)),
                }
            }
        }
        tally.sort_by_key(|t| std::cmp::Reverse(t.1));
        let bound = tally.first().map_or(String::new(), |(part, n)| {
            format!("; the largest part of {n} of them: {}", part.name())
        });
        (!calls.is_empty()).then(|| {
            format!(
                "no call stalls: the median call took {fastest:.0} to {slowest:.0} µs over {} cells{bound}",
                calls.len()
            )
        })
    }
}

/// Each column's time per call (ms, the median of its repetitions) by
/// argument size, in size order.
fn time_by_column(measured: &[Record]) -> Vec<Series> {
    let mut series: Vec<Series> = Vec::new();
    for r in measured {
        if let RpcData {
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
    series
}

/// The cliffs `netlab rpc` flags (by the median call), each with the best
/// time a diagnosis rerun reached, by column.
fn cliff_marks(records: &[Record], measured: &[Record]) -> Vec<(String, Mark)> {
    rpc::flag_cliffs(measured)
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
        .collect()
}

/// Time per call vs argument size per column (TCP/UDP, local/remote),
/// cliffs marked with their diagnosis reruns' times where recorded.
pub fn rpc_time(records: &[Record]) -> Vec<Figure> {
    let measured = rpc::measured_records(records);
    if measured.is_empty() {
        return Vec::new();
    }
    let series = time_by_column(&measured);
    let marks = cliff_marks(records, &measured);
    let used: Vec<&Record> = measured.iter().collect();
    // One panel per protocol: today's local and remote columns beside
    // 1989's (the document's figures read as ms per call, the one reading
    // its own Ethernet allows), four lines a panel.
    let h = &crate::report::historical::figures().rpc_size_sweep;
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
                y_label: "time per call (s, log)".into(),
                log_x: true,
                log_y: true,
                x_unit: crate::report::figures::Unit::Bytes,
                y_unit: crate::report::figures::Unit::Seconds { scale: 1e-3 },
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
