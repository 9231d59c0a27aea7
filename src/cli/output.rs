//! `netlab output`: the 1987 terminal-output experiment. Text files typed
//! to a terminal through each relay design and protocol: terminal
//! throughput, CPU per KB on the server and client sides, packets per KB
//! and their mean size, with the 1987 telnet figures beside.

use super::Output;
use crate::endpoint::login::protocol::Protocol;
use crate::experiment::login::Target;
use crate::experiment::output::{OutputParams, OutputResult, run_cell, write_corpus};
use crate::report::{historical, tables};
use anyhow::{Context, bail};
use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// netlab relay designs (a list).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "fork,epoll,splice,uring"
    )]
    pub relay: Vec<Target>,
    /// Protocols (a list).
    #[arg(long, value_delimiter = ',', default_value = "telnet,rlogin")]
    pub protocol: Vec<String>,
    /// Size of the text typed (netlab generates it).
    #[arg(long, default_value = "4M", value_parser = crate::units::parse_size)]
    pub size: u64,
    /// Pace the output like a serial terminal of this speed (e.g. 9600).
    #[arg(long)]
    pub baud: Option<u32>,
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: OutputArgs, out: &mut Output) -> anyhow::Result<()> {
    if args.size == 0 {
        bail!("--size must be above zero");
    }
    if args.baud == Some(0) {
        bail!("--baud must be above zero");
    }
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("corpus.txt");
    write_corpus(&file, args.size).with_context(|| format!("cannot write {}", file.display()))?;
    let mut rows = Vec::new();
    let mut results: Vec<OutputResult> = Vec::new();
    let mut failures = Vec::new();
    for name in &args.protocol {
        let protocol = Protocol::parse(name)
            .with_context(|| format!("--protocol {name}: expected telnet or rlogin"))?;
        for &relay in &args.relay {
            let params = OutputParams {
                relay,
                protocol,
                file_bytes: args.size,
                baud: args.baud,
            };
            eprintln!("output: {} {}", relay.name(), protocol.name());
            match run_cell(&params, &file) {
                Ok(r) => {
                    rows.push(vec![
                        relay.name().to_string(),
                        protocol.name().to_string(),
                        tables::num(r.kbytes_per_s),
                        tables::num(r.server_cpu_us_per_kb),
                        tables::num(r.client_cpu_us_per_kb),
                        tables::num(r.segments_per_kb),
                        tables::num(r.mean_segment_bytes),
                        format!("{:.0}", r.server_cpu_pct),
                    ]);
                    results.push(r);
                }
                Err(e) => {
                    failures.push(serde_json::json!({"relay": relay, "protocol": protocol, "error": format!("{e:#}")}));
                    rows.push(vec![
                        relay.name().to_string(),
                        protocol.name().to_string(),
                        format!("failed: {e:#}"),
                    ]);
                }
            }
        }
    }
    if args.json {
        out.json(
            &serde_json::json!({"experiment": "output", "results": results, "failed": failures}),
        )?;
    } else {
        out.text(&format!(
            "netlab output: {} of text typed through each design ({}), loopback\n",
            crate::units::format_size(args.size),
            args.baud
                .map_or("unpaced".to_string(), |b| format!("paced to {b} baud"))
        ))?;
        out.text(&tables::markdown(
            &[
                "server",
                "proto",
                "KB/s",
                "server µs/KB",
                "client µs/KB",
                "segs/KB",
                "mean seg B",
                "server cpu %",
            ],
            &rows,
        ))?;
        let then = &historical::figures().terminal_output;
        out.text(&format!(
            "1987 ({}): {}: telnet server host {}% CPU for at most {} KB/s of terminal output, ~{}-byte packets; DECnet SET HOST and LAT left it at least {}% idle.\n",
            then.source,
            then.what,
            then.telnet.remote_cpu_pct,
            then.telnet.terminal_kbytes_s_max,
            then.telnet.avg_packet_bytes,
            then.lat_direct.remote_idle_pct_min
        ))?;
    }
    if results.is_empty() {
        bail!("every cell failed");
    }
    Ok(())
}
