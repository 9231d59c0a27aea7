//! `netlab cksum`: the Internet checksum and copy costs per KB, against the
//! machine's limits and Van Jacobson's 1988 figures.

use super::Output;
use crate::analysis::cksum::results;
use crate::experiment::cksum::{CksumMeasure, CksumPlan};
use crate::experiment::runner::Runner;
use crate::measure::host::HostFacts;
use crate::record::RecordWriter;
use crate::report;
use crate::units::parse_size;
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
    /// Stop at the first failed size (it is recorded).
    #[arg(long)]
    pub fail_fast: bool,
}

pub fn run(args: CksumArgs, out: &mut Output) -> anyhow::Result<()> {
    let specs = CksumPlan::with_sizes(&args.sizes, args.batches, args.cold_pool)?.specs()?;
    let mut writer = RecordWriter::append(&args.out)
        .with_context(|| format!("cannot open {}", args.out.display()))?;
    let host = HostFacts::gather();
    let caches = host.caches.clone();
    let records = Runner::new(host, Some(&mut writer))
        .fail_fast(args.fail_fast)
        .progress(!args.json)
        .grid(&mut CksumMeasure, &specs)?;
    if args.json {
        out.json(&serde_json::json!({
            "experiment": "cksum",
            "records_file": args.out,
            "caches": caches,
            "records": records,
        }))?;
    } else {
        out.text(&format!(
            "netlab cksum: ns per KB, median of {} batches\n",
            args.batches
        ))?;
        out.text(&report::cksum::table(&records))?;
        eprintln!("records appended to {}", args.out.display());
    }
    if results(&records).is_empty() {
        bail!("every size failed; see {}", args.out.display());
    }
    Ok(())
}
