//! `netlab output`: the 1987 terminal-output experiment. Text files typed
//! to a terminal through each relay design and protocol: terminal
//! throughput, CPU per KB on the server and client sides, packets per KB
//! and their mean size, with the 1987 telnet figures beside.

use crate::endpoint::login::host::Dialect;
use crate::endpoint::login::host::Target;
use crate::experiments::output::cell::{OutputMeasure, OutputPlan};
use crate::options::Output;
use crate::options::run::RunOutcome;
use anyhow::bail;
use clap::Args;

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
    /// `linux`: measure this kernel. `vms44`: the 1987 remote host (a
    /// VAX-11/750 under VMS 4.4 with CMU/TEK TCP/IP, 002) as a CPU model
    /// that runs nothing: 002's figures beside its predictions, and why
    /// LAT left the host idle.
    #[arg(long, value_enum, default_value = "linux")]
    pub stack: OutputStack,
    /// With --stack vms44: an output results file (`netlab output --out`)
    /// whose servers' counted work a KB is priced on 1987's VAX: today's
    /// servers on the old machine (`-`: standard input).
    #[arg(long, value_name = "RESULTS")]
    pub counts_from: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub place: crate::options::placement::ListedArgs,
    #[command(flatten)]
    pub run: crate::options::run::RunOptions,
}

/// Which host the text is typed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputStack {
    Linux,
    Vms44,
}

impl OutputArgs {
    /// Whether it prints JSON (so an error is printed as JSON too).
    pub fn json(&self) -> bool {
        self.run.json
    }
}

/// The longest a cell may take to type its file at `--baud`.
const MAX_TYPING_S: f64 = 86_400.0;

pub fn run(args: OutputArgs, out: &mut Output) -> anyhow::Result<()> {
    if args.stack == OutputStack::Vms44 {
        if args.place.placement.is_some()
            || args.place.remote.from.is_some()
            || args.place.remote.to.is_some()
            || args.baud.is_some()
            || args.nodelay
        {
            bail!(
                "--stack vms44: the model describes 002's host only (a VAX-11/750 typing to a 9600-baud terminal) and runs no endpoints: --placement, --from, --to, --baud and --nodelay do not apply"
            );
        }
        let today = match &args.counts_from {
            None => Vec::new(),
            Some(path) => crate::record::counts_from(
                path,
                crate::experiments::output::model::today,
                "no output cell there counted its server's work a KB (records before 2026-12-05 do not)",
            )
            .map_err(anyhow::Error::msg)?,
        };
        use crate::experiments::output::model::{model_doc, model_text};
        return args
            .run
            .finish_unrecorded(out, model_doc(&today), || model_text(&today));
    }
    if args.counts_from.is_some() {
        bail!("--counts-from feeds measured counts into the model: add --stack vms44");
    }
    if args.size == 0 {
        bail!("--size must be above zero");
    }
    if args.baud == Some(0) {
        bail!("--baud must be above zero");
    }
    if let Some(baud) = args.baud {
        // Ten bits a character on an asynchronous line (start, 8, stop).
        let seconds = args.size as f64 * 10.0 / f64::from(baud);
        if seconds > MAX_TYPING_S {
            bail!(
                "--baud {baud} --size {}: typing it would take about {:.0} days; a run takes at most a day: give a smaller --size or a faster --baud",
                crate::units::format_size(args.size),
                seconds / 86_400.0
            );
        }
    }
    let placements = args.place.placements("output")?;
    let plan = OutputPlan {
        relays: args.relay.clone(),
        protocols: args.protocol.clone(),
        placements,
        size: args.size,
        baud: args.baud,
        nodelay: args.nodelay,
        stall: args.run.stall_option()?,
    };
    args.run.measure(out, |runner| {
        let records = runner.grid(&mut OutputMeasure, &plan.cells())?;
        let doc = serde_json::json!({ "experiment": "output", "records": records });
        let text = crate::experiments::output::report::output_text(args.size, args.baud, &records);
        Ok(RunOutcome::grid(records, doc, text))
    })
}
