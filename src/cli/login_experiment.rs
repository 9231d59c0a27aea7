//! `netlab login [options]`: the 1989 login-load experiment. For every relay
//! design, protocol and user count, N simulated users type into
//! `cat > /dev/null` through netlab's server while the machine is watched in
//! vmstat's terms; the table prints the 1989 rows beside today's.

use super::Output;
use crate::experiment::login::{
    DEFAULT_CORPUS, Dialect, LimitSearch, LoginMeasure, LoginPlan, PresetBudget, Target,
    find_limits, serving_host,
};
use crate::experiment::runner::Runner;
use crate::report;
use crate::testbed::Placement;
use crate::testbed::cgroup::HostPreset;
use anyhow::{Context, bail};
use clap::Args;
use std::path::PathBuf;
#[derive(Debug, Clone, Args)]
pub struct LoginExperimentArgs {
    /// Simulated users per cell (a list).
    #[arg(long, default_value = "16,32,48", value_delimiter = ',')]
    pub users: Vec<usize>,
    /// Servers (a list): netlab's relay designs, and as real servers beside
    /// them `telnetd` (inetutils, via socat; TELNET only) and `sshd`
    /// (OpenSSH with a throwaway key and test user; its cells always speak
    /// SSH, through real `ssh` clients; needs root).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "fork,epoll,splice,uring"
    )]
    pub relay: Vec<Target>,
    /// Protocols (a list): rlogin as in the 1989 test, telnet, telnet-linemode
    /// (the client edits lines; latency is per line), ssh (sshd only).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "rlogin")]
    pub protocol: Vec<Dialect>,
    /// Placements (a list): loopback, netns (server and users in two
    /// namespaces over --link; needs root). Default loopback; with
    /// --from/--to, `remote` (users at --from, server at --to) and `local`
    /// (both at --to), remote by default.
    #[arg(long, value_delimiter = ',')]
    pub placement: Option<Vec<String>>,
    /// Link profile of the netns placement.
    #[arg(long, default_value = "ether10")]
    pub link: String,
    /// Characters per second per user (the source: 5).
    #[arg(long, default_value_t = 5.0, allow_negative_numbers = true)]
    pub rate: f64,
    /// Exponential gaps between keystrokes instead of even spacing.
    #[arg(long)]
    pub poisson: bool,
    /// Measured window per cell, e.g. 30s.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub duration: std::time::Duration,
    /// Typing before the window, not counted.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub warmup: std::time::Duration,
    /// A text file to type instead of the built-in paragraph.
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Find, per server and protocol, the most users it serves with a
    /// "normal" verdict: doubling from the first --users value, then bisecting.
    #[arg(long)]
    pub find_limit: bool,
    /// Upper bound for --find-limit (each session holds a pty; the kernel's
    /// limit is /proc/sys/kernel/pty/max).
    #[arg(long, default_value_t = 3000)]
    pub max_users: usize,
    /// Give the server a CPU budget of PERCENT of one CPU (0.1 up to 100
    /// per CPU), through a cgroup of the CPU controller that netlab creates
    /// and removes: a 1989-class host on today's machine. Or a preset,
    /// `sun3` (the 1989 test's Sun-3/260) or `vax750`: the budget under
    /// which a small TCP packet costs this host what it cost that one
    /// (measured here first, in a quarter second). Needs root; where no
    /// CPU controller is available netlab says so and runs without.
    #[arg(long, value_name = "PERCENT|PRESET", allow_hyphen_values = true)]
    pub host_cpu: Option<String>,
    #[command(flatten)]
    pub remote: super::placement::RemoteArgs,
    #[command(flatten)]
    pub run: super::run::RunOptions,
}

impl LoginExperimentArgs {
    /// The validated plan; errors name the bad option before anything runs.
    pub fn plan(&self) -> anyhow::Result<LoginPlan> {
        let placements =
            super::placement::listed(self.placement.as_deref(), &self.link, &self.remote, "login")?;
        let (host_cpu_pct, host_cpu_preset) = self.host_budget(&placements)?;
        let plan = LoginPlan {
            host_cpu_pct,
            host_cpu_preset,
            users: self.users.clone(),
            relays: self.relay.clone(),
            protocols: self.protocol.clone(),
            placements,
            rate: self.rate,
            poisson: self.poisson,
            warmup_s: self.warmup.as_secs_f64(),
            duration_s: self.duration.as_secs_f64(),
        };
        plan.validate()?;
        Ok(plan)
    }

    /// `--host-cpu`: a percent as given, or a preset's percent from this
    /// host's packet cost, measured now, with its derivation.
    fn host_budget(
        &self,
        placements: &[Placement],
    ) -> anyhow::Result<(Option<f64>, Option<PresetBudget>)> {
        let Some(text) = self.host_cpu.as_deref() else {
            return Ok((None, None));
        };
        if let Ok(percent) = text.parse::<f64>() {
            return Ok((Some(percent), None));
        }
        let Some(preset) = HostPreset::parse(text) else {
            bail!("--host-cpu {text}: give a percent of one CPU or a preset (sun3, vax750)");
        };
        if placements.iter().any(|p| serving_host(p) != "local") {
            bail!(
                "--host-cpu {text} is derived from this host's packet cost; a server on an agent needs a percent"
            );
        }
        let (percent, budget) = preset
            .budget_here()
            .context("measuring this host's cost of a TCP packet")?;
        Ok((Some(percent), Some(budget)))
    }
}

fn run_find_limit(
    args: &LoginExperimentArgs,
    plan: &LoginPlan,
    measure: &mut LoginMeasure,
    runner: &mut Runner,
    out: &mut Output,
) -> anyhow::Result<()> {
    let start = plan.users.first().copied().unwrap_or(16);
    let mut records = Vec::new();
    let search = LimitSearch {
        start,
        max_users: args.max_users,
        resolution: 8,
    };
    let limits = find_limits(runner, measure, plan, search, &mut records)?;
    let doc = serde_json::json!({
        "experiment": "login",
        "find_limit": limits,
        "records": records,
    });
    // A limit is found even when its probes failed: no failure check.
    args.run.finish(out, &[], doc, || {
        report::login::limits_table(args.rate, &limits)
    })
}

pub fn run(args: LoginExperimentArgs, out: &mut Output) -> anyhow::Result<()> {
    let mut plan = args.plan()?;
    let serving_here = plan.placements.iter().all(|p| serving_host(p) == "local");
    if plan.host_cpu_pct.is_some()
        && serving_here
        && let Err(why) = crate::testbed::cgroup::available()
    {
        eprintln!("warning: --host-cpu ignored: {why}");
        plan.host_cpu_pct = None;
        plan.host_cpu_preset = None;
    }
    if let Some(preset) = &plan.host_cpu_preset {
        eprintln!("netlab login: --host-cpu {}", preset.derivation);
    }
    let corpus = match &args.corpus {
        Some(path) => std::fs::read(path)
            .with_context(|| format!("--corpus {}: cannot read it", path.display()))?,
        None => DEFAULT_CORPUS.as_bytes().to_vec(),
    };
    if crate::endpoint::login::typist::keystrokes_of(&corpus).is_empty() {
        bail!("the corpus has no typeable characters");
    }
    let mut writer = args.run.writer()?;
    // One idle baseline for the run, before any cell starts anything.
    let mut measure = LoginMeasure::new(corpus)?;
    let mut runner = args.run.runner(&mut writer)?;
    if args.find_limit {
        return run_find_limit(&args, &plan, &mut measure, &mut runner, out);
    }
    let records = runner.grid(&mut measure, &plan.cells())?;
    let doc = serde_json::json!({ "experiment": "login", "records": records });
    args.run.finish(out, &records, doc, || {
        format!(
            "netlab login: users typing {} chars/s into `cat > /dev/null` (LINEMODE: into `cat`, latency per line), {} s window after {} s warm-up\n{}{}",
            args.rate,
            args.duration.as_secs_f64(),
            args.warmup.as_secs_f64(),
            plan.host_cpu_preset
                .as_ref()
                .map_or(String::new(), |p| format!("server CPU budget {}\n", p.derivation)),
            report::login::table(&records)
        )
    })
}
