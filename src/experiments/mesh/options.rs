//! `netlab mesh plan`: the inventory, the rounds and the time a pass will
//! take, before any traffic.

use crate::experiments::mesh::inventory;
use crate::experiments::mesh::schedule::{Mode, Pair, Schedule};
use crate::options::Output;
use clap::{Args, Subcommand};
use std::fmt::Write;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct MeshArgs {
    #[command(subcommand)]
    pub command: MeshCommand,
}

impl MeshArgs {
    /// Whether it prints JSON (so an error is printed as JSON too).
    pub fn json(&self) -> bool {
        match &self.command {
            MeshCommand::Plan(plan) => plan.json,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum MeshCommand {
    /// Print a pass's rounds and how long it will take, sending no traffic.
    Plan(PlanArgs),
}

/// What one pair is measured for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MeshTest {
    /// TCP throughput, retransmissions, RTT and what limited it.
    Stream,
    /// Round-trip percentiles.
    Rtt,
    /// UDP loss and jitter.
    Loss,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The agents: `a:5310,b:5310`, a file (one `HOST[:PORT] [label=value
    /// ...]` a line), or `dns:NAME[:PORT]` (every A/AAAA record).
    #[arg(long)]
    pub agents: String,
    /// The tests each pair runs, in turn.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "stream")]
    pub tests: Vec<MeshTest>,
    /// Each test's length.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub duration: Duration,
    /// host: no host in two tests at once (the default); strict: one pair
    /// at a time; stress: every pair of a round at once, as a bisection test.
    #[arg(long, value_enum, default_value = "host")]
    pub mode: Mode,
    /// At most this many pairs at once (host mode).
    #[arg(long)]
    pub max_pairs: Option<usize>,
    /// Both directions of a pair at once: half the rounds.
    #[arg(long)]
    pub bidir: bool,
    /// Shuffles the hosts' places in the plan; the same seed, the same plan.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Rounds to list (all of them are counted).
    #[arg(long, default_value_t = 20)]
    pub show: usize,
    #[arg(long)]
    pub json: bool,
}

/// A test's time beyond its own length: connecting both agents, starting
/// and stopping the endpoints, collecting the records (about 2 s between
/// two agents here, as `netlab stream --from --to` shows).
const CELL_OVERHEAD: Duration = Duration::from_secs(2);

pub fn run(args: MeshArgs, out: &mut Output) -> anyhow::Result<()> {
    match args.command {
        MeshCommand::Plan(plan) => print_plan(&plan, out),
    }
}

fn print_plan(args: &PlanArgs, out: &mut Output) -> anyhow::Result<()> {
    let agents = inventory::parse(&args.agents)?;
    let ids: Vec<u32> = (0..agents.len() as u32).collect();
    let schedule = Schedule::new(&ids, args.seed, args.bidir, args.mode, args.max_pairs)?;
    let steps = schedule.step_count();
    let step_time = (args.duration + CELL_OVERHEAD) * args.tests.len() as u32;
    let estimate = step_time * steps as u32;
    let name = |h: u32| agents[h as usize].name.as_str();
    let arrow = if args.bidir { "<->" } else { "->" };
    let listed: Vec<Vec<Pair>> = (0..schedule.rounds().min(args.show))
        .map(|r| schedule.round(r))
        .collect();
    if args.json {
        let rounds: Vec<Vec<[&str; 2]>> = listed
            .iter()
            .map(|pairs| pairs.iter().map(|p| [name(p.from), name(p.to)]).collect())
            .collect();
        out.json(&serde_json::json!({
            "experiment": "mesh",
            "plan": {
                "agents": agents,
                "seed": args.seed,
                "mode": args.mode,
                "bidir": args.bidir,
                "max_pairs": args.max_pairs,
                "tests_per_pair": args.tests,
                "rounds": schedule.rounds(),
                "steps": steps,
                "pair_tests": schedule.tests(),
                "estimated_s": estimate.as_secs_f64(),
                "listed_rounds": rounds,
            }
        }))?;
        return Ok(());
    }
    let mut text = String::new();
    let _ = writeln!(
        text,
        "netlab mesh plan: {} agents, {} pair tests a pass ({}), {} mode{}, seed {}",
        agents.len(),
        schedule.tests(),
        if args.bidir {
            "each pair both ways at once"
        } else {
            "each ordered pair once"
        },
        args.mode.name(),
        args.max_pairs
            .map_or(String::new(), |n| format!(", at most {n} pairs at once")),
        args.seed
    );
    let _ = writeln!(
        text,
        "{} rounds of disjoint pairs (the circle method's {}), {} steps; each step runs {} ({} s each, plus about {} s to set up): about {} a pass",
        schedule.rounds(),
        if args.bidir { "N-1, or N for odd N" } else { "2(N-1), or 2N for odd N" },
        steps,
        args.tests
            .iter()
            .map(|t| format!("{t:?}").to_lowercase())
            .collect::<Vec<_>>()
            .join(", "),
        args.duration.as_secs_f64(),
        CELL_OVERHEAD.as_secs(),
        humantime::format_duration(Duration::from_secs(estimate.as_secs()))
    );
    if args.mode == Mode::Stress {
        text.push_str("stress: every pair of a round starts at once and they share the network on purpose (a bisection test); its cells are not each path's own figure\n");
    }
    for (r, pairs) in listed.iter().enumerate() {
        let mut line = format!("round {}:", r + 1);
        for (i, step) in schedule.steps(pairs).enumerate() {
            if i > 0 {
                line.push_str(" |");
            }
            for p in step {
                let _ = write!(line, " {}{arrow}{}", name(p.from), name(p.to));
            }
        }
        text.push_str(&line);
        text.push('\n');
    }
    if schedule.rounds() > listed.len() {
        let _ = writeln!(
            text,
            "... {} more rounds (--show N lists more)",
            schedule.rounds() - listed.len()
        );
    }
    out.text(&text)?;
    Ok(())
}
