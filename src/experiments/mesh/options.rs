//! `netlab mesh`: the measuring run (`netlab mesh --agents ... --key
//! ...`), and `netlab mesh plan`: the inventory, the rounds and the time a
//! pass will take, before any traffic.

use crate::experiments::mesh::inventory;
use crate::experiments::mesh::record::PassSpec;
use crate::experiments::mesh::run::{MeshRun, TEST_OVERHEAD};
use crate::experiments::mesh::schedule::{Mode, Pair, Schedule};
use crate::options::Output;
use anyhow::bail;
use clap::{Args, Subcommand};
use std::fmt::Write;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct MeshArgs {
    #[command(subcommand)]
    pub command: Option<MeshCommand>,
    #[command(flatten)]
    pub run: RunArgs,
}

impl MeshArgs {
    /// Whether it prints JSON (so an error is printed as JSON too).
    pub fn json(&self) -> bool {
        match &self.command {
            Some(MeshCommand::Plan(plan)) => plan.json,
            Some(MeshCommand::Report(report)) => report.json,
            Some(MeshCommand::Manifests(_)) => false,
            None => self.run.json,
        }
    }
}

/// `netlab mesh --agents SPEC --key KEY ...`: a pass over every pair.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub pass: PassArgs,
    /// The agents' pre-shared key (`netlab agent keygen`).
    #[arg(long, value_name = "FILE", env = "NETLAB_KEY_FILE")]
    pub key: Option<PathBuf>,
    /// The run's directory: manifest.json, results.jsonl (each test as it
    /// ends) and a CSV matrix per figure. Default mesh-<time>.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Finish the run in DIR (its manifest gives the agents and the plan,
    /// so no --agents): the tests it measured are not measured again.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["out", "agents"])]
    pub resume: Option<PathBuf>,
    /// The loss test's datagram rate (10mbit, 1gbit).
    #[arg(long, default_value = "10mbit")]
    pub loss_rate: String,
    /// The loss test's datagram length, header included.
    #[arg(long, default_value_t = 1200)]
    pub loss_length: usize,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What a pass is: the options `plan` and a run share.
#[derive(Debug, Args)]
pub struct PassArgs {
    /// The agents: `a:5310,b:5310`, a file (one `HOST[:PORT] [label=value
    /// ...]` a line), or `dns:NAME[:PORT]` (every A/AAAA record).
    #[arg(long)]
    pub agents: Option<String>,
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
    /// Shuffles the hosts' places in the plan; the same seed, the same plan
    /// (pass P takes seed + P, so each pass has its own order).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Measure every pair this many times, a pass after another: the
    /// repeats of a cell show its spread, and two groups among them
    /// (at least 4 passes) point to ECMP.
    #[arg(long, default_value_t = 1)]
    pub passes: usize,
}

pub use crate::experiments::mesh::record::{MAX_PASSES, MeshTest};

impl PassArgs {
    /// Refuses passes outside 1..=[`MAX_PASSES`].
    fn check_passes(&self) -> anyhow::Result<()> {
        if self.passes == 0 || self.passes > MAX_PASSES {
            bail!("--passes {}: give 1 to {MAX_PASSES}", self.passes);
        }
        Ok(())
    }
}

#[derive(Debug, Subcommand)]
pub enum MeshCommand {
    /// Print a pass's rounds and how long it will take, sending no traffic.
    Plan(PlanArgs),
    /// Write a run directory's matrices and report.html again, and say what
    /// they show.
    Report(ReportArgs),
    /// Print the Kubernetes objects of a mesh: Namespace, Secret, DaemonSet
    /// of agents, headless Service, and a Job or CronJob that measures.
    Manifests(ManifestsArgs),
}

#[derive(Debug, Args)]
pub struct ManifestsArgs {
    /// The namespace every object goes in.
    #[arg(long, default_value = "netlab")]
    pub namespace: String,
    /// The netlab image (deploy/kubernetes/Dockerfile builds one).
    #[arg(long)]
    pub image: String,
    /// Agents on the pod network (the CNI's path), not the nodes' own.
    #[arg(long)]
    pub pod_network: bool,
    /// Put this key in the Secret (otherwise make the Secret apart).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// A CronJob on this schedule (`0 3 * * *`) instead of a one-off Job.
    #[arg(long)]
    pub schedule: Option<String>,
    /// The cluster's DNS domain.
    #[arg(long, default_value = "cluster.local")]
    pub cluster_domain: String,
    /// The mesh's tests and their length, as `netlab mesh` takes them.
    #[arg(long, default_value = "stream,rtt,loss")]
    pub tests: String,
    #[arg(long, default_value = "10s")]
    pub duration: String,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The run's directory (`--out` of `netlab mesh`).
    pub dir: PathBuf,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(flatten)]
    pub pass: PassArgs,
    /// Rounds to list (all of them are counted).
    #[arg(long, default_value_t = 20)]
    pub show: usize,
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: MeshArgs, out: &mut Output) -> anyhow::Result<()> {
    match args.command {
        Some(MeshCommand::Plan(plan)) => print_plan(&plan, out),
        Some(MeshCommand::Report(report)) => {
            let found = crate::experiments::mesh::report::write_dir(&report.dir)?;
            print_findings(&report.dir, &found, report.json, out)
        }
        Some(MeshCommand::Manifests(m)) => {
            // The mesh's own options, checked as `netlab mesh` would.
            for test in m.tests.split(',') {
                <MeshTest as clap::ValueEnum>::from_str(test, false).map_err(|_| {
                    anyhow::anyhow!(
                        "--tests {}: {test:?} is not stream, rtt, loss or rpm",
                        m.tests
                    )
                })?;
            }
            humantime::parse_duration(&m.duration)
                .map_err(|e| anyhow::anyhow!("--duration {}: {e}", m.duration))?;
            let yaml = crate::experiments::mesh::manifests::render(
                &crate::experiments::mesh::manifests::Cluster {
                    namespace: &m.namespace,
                    image: &m.image,
                    pod_network: m.pod_network,
                    key: m.key.as_deref(),
                    schedule: m.schedule.as_deref(),
                    cluster_domain: &m.cluster_domain,
                    tests: &m.tests,
                    duration: &m.duration,
                },
            )?;
            out.text(&yaml)?;
            Ok(())
        }
        None => run_mesh(args.run, out),
    }
}

/// The most a test may last: a day, as a stream's longest run.
const MAX_TEST: Duration = Duration::from_secs(86_400);

fn run_mesh(args: RunArgs, out: &mut Output) -> anyhow::Result<()> {
    let Some(key) = args.key.clone() else {
        bail!(
            "netlab mesh needs the agents' key: --key FILE or NETLAB_KEY_FILE (netlab agent keygen makes one)"
        );
    };
    let (dir, resume) = match (&args.resume, &args.out) {
        (Some(dir), _) => (dir.clone(), true),
        (None, Some(dir)) => (dir.clone(), false),
        (None, None) => (
            PathBuf::from(format!(
                "mesh-{}",
                crate::record::now_rfc3339().replace(':', "")
            )),
            false,
        ),
    };
    let (agents_spec, inventory, pass) = if resume {
        let manifest = crate::experiments::mesh::record::read_manifest(&dir)?;
        (manifest.agents_spec, manifest.inventory, manifest.pass)
    } else {
        let Some(spec) = args.pass.agents.clone() else {
            bail!("netlab mesh needs --agents (a list, a file or dns:NAME), or --resume DIR");
        };
        args.pass.check_passes()?;
        let inventory = inventory::parse(&spec)?;
        let duration = args.pass.duration;
        if duration.is_zero() || duration > MAX_TEST {
            bail!(
                "--duration {}: give more than 0 and at most a day",
                humantime::format_duration(duration)
            );
        }
        let rate = crate::testbed::link::parse_rate(&args.loss_rate)
            .map_err(|e| anyhow::anyhow!("--loss-rate {}: {e}", args.loss_rate))?;
        if rate == 0 {
            bail!(
                "--loss-rate {}: the loss test needs a rate above zero",
                args.loss_rate
            );
        }
        let lengths = crate::experiments::stream::udp::MIN_LENGTH
            ..=crate::experiments::stream::udp::MAX_LENGTH;
        if !lengths.contains(&args.loss_length) {
            bail!(
                "--loss-length {}: give {} to {} bytes",
                args.loss_length,
                lengths.start(),
                lengths.end()
            );
        }
        let pass = PassSpec {
            tests: dedup(&args.pass.tests),
            duration_s: duration.as_secs_f64(),
            mode: args.pass.mode,
            max_pairs: args.pass.max_pairs,
            bidir: args.pass.bidir,
            seed: args.pass.seed,
            loss_rate_bps: rate,
            loss_length: args.loss_length,
            passes: args.pass.passes,
        };
        pass.check()
            .map_err(|why| anyhow::anyhow!("netlab mesh: {why}"))?;
        (spec, inventory, pass)
    };
    let run = MeshRun {
        agents_spec,
        inventory,
        pass,
        key,
        dir: dir.clone(),
        resume,
    };
    let say = |line: &str| eprintln!("{line}");
    let summary = match run.run(&say) {
        Ok(summary) => summary,
        Err(e) => {
            // What was measured before it stopped is still shown.
            if crate::experiments::mesh::record::results_of(&dir).is_ok() {
                let _ = crate::experiments::mesh::report::write_dir(&dir);
            }
            return Err(e);
        }
    };
    let found = crate::experiments::mesh::report::write_dir(&dir)?;
    let lost: Vec<String> = summary
        .lost
        .iter()
        .map(|(name, why)| format!("{name}: {why}"))
        .collect();
    if args.json {
        out.json(&serde_json::json!({
            "experiment": "mesh",
            "dir": dir,
            "measured": summary.measured,
            "failed": summary.failed,
            "skipped": summary.skipped,
            "lost": lost,
            "seconds": summary.seconds,
            "cell_s": summary.cell_s,
            "controller_cpu_s": summary.controller_cpu_s,
            "findings": found,
        }))?;
    } else {
        out.text(&format!(
            "netlab mesh: {} tests measured, {} failed, {} finished before; {:.0} s, of which the controller's own (between cells) {:.1} s ({:.1}%), its CPU {:.2} s; results in {}\n",
            summary.measured,
            summary.failed,
            summary.skipped,
            summary.seconds,
            summary.seconds - summary.cell_s,
            100.0 * (summary.seconds - summary.cell_s) / summary.seconds.max(1e-9),
            summary.controller_cpu_s,
            dir.display()
        ))?;
        print_findings(&dir, &found, false, out)?;
    }
    if summary.failed > 0 {
        bail!(
            "{} tests failed (each is a line of {} with its reason){}",
            summary.failed,
            dir.join(crate::experiments::mesh::record::RESULTS)
                .display(),
            if lost.is_empty() {
                String::new()
            } else {
                format!(
                    "; agents that took no part or were lost:\n  {}",
                    lost.join("\n  ")
                )
            }
        );
    }
    Ok(())
}

/// What the matrices show, a line each, and where the report is.
fn print_findings(
    dir: &std::path::Path,
    found: &[String],
    json: bool,
    out: &mut Output,
) -> anyhow::Result<()> {
    let report = dir.join("report.html");
    if json {
        out.json(&serde_json::json!({"report": report, "findings": found}))?;
        return Ok(());
    }
    let mut text = String::new();
    if found.is_empty() {
        text.push_str(
            "nothing stands out: every measured cell is within reach of the typical one\n",
        );
    }
    for line in found {
        text.push_str(line);
        text.push('\n');
    }
    let _ = writeln!(text, "report: {}", report.display());
    out.text(&text)?;
    Ok(())
}

/// The tests in the order given, each once.
fn dedup(tests: &[MeshTest]) -> Vec<MeshTest> {
    let mut seen = Vec::new();
    for &t in tests {
        if !seen.contains(&t) {
            seen.push(t);
        }
    }
    seen
}

fn print_plan(plan: &PlanArgs, out: &mut Output) -> anyhow::Result<()> {
    let args = &plan.pass;
    let Some(spec) = args.agents.as_deref() else {
        bail!("netlab mesh plan needs --agents (a list, a file or dns:NAME)");
    };
    args.check_passes()?;
    let agents = inventory::parse(spec)?;
    let ids: Vec<u32> = (0..agents.len() as u32).collect();
    let schedule = Schedule::new(&ids, args.seed, args.bidir, args.mode, args.max_pairs)?;
    let steps = schedule.step_count();
    let step_time = (args.duration + TEST_OVERHEAD) * args.tests.len() as u32;
    let estimate = step_time * steps as u32 * args.passes as u32;
    let name = |h: u32| agents[h as usize].name.as_str();
    let arrow = if args.bidir { "<->" } else { "->" };
    let listed: Vec<Vec<Pair>> = (0..schedule.rounds().min(plan.show))
        .map(|r| schedule.round(r))
        .collect();
    if plan.json {
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
                "passes": args.passes,
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
        "{} rounds of disjoint pairs (the circle method's {}), {} steps; each step runs {} ({} s each, plus about {} s to set up): about {}{}",
        schedule.rounds(),
        if args.bidir {
            "N-1, or N for odd N"
        } else {
            "2(N-1), or 2N for odd N"
        },
        steps,
        args.tests
            .iter()
            .map(|t| format!("{t:?}").to_lowercase())
            .collect::<Vec<_>>()
            .join(", "),
        args.duration.as_secs_f64(),
        TEST_OVERHEAD.as_secs(),
        humantime::format_duration(Duration::from_secs(estimate.as_secs())),
        if args.passes > 1 {
            format!(
                " for {} passes (each pair measured {} times)",
                args.passes, args.passes
            )
        } else {
            " a pass".to_string()
        }
    );
    if (2..crate::experiments::mesh::analysis::MIN_REPEATS).contains(&args.passes) {
        let _ = writeln!(
            text,
            "{} passes show each cell's spread; two groups among a cell's repeats (ECMP) are read from {} passes on",
            args.passes,
            crate::experiments::mesh::analysis::MIN_REPEATS
        );
    }
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
