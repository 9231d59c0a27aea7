//! `netlab rpc [options]`: the 1989 Sun RPC experiment, its cliffs found and
//! explained, and `--find-cliffs` mapping where a stall begins and ends.
//! Arguments become an [`RpcPlan`]; `plan` runs it.

use crate::controller::processes::wait_for_interrupt;
use crate::controller::runner::Runner;
use crate::endpoint::rpc::client;
use crate::endpoint::rpc::client::{ClientOptions, Strategy};
use crate::endpoint::rpc::rpcbind;
use crate::endpoint::rpc::server::{PROGRAM, Server, ServerOptions, VERSION};
use crate::endpoint::rpc::{MAX_ARG_SIZE, MAX_CALLS, MAX_REPS, Proto};
use crate::experiments::rpc::cell::RpcMeasure;
use crate::experiments::rpc::plan as rpc_search;
use crate::experiments::rpc::plan::RpcPlan;
use crate::experiments::rpc::record::RpcData;
use crate::model::sunos4;
use crate::options::Output;
use crate::options::run::{Print, RunOutcome};
use crate::units::parse_count_list;
use crate::units::{parse_duration, parse_size};
use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use std::io::Write;
use std::net::SocketAddr;

/// Which stack carries the calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StackArg {
    /// This machine's kernel: real sockets, real RPC client and server.
    Linux,
    /// The 1989 SunOS 4 stack as a deterministic model (no sockets, TCP
    /// only): `model::sunos4`.
    Sunos4,
}

#[derive(Debug, Clone, Args)]
pub struct RpcExperimentArgs {
    /// The stack: `linux` (the real kernel) or `sunos4` (the model of
    /// 1989's SunOS 4, which predicts the source's table and its slow
    /// ranges from historical constants).
    #[arg(long, value_enum, default_value = "linux")]
    pub stack: StackArg,
    /// Argument sizes in bytes (a list, or LO..HI).
    #[arg(long, default_value = "0,512,1024,2048,4000,4096,8000,8192")]
    pub sizes: String,
    /// Calls per repetition.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=MAX_CALLS as i64))]
    pub calls: u32,
    /// Repetitions per cell.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=MAX_REPS as i64))]
    pub reps: u32,
    /// Protocols: tcp, udp or both.
    #[arg(long, value_enum, default_value = "tcp,udp", value_delimiter = ',')]
    pub proto: Vec<Proto>,
    /// How the client writes a TCP request.
    #[arg(long, value_enum, default_value = "sun")]
    pub strategy: Strategy,
    /// TCP_NODELAY on the client.
    #[arg(long)]
    pub nodelay: bool,
    /// TCP_QUICKACK on the server (no delayed ACKs).
    #[arg(long)]
    pub quickack: bool,
    /// TCP_CORK around each request's writes on the client.
    #[arg(long)]
    pub cork: bool,
    /// A new TCP connection for every call, closed after its reply
    /// (netperf's TCP_CRR): connections per second and their latency.
    /// TCP only (UDP has no connection; its cells are left out).
    #[arg(long)]
    pub connect_per_call: bool,
    /// Busy polling on both ends: spin on non-blocking receives this many
    /// µs before sleeping (user space; loopback and veth have no NAPI for
    /// SO_BUSY_POLL). 0, the default, never spins.
    #[arg(long, default_value_t = 0, value_name = "US", value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub busy_poll: u32,
    /// SO_SNDBUF and SO_RCVBUF on both ends' TCP sockets, set before the
    /// connection opens (e.g. 4096, SunOS 4's tcp_sendspace and
    /// tcp_recvspace; Linux doubles it and keeps at least its minimum).
    #[arg(long, value_name = "SIZE", value_parser = sockbuf_arg)]
    pub sockbuf: Option<u32>,
    /// Pin the client and the server each to one CPU, e.g. `0,1` (two CPUs)
    /// or `1,1` (one shared). Unpinned, the scheduler chooses call by call,
    /// which on a small VM moves a loopback round trip by several times.
    #[arg(long, value_name = "CLIENT,SERVER", value_parser = crate::endpoint::pin::parse_pair)]
    pub pin: Option<(usize, usize)>,
    /// Placements: loopback ("local"), netns ("remote"); default both when allowed.
    #[arg(long, value_delimiter = ',')]
    pub placements: Vec<String>,
    /// Link profile of the "remote" placement.
    #[arg(long, default_value = "ether10")]
    pub link: String,
    /// How to build the "remote" link (auto: netem where the kernel has it).
    #[arg(long, value_enum, default_value = "auto")]
    pub link_via: crate::options::placement::ViaKind,
    /// Do not rerun flagged cells to diagnose them.
    #[arg(long)]
    pub no_diagnose: bool,
    /// Map where TCP stalls begin and end, to the byte, on each placement.
    #[arg(long)]
    pub find_cliffs: bool,
    /// Range for --find-cliffs.
    #[arg(long, default_value = "0..12000")]
    pub cliff_range: String,
    #[command(flatten)]
    pub remote: crate::options::placement::RemoteArgs,
    #[command(flatten)]
    pub run: crate::options::run::RunOptions,
}

/// `--sockbuf`: a size from 1 byte to 1G.
fn sockbuf_arg(text: &str) -> Result<u32, String> {
    crate::units::parse_size(text)
        .ok()
        .and_then(|n| u32::try_from(n).ok().filter(|&n| n > 0 && n <= 1 << 30))
        .ok_or_else(|| "a size from 1 byte to 1G".to_string())
}

impl RpcExperimentArgs {
    pub fn plan(&self) -> anyhow::Result<RpcPlan> {
        let sizes = parse_count_list(&self.sizes).context("--sizes")?;
        if let Some(&big) = sizes.iter().find(|&&s| s > MAX_ARG_SIZE) {
            bail!(
                "argument size {big} is too large: a UDP call must fit one datagram (at most {MAX_ARG_SIZE} bytes)"
            );
        }
        let (pin, sockbuf) = (self.pin, self.sockbuf);
        let ends = self.remote.ends("rpc")?;
        let (mut placements, mut skipped) =
            RpcPlan::placements(&self.placements, &self.link, ends.as_ref())?;
        placements
            .iter_mut()
            .for_each(|p| p.set_via(self.link_via.into()));
        let mut protos = self.proto.clone();
        if self.connect_per_call && protos.contains(&Proto::Udp) {
            protos.retain(|&p| p == Proto::Tcp);
            skipped.push(
                "UDP left out: --connect-per-call opens a TCP connection per call, and UDP has none"
                    .into(),
            );
            if protos.is_empty() {
                bail!("--connect-per-call is TCP only: give --proto tcp");
            }
        }
        Ok(RpcPlan {
            sizes,
            protos,
            placements,
            strategy: self.strategy,
            client: ClientOptions {
                nodelay: self.nodelay,
                cork: self.cork,
                quickack: false,
                busy_poll_us: self.busy_poll,
                cpu: pin.map(|(client, _)| client),
                sockbuf,
                connect_per_call: self.connect_per_call,
                stall: self.run.stall_option()?,
                udp_timeout_ms: None,
            },
            server: ServerOptions {
                quickack: self.quickack,
                busy_poll_us: self.busy_poll,
                cpu: pin.map(|(_, server)| server),
                sockbuf,
                ..Default::default()
            },
            calls: self.calls,
            reps: self.reps,
            diagnose: !self.no_diagnose,
            skipped,
        })
    }
}

fn parse_cliff_range(text: &str) -> anyhow::Result<(usize, usize)> {
    let usage = || anyhow::anyhow!("--cliff-range must be LO..HI, e.g. 0..12000, not {text}");
    let (lo, hi) = text.split_once("..").ok_or_else(usage)?;
    let bound = |s: &str| s.trim().parse::<usize>().map_err(|_| usage());
    Ok((bound(lo)?, bound(hi)?))
}

/// `--stack sunos4`: the model's table, or its slow ranges.
fn run_model(args: RpcExperimentArgs, out: &mut Output) -> anyhow::Result<()> {
    if args.remote.from.is_some() || args.remote.to.is_some() {
        bail!("--stack sunos4 is a model that runs no endpoints: --from/--to do not apply");
    }
    if args.proto.iter().all(|&p| p == Proto::Udp) {
        bail!("--stack sunos4 models TCP only (1989's UDP columns had no stalls to explain)");
    }
    if args.find_cliffs {
        let (lo, hi) = parse_cliff_range(&args.cliff_range)?;
        let ranges = sunos4::slow_ranges_table(lo as u64, hi as u64).context("--cliff-range")?;
        return args.run.finish_unrecorded(
            out,
            crate::experiments::rpc::report::model_ranges_doc(lo as u64, hi as u64, &ranges),
            || crate::experiments::rpc::report::model_ranges_text(lo as u64, hi as u64, &ranges),
        );
    }
    let sizes = parse_count_list(&args.sizes).context("--sizes")?;
    let sizes64: Vec<u64> = sizes.iter().map(|&s| s as u64).collect();
    let predictions = sunos4::predict_table(&sizes64)?;
    args.run.finish_unrecorded(
        out,
        crate::experiments::rpc::report::model_doc(&predictions),
        || crate::experiments::rpc::report::model_table(&sizes),
    )
}

pub fn run_experiment(args: RpcExperimentArgs, out: &mut Output) -> anyhow::Result<()> {
    if args.stack == StackArg::Sunos4 {
        return run_model(args, out);
    }
    let plan = args.plan()?;
    let cliff_range = args
        .find_cliffs
        .then(|| parse_cliff_range(&args.cliff_range))
        .transpose()?;
    for note in &plan.skipped {
        eprintln!("netlab rpc: {note}");
    }
    args.run.measure(out, |runner| match cliff_range {
        Some(range) => find_cliffs(runner, &plan, range),
        None => {
            let rpc_search::Explained {
                records,
                findings,
                reruns,
            } = rpc_search::measure_and_explain(runner, &mut RpcMeasure, &plan)?;
            let doc =
                crate::experiments::rpc::report::doc(&records, &findings, &reruns, &plan.skipped);
            let text = format!(
                "{}{}{}",
                plan.title(),
                crate::experiments::rpc::report::table(&records, &findings),
                crate::experiments::rpc::report::connect_per_call_text(&records)
            );
            Ok(RunOutcome::grid(records, doc, text))
        }
    })
}

/// `--find-cliffs`: the sizes between `lo` and `hi` where calls stall.
fn find_cliffs(
    runner: &mut Runner<'_>,
    plan: &RpcPlan,
    (lo, hi): (usize, usize),
) -> anyhow::Result<RunOutcome<RpcData>> {
    let ranges = rpc_search::find_cliffs(runner, &mut RpcMeasure, plan, lo, hi).map_err(|e| {
        match e {
            // Keeps an interruption an interruption (exit 130).
            rpc_search::SearchError::Stopped(stopped) => anyhow::Error::from(stopped),
            other => other.into(),
        }
    })?;
    let doc = crate::experiments::rpc::report::cliffs_doc(plan.strategy.name(), (lo, hi), &ranges);
    let text = crate::experiments::rpc::report::stall_ranges_text(
        plan.strategy.name(),
        &plan.placements,
        &ranges,
        (lo, hi),
        rpc_search::PROBE_CALLS,
    );
    // The probes' records are in the records file; the search's answer is
    // the ranges, found even where probes failed.
    Ok(RunOutcome {
        records: Vec::new(),
        judged: false,
        print: Print::DocOrText { doc, text },
    })
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct RpcArgs {
    #[command(subcommand)]
    pub command: Option<RpcCommand>,
    #[command(flatten)]
    pub experiment: crate::experiments::rpc::options::RpcExperimentArgs,
}

impl RpcArgs {
    /// Whether it prints JSON (so an error is printed as JSON too).
    pub fn json(&self) -> bool {
        self.command.is_none() && self.experiment.run.json
    }
}

#[derive(Debug, Subcommand)]
pub enum RpcCommand {
    /// Serve netlab's RPC program (NULL and SINK) on TCP and UDP.
    Serve(ServeArgs),
    /// Call procedure 0 (NULL) of any ONC RPC program, like `rpcinfo -t/-u`.
    Ping(PingArgs),
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Where to serve (one port for both TCP and UDP).
    #[command(flatten)]
    pub bind: crate::options::BindArgs,
    /// Register with the local rpcbind (so rpcinfo finds the program), and unregister on exit.
    #[arg(long)]
    pub register: bool,
    #[arg(long)]
    pub nodelay: bool,
    /// Never delay ACKs (TCP_QUICKACK re-armed after every read).
    #[arg(long)]
    pub quickack: bool,
    /// Spin on non-blocking receives this many µs before sleeping (0: never).
    #[arg(long, default_value_t = 0, value_name = "US", value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub busy_poll: u32,
    /// Largest record accepted.
    #[arg(long, default_value = "1M", value_parser = parse_size)]
    pub max_record: u64,
    /// Close connections idle this long.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub idle_timeout: std::time::Duration,
}

#[derive(Debug, Args)]
pub struct PingArgs {
    /// Server address, e.g. 127.0.0.1:111.
    pub server: SocketAddr,
    /// Program number (100000 is rpcbind).
    pub program: u32,
    /// Version.
    pub version: u32,
    /// Use UDP instead of TCP.
    #[arg(long)]
    pub udp: bool,
}

pub fn run(args: RpcArgs, out: &mut Output) -> anyhow::Result<()> {
    match args.command {
        Some(RpcCommand::Serve(serve_args)) => serve(serve_args, out),
        Some(RpcCommand::Ping(ping_args)) => ping(ping_args, out),
        None => run_experiment(args.experiment, out),
    }
}

fn serve(args: ServeArgs, out: &mut Output) -> anyhow::Result<()> {
    let bind = args
        .bind
        .checked("rpc serve", "any peer may call the program")?;
    let options = ServerOptions {
        max_record: args.max_record as usize,
        nodelay: args.nodelay,
        quickack: args.quickack,
        busy_poll_us: args.busy_poll,
        idle_timeout_ms: args.idle_timeout.as_millis() as u64,
        ..Default::default()
    };
    let server = Server::bind(bind, options).with_context(|| format!("cannot bind {bind}"))?;
    let running = server.start()?;
    let port = running.port();
    out.text(&format!("{port}\n"))?;
    let _ = std::io::stdout().flush();
    let registration = args
        .register
        .then(|| rpcbind::Registration::new(PROGRAM, VERSION, port))
        .transpose()?;
    eprintln!(
        "netlab rpc serve: program {PROGRAM} (0x{PROGRAM:08x}) version {VERSION} on {}:{port} TCP and UDP{}; Ctrl-C stops",
        bind.ip(),
        if registration.is_some() {
            ", registered with rpcbind"
        } else {
            ""
        }
    );
    wait_for_interrupt();
    drop(registration);
    let report = running.stop();
    eprintln!(
        "netlab rpc serve: {} calls, {} connections, {} closed for misbehaving, {} records dropped",
        report.calls, report.connections, report.closed_bad_peers, report.dropped_records
    );
    Ok(())
}

fn ping(args: PingArgs, out: &mut Output) -> anyhow::Result<()> {
    let proto = if args.udp { "udp" } else { "tcp" };
    let took = client::ping(args.server, args.program, args.version, args.udp)
        // A stop's signal wakes the call with EINTR: say what it was.
        .map_err(|e| match crate::measure::stop::check() {
            Err(stopped) => anyhow::Error::new(stopped),
            Ok(()) => anyhow::Error::new(e),
        })
        .with_context(|| {
            format!(
                "program {} version {} at {} ({proto})",
                args.program, args.version, args.server
            )
        })?;
    out.text(&format!(
        "program {} version {} ready and waiting ({proto} {} µs)\n",
        args.program,
        args.version,
        took.as_micros()
    ))?;
    Ok(())
}
