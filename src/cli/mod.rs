//! The command line: the top-level command, whose experiments' subcommands
//! come from the registry (`experiments::Command`, each experiment's
//! options beside its `run` in its folder), and the commands that are no
//! experiment (lab, report, testbed, agent, doctor). `main` only calls
//! [`main`] here.
//!
//! Exit codes: 0 success (also when stdout is a closed pipe, as in
//! `netlab ... | head`; failed cells show in the table and the records), 1
//! every cell failed, `--fail-fast` stopped at one, or bad configuration, 2
//! bad usage, 130 interrupted (records finished before the interrupt are
//! kept).

pub mod agent;
pub mod calibrate;
pub mod doctor;
pub mod lab;
pub mod report;
pub mod testbed;

use crate::controller::MeasureError;
use crate::options::{Output, describe};
use clap::{Parser, Subcommand};
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

// Parsed once per process: the size of its largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Commands {
    /// Run the lab: every landed experiment in its quick profile, tables and records.
    Lab(lab::LabArgs),
    /// Measure this host's CPU per small TCP packet, the unit of the
    /// 1989-class hosts (`--host-cpu sun3`), and store it (`--out`).
    Calibrate(calibrate::CalibrateArgs),
    #[command(flatten)]
    Experiment(crate::experiments::Command),
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
            Commands::Experiment(command) => command.json(),
            Commands::Doctor(a) => a.json,
            Commands::Calibrate(a) => a.json,
            Commands::Lab(_)
            | Commands::Report(_)
            | Commands::Testbed(_)
            | Commands::Agent(_)
            | Commands::Endpoint => false,
        }
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
        // A SIGTERM meant for the run (as `timeout` sends it, to the whole
        // process group) must not kill the ends before their controller
        // stops them: a dead end cannot remove its CPU-budget cgroup, its
        // sessions or its test user. The controller stops them on SIGTERM;
        // if it dies, they die with it (PR_SET_PDEATHSIG). A handler, not
        // SIG_IGN, so the programs they start get the default again at exec.
        let _ = signal_hook::flag::register(
            signal_hook::consts::SIGTERM,
            std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)),
        );
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
    if let Err(e) = crate::controller::processes::install_interrupt_handler() {
        eprintln!("netlab: cannot install the Ctrl-C handler: {e}");
        return ExitCode::FAILURE;
    }
    let json = cli.command.json();
    let json_lines = std::env::args().any(|a| a == "--json-stream");
    let mut out = Output::new();
    let result = match cli.command {
        Commands::Lab(args) => lab::run(args, &mut out),
        Commands::Experiment(command) => command.run(&mut out),
        Commands::Testbed(args) => testbed::run(args, &mut out),
        Commands::Report(args) => report::run(args, &mut out),
        Commands::Agent(args) => agent::run(args, &mut out),
        Commands::Doctor(args) => doctor::run(args, &mut out),
        Commands::Calibrate(args) => calibrate::run(args, &mut out),
        Commands::Endpoint => unreachable!("handled above"),
    };
    // Ends the run on every agent it used, so each is free for the next
    // controller at once.
    crate::controller::remote::close_all();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Whatever error a stop left behind (a wait given up, a cell
            // cut short), a stopped command exits as interrupted.
            let interrupted = crate::measure::stop::requested()
                || matches!(
                    e.downcast_ref::<MeasureError>(),
                    Some(MeasureError::Interrupted { .. })
                );
            // Its document or text is out already; only the count is left to say.
            if e.downcast_ref::<crate::options::run::SomeCellsFailed>()
                .is_some()
                || e.downcast_ref::<crate::options::run::PrintedIncomplete>()
                    .is_some()
            {
                eprintln!("netlab: {}", describe(&e));
                return ExitCode::from(crate::options::run::SOME_CELLS_FAILED);
            }
            if json_lines {
                // JSON Lines: the error on one line, as the last event.
                let line = serde_json::json!({ "event": "error", "error": describe(&e) });
                let _ = out.text(&format!("{line}\n"));
            } else if json {
                let _ = out.json(&serde_json::json!({ "error": describe(&e) }));
            } else {
                eprintln!("netlab: {}", describe(&e));
            }
            ExitCode::from(if interrupted { 130 } else { 1 })
        }
    }
}
