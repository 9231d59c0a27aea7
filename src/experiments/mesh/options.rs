//! `netlab mesh`: the measuring run (`netlab mesh --agents ... --key
//! ...`), and `netlab mesh plan`: the inventory, the rounds and the time a
//! pass will take, before any traffic.

use crate::controller::rounds::{Mode, Pair, Schedule};
use crate::experiments::mesh::inventory;
use crate::experiments::mesh::record::PassSpec;
use crate::experiments::mesh::run::{MeshRun, TEST_OVERHEAD};
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
            Some(MeshCommand::Peers(peers)) => peers.json,
            Some(MeshCommand::Watch(watch)) => watch.json,
            Some(MeshCommand::Manifests(_) | MeshCommand::Rules(_)) => false,
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
    /// The probe test's empty UDP RPC calls each way of a pair (with
    /// --every, what the probe budget allows when not given).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub probe_calls: Option<u32>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub continuous: ContinuousArgs,
}

/// `netlab mesh --every PERIOD`: a long-running controller.
#[derive(Debug, Args)]
pub struct ContinuousArgs {
    /// Run on as a controller: probe every ordered pair every PERIOD
    /// (Pingmesh-style, a few UDP RPC calls: round trip and loss), until
    /// stopped (SIGTERM, Ctrl-C) or --cycles; each cycle a run directory
    /// under DIR/cycles/.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "PERIOD", conflicts_with = "resume")]
    pub every: Option<Duration>,
    /// The probe budget: at most this many probe calls a second reach each
    /// agent (as caller and as server); the calls a probe makes follow
    /// from it unless --probe-calls is given.
    #[arg(long, default_value_t = 10.0, value_name = "CALLS_PER_S")]
    pub probe_rate: f64,
    /// Also run the throughput pass (--tests, stream by default) this
    /// often, after a probe cycle.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "PERIOD", requires = "every")]
    pub stream_every: Option<Duration>,
    /// Cycle directories kept on disk (the oldest removed first).
    #[arg(long, default_value_t = 100, requires = "every")]
    pub keep: usize,
    /// Serve the metrics at http://ADDR:PORT/metrics (OpenMetrics).
    #[arg(long, value_name = "ADDR:PORT", requires = "every")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Per-path series for the worst K paths only (and those in breach of
    /// the SLO, at most 10 K); per host and per zone, always.
    #[arg(long, default_value_t = 20, value_name = "K")]
    pub metrics_pairs: usize,
    /// A path is in breach when its probes lose more than this share
    /// (1%, 0.5%), or fail.
    #[arg(long, default_value = "1%", value_name = "PERCENT")]
    pub loss_slo: String,
    /// ... or when their median round trip is longer than this.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "TIME")]
    pub rtt_slo: Option<Duration>,
    /// Write the Prometheus alert rules for these options to FILE before
    /// the first cycle (`netlab mesh rules` prints them).
    #[arg(long, value_name = "FILE", requires = "every")]
    pub rules: Option<PathBuf>,
    /// Stop after this many probe cycles.
    #[arg(long, requires = "every")]
    pub cycles: Option<u64>,
}

/// `--loss-slo` as a ratio: `1%`, `0.5%`, or a bare ratio below 1.
pub fn parse_loss_slo(text: &str) -> anyhow::Result<f64> {
    let (number, scale) = match text.trim().strip_suffix('%') {
        Some(pct) => (pct, 0.01),
        None => (text.trim(), 1.0),
    };
    let ratio = number
        .trim()
        .parse::<f64>()
        .map_err(|_| anyhow::anyhow!("--loss-slo {text}: give a percentage (1%, 0.5%)"))?
        * scale;
    if !(ratio.is_finite() && ratio > 0.0 && ratio < 1.0) {
        bail!("--loss-slo {text}: give more than 0% and less than 100%");
    }
    Ok(ratio)
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

impl PassArgs {
    /// The pass these options ask for, of `tests` lasting `duration_s`
    /// each, its loss test at `(bits/s, datagram length)`, with the
    /// default probe calls.
    fn spec(
        &self,
        tests: Vec<MeshTest>,
        duration_s: f64,
        (rate, length): (u64, usize),
    ) -> PassSpec {
        PassSpec {
            tests,
            duration_s,
            mode: self.mode,
            max_pairs: self.max_pairs,
            bidir: self.bidir,
            seed: self.seed,
            loss_rate_bps: rate,
            loss_length: length,
            passes: self.passes,
            probe_calls: crate::experiments::mesh::record::DEFAULT_PROBE_CALLS,
        }
    }
}

use crate::experiments::mesh::record::{MAX_PASSES, MeshTest};

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
    /// Print the Prometheus alert rules for a continuous mesh's metrics.
    Rules(RulesArgs),
    /// Print the peer lists a fleet's agents would probe within a probe
    /// budget (their rack, samples of their zone and of the others), and
    /// the cycles until every pair is probed, sending no traffic.
    Peers(crate::experiments::mesh::peer_lists::PeersArgs),
    /// Read the summaries of agents that probe their own peer lists
    /// (`netlab agent serve --probe-peers`) each cycle, and name the hosts
    /// and racks in trouble from them.
    Watch(crate::experiments::mesh::watch::WatchArgs),
}

#[derive(Debug, Args)]
pub struct RulesArgs {
    /// The probe cycle the rules wait two of.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub every: Duration,
    /// The loss SLO (1%, 0.5%).
    #[arg(long, default_value = "1%")]
    pub loss_slo: String,
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
    /// The Job's passes over every pair (`netlab mesh --passes`).
    #[arg(long, default_value_t = 1)]
    pub passes: usize,
    /// The controller as a Deployment probing all the time (`netlab mesh
    /// --every`), serving Prometheus metrics, instead of a Job.
    #[arg(long, conflicts_with = "schedule")]
    pub continuous: bool,
    /// The probe cycle of the continuous controller or of the sampled fleet.
    #[arg(long, default_value = "30s")]
    pub every: String,
    /// The continuous controller's throughput pass (--tests), this often.
    #[arg(long, requires = "continuous")]
    pub stream_every: Option<String>,
    /// Agents that probe their own peer lists each --every (`netlab agent
    /// serve --probe-peers`) and a controller reading their summaries
    /// (`netlab mesh watch`): for fleets of hundreds and thousands.
    #[arg(long, conflicts_with_all = ["schedule", "continuous"])]
    pub sampled: bool,
    /// The sampled agents' probe budget, calls a second each.
    #[arg(long, default_value_t = 10.0, requires = "sampled")]
    pub probe_rate: f64,
    /// The sampled agents' shared seed.
    #[arg(long, default_value_t = 0, requires = "sampled")]
    pub probe_seed: u64,
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
        Some(MeshCommand::Peers(peers)) => crate::experiments::mesh::peer_lists::print(&peers, out),
        Some(MeshCommand::Watch(watch)) => crate::experiments::mesh::watch::run(&watch, out),
        Some(MeshCommand::Report(report)) => {
            let found = crate::experiments::mesh::report::write_dir(&report.dir)?;
            print_findings(&report.dir, &found, report.json, out)
        }
        Some(MeshCommand::Manifests(m)) => {
            // The mesh's own options, checked as `netlab mesh` would.
            for test in m.tests.split(',') {
                <MeshTest as clap::ValueEnum>::from_str(test, false).map_err(|_| {
                    anyhow::anyhow!(
                        "--tests {}: {test:?} is not stream, rtt, loss, rpm or probe",
                        m.tests
                    )
                })?;
            }
            let duration = humantime::parse_duration(&m.duration)
                .map_err(|e| anyhow::anyhow!("--duration {}: {e}", m.duration))?;
            check_test_duration(duration)?;
            let period = |option: &str, value: &str| {
                humantime::parse_duration(value)
                    .map_err(|e| anyhow::anyhow!("{option} {value}: {e}"))
            };
            let every = period("--every", &m.every)?;
            let stream_every = m
                .stream_every
                .as_deref()
                .map(|v| period("--stream-every", v))
                .transpose()?;
            if m.continuous {
                check_periods(every, stream_every)?;
            }
            if m.sampled {
                let peers = crate::fleet::peers::peers_within(m.probe_rate, every, 20);
                if peers == 0 {
                    bail!(
                        "--probe-rate {} over --every {}: no room for one probe of 20 calls each way a cycle",
                        m.probe_rate,
                        m.every
                    );
                }
            }
            if m.passes == 0 || m.passes > crate::experiments::mesh::record::MAX_PASSES {
                bail!(
                    "--passes {}: give 1 to {}",
                    m.passes,
                    crate::experiments::mesh::record::MAX_PASSES
                );
            }
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
                    passes: m.passes,
                    continuous: m.continuous.then(|| {
                        crate::experiments::mesh::manifests::Continuous {
                            every: &m.every,
                            stream_every: m.stream_every.as_deref(),
                        }
                    }),
                    sampled: m
                        .sampled
                        .then_some(crate::experiments::mesh::manifests::Sampled {
                            every: &m.every,
                            rate: m.probe_rate,
                            seed: m.probe_seed,
                        }),
                },
            )?;
            out.text(&yaml)?;
            Ok(())
        }
        Some(MeshCommand::Rules(r)) => {
            check_periods(r.every, None)?;
            out.text(&crate::experiments::mesh::rules::render(
                crate::experiments::mesh::rules::RuleSettings {
                    every: r.every,
                    loss_ratio: parse_loss_slo(&r.loss_slo)?,
                },
            ))?;
            Ok(())
        }
        None if args.run.continuous.every.is_some() => run_continuous(args.run, out),
        None => run_mesh(args.run, out),
    }
}

/// The longest probe cycle: a day.
const MAX_CYCLE: Duration = Duration::from_secs(86_400);
/// The longest throughput period: a week.
const MAX_STREAM_PERIOD: Duration = Duration::from_secs(7 * 86_400);

/// The checks a continuous mesh's periods pass wherever they come from
/// (`mesh --every`, `mesh manifests --continuous`, `mesh rules`), so that
/// no command writes a setting another refuses.
pub fn check_periods(every: Duration, stream_every: Option<Duration>) -> anyhow::Result<()> {
    let shown = |d: Duration| humantime::format_duration(d).to_string();
    if every < Duration::from_secs(1) || every > MAX_CYCLE {
        bail!("--every {}: a probe cycle is 1 s to a day", shown(every));
    }
    if let Some(period) = stream_every
        && (period < every || period > MAX_STREAM_PERIOD)
    {
        bail!(
            "--stream-every {}: give the probe cycle (--every {}) to a week",
            shown(period),
            shown(every)
        );
    }
    Ok(())
}

/// A test's length as a mesh takes it (the bounds a manifest's
/// `duration_s` is checked against too).
pub fn check_test_duration(duration: Duration) -> anyhow::Result<()> {
    use crate::experiments::mesh::record::{MAX_TEST_S, MIN_TEST_S};
    let s = duration.as_secs_f64();
    if !(MIN_TEST_S..=MAX_TEST_S).contains(&s) {
        bail!(
            "--duration {}: give {MIN_TEST_S} s to a day",
            humantime::format_duration(duration)
        );
    }
    Ok(())
}

/// `netlab mesh --every PERIOD ...`: cycles until stopped, then what ran.
fn run_continuous(args: RunArgs, out: &mut Output) -> anyhow::Result<()> {
    let c = &args.continuous;
    let every = c.every.expect("checked by the caller");
    let Some(key) = args.key.clone() else {
        bail!(
            "netlab mesh needs the agents' key: --key FILE or NETLAB_KEY_FILE (netlab agent keygen makes one)"
        );
    };
    let Some(spec) = args.pass.agents.clone() else {
        bail!("netlab mesh --every needs --agents (a list, a file or dns:NAME)");
    };
    check_periods(every, c.stream_every)?;
    if c.cycles == Some(0) {
        bail!("--cycles 0: run at least one cycle (leave it out to run until stopped)");
    }
    if !(c.probe_rate.is_finite() && c.probe_rate > 0.0) {
        bail!(
            "--probe-rate {}: give more than 0 calls a second",
            c.probe_rate
        );
    }
    if c.keep == 0 {
        bail!("--keep 0: keep at least the cycle being written");
    }
    if c.metrics_pairs > 10_000 {
        bail!("--metrics-pairs {}: at most 10000", c.metrics_pairs);
    }
    if args.pass.passes != 1 {
        bail!("--passes does not apply with --every: every cycle is a pass");
    }
    let loss_ratio = parse_loss_slo(&c.loss_slo)?;
    let dir = args.out.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "mesh-continuous-{}",
            crate::record::now_rfc3339().replace(':', "")
        ))
    });
    let rate = crate::testbed::link::parse_rate(&args.loss_rate)
        .map_err(|e| anyhow::anyhow!("--loss-rate {}: {e}", args.loss_rate))?;
    let base = PassSpec {
        passes: 1,
        ..args.pass.spec(
            vec![MeshTest::Probe],
            args.pass.duration.as_secs_f64(),
            (rate, args.loss_length),
        )
    };
    let stream = match c.stream_every {
        Some(period) => {
            let tests: Vec<MeshTest> = dedup(&args.pass.tests)
                .into_iter()
                .filter(|t| *t != MeshTest::Probe)
                .collect();
            if tests.is_empty() {
                bail!(
                    "--stream-every: --tests names no throughput test (stream, rtt, loss, rpm) to run"
                );
            }
            let spec = PassSpec {
                tests,
                ..base.clone()
            };
            spec.check()
                .map_err(|why| anyhow::anyhow!("netlab mesh: {why}"))?;
            Some((spec, period))
        }
        None => None,
    };
    let continuous = crate::experiments::mesh::continuous::Continuous {
        agents_spec: spec,
        key,
        dir,
        probe: base,
        probe_calls: args.probe_calls,
        probe_rate: c.probe_rate,
        stream,
        every,
        keep: c.keep,
        metrics: c.metrics,
        pairs: c.metrics_pairs,
        slo: crate::experiments::mesh::metrics::Slo {
            loss_ratio,
            rtt_s: c.rtt_slo.map(|d| d.as_secs_f64()),
        },
        rules: c.rules.clone(),
        cycles: c.cycles,
    };
    let say = |line: &str| eprintln!("{line}");
    let summary = continuous.run(&say)?;
    if args.json {
        out.json(&serde_json::json!({
            "experiment": "mesh-continuous",
            "summary": summary,
        }))?;
    } else {
        out.text(&format!("{summary}\n"))?;
    }
    Ok(())
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
        let lengths =
            crate::endpoint::bulk::types::MIN_LENGTH..=crate::endpoint::bulk::types::MAX_LENGTH;
        if !lengths.contains(&args.loss_length) {
            bail!(
                "--loss-length {}: give {} to {} bytes",
                args.loss_length,
                lengths.start(),
                lengths.end()
            );
        }
        let pass = PassSpec {
            probe_calls: args
                .probe_calls
                .unwrap_or(crate::experiments::mesh::record::DEFAULT_PROBE_CALLS),
            ..args.pass.spec(
                dedup(&args.pass.tests),
                duration.as_secs_f64(),
                (rate, args.loss_length),
            )
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
        keep: false,
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
