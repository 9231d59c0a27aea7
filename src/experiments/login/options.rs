//! `netlab login [options]`: the 1989 login-load experiment. For every relay
//! design, protocol and user count, N simulated users type into
//! `cat > /dev/null` through netlab's server while the machine is watched in
//! vmstat's terms; the table prints the 1989 rows beside today's.

use crate::endpoint::login::host::Dialect;
use crate::endpoint::login::host::Target;
use crate::experiments::login::cell::{
    LimitSearch, LoginMeasure, LoginPlan, corpus, find_limits, host_budget,
};
use crate::experiments::login::record::LoginData;
use crate::options::Output;

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
    pub place: crate::options::placement::ListedArgs,
    #[command(flatten)]
    pub run: crate::options::run::RunOptions,
}

impl LoginExperimentArgs {
    /// The validated plan; errors name the bad option before anything runs.
    pub fn plan(&self) -> anyhow::Result<LoginPlan> {
        let placements = self.place.placements("login")?;
        let (host_cpu_pct, host_cpu_preset) = match self.host_cpu.as_deref() {
            Some(text) => {
                host_budget(text, &placements).map(|(pct, preset)| (Some(pct), preset))?
            }
            None => (None, None),
        };
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
}

pub fn run(args: LoginExperimentArgs, out: &mut Output) -> anyhow::Result<()> {
    let mut plan = args.plan()?;
    if let Some(warning) = plan.drop_budget_unless_available() {
        eprintln!("warning: {warning}");
    }
    if let Some(preset) = &plan.host_cpu_preset {
        eprintln!("netlab login: --host-cpu {}", preset.derivation);
    }
    let most_users = if args.find_limit {
        args.max_users
    } else {
        plan.users.iter().copied().max().unwrap_or(0)
    };
    plan.check_limits(most_users)?;
    let corpus = corpus(args.corpus.as_deref())?;
    let mut writer = args.run.writer()?;
    // One idle baseline for the run, before any cell starts anything.
    let mut measure = LoginMeasure::new(corpus)?;
    let mut runner = args.run.runner(&mut writer)?;
    if args.find_limit {
        let search = LimitSearch {
            start: plan.users.first().copied().unwrap_or(16),
            max_users: args.max_users,
            resolution: 8,
        };
        let mut records = Vec::new();
        let limits = find_limits(&mut runner, &mut measure, &plan, search, &mut records)?;
        let doc =
            serde_json::json!({ "experiment": "login", "find_limit": limits, "records": records });
        // A limit is found even when its probes failed: no failure check.
        return args.run.finish::<LoginData>(out, &[], doc, || {
            crate::experiments::login::report::limits_table(plan.rate, &limits)
        });
    }
    let records = runner.grid(&mut measure, &plan.cells())?;
    let doc = serde_json::json!({ "experiment": "login", "records": records });
    args.run.finish(out, &records, doc, || {
        crate::experiments::login::report::grid_text(&plan, &records)
    })
}
