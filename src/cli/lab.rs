//! `netlab lab`: the main job. Runs every landed experiment in its quick
//! profile (or `--full`), prints the tables, and writes them with the
//! records under `netlab-out/<timestamp>/`.

use super::Output;
use super::cksum;
use super::login_experiment;
use super::output;
use super::rpc_experiment::{
    RpcExperimentArgs, measure_and_explain, table as rpc_table, title as rpc_title,
};
use super::stream::run_series;
use super::sweep::run_sweep;
use crate::analysis::split::split;
use crate::endpoint::login::server::Relay;
use crate::endpoint::protocol::{Amount, RecvStrategy, SendStrategy, SocketOptions};
use crate::experiment::login::{DEFAULT_CORPUS, Dialect, LoginParams, Target};
use crate::experiment::output::write_corpus;
use crate::experiment::stream::StreamConfig;
use crate::experiment::sweep::{SweepConfig, summarize};
use crate::measure::host::HostFacts;
use crate::record::RecordWriter;
use crate::report::tables;
use crate::testbed::{LinkVia, Placement, link::LinkProfile};
use crate::units::parse_size_list;
use anyhow::Context;
use clap::{Args, Parser};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct LabArgs {
    /// The source documents' full repetition counts and longer runs.
    #[arg(long)]
    pub full: bool,
    /// Directory under which a timestamped results directory is created.
    #[arg(long, default_value = "netlab-out", value_name = "DIR")]
    pub out_dir: PathBuf,
}

/// The profile's sizes and counts.
struct Profile {
    joy_repeat: u32,
    netns_repeat: u32,
    rpc_calls: u32,
    rpc_reps: u32,
    sweep_records: &'static str,
    sweep_seconds: f64,
    sweep_repeat: u32,
    cksum_sizes: &'static str,
    cksum_batches: u32,
    cksum_pool: u64,
    login_users: &'static [usize],
    output_bytes: u64,
    login_warmup_s: f64,
    login_seconds: f64,
}

const QUICK: Profile = Profile {
    joy_repeat: 5,
    netns_repeat: 2,
    rpc_calls: 20,
    rpc_reps: 3,
    sweep_records: "64..1M",
    sweep_seconds: 0.3,
    sweep_repeat: 3,
    cksum_sizes: "64,1408,65536,1M,64M",
    cksum_batches: 5,
    cksum_pool: 256 << 20,
    login_users: &[16, 48],
    output_bytes: 1 << 20,
    login_warmup_s: 0.5,
    login_seconds: 1.5,
};

const FULL: Profile = Profile {
    joy_repeat: 20,
    netns_repeat: 5,
    rpc_calls: 100,
    rpc_reps: 20,
    sweep_records: "16..4M",
    sweep_seconds: 2.0,
    sweep_repeat: 5,
    cksum_sizes: "64,1408,4096,65536,1M,64M",
    cksum_batches: 15,
    cksum_pool: 512 << 20,
    login_users: &[16, 32, 48],
    output_bytes: 4 << 20,
    login_warmup_s: 2.0,
    login_seconds: 30.0,
};

pub fn run(args: LabArgs, out: &mut Output) -> anyhow::Result<()> {
    let profile = if args.full { &FULL } else { &QUICK };
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(':', "");
    let dir = args.out_dir.join(&stamp);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut writer = RecordWriter::append(&dir.join("results.jsonl"))
        .with_context(|| format!("cannot create the records file in {}", dir.display()))?;
    let host = HostFacts::gather();
    let mut printed = String::new();
    let mut show = |text: String, out: &mut Output| -> anyhow::Result<()> {
        out.text(&text)?;
        out.text("\n")?;
        printed.push_str(&text);
        printed.push('\n');
        Ok(())
    };

    // 1981: Bill Joy's 4 MB in 1024-byte records.
    let joy = StreamConfig {
        amount: Amount::Bytes(4 << 20),
        record: 1024,
        send: SendStrategy::Write,
        recv: RecvStrategy::Read { buffer: 1024 },
        options: SocketOptions::default(),
        verify: true,
        port: 0,
        placement: Placement::Loopback,
    };
    eprintln!(
        "lab: stream, {} ({} runs)",
        joy.describe(),
        profile.joy_repeat
    );
    let records = run_series(&joy, profile.joy_repeat, &mut writer, &host)?;
    let mut text = tables::stream_table(&joy.describe(), &records);
    if let Some(line) = tables::berkeley_then_now(&records) {
        text.push_str(&line);
        text.push('\n');
    }
    show(text, out)?;

    // 1981 again, over a 10 Mbit/s Ethernet between two hosts (namespaces).
    if crate::testbed::netns::has_net_admin() {
        let over_ether = StreamConfig {
            placement: Placement::Netns {
                link: LinkProfile::named("ether10").expect("a known profile"),
                via: LinkVia::Auto,
                capture: true,
                pcap: None,
                verbose: false,
            },
            ..joy.clone()
        };
        eprintln!(
            "lab: stream over netns ether10, {} ({} runs)",
            over_ether.describe(),
            profile.netns_repeat
        );
        let records = run_series(&over_ether, profile.netns_repeat, &mut writer, &host)?;
        let mut text = tables::stream_table(
            &format!(
                "{} over an emulated 10 Mbit/s Ethernet",
                over_ether.describe()
            ),
            &records,
        );
        if let Some(line) = tables::berkeley_then_now(&records) {
            text.push_str(&line);
            text.push('\n');
        }
        show(text, out)?;
    } else {
        show(
            "skipped: stream over netns ether10 (the netns placement needs CAP_NET_ADMIN; run as root)\n".into(),
            out,
        )?;
    }

    // 1989: Sun RPC time per call vs argument size, its cliffs and their causes.
    /// The rpc command's own defaults, with the profile's counts.
    #[derive(Parser)]
    struct RpcDefaults {
        #[command(flatten)]
        args: RpcExperimentArgs,
    }
    let rpc_args = RpcDefaults::parse_from([
        "rpc".to_string(),
        "--calls".into(),
        profile.rpc_calls.to_string(),
        "--reps".into(),
        profile.rpc_reps.to_string(),
        "--out".into(),
        writer.path().display().to_string(),
    ])
    .args;
    let plan = rpc_args.plan()?;
    for note in &plan.skipped {
        show(format!("skipped: {note}\n"), out)?;
    }
    eprintln!(
        "lab: rpc, {} calls x {} reps per cell, {} placement(s)",
        plan.calls,
        plan.reps,
        plan.placements.len()
    );
    let (records, findings, _) = measure_and_explain(&plan, true, &host, &mut writer)?;
    show(
        format!("{}{}", rpc_title(&plan), rpc_table(&records, &findings)),
        out,
    )?;

    // 1988: throughput vs write size.
    let sweep = SweepConfig {
        base: StreamConfig {
            amount: Amount::Seconds(profile.sweep_seconds),
            record: 64,
            recv: RecvStrategy::Read { buffer: 128 << 10 },
            ..joy.clone()
        },
        records: parse_size_list(profile.sweep_records).expect("profile sizes parse"),
        repeat: profile.sweep_repeat,
        knee_fraction: crate::analysis::knee::DEFAULT_FRACTION,
    };
    eprintln!(
        "lab: sweep stream over {} ({} s per run, {} runs per size)",
        profile.sweep_records, profile.sweep_seconds, profile.sweep_repeat
    );
    let records = run_sweep(&sweep, &mut writer, &host)?;
    let summary = summarize(&records, sweep.knee_fraction);
    let title = format!(
        "record sizes {}; each point {}",
        profile.sweep_records,
        sweep.base.describe()
    );
    show(tables::sweep_table(&title, &summary, &records), out)?;

    // 1988: the per-KB costs of copying and checksumming, and what they explain.
    let specs = cksum::specs(
        profile.cksum_sizes,
        profile.cksum_batches,
        profile.cksum_pool,
    )?;
    eprintln!("lab: cksum over {}", profile.cksum_sizes);
    let records = cksum::measure_all(&specs, &host, &mut writer)?;
    let mut text = format!(
        "netlab cksum: ns per KB, median of {} batches\n",
        profile.cksum_batches
    );
    text.push_str(&cksum::table(&records));
    if let (Some(model), Some((copy, sum))) =
        (&summary.model, cksum::per_byte_costs(&records, 65536))
    {
        text.push_str(&format!(
            "the stream sweep's {} (loopback: two copies per byte, no checksum; copy and checksum costs hot at 64 KB)\n",
            split(model.per_byte * 1e9, copy, sum, 2, 0).describe()
        ));
    }
    show(text, out)?;

    // 1989: users typing through rlogind, one relay design against
    // another; the real servers beside them (telnetd over TELNET, sshd over
    // SSH) where this machine has them.
    let mut servers: Vec<(Target, Dialect)> = Relay::ALL
        .into_iter()
        .map(|relay| (Target::of(relay), Dialect::Rlogin))
        .collect();
    if std::path::Path::new("/usr/sbin/telnetd").exists() {
        servers.push((Target::Telnetd, Dialect::Telnet));
    }
    // SAFETY: geteuid has no preconditions.
    if std::path::Path::new("/usr/sbin/sshd").exists() && unsafe { libc::geteuid() } == 0 {
        servers.push((Target::Sshd, Dialect::Ssh));
    }
    // Over a 10 Mbit/s Ethernet too (as root), one design at the first count:
    // the packets in and out are then the interface's, as in 1989's vmstat.
    let ether10 = crate::testbed::netns::has_net_admin().then(|| Placement::Netns {
        link: LinkProfile::named("ether10").expect("a known profile"),
        via: LinkVia::Auto,
        capture: false,
        pcap: None,
        verbose: false,
    });
    let mut cells = Vec::new();
    let login_cell = |relay, protocol, placement: &Placement, users| LoginParams {
        relay,
        protocol,
        placement: placement.clone(),
        users,
        rate: 5.0,
        poisson: false,
        warmup_s: profile.login_warmup_s,
        duration_s: profile.login_seconds,
    };
    for &users in profile.login_users {
        for &(relay, protocol) in &servers {
            cells.push(login_cell(relay, protocol, &Placement::Loopback, users));
        }
    }
    if let Some(netns) = &ether10 {
        cells.push(login_cell(
            Target::Epoll,
            Dialect::Rlogin,
            netns,
            profile.login_users[0],
        ));
    }
    eprintln!(
        "lab: login, {:?} users typing 5 chars/s through each relay design ({} s windows)",
        profile.login_users, profile.login_seconds
    );
    let records =
        login_experiment::measure_all(&cells, DEFAULT_CORPUS.as_bytes(), &host, &mut writer, true)?;
    show(
        format!(
            "netlab login: users typing 5 chars/s into `cat > /dev/null` (netlab's designs over rlogin), {} s windows, loopback (and epoll over netns ether10 as root)\n{}",
            profile.login_seconds,
            login_experiment::table(&records)
        ),
        out,
    )?;

    // 1987: text typed to a terminal through each design, per KB.
    let corpus_dir = tempfile::tempdir()?;
    let corpus = corpus_dir.path().join("corpus.txt");
    write_corpus(&corpus, profile.output_bytes)?;
    let targets: Vec<Target> = Relay::ALL.into_iter().map(Target::of).collect();
    let mut cells = output::cells(
        &targets,
        &[Dialect::Telnet, Dialect::Rlogin],
        &[Placement::Loopback],
        profile.output_bytes,
        None,
        false,
    );
    // The real servers beside netlab's, where this machine has them.
    let real: Vec<Target> = servers
        .iter()
        .filter(|(t, _)| t.relay().is_none())
        .map(|(t, _)| *t)
        .collect();
    cells.extend(output::cells(
        &real,
        &[Dialect::Telnet],
        &[Placement::Loopback],
        profile.output_bytes,
        None,
        false,
    ));
    if let Some(netns) = &ether10 {
        cells.extend(output::cells(
            &[Target::Epoll],
            &[Dialect::Rlogin],
            std::slice::from_ref(netns),
            profile.output_bytes,
            None,
            false,
        ));
    }
    eprintln!(
        "lab: output, {} typed through each relay design",
        profile.output_bytes
    );
    let records = output::measure_all(&cells, &corpus, &host, &mut writer)?;
    show(
        format!(
            "netlab output: {} of text typed through each design (unpaced), loopback (and epoll over netns ether10 as root)\n{}",
            crate::units::format_size(profile.output_bytes),
            output::table(&records)
        ),
        out,
    )?;

    let tables_path = dir.join("tables.txt");
    std::fs::write(&tables_path, &printed)
        .with_context(|| format!("cannot write {}", tables_path.display()))?;
    out.text(&format!(
        "lab results: {} (records: {})\n",
        dir.display(),
        writer.path().display()
    ))?;
    // The report, from the records alone, beside them.
    let loaded = crate::report::html::load(writer.path())
        .with_context(|| format!("cannot read back {}", writer.path().display()))?;
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
