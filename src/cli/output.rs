//! `netlab output`: the 1987 terminal-output experiment. Text files typed
//! to a terminal through each relay design and protocol: terminal
//! throughput, CPU per KB on the server and client sides, packets per KB
//! and their mean size, with the 1987 telnet figures beside.

use super::{Interrupted, Output};
use crate::experiment::endpoints::interrupted;
use crate::experiment::login::{Dialect, Target};
use crate::experiment::output::{OutputParams, run_cell, write_corpus};
use crate::measure::host::HostFacts;
use crate::record::{Record, RecordData, RecordWriter, now_rfc3339};
use crate::report::{historical, tables};
use crate::testbed::Placement;
use anyhow::{Context, bail};
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Servers (a list): netlab's relay designs, `telnetd` (inetutils via
    /// socat; TELNET only), `sshd` (OpenSSH with a throwaway key and test
    /// user, read through OpenSSH's `ssh`; always SSH; needs root).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "fork,epoll,splice,uring"
    )]
    pub relay: Vec<Target>,
    /// Protocols (a list): telnet, rlogin, telnet-linemode, ssh (sshd only).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "telnet,rlogin"
    )]
    pub protocol: Vec<Dialect>,
    /// Placements (a list): loopback, netns (server and client in two
    /// namespaces over --link; needs root).
    #[arg(long, value_delimiter = ',', default_value = "loopback")]
    pub placement: Vec<String>,
    /// Link profile of the netns placement.
    #[arg(long, default_value = "ether10")]
    pub link: String,
    /// Size of the text typed (netlab generates it).
    #[arg(long, default_value = "4M", value_parser = crate::units::parse_size)]
    pub size: u64,
    /// Pace the output like a serial terminal of this speed (e.g. 9600).
    #[arg(long)]
    pub baud: Option<u32>,
    /// TCP_NODELAY on netlab's server sessions (the fix for Nagle holding
    /// output until the client's delayed ACK; telnetd has no such switch).
    #[arg(long)]
    pub nodelay: bool,
    #[arg(long, default_value = "netlab-results.jsonl")]
    pub out: PathBuf,
    #[arg(long)]
    pub json: bool,
}

/// Runs every cell, saving each record as it is made; a failed cell is
/// recorded with its reason and the rest go on.
pub fn measure_all(
    cells: &[OutputParams],
    file: &Path,
    host: &HostFacts,
    writer: &mut RecordWriter,
) -> anyhow::Result<Vec<Record>> {
    let mut records = Vec::new();
    for params in cells {
        if interrupted() {
            return Err(Interrupted {
                saved: records.len(),
            }
            .into());
        }
        eprintln!(
            "output: {} {} {}",
            params.relay.name(),
            params.protocol.name(),
            params.placement.name()
        );
        let started = now_rfc3339();
        let (result, error) = match run_cell(params, file) {
            Ok(r) => (Some(Box::new(r)), None),
            Err(e) => (None, Some(format!("{e:#}"))),
        };
        let data = RecordData::Output {
            params: params.clone(),
            result,
        };
        let record = Record::new(started, params.placement.name(), host, data, error);
        writer
            .write(&record)
            .with_context(|| format!("cannot save to {}", writer.path().display()))?;
        records.push(record);
    }
    Ok(records)
}

/// The cells of every server, protocol and placement for a text of
/// `size` bytes. sshd's cells speak SSH whatever else is asked, once.
pub fn cells(
    relays: &[Target],
    protocols: &[Dialect],
    placements: &[Placement],
    size: u64,
    baud: Option<u32>,
    nodelay: bool,
) -> Vec<OutputParams> {
    let mut cells = Vec::new();
    for placement in placements {
        for &protocol in protocols {
            for &relay in relays {
                let cell = OutputParams {
                    relay,
                    protocol: if relay == Target::Sshd {
                        Dialect::Ssh
                    } else {
                        protocol
                    },
                    placement: placement.clone(),
                    file_bytes: size,
                    baud,
                    nodelay,
                };
                if !cells.contains(&cell) {
                    cells.push(cell);
                }
            }
        }
    }
    cells
}

/// Today's rows, then the 1987 figures.
pub fn table(records: &[Record]) -> String {
    let mut rows = Vec::new();
    for record in records {
        let RecordData::Output { params, result } = &record.data else {
            continue;
        };
        let mut row = vec![
            params.relay.name().to_string(),
            params.protocol.name().to_string(),
            params.placement.name().to_string(),
        ];
        match result {
            Some(r) => row.extend([
                tables::num(r.kbytes_per_s),
                tables::num(r.server_cpu_us_per_kb),
                tables::num(r.client_cpu_us_per_kb),
                tables::num(r.segments_per_kb),
                tables::num(r.mean_segment_bytes),
                format!("{:.0}", r.server_cpu_pct),
            ]),
            None => {
                row.extend(std::iter::repeat_n(String::new(), 5));
                row.push(format!(
                    "failed: {}",
                    record.error.as_deref().unwrap_or("?")
                ));
            }
        }
        rows.push(row);
    }
    let mut text = tables::markdown(
        &[
            "server",
            "proto",
            "place",
            "KB/s",
            "server µs/KB",
            "client µs/KB",
            "segs/KB",
            "mean seg B",
            "server cpu %",
        ],
        &rows,
    );
    let then = &historical::figures().terminal_output;
    text.push_str(&format!(
        "1987 ({}): {}: telnet server host {}% CPU for at most {} KB/s of terminal output, ~{}-byte packets; DECnet SET HOST and LAT left it at least {}% idle.\n",
        then.source,
        then.what,
        then.telnet.remote_cpu_pct,
        then.telnet.terminal_kbytes_s_max,
        then.telnet.avg_packet_bytes,
        then.lat_direct.remote_idle_pct_min
    ));
    text
}

pub fn run(args: OutputArgs, out: &mut Output) -> anyhow::Result<()> {
    if args.size == 0 {
        bail!("--size must be above zero");
    }
    if args.baud == Some(0) {
        bail!("--baud must be above zero");
    }
    let placements = super::login_experiment::placements(&args.placement, &args.link)?;
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("corpus.txt");
    write_corpus(&file, args.size).with_context(|| format!("cannot write {}", file.display()))?;
    let mut writer = RecordWriter::append(&args.out)
        .with_context(|| format!("cannot open {}", args.out.display()))?;
    let host = HostFacts::gather();
    let records = measure_all(
        &cells(
            &args.relay,
            &args.protocol,
            &placements,
            args.size,
            args.baud,
            args.nodelay,
        ),
        &file,
        &host,
        &mut writer,
    )?;
    if args.json {
        out.json(&serde_json::json!({
            "experiment": "output",
            "records_file": args.out,
            "records": records,
        }))?;
    } else {
        out.text(&format!(
            "netlab output: {} of text typed through each server ({})\n",
            crate::units::format_size(args.size),
            args.baud
                .map_or("unpaced".to_string(), |b| format!("paced to {b} baud"))
        ))?;
        out.text(&table(&records))?;
        eprintln!("records appended to {}", writer.path().display());
    }
    if records.iter().all(|r| r.error.is_some()) {
        bail!(
            "every cell failed; see the records in {}",
            writer.path().display()
        );
    }
    Ok(())
}
