//! `netlab rpc [options]`: the 1989 Sun RPC experiment, its cliffs found and
//! explained, and `--find-cliffs` mapping where a stall begins and ends.

use super::{Interrupted, Output};
use crate::analysis::cliff::{Cliff, DEFAULT_FACTOR, MIN_STALL_MS, find_cliffs};
use crate::analysis::diagnosis::{Diagnosis, Rerun, diagnose};
use crate::analysis::wire::last_call_timeline;
use crate::endpoint::rpc::client::{ClientOptions, Strategy};
use crate::endpoint::rpc::{Proto, ServerOptions};
use crate::experiment::rpc::{RpcParams, RpcResult, measure_cell};
use crate::experiment::stream::MeasureError;
use crate::measure::host::HostFacts;
use crate::record::{Record, RecordData, RecordWriter};
use crate::report::{historical, progress::Progress, tables};
use crate::testbed::{LinkVia, Placement, link::LinkProfile, netns::has_net_admin};
use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use serde::Serialize;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StrategyArg {
    Sun,
    TwoWrite,
    Writev,
}

#[derive(Debug, Clone, Args)]
pub struct RpcExperimentArgs {
    /// Argument sizes in bytes (a list, or LO..HI).
    #[arg(long, default_value = "0,512,1024,2048,4000,4096,8000,8192")]
    pub sizes: String,
    /// Calls per repetition.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub calls: u32,
    /// Repetitions per cell.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub reps: u32,
    /// Protocols: tcp, udp or both.
    #[arg(long, default_value = "tcp,udp", value_delimiter = ',')]
    pub proto: Vec<String>,
    /// How the client writes a TCP request.
    #[arg(long, value_enum, default_value = "sun")]
    pub strategy: StrategyArg,
    /// TCP_NODELAY on the client.
    #[arg(long)]
    pub nodelay: bool,
    /// TCP_QUICKACK on the server (no delayed ACKs).
    #[arg(long)]
    pub quickack: bool,
    /// TCP_CORK around each request's writes on the client.
    #[arg(long)]
    pub cork: bool,
    /// Busy polling on both ends: spin on non-blocking receives this many
    /// µs before sleeping (user space; loopback and veth have no NAPI for
    /// SO_BUSY_POLL). 0, the default, never spins.
    #[arg(long, default_value_t = 0, value_name = "US", value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub busy_poll: u32,
    /// Pin the client and the server each to one CPU, e.g. `0,1` (two CPUs)
    /// or `1,1` (one shared). Unpinned, the scheduler chooses call by call,
    /// which on a small VM moves a loopback round trip by several times.
    #[arg(long, value_name = "CLIENT,SERVER")]
    pub pin: Option<String>,
    /// Placements: loopback ("local"), netns ("remote"); default both when allowed.
    #[arg(long, value_delimiter = ',')]
    pub placements: Vec<String>,
    /// Link profile of the "remote" placement.
    #[arg(long, default_value = "ether10")]
    pub link: String,
    /// Do not rerun flagged cells to diagnose them.
    #[arg(long)]
    pub no_diagnose: bool,
    /// Map where TCP stalls begin and end, to the byte, on each placement.
    #[arg(long)]
    pub find_cliffs: bool,
    /// Range for --find-cliffs.
    #[arg(long, default_value = "0..12000")]
    pub cliff_range: String,
    #[arg(long, default_value = "netlab-results.jsonl", value_name = "FILE")]
    pub out: PathBuf,
    #[arg(long)]
    pub json: bool,
}

/// Validated settings of a run.
pub struct RpcPlan {
    pub sizes: Vec<usize>,
    pub protos: Vec<Proto>,
    pub placements: Vec<Placement>,
    pub strategy: Strategy,
    pub client: ClientOptions,
    pub server: ServerOptions,
    pub calls: u32,
    pub reps: u32,
    pub skipped: Vec<String>,
}

/// `--pin CLIENT,SERVER`: two CPU numbers this process may run on.
fn parse_pin(text: &str) -> anyhow::Result<(usize, usize)> {
    let usage = || {
        anyhow::anyhow!(
            "--pin {text}: give two CPU numbers, the client's and the server's (e.g. --pin 0,1)"
        )
    };
    let (client, server) = text.split_once(',').ok_or_else(usage)?;
    let cpu = |s: &str| s.trim().parse::<usize>().map_err(|_| usage());
    let (client, server) = (cpu(client)?, cpu(server)?);
    for cpu in [client, server] {
        crate::endpoint::pin::check(cpu).map_err(|e| anyhow::anyhow!("--pin {text}: {e}"))?;
    }
    Ok((client, server))
}

fn parse_sizes(text: &str) -> anyhow::Result<Vec<usize>> {
    if let Some((lo, hi)) = text.split_once("..") {
        let lo: usize = lo.trim().parse().context("size range start")?;
        let hi: usize = hi.trim().parse().context("size range end")?;
        if lo > hi {
            bail!("size range {text}: the low end is above the high end");
        }
        return Ok((lo..=hi).collect());
    }
    text.split(',')
        .map(|s| {
            let s = s.trim();
            if s == "0" {
                Ok(0)
            } else {
                crate::units::parse_size(s)
                    .map(|v| v as usize)
                    .map_err(|e| anyhow::anyhow!("--sizes: {e}"))
            }
        })
        .collect()
}

impl RpcExperimentArgs {
    pub fn plan(&self) -> anyhow::Result<RpcPlan> {
        let sizes = parse_sizes(&self.sizes)?;
        if let Some(&big) = sizes.iter().find(|&&s| s > 60_000) {
            bail!(
                "argument size {big} is too large: a UDP call must fit one datagram (at most 60000 bytes)"
            );
        }
        let protos = self
            .proto
            .iter()
            .map(|p| match p.as_str() {
                "tcp" => Ok(Proto::Tcp),
                "udp" => Ok(Proto::Udp),
                other => bail!("unknown protocol \"{other}\" (tcp or udp)"),
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let pin = self.pin.as_deref().map(parse_pin).transpose()?;
        let link = LinkProfile::named(&self.link)?;
        let netns = Placement::Netns {
            link,
            via: LinkVia::Auto,
            capture: false,
            pcap: None,
            verbose: false,
        };
        let mut skipped = Vec::new();
        let placements = if self.placements.is_empty() {
            if has_net_admin() {
                vec![Placement::Loopback, netns]
            } else {
                skipped.push(
                    "remote (netns) placement skipped: it needs CAP_NET_ADMIN (run as root)".into(),
                );
                vec![Placement::Loopback]
            }
        } else {
            self.placements
                .iter()
                .map(|p| match p.as_str() {
                    "loopback" | "local" => Ok(Placement::Loopback),
                    "netns" | "remote" => Ok(netns.clone()),
                    other => bail!("unknown placement \"{other}\" (loopback or netns)"),
                })
                .collect::<anyhow::Result<Vec<_>>>()?
        };
        Ok(RpcPlan {
            sizes,
            protos,
            placements,
            strategy: match self.strategy {
                StrategyArg::Sun => Strategy::Sun,
                StrategyArg::TwoWrite => Strategy::TwoWrite,
                StrategyArg::Writev => Strategy::Writev,
            },
            client: ClientOptions {
                nodelay: self.nodelay,
                cork: self.cork,
                quickack: false,
                busy_poll_us: self.busy_poll,
                cpu: pin.map(|(client, _)| client),
            },
            server: ServerOptions {
                quickack: self.quickack,
                busy_poll_us: self.busy_poll,
                cpu: pin.map(|(_, server)| server),
                ..Default::default()
            },
            calls: self.calls,
            reps: self.reps,
            skipped,
        })
    }
}

/// One change to a cell, for a diagnostic rerun.
type Change = fn(&mut RpcParams);

/// One flagged cell and what its reruns showed.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub column: String,
    pub size: usize,
    pub ratio: f64,
    pub ms_per_100_calls: f64,
    pub diagnosis: Option<Diagnosis>,
    /// One stalled call as captured on the client's side of the path.
    pub timeline: Vec<String>,
}

fn mean_ms_per_100(result: &RpcResult, calls: u32) -> f64 {
    let reps = &result.client.rep_seconds;
    if reps.is_empty() {
        return 0.0;
    }
    reps.iter().sum::<f64>() / reps.len() as f64 * 1e3 * 100.0 / f64::from(calls.max(1))
}

fn run_cells(
    cells: &[RpcParams],
    host: &HostFacts,
    writer: &mut RecordWriter,
    label: &str,
) -> anyhow::Result<Vec<Record>> {
    let mut bar = Progress::new(cells.len() as u64, false, true);
    let mut records = Vec::new();
    for cell in cells {
        bar.set_message(format!("{label} {} {} B", cell.column(), cell.size));
        match measure_cell(cell, host, Some(writer)) {
            Ok(record) => records.push(record),
            Err(MeasureError::Interrupted) => {
                bar.finish();
                return Err(Interrupted {
                    saved: records.len(),
                }
                .into());
            }
            Err(e) => {
                bar.finish();
                return Err(e.into());
            }
        }
        bar.inc(1);
    }
    bar.finish();
    Ok(records)
}

/// The grid of cells of a plan.
pub fn cells(plan: &RpcPlan, purpose: &str) -> Vec<RpcParams> {
    let mut cells = Vec::new();
    for placement in &plan.placements {
        for &proto in &plan.protos {
            for &size in &plan.sizes {
                cells.push(RpcParams {
                    size,
                    proto,
                    strategy: plan.strategy,
                    client: plan.client.clone(),
                    server: plan.server.clone(),
                    calls: plan.calls,
                    reps: plan.reps,
                    placement: placement.clone(),
                    purpose: purpose.into(),
                    capture_timeline: false,
                });
            }
        }
    }
    cells
}

fn results(records: &[Record]) -> Vec<(&RpcParams, &RpcResult)> {
    records
        .iter()
        .filter_map(|r| match &r.data {
            RecordData::Rpc {
                params,
                result: Some(result),
            } => Some((params, result.as_ref())),
            _ => None,
        })
        .collect()
}

/// The cells of each column whose median call is far above what their
/// neighbours predict (and by at least [`MIN_STALL_MS`]).
pub fn flag_cliffs(records: &[Record]) -> Vec<(String, Cliff, &RpcParams, &RpcResult)> {
    let measured = results(records);
    let mut columns: Vec<String> = measured.iter().map(|(p, _)| p.column()).collect();
    columns.dedup();
    let mut flagged = Vec::new();
    for column in columns {
        let cells: Vec<&(&RpcParams, &RpcResult)> = measured
            .iter()
            .filter(|(p, _)| p.column() == column)
            .collect();
        // Judged by the median call (ms), so one slow call cannot make a cell a cliff.
        let points: Vec<(f64, f64)> = cells
            .iter()
            .map(|(p, r)| (p.size as f64, r.client.latency_us_p50 / 1e3))
            .collect();
        let (cliffs, _) = find_cliffs(&points, DEFAULT_FACTOR);
        for cliff in cliffs
            .into_iter()
            .filter(|c| c.measured - c.predicted >= MIN_STALL_MS)
        {
            if let Some((params, result)) = cells.iter().find(|(p, _)| p.size as f64 == cliff.size)
            {
                flagged.push((column.clone(), cliff, *params, *result));
            }
        }
    }
    flagged
}

/// The RPC records of the grid itself (not diagnosis reruns or captures).
pub fn measured_records(records: &[Record]) -> Vec<Record> {
    records
        .iter()
        .filter(
            |r| matches!(&r.data, RecordData::Rpc { params, .. } if params.purpose == "measure"),
        )
        .cloned()
        .collect()
}

/// The findings a finished run's records hold: the cliffs of its measured
/// cells, diagnosed from the diagnosis reruns and the captured timeline
/// recorded beside them (`netlab report` rebuilds them without measuring).
pub fn findings_from_records(records: &[Record]) -> Vec<Finding> {
    let measured = measured_records(records);
    flag_cliffs(&measured)
        .into_iter()
        .map(|(column, cliff, params, result)| {
            let reruns: Vec<Rerun> =
                crate::report::figures::diagnosis_reruns(records, &column, params.size)
                    .into_iter()
                    .map(|(change, ms_per_call)| Rerun {
                        change,
                        ms_per_call,
                    })
                    .collect();
            let timeline = records
                .iter()
                .find_map(|r| match &r.data {
                    RecordData::Rpc {
                        params: p,
                        result: Some(r),
                    } if p.capture_timeline && p.column() == column && p.size == params.size => r
                        .capture
                        .as_ref()
                        .map(|c| last_call_timeline(&c.timeline, r.server_port)),
                    _ => None,
                })
                .unwrap_or_default();
            Finding {
                column,
                size: params.size,
                ratio: cliff.ratio,
                ms_per_100_calls: mean_ms_per_100(result, params.calls),
                diagnosis: (!reruns.is_empty()).then(|| {
                    diagnose(
                        result.client.latency_us_p50 / 1e3,
                        result.client.writes_per_call,
                        result.delayed_acks_per_call,
                        &reruns,
                    )
                }),
                timeline,
            }
        })
        .collect()
}

/// Finds the cliffs of each column and, unless told not to, diagnoses each.
pub fn find_and_diagnose(
    records: &[Record],
    diagnose_cells: bool,
    rerun_calls: u32,
    host: &HostFacts,
    writer: &mut RecordWriter,
) -> anyhow::Result<(Vec<Finding>, Vec<Record>)> {
    let mut findings = Vec::new();
    let mut extra = Vec::new();
    for (column, cliff, params, result) in flag_cliffs(records) {
        let mut finding = Finding {
            column: column.clone(),
            size: params.size,
            ratio: cliff.ratio,
            ms_per_100_calls: mean_ms_per_100(result, params.calls),
            diagnosis: None,
            timeline: Vec::new(),
        };
        if diagnose_cells && params.proto == Proto::Tcp {
            let mut reruns = Vec::new();
            let changes: [(&str, Change); 3] = [
                ("TCP_NODELAY on the client", |p| p.client.nodelay = true),
                ("TCP_QUICKACK on the server", |p| p.server.quickack = true),
                ("the request in one writev", |p| {
                    p.strategy = Strategy::Writev
                }),
            ];
            for (change, apply) in changes {
                let mut cell = (*params).clone();
                apply(&mut cell);
                cell.calls = rerun_calls;
                cell.reps = 1;
                cell.purpose = format!("diagnose: {change}");
                let rerun = run_cells(&[cell], host, writer, "diagnosing")?;
                if let Some((_, r)) = results(&rerun).first() {
                    reruns.push(Rerun {
                        change: change.into(),
                        ms_per_call: r.client.latency_us_p50 / 1e3,
                    });
                }
                extra.extend(rerun);
            }
            // One short run with the connection captured, to show a stalled call.
            let mut cell = (*params).clone();
            cell.calls = 3;
            cell.reps = 1;
            cell.capture_timeline = true;
            cell.purpose = "diagnose: packet timeline".into();
            let captured = run_cells(&[cell], host, writer, "capturing")?;
            if let Some((_, r)) = results(&captured).first()
                && let Some(capture) = &r.capture
            {
                finding.timeline = last_call_timeline(&capture.timeline, r.server_port);
            }
            extra.extend(captured);
            finding.diagnosis = Some(diagnose(
                result.client.latency_us_p50 / 1e3,
                result.client.writes_per_call,
                result.delayed_acks_per_call,
                &reruns,
            ));
        }
        findings.push(finding);
    }
    Ok((findings, extra))
}

/// The source document's table: rows of argument sizes, columns TCP/UDP local/remote.
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
    header.extend(columns.iter().map(|c| format!("{c} ms/100 calls")));
    header.extend(columns.iter().map(|c| format!("1989 {c}")));
    let mut rows = Vec::new();
    for size in &sizes {
        let mut row = vec![size.to_string()];
        for column in &columns {
            let cell = measured
                .iter()
                .find(|(p, _)| p.size == *size && &p.column() == column);
            row.push(match cell {
                Some((p, r)) => {
                    let flag = if findings
                        .iter()
                        .any(|f| &f.column == column && f.size == *size)
                    {
                        " !"
                    } else {
                        ""
                    };
                    format!(
                        "{} ({}–{}){flag}",
                        tables::num(mean_ms_per_100(r, p.calls)),
                        tables::num(r.ms_per_100_calls.min),
                        tables::num(r.ms_per_100_calls.max)
                    )
                }
                None => "-".into(),
            });
        }
        for column in &columns {
            let index = h
                .columns
                .iter()
                .position(|c| c.replace('_', " ").eq_ignore_ascii_case(column));
            let then = h.rows.iter().find(|r| r[0] as usize == *size);
            row.push(match (index, then) {
                (Some(i), Some(r)) => tables::num(r[i]),
                _ => "".into(),
            });
        }
        rows.push(row);
    }
    let mut out = String::new();
    if let Some(first) = records.first() {
        // Only the placements these records were measured on.
        let mut placements: Vec<String> = Vec::new();
        for (params, _) in results(records) {
            let text = match &params.placement {
                Placement::Loopback => "loopback (local)".to_string(),
                Placement::Netns { link, .. } => format!("netns over {} (remote)", link.describe()),
            };
            if !placements.contains(&text) {
                placements.push(text);
            }
        }
        out.push_str(&tables::host_line(&first.host, &placements.join(", ")));
        out.push('\n');
    }
    let header_refs: Vec<&str> = header.iter().map(String::as_str).collect();
    out.push_str(&tables::markdown(&header_refs, &rows));
    out.push_str(&format!(
        "ms/100 calls: mean over the repetitions (min–max); ! marks a cliff. 1989: {}; unit: {}.\n",
        h.what, h.unit
    ));
    for (params, result) in measured
        .iter()
        .filter(|(p, _)| p.size == *sizes.last().unwrap_or(&0))
    {
        out.push_str(&format!(
            "per-call latency, {} {} B: p50 {} µs, p99 {} µs, max {} µs\n",
            params.column(),
            params.size,
            tables::num(result.client.latency_us_p50),
            tables::num(result.client.latency_us_p99),
            tables::num(result.client.latency_us_max)
        ));
    }
    for finding in findings {
        out.push_str(&format!(
            "cliff: {} at {} bytes, {} ms per 100 calls, its median call {:.0}x what the other sizes predict\n",
            finding.column,
            finding.size,
            tables::num(finding.ms_per_100_calls),
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

/// Runs every cell of `plan`, finds the cliffs and (if `diagnose_cells`)
/// reruns each to explain it. Shared with `netlab lab`.
pub fn measure_and_explain(
    plan: &RpcPlan,
    diagnose_cells: bool,
    host: &HostFacts,
    writer: &mut RecordWriter,
) -> anyhow::Result<(Vec<Record>, Vec<Finding>, Vec<Record>)> {
    let records = run_cells(&cells(plan, "measure"), host, writer, "measuring")?;
    let (findings, reruns) =
        find_and_diagnose(&records, diagnose_cells, plan.calls.min(20), host, writer)?;
    Ok((records, findings, reruns))
}

/// The heading line of the table.
pub fn title(plan: &RpcPlan) -> String {
    let flag = |on: bool, text: &'static str| if on { text } else { "" };
    format!(
        "netlab rpc: {} calls x {} reps per cell, {} strategy{}{}{}{}{}\n",
        plan.calls,
        plan.reps,
        plan.strategy.name(),
        flag(plan.client.nodelay, ", TCP_NODELAY"),
        flag(plan.server.quickack, ", server TCP_QUICKACK"),
        flag(plan.client.cork, ", TCP_CORK"),
        match plan.client.busy_poll_us {
            0 => String::new(),
            us => format!(", busy poll {us} µs"),
        },
        match (plan.client.cpu, plan.server.cpu) {
            (Some(client), Some(server)) =>
                format!(", client on CPU {client}, server on CPU {server}"),
            _ => String::new(),
        },
    )
}

pub fn run(args: RpcExperimentArgs, out: &mut Output) -> anyhow::Result<()> {
    let plan = args.plan()?;
    for note in &plan.skipped {
        eprintln!("netlab rpc: {note}");
    }
    let mut writer = RecordWriter::append(&args.out)
        .with_context(|| format!("cannot open {}", args.out.display()))?;
    let host = HostFacts::gather();
    if args.find_cliffs {
        return super::rpc_cliffs::run(&args, &plan, &host, &mut writer, out);
    }
    let (records, findings, reruns) =
        measure_and_explain(&plan, !args.no_diagnose, &host, &mut writer)?;
    if args.json {
        out.json(&serde_json::json!({
            "experiment": "rpc",
            "records_file": args.out,
            "findings": findings,
            "records": records,
            "diagnosis_records": reruns,
            "skipped": plan.skipped,
        }))?;
    } else {
        out.text(&title(&plan))?;
        out.text(&table(&records, &findings))?;
        eprintln!("records appended to {}", writer.path().display());
    }
    if results(&records).is_empty() {
        bail!(
            "every cell failed; see the records in {}",
            writer.path().display()
        );
    }
    Ok(())
}
