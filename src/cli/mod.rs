//! The command line: one module per subcommand, each with its options beside
//! its `run`, which turns them into a plan (`experiment`), runs it through
//! the runner and prints what `report` makes of the records; [`run`] holds
//! the options and steps every experiment shares. `main` only calls [`main`]
//! here.
//!
//! Exit codes: 0 success (also when stdout is a closed pipe, as in
//! `netlab ... | head`; failed cells show in the table and the records), 1
//! every cell failed, `--fail-fast` stopped at one, or bad configuration, 2
//! bad usage, 130 interrupted (records finished before the interrupt are
//! kept).

pub mod ablate;
pub mod agent;
pub mod cksum;
pub mod doctor;
pub mod lab;
pub mod login;
pub mod login_experiment;
pub mod output;
pub mod placement;
pub mod report;
pub mod rpc;
pub mod rpc_experiment;
pub mod run;
pub mod stream;
pub mod sweep;
pub mod testbed;

use crate::experiment::MeasureError;
use clap::{Parser, Subcommand};
use std::io::Write;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "netlab",
    version,
    about = "A TCP/IP performance laboratory: the classic experiments, the numbers, the reasons",
    long_about = None
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Commands,
}

#[derive(Debug, Subcommand)]
pub enum Commands {
    /// Run the lab: every landed experiment in its quick profile, tables and records.
    Lab(lab::LabArgs),
    /// Bulk transfer between two endpoint processes (ttcp-style).
    Stream(stream::StreamArgs),
    /// ONC RPC: the 1989 experiment (time per call vs size), cliffs and their causes; `serve`, `ping`.
    Rpc(rpc::RpcArgs),
    /// Internet checksum and copy costs per KB: variants, limits, then vs now, the per-packet budget.
    Cksum(cksum::CksumArgs),
    /// Run an experiment over a grid of sizes: throughput vs size, knee, cost model.
    Sweep(sweep::SweepArgs),
    /// What-ifs as a full factorial: each feature's effect and their interactions.
    Ablate(ablate::AblateArgs),
    /// Remote-login load (the 1989 typing test) and servers on ptys: `serve`.
    Login(login::LoginArgs),
    /// The 1987 terminal-output test: text typed to a terminal through each relay design.
    Output(output::OutputArgs),
    /// Build report.html, SVG/PNG figures (and --csv) from a records file.
    Report(report::ReportArgs),
    /// Manage the network namespaces and links netlab creates.
    Testbed(testbed::TestbedArgs),
    /// Serve as the far end of runs from other hosts (`keygen`, `serve`).
    Agent(agent::AgentArgs),
    /// What this host can and cannot do for netlab, each gap with its fix.
    Doctor(doctor::DoctorArgs),
    /// Internal: an endpoint process driven by the controller over stdin/stdout.
    #[command(hide = true)]
    Endpoint,
}

impl Commands {
    fn json(&self) -> bool {
        match self {
            Commands::Stream(a) => a.common.run.json || a.json_stream,
            Commands::Sweep(a) => a.json(),
            Commands::Ablate(a) => a.json(),
            Commands::Rpc(a) => a.command.is_none() && a.experiment.run.json,
            Commands::Cksum(a) => a.run.json,
            Commands::Login(a) => a.command.is_none() && a.experiment.run.json,
            Commands::Output(a) => a.run.json,
            Commands::Doctor(a) => a.json,
            Commands::Lab(_)
            | Commands::Report(_)
            | Commands::Testbed(_)
            | Commands::Agent(_)
            | Commands::Endpoint => false,
        }
    }
}

/// A size (`parse_size`) as a `usize`, for clap.
fn usize_size_arg(text: &str) -> Result<usize, String> {
    let size = crate::units::parse_size(text).map_err(|e| e.to_string())?;
    usize::try_from(size).map_err(|_| format!("size \"{text}\" is too large"))
}

/// A size (`parse_size`) as a `u32`, for clap.
fn u32_size_arg(text: &str) -> Result<u32, String> {
    let size = crate::units::parse_size(text).map_err(|e| e.to_string())?;
    u32::try_from(size).map_err(|_| format!("size \"{text}\" is too large"))
}

/// A duration (`parse_duration`) in seconds, for clap.
fn seconds_arg(text: &str) -> Result<f64, crate::units::UnitError> {
    crate::units::parse_duration(text).map(|d| d.as_secs_f64())
}

/// Where a server started from the command line listens.
#[derive(Debug, clap::Args)]
pub struct BindArgs {
    /// Port; 0 picks a free one and prints it.
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Address to bind; anything but loopback needs --allow-remote.
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: std::net::IpAddr,
    /// Allow a non-loopback bind (the server has no authentication).
    #[arg(long)]
    pub allow_remote: bool,
}

impl BindArgs {
    /// The address, refused when not loopback without --allow-remote, with a
    /// warning when allowed: `what` serves `why` to anyone who reaches it.
    fn checked(&self, what: &str, why: &str) -> anyhow::Result<std::net::SocketAddr> {
        let bind = self.bind;
        if !bind.is_loopback() {
            if !self.allow_remote {
                anyhow::bail!(
                    "refusing to bind {bind} (not loopback) without --allow-remote: {why}"
                );
            }
            eprintln!(
                "netlab {what}: warning: serving on {bind}, reachable from other hosts: {why}"
            );
        }
        Ok(std::net::SocketAddr::new(bind, self.port))
    }
}

/// Standard output that treats a closed pipe as the reader's wish to stop.
pub struct Output {
    closed: bool,
}

impl Output {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.closed {
            return Ok(());
        }
        let mut stdout = std::io::stdout().lock();
        match stdout.write_all(bytes).and_then(|_| stdout.flush()) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            other => other,
        }
    }

    pub fn text(&mut self, text: &str) -> std::io::Result<()> {
        self.write(text.as_bytes())
    }

    /// One JSON document, pretty-printed, with a final newline.
    pub fn json(&mut self, value: &serde_json::Value) -> std::io::Result<()> {
        let mut bytes = serde_json::to_vec_pretty(value).map_err(std::io::Error::other)?;
        bytes.push(b'\n');
        self.write(&bytes)
    }
}

/// Parses the arguments, runs the subcommand and maps the outcome to an exit code.
pub fn main() -> ExitCode {
    let wants_json = std::env::args().any(|a| a == "--json");
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if wants_json && e.use_stderr() => {
            let message = e.render().to_string();
            let first = message
                .lines()
                .next()
                .unwrap_or("")
                .trim_start_matches("error: ");
            println!("{}", serde_json::json!({ "error": first }));
            return ExitCode::from(2);
        }
        Err(e) => e.exit(),
    };
    if let Commands::Endpoint = cli.command {
        return match crate::endpoint::serve(
            crate::experiments::ROLES,
            std::io::stdin().lock(),
            std::io::stdout().lock(),
        ) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("netlab endpoint: control channel: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if let Err(e) = crate::experiment::endpoints::install_interrupt_handler() {
        eprintln!("netlab: cannot install the Ctrl-C handler: {e}");
        return ExitCode::FAILURE;
    }
    let json = cli.command.json();
    let json_lines = std::env::args().any(|a| a == "--json-stream");
    let mut out = Output { closed: false };
    let result = match cli.command {
        Commands::Lab(args) => lab::run(args, &mut out),
        Commands::Stream(args) => stream::run(args, &mut out),
        Commands::Sweep(args) => sweep::run(args, &mut out),
        Commands::Ablate(args) => ablate::run(args, &mut out),
        Commands::Rpc(args) => rpc::run(args, &mut out),
        Commands::Cksum(args) => cksum::run(args, &mut out),
        Commands::Testbed(args) => testbed::run(args, &mut out),
        Commands::Report(args) => report::run(args, &mut out),
        Commands::Login(args) => login::run(args, &mut out),
        Commands::Output(args) => output::run(args, &mut out),
        Commands::Agent(args) => agent::run(args, &mut out),
        Commands::Doctor(args) => doctor::run(args, &mut out),
        Commands::Endpoint => unreachable!("handled above"),
    };
    // Ends the run on every agent it used, so each is free for the next
    // controller at once.
    crate::experiment::remote::close_all();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let interrupted = matches!(
                e.downcast_ref::<MeasureError>(),
                Some(MeasureError::Interrupted { .. })
            );
            if json_lines {
                // JSON Lines: the error on one line, as the last event.
                let line = serde_json::json!({ "event": "error", "error": format!("{e:#}") });
                let _ = out.text(&format!("{line}\n"));
            } else if json {
                let _ = out.json(&serde_json::json!({ "error": format!("{e:#}") }));
            } else {
                eprintln!("netlab: {e:#}");
            }
            ExitCode::from(if interrupted { 130 } else { 1 })
        }
    }
}
