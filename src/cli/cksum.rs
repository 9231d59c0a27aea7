//! `netlab cksum`: the Internet checksum and copy costs per KB, against the
//! machine's limits and Van Jacobson's 1988 figures.

use super::{Interrupted, Output};
use crate::endpoint::protocol::{Command, Reply};
use crate::experiment::cksum::{CksumResult, CksumSpec, Kind};
use crate::experiment::endpoints::{ControlError, EndpointProcess};
use crate::experiment::stream::MeasureError;
use crate::measure::host::HostFacts;
use crate::record::{Record, RecordData, RecordWriter};
use crate::report::{historical, tables};
use crate::units::{format_size, parse_size};
use anyhow::{Context, bail};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct CksumArgs {
    /// Buffer sizes (a list; 4M, 1408, ...).
    #[arg(long, default_value = "64,1408,4096,65536,1M,64M")]
    pub sizes: String,
    /// Timed batches per variant (the median is reported, with min and max).
    #[arg(long, default_value_t = 9, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub batches: u32,
    /// Pool the cold runs walk through; should exceed the last-level cache.
    #[arg(long, default_value = "512M", value_parser = |s: &str| parse_size(s).map_err(|e| e.to_string()))]
    pub cold_pool: u64,
    #[arg(long, default_value = "netlab-results.jsonl", value_name = "FILE")]
    pub out: PathBuf,
    #[arg(long)]
    pub json: bool,
}

fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Checks sizes and memory before anything runs.
pub fn specs(sizes: &str, batches: u32, cold_pool: u64) -> anyhow::Result<Vec<CksumSpec>> {
    let sizes = sizes
        .split(',')
        .map(|s| parse_size(s.trim()).map_err(|e| anyhow::anyhow!("--sizes: {e}")))
        .collect::<anyhow::Result<Vec<u64>>>()?;
    let available = mem_available().unwrap_or(u64::MAX);
    for &size in &sizes {
        // Hot source and destination, and two cold pools of at least two buffers each.
        let needed = 2 * size + 2 * cold_pool.max(2 * size.next_multiple_of(4096) + 128);
        if needed > available / 2 {
            bail!(
                "size {} needs about {} of memory (buffers and cold pools) but only {} is available",
                format_size(size),
                format_size(needed),
                format_size(available)
            );
        }
    }
    Ok(sizes
        .into_iter()
        .map(|size| CksumSpec {
            size: size as usize,
            cold_pool: cold_pool as usize,
            batches,
        })
        .collect())
}

/// Measures each size in an endpoint process, recording each.
pub fn measure_all(
    specs: &[CksumSpec],
    host: &HostFacts,
    writer: &mut RecordWriter,
) -> anyhow::Result<Vec<Record>> {
    let mut records = Vec::new();
    for spec in specs {
        eprintln!("cksum: {} ...", format_size(spec.size as u64));
        let measured = crate::experiment::record_run(
            "local",
            host,
            Some(&mut *writer),
            || -> Result<CksumResult, ControlError> {
                let mut endpoint = EndpointProcess::spawn("cksum")?;
                endpoint.send(&Command::Cksum(spec.clone()))?;
                let result = match endpoint.recv(None, "measuring", &mut |_| {})? {
                    Reply::CksumDone(result) => *result,
                    other => return Err(endpoint.unexpected("measuring", &other)),
                };
                endpoint.finish();
                Ok(result)
            },
            |result| RecordData::Cksum {
                params: spec.clone(),
                result,
            },
        );
        let record = match measured {
            Ok(record) => record,
            Err(MeasureError::Interrupted) => {
                return Err(Interrupted {
                    saved: records.len(),
                }
                .into());
            }
            Err(e) => return Err(e.into()),
        };
        records.push(record);
    }
    Ok(records)
}

/// The hot cost per byte (ns) of the fastest copy and the fastest checksum
/// at the size nearest `size`.
pub fn per_byte_costs(records: &[Record], size: usize) -> Option<(f64, f64)> {
    let results = results(records);
    let result = results.iter().min_by_key(|r| r.size.abs_diff(size))?;
    let best = |kind: Kind| {
        result
            .rows
            .iter()
            .filter(|r| !r.cold && r.kind == kind)
            .map(|r| r.ns_per_kb.median / 1024.0)
            .min_by(f64::total_cmp)
    };
    Some((best(Kind::Copy)?, best(Kind::Checksum)?))
}

/// Van Jacobson's µs/KB for a variant, if he gave one.
fn then_us_per_kb(variant: &str) -> Option<f64> {
    let h = &historical::figures().bsd_speedups;
    match variant {
        "naive16" => h.checksum_us_per_kb.first().copied(),
        "wide" | "simd" => h.checksum_us_per_kb.last().copied(),
        "copy-16" => h.copy_us_per_kb.first().copied(),
        "copy-64-unrolled" | "memcpy" => h.copy_us_per_kb.last().copied(),
        "fused-naive16" | "fused-wide" | "fused-simd" => Some(h.copy_and_checksum_fused_us_per_kb),
        _ => None,
    }
}

fn results(records: &[Record]) -> Vec<&CksumResult> {
    records
        .iter()
        .filter_map(|r| match &r.data {
            RecordData::Cksum {
                result: Some(result),
                ..
            } => Some(result.as_ref()),
            _ => None,
        })
        .collect()
}

/// The tables, the historical comparison and the per-packet budget.
pub fn table(records: &[Record]) -> String {
    let mut out = String::new();
    let results = results(records);
    if let Some(first) = records.first() {
        out.push_str(&tables::host_line(&first.host, "local"));
        out.push('\n');
    }
    out.push_str(&format!(
        "caches: {}; SIMD path: {}\n",
        // The machine that measured, not the one printing the report.
        records
            .first()
            .and_then(|r| r.host.caches.as_deref())
            .unwrap_or("not recorded"),
        results.first().map_or("?", |r| r.simd_path.as_str())
    ));
    for result in &results {
        out.push_str(&format!("\n{} bytes:\n", result.size));
        let mut rows = Vec::new();
        for hot in result.rows.iter().filter(|r| !r.cold) {
            let cold = result
                .rows
                .iter()
                .find(|r| r.cold && r.variant == hot.variant);
            let then = then_us_per_kb(&hot.variant);
            rows.push(vec![
                hot.variant.clone(),
                format!(
                    "{} ({}–{})",
                    tables::num(hot.ns_per_kb.median),
                    tables::num(hot.ns_per_kb.min),
                    tables::num(hot.ns_per_kb.max)
                ),
                tables::num(hot.gb_s),
                format!("{:.0}%", 100.0 * hot.fraction_of_limit),
                cold.map_or("-".into(), |c| tables::num(c.ns_per_kb.median)),
                cold.map_or("-".into(), |c| tables::num(c.gb_s)),
                cold.map_or("-".into(), |c| {
                    format!("{:.0}%", 100.0 * c.fraction_of_limit)
                }),
                then.map_or(String::new(), |t| format!("{t}")),
                then.map_or(String::new(), |t| {
                    format!("{}x", tables::num(t * 1000.0 / hot.ns_per_kb.median))
                }),
            ]);
        }
        out.push_str(&tables::markdown(
            &[
                "variant",
                "hot ns/KB (min–max)",
                "hot GB/s",
                "of limit",
                "cold ns/KB",
                "cold GB/s",
                "of limit",
                "1988 µs/KB",
                "faster",
            ],
            &rows,
        ));
    }
    out.push_str("of limit: checksums against the read limit (an OR over every byte), copies and fused copies against memcpy, same size and temperature.\n");
    out.push_str(&budget(&results));
    for record in records.iter().filter(|r| r.error.is_some()) {
        out.push_str(&format!(
            "failed: {}\n",
            record.error.as_deref().unwrap_or("")
        ));
    }
    out
}

/// Van Jacobson's per-packet budget for a 1408-byte packet at today's hot costs.
pub fn budget(results: &[&CksumResult]) -> String {
    let h = &historical::figures().bsd_speedups;
    let packet = h.packet_data_bytes as f64;
    // The size nearest a packet.
    let Some(result) = results
        .iter()
        .min_by_key(|r| (r.size as f64 - packet).abs() as u64)
    else {
        return String::new();
    };
    let ns_per_kb = |name: &str| {
        result
            .rows
            .iter()
            .find(|r| !r.cold && r.variant == name)
            .map(|r| r.ns_per_kb.median)
    };
    let best = |kind: Kind| {
        result
            .rows
            .iter()
            .filter(|r| !r.cold && r.kind == kind)
            .min_by(|a, b| a.ns_per_kb.median.total_cmp(&b.ns_per_kb.median))
            .map(|r| (r.variant.clone(), r.ns_per_kb.median))
    };
    let us = |ns_kb: f64| ns_kb * packet / 1024.0 / 1000.0;
    let (Some(copy), Some(sum), Some(fused)) =
        (best(Kind::Copy), best(Kind::Checksum), best(Kind::Fused))
    else {
        return String::new();
    };
    let then = |k: &str| h.per_packet_us.get(k).copied().unwrap_or(0.0);
    format!(
        "per-packet budget, {packet} B of data (costs at {} B, hot): copy {:.3} µs ({}), checksum {:.3} µs ({}), copy+checksum fused {:.3} µs ({}) vs {:.3} µs done apart{}.\n\
         1988 (Sun-3/60): copy {} µs, checksum {} µs, LANCE DMA {} µs, all per-byte work {} µs of a {} µs budget at 10 Mbit/s.\n",
        result.size,
        us(copy.1),
        copy.0,
        us(sum.1),
        sum.0,
        us(fused.1),
        fused.0,
        us(copy.1) + us(sum.1),
        ns_per_kb("naive16").map_or(String::new(), |n| format!(
            "; the 1980s routine (naive16) alone would take {:.3} µs",
            us(n)
        )),
        then("copy"),
        then("checksum"),
        then("lance_dma"),
        then("variable_total"),
        then("budget_at_10mbit"),
    )
}

pub fn run(args: CksumArgs, out: &mut Output) -> anyhow::Result<()> {
    let specs = specs(&args.sizes, args.batches, args.cold_pool)?;
    let mut writer = RecordWriter::append(&args.out)
        .with_context(|| format!("cannot open {}", args.out.display()))?;
    let host = HostFacts::gather();
    let records = measure_all(&specs, &host, &mut writer)?;
    if args.json {
        out.json(&serde_json::json!({
            "experiment": "cksum",
            "records_file": args.out,
            "caches": host.caches,
            "records": records,
        }))?;
    } else {
        out.text(&format!(
            "netlab cksum: ns per KB, median of {} batches\n",
            args.batches
        ))?;
        out.text(&table(&records))?;
        eprintln!("records appended to {}", writer.path().display());
    }
    if results(&records).is_empty() {
        bail!("every size failed; see {}", writer.path().display());
    }
    Ok(())
}
