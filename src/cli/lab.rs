//! `netlab lab`: the main job. Runs every landed experiment in its quick
//! profile (or `--full`), prints the tables, and writes them with the
//! records under `netlab-out/<timestamp>/`.

use super::Output;
use crate::analysis::cksum::per_byte_costs;
use crate::analysis::split::split;
use crate::endpoint::protocol::Amount;
use crate::experiment::cksum::CksumMeasure;
use crate::experiment::lab::LabPlan;
use crate::experiment::login::{DEFAULT_CORPUS, LoginMeasure};
use crate::experiment::output::{OutputMeasure, write_corpus};
use crate::experiment::rpc::RpcMeasure;
use crate::experiment::rpc_search;
use crate::experiment::runner::Runner;
use crate::experiment::stream::{StreamCell, StreamMeasure};
use crate::experiment::sweep::{self, summarize};
use crate::measure::host::HostFacts;
use crate::record::{Record, RecordWriter};
use crate::report::{self, tables};
use crate::units::format_size;
use anyhow::Context;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct LabArgs {
    /// The source documents' full repetition counts and longer runs.
    #[arg(long)]
    pub full: bool,
    /// Directory under which a timestamped results directory is created.
    #[arg(long, default_value = "netlab-out", value_name = "DIR")]
    pub out_dir: PathBuf,
    /// Stop at the first failed cell (it is recorded); by default a failed
    /// cell is recorded with its reason and the lab goes on.
    #[arg(long)]
    pub fail_fast: bool,
}

pub fn run(args: LabArgs, out: &mut Output) -> anyhow::Result<()> {
    let plan = if args.full {
        LabPlan::full()
    } else {
        LabPlan::quick()
    };
    // Limits first: nothing runs if a later section could not.
    let cksum_specs = plan.cksum.specs()?;
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(':', "");
    let dir = args.out_dir.join(&stamp);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let records_path = dir.join("results.jsonl");
    let mut writer = RecordWriter::append(&records_path)
        .with_context(|| format!("cannot create the records file in {}", dir.display()))?;
    let mut runner = Runner::new(HostFacts::gather(), Some(&mut writer)).fail_fast(args.fail_fast);
    let mut printed = String::new();
    let mut show = |text: String, out: &mut Output| -> anyhow::Result<()> {
        out.text(&text)?;
        out.text("\n")?;
        printed.push_str(&text);
        printed.push('\n');
        Ok(())
    };

    // 1981: Bill Joy's 4 MB in 1024-byte records.
    let joy = &plan.joy;
    eprintln!("lab: stream, {} ({} runs)", joy.describe(), plan.joy_repeat);
    let records = runner.grid(
        &mut StreamMeasure,
        &StreamCell::repeats(joy, plan.joy_repeat),
    )?;
    show(stream_section(&joy.describe(), &records), out)?;

    // 1981 again, over a 10 Mbit/s Ethernet between two hosts (namespaces).
    match &plan.joy_ether10 {
        Some(over_ether) => {
            eprintln!(
                "lab: stream over netns ether10, {} ({} runs)",
                over_ether.describe(),
                plan.ether10_repeat
            );
            let records = runner.grid(
                &mut StreamMeasure,
                &StreamCell::repeats(over_ether, plan.ether10_repeat),
            )?;
            let title = format!(
                "{} over an emulated 10 Mbit/s Ethernet",
                over_ether.describe()
            );
            show(stream_section(&title, &records), out)?;
        }
        None => show(
            "skipped: stream over netns ether10 (the netns placement needs CAP_NET_ADMIN; run as root)\n".into(),
            out,
        )?,
    }

    // 1989: Sun RPC time per call vs argument size, its cliffs and their causes.
    for note in &plan.rpc.skipped {
        show(format!("skipped: {note}\n"), out)?;
    }
    eprintln!(
        "lab: rpc, {} calls x {} reps per cell, {} placement(s)",
        plan.rpc.calls,
        plan.rpc.reps,
        plan.rpc.placements.len()
    );
    let rpc_search::Explained {
        records, findings, ..
    } = rpc_search::measure_and_explain(&mut runner, &mut RpcMeasure, &plan.rpc)?;
    show(
        format!(
            "{}{}",
            plan.rpc.title(),
            report::rpc::table(&records, &findings)
        ),
        out,
    )?;

    // 1988: throughput vs write size.
    let sweep = &plan.sweep;
    let sizes = format!(
        "{}..{}",
        format_size(sweep.records[0]),
        format_size(*sweep.records.last().unwrap_or(&sweep.records[0]))
    );
    eprintln!(
        "lab: sweep stream over {sizes} ({} s per run, {} runs per size)",
        match sweep.base.amount {
            Amount::Seconds(s) => s,
            Amount::Bytes(_) => 0.0,
        },
        sweep.repeat
    );
    let records = runner.grid(&mut StreamMeasure, &sweep::cells(sweep))?;
    let summary = summarize(&records, sweep.knee_fraction);
    let title = format!("record sizes {sizes}; each point {}", sweep.base.describe());
    show(tables::sweep_table(&title, &summary, &records), out)?;

    // 1988: the per-KB costs of copying and checksumming, and what they explain.
    eprintln!(
        "lab: cksum over {}",
        plan.cksum
            .sizes
            .iter()
            .map(|&s| format_size(s))
            .collect::<Vec<_>>()
            .join(",")
    );
    let records = runner.grid(&mut CksumMeasure, &cksum_specs)?;
    let mut text = format!(
        "netlab cksum: ns per KB, median of {} batches\n",
        plan.cksum.batches
    );
    text.push_str(&report::cksum::table(&records));
    if let (Some(model), Some((copy, sum))) = (&summary.model, per_byte_costs(&records, 65536)) {
        text.push_str(&format!(
            "the stream sweep's {} (loopback: two copies per byte, no checksum; copy and checksum costs hot at 64 KB)\n",
            split(model.per_byte * 1e9, copy, sum, 2, 0).describe()
        ));
    }
    show(text, out)?;

    // 1989: users typing through rlogind, one relay design against
    // another; the real servers beside them where this machine has them.
    eprintln!(
        "lab: login, {:?} users typing 5 chars/s through each relay design ({} s windows)",
        plan.login.users, plan.login.duration_s
    );
    let mut typing = LoginMeasure::new(DEFAULT_CORPUS.as_bytes().to_vec())?;
    let records = runner.grid(&mut typing, &plan.login_cells)?;
    show(
        format!(
            "netlab login: users typing 5 chars/s into `cat > /dev/null` (netlab's designs over rlogin), {} s windows, loopback (and epoll over netns ether10 as root)\n{}",
            plan.login.duration_s,
            report::login::table(&records)
        ),
        out,
    )?;

    // 1987: text typed to a terminal through each design, per KB.
    let corpus_dir = tempfile::tempdir()?;
    let corpus = corpus_dir.path().join("corpus.txt");
    write_corpus(&corpus, plan.output.size)?;
    eprintln!(
        "lab: output, {} typed through each relay design",
        plan.output.size
    );
    let records = runner.grid(&mut OutputMeasure { file: corpus }, &plan.output_cells)?;
    show(
        format!(
            "netlab output: {} of text typed through each design (unpaced), loopback (and epoll over netns ether10 as root)\n{}",
            format_size(plan.output.size),
            report::login::output_table(&records)
        ),
        out,
    )?;
    drop(runner);

    let tables_path = dir.join("tables.txt");
    std::fs::write(&tables_path, &printed)
        .with_context(|| format!("cannot write {}", tables_path.display()))?;
    out.text(&format!(
        "lab results: {} (records: {})\n",
        dir.display(),
        records_path.display()
    ))?;
    // The report, from the records alone, beside them.
    let loaded = crate::report::html::load(&records_path)
        .with_context(|| format!("cannot read back {}", records_path.display()))?;
    let report = crate::report::html::write(&loaded, "results.jsonl", &dir)
        .with_context(|| format!("cannot write the report into {}", dir.display()))?;
    for e in &report.figure_errors {
        eprintln!("figure not drawn: {e}");
    }
    out.text(&format!(
        "report: {} ({} figures)\n",
        report.html.display(),
        report.figures.len()
    ))?;
    out.text("most notable:\n")?;
    for (i, finding) in report.notable.iter().enumerate() {
        out.text(&format!("{}. {finding}\n", i + 1))?;
    }
    Ok(())
}

/// A stream table with the 1981 figures beside it.
fn stream_section(title: &str, records: &[Record]) -> String {
    let mut text = tables::stream_table(title, records);
    if let Some(line) = tables::berkeley_then_now(records) {
        text.push_str(&line);
        text.push('\n');
    }
    text
}
