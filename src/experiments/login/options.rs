//! `netlab login [options]`: the 1989 login-load experiment. For every relay
//! design, protocol and user count, N simulated users type into
//! `cat > /dev/null` through netlab's server while the machine is watched in
//! vmstat's terms; the table prints the 1989 rows beside today's.

use crate::endpoint::login::host::Dialect;
use crate::endpoint::login::host::Target;
use crate::experiments::login::cell::{
    LimitSearch, LoadPlan, LoginMeasure, LoginPlan, PROBE_ECHOES, check_one_session, corpus,
    find_limits, host_budget, serving_host,
};
use crate::experiments::login::load::{LoadFix, parse_load};
use crate::experiments::login::record::LoginData;
use crate::options::Output;
use crate::options::run::{Print, RunOutcome};
use crate::record::testbed::Placement;
use crate::testbed::cgroup::PresetBudget;
use anyhow::bail;

use crate::controller::processes::wait_for_interrupt;
use crate::endpoint::login::conn::SessionConfig;
use crate::endpoint::login::protocol::Protocol;
use crate::endpoint::login::relay_fork;
use crate::endpoint::login::server::{self, LoginServeSpec, Relay, pace};
use anyhow::Context;
use clap::{Args, Subcommand};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

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
    /// Measured window per cell, e.g. 30s [default: 30s; 5s per probe
    /// with --find-limit, so that a search takes minutes].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub duration: Option<std::time::Duration>,
    /// Typing before the window, not counted [default: 2s; 1s with
    /// --find-limit].
    #[arg(long, value_parser = humantime::parse_duration)]
    pub warmup: Option<std::time::Duration>,
    /// A text file to type instead of the built-in paragraph (`-`:
    /// standard input).
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Find, per server and protocol, the most users it serves with a
    /// "normal" verdict: doubling from the first --users value, then bisecting.
    #[arg(long)]
    pub find_limit: bool,
    /// Upper bound for --find-limit (each session holds a pty; the kernel's
    /// limit is /proc/sys/kernel/pty/max).
    #[arg(long, default_value_t = 3000, value_parser = crate::options::positive_count)]
    pub max_users: usize,
    /// Give the server a CPU budget of PERCENT of one CPU (0.1 up to 100
    /// per CPU), through a cgroup of the CPU controller that netlab creates
    /// and removes: a 1989-class host on today's machine. Or a preset,
    /// `sun3` (the 1989 test's Sun-3/260) or `vax750`: the budget under
    /// which a small TCP packet costs this host what it cost that one
    /// (measured here first, in under a second, both ends of a ping-pong
    /// on one CPU; or read from --calibration). Needs root; where no CPU
    /// controller is available netlab says so and runs without.
    #[arg(long, value_name = "PERCENT|PRESET", allow_hyphen_values = true)]
    pub host_cpu: Option<String>,
    /// With a --host-cpu preset: this host's CPU per small TCP packet as
    /// `netlab calibrate --out FILE` stored it, so that every run emulates
    /// the same 1989-class host (the record names the file and when it was
    /// measured). Refused when it was measured on another host.
    #[arg(long, value_name = "FILE", requires = "host_cpu")]
    pub calibration: Option<PathBuf>,
    /// Bulk TCP streams beside the typing, from the server's end to the
    /// users' (the echoes' way), for each cell: `stream` (4) or `stream:N`
    /// (1 to 16). Loopback and netns placements.
    #[arg(long, value_name = "stream[:N]")]
    pub load: Option<String>,
    /// With --load: the fixes to compare, each its own cells (a list of
    /// none, fq_codel, codel, notsent-lowat, bbr, small-buffers) [default:
    /// none, notsent-lowat, and fq_codel on a netns link].
    #[arg(long, value_delimiter = ',', value_name = "FIX")]
    pub load_fix: Option<Vec<String>>,
    /// With --load: the load's congestion control in every cell but the
    /// bbr fix's [default: the host's].
    #[arg(long, value_name = "NAME")]
    pub load_congestion: Option<String>,
    /// `linux`: measure this kernel. `sunos35`: the 1989 login host (a
    /// Sun-3/260 under SunOS 3.5, 000's table) as a CPU model that runs
    /// nothing: its predicted vmstat rows at --users and each design's
    /// melting point, every cost cited.
    #[arg(long, value_enum, default_value = "linux")]
    pub stack: LoginStack,
    /// With --stack sunos35: a login results file (`netlab login --out`)
    /// whose cells' measured work per keystroke is fed into the model:
    /// today's relays on 1989's machine (`-`: standard input).
    #[arg(long, value_name = "RESULTS")]
    pub counts_from: Option<PathBuf>,
    #[command(flatten)]
    pub place: crate::options::placement::ListedArgs,
    #[command(flatten)]
    pub run: crate::options::run::RunOptions,
}

/// Which host the users type at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LoginStack {
    Linux,
    Sunos35,
}

/// A grid cell's window and warm-up.
const WINDOW: std::time::Duration = std::time::Duration::from_secs(30);
const WARMUP: std::time::Duration = std::time::Duration::from_secs(2);
/// A limit search's: many probes, each a verdict rather than a figure to
/// quote, so that a search of one server takes a minute or two. 5 s at 5
/// keystrokes a second is 25 echoes a user, hundreds at any count near a
/// limit; a server past its limit falls behind by seconds within it.
const SEARCH_WINDOW: std::time::Duration = std::time::Duration::from_secs(5);
const SEARCH_WARMUP: std::time::Duration = std::time::Duration::from_secs(1);

impl LoginExperimentArgs {
    /// The validated plan; errors name the bad option before anything runs.
    pub fn plan(&self) -> anyhow::Result<LoginPlan> {
        let placements = self.place.placements("login")?;
        // A resumed run emulates the host the earlier one did: the same
        // budget, from the same calibration, not one measured again now.
        let earlier = match (self.host_cpu.as_deref(), &self.calibration) {
            (Some(name), None) => self
                .run
                .earlier::<PresetBudget>("login", "/params/host_cpu_preset")?
                .filter(|preset| preset.name == name)
                .zip(self.run.earlier::<f64>("login", "/params/host_cpu_pct")?),
            _ => None,
        };
        let (host_cpu_pct, host_cpu_preset) = match (self.host_cpu.as_deref(), earlier) {
            (Some(_), Some((preset, pct))) => (Some(pct), Some(preset)),
            (Some(text), None) => host_budget(text, &placements, self.calibration.as_deref())
                .map(|(pct, preset)| (Some(pct), preset))?,
            (None, _) => (None, None),
        };
        // A budget a single session outgrows is refused before anything
        // starts, against this host's packet cost (where the server runs here).
        if let Some(percent) = host_cpu_pct
            && crate::testbed::cgroup::check(percent).is_ok()
            && placements.iter().all(|p| serving_host(p) == "local")
        {
            let packet_us = match &host_cpu_preset {
                Some(preset) => preset.packet_us_here,
                None => {
                    crate::measure::packet_cost::loopback_packet_cost()
                        .context("measuring this host's cost of a TCP packet")?
                        .us_per_packet
                }
            };
            check_one_session(percent, self.rate, packet_us)?;
        }
        if self.find_limit && self.max_users > crate::experiments::login::bounds::MAX_USERS {
            bail!(
                "--max-users {}: at most {} users a cell (an ephemeral port each)",
                self.max_users,
                crate::experiments::login::bounds::MAX_USERS
            );
        }
        if self.find_limit && self.load.is_some() {
            bail!(
                "--find-limit with --load: a limit search varies users, a load's cells vary the fix; run one, then the other"
            );
        }
        let load = self.load_plan(&placements)?;
        let plan = LoginPlan {
            load,
            host_cpu_pct,
            host_cpu_preset,
            users: self.users.clone(),
            relays: self.relay.clone(),
            protocols: self.protocol.clone(),
            placements,
            rate: self.rate,
            poisson: self.poisson,
            warmup_s: self
                .warmup
                .unwrap_or(if self.find_limit {
                    SEARCH_WARMUP
                } else {
                    WARMUP
                })
                .as_secs_f64(),
            duration_s: self
                .duration
                .unwrap_or(if self.find_limit {
                    SEARCH_WINDOW
                } else {
                    WINDOW
                })
                .as_secs_f64(),
            stall: self.run.stall_option()?,
        };
        plan.validate()?;
        Ok(plan)
    }

    /// `--load` and `--load-fix`: each fix with the placements it runs on.
    fn load_plan(&self, placements: &[Placement]) -> anyhow::Result<Option<LoadPlan>> {
        let Some(text) = &self.load else {
            if self.load_fix.is_some() || self.load_congestion.is_some() {
                bail!("--load-fix and --load-congestion shape a load: give --load stream[:N]");
            }
            return Ok(None);
        };
        let streams = parse_load(text).map_err(anyhow::Error::msg)?;
        if placements
            .iter()
            .any(|p| matches!(p, Placement::Remote { .. }))
        {
            bail!(
                "--load runs on loopback and netns placements: between agents the load's endpoints are not part of a login run yet"
            );
        }
        let netns = placements
            .iter()
            .any(|p| matches!(p, Placement::Netns { .. }));
        let fixes: Vec<LoadFix> = match &self.load_fix {
            Some(names) => names
                .iter()
                .map(|n| LoadFix::parse(n.trim()))
                .collect::<Result<_, _>>()
                .map_err(anyhow::Error::msg)?,
            None if netns => vec![LoadFix::None, LoadFix::FqCodel, LoadFix::NotsentLowat],
            None => vec![LoadFix::None, LoadFix::NotsentLowat],
        };
        if fixes.is_empty() {
            bail!("--load-fix: name at least one fix (none for the load as it comes)");
        }
        if fixes.contains(&LoadFix::Bbr)
            && let Err(e) = crate::endpoint::rpm::sockets::congestion_available("bbr")
        {
            bail!("--load-fix bbr: {e}");
        }
        if let Some(name) = &self.load_congestion
            && let Err(e) = crate::endpoint::rpm::sockets::congestion_available(name)
        {
            bail!("--load-congestion {name}: {e}");
        }
        // On a netns link the other fixes run with netlab's emulator
        // carrying its queue (drop-tail unless --queue-discipline says
        // otherwise), as a discipline's cells do: the one difference
        // between two cells is the fix, and each reads the queue's sojourn.
        let mut planned = Vec::new();
        for fix in fixes {
            let on = match fix.discipline() {
                Some(name) => {
                    if !netns {
                        bail!(
                            "--load-fix {}: the discipline is the emulated link's bottleneck queue: add netns to --placement",
                            fix.name()
                        );
                    }
                    let on: Vec<Placement> = self
                        .place
                        .placements_with("login", Some(name))?
                        .into_iter()
                        .filter(|p| matches!(p, Placement::Netns { .. }))
                        .collect();
                    on
                }
                None if netns => self.place.placements_with(
                    "login",
                    Some(self.place.queue_discipline.as_deref().unwrap_or("droptail")),
                )?,
                None => placements.to_vec(),
            };
            planned.push((fix, on));
        }
        Ok(Some(LoadPlan {
            streams,
            fixes: planned,
            congestion: self.load_congestion.clone(),
        }))
    }
}

/// `--stack sunos35`: the model's rows, and today's relays on 1989's
/// machine from `--counts-from`. Options that would measure are refused:
/// the model describes one placement (two terminal servers to one
/// Sun-3/260 over 10 Mbit/s Ethernet), one protocol (rlogin), no budget.
fn run_model(args: LoginExperimentArgs, out: &mut Output) -> anyhow::Result<()> {
    let describes = "the model describes 000's setup only (terminal servers to one Sun-3/260 over 10 Mbit/s Ethernet) and runs no endpoints";
    if args.place.placement.is_some()
        || args.place.remote.from.is_some()
        || args.place.remote.to.is_some()
    {
        bail!("--stack sunos35: {describes}: --placement, --from and --to do not apply");
    }
    if let Some(p) = args.protocol.iter().find(|p| **p != Dialect::Rlogin) {
        bail!(
            "--stack sunos35 --protocol {}: the model describes rlogin, 000's protocol",
            p.name()
        );
    }
    let measuring = [
        (
            args.host_cpu.is_some(),
            "--host-cpu (the model is the 1989 host)",
        ),
        (args.load.is_some(), "--load"),
        (
            args.find_limit,
            "--find-limit (the model gives each design's melting point)",
        ),
        (args.corpus.is_some(), "--corpus"),
        (args.poisson, "--poisson"),
        (
            args.duration.is_some() || args.warmup.is_some(),
            "--duration/--warmup",
        ),
    ];
    if let Some((_, option)) = measuring.iter().find(|(given, _)| *given) {
        bail!("--stack sunos35: {describes}: {option} does not apply");
    }
    if !(args.rate.is_finite() && args.rate > 0.0) {
        bail!(
            "--rate must be a positive number of characters a second, not {}",
            args.rate
        );
    }
    let users: Vec<u32> = args
        .users
        .iter()
        .map(|&n| u32::try_from(n).ok().filter(|&n| n > 0))
        .collect::<Option<_>>()
        .ok_or_else(|| anyhow::anyhow!("--users: each count must be 1 to {}", u32::MAX))?;
    let today = match &args.counts_from {
        None => Vec::new(),
        Some(path) => {
            let (records, unreadable) = crate::record::read_records_split::<LoginData>(path)
                .with_context(|| format!("--counts-from {}", path.display()))?;
            let (today, left_out) =
                crate::experiments::login::model::today(&records, &users, args.rate);
            if today.is_empty() && !left_out.is_empty() {
                bail!(
                    "--counts-from {}: no cell's counts can be used: {}",
                    path.display(),
                    left_out.join("; ")
                );
            }
            if today.is_empty() {
                bail!(
                    "--counts-from {}: no login cell there carries its work per keystroke (system calls, context switches and pty transfers of one of netlab's relays; records before 2026-11-29 do not){}",
                    path.display(),
                    crate::record::unreadable_clause(&unreadable)
                        .map(|c| format!("; {c}"))
                        .unwrap_or_default()
                );
            }
            for why in &left_out {
                eprintln!("warning: --counts-from {}: left out {why}", path.display());
            }
            if let Some(skipped) = crate::record::unreadable_clause(&unreadable) {
                eprintln!("warning: --counts-from {}: {skipped}", path.display());
            }
            today
        }
    };
    use crate::experiments::login::model::{model_doc, model_text};
    args.run
        .finish_unrecorded(out, model_doc(&users, args.rate, &today), || {
            model_text(&users, args.rate, &today)
        })
}

pub fn run_experiment(args: LoginExperimentArgs, out: &mut Output) -> anyhow::Result<()> {
    if args.stack == LoginStack::Sunos35 {
        return run_model(args, out);
    }
    if args.counts_from.is_some() {
        bail!("--counts-from feeds measured counts into the model: add --stack sunos35");
    }
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
    args.run.measure(out, |runner| {
        // One idle baseline for the run, before any cell starts anything.
        let mut measure = LoginMeasure::new(corpus)?;
        if args.find_limit {
            let search = LimitSearch {
                start: plan.users.first().copied().unwrap_or(16),
                max_users: args.max_users,
                resolution: 8,
                echoes: PROBE_ECHOES,
            };
            let mut records = Vec::new();
            let limits = find_limits(runner, &mut measure, &plan, search, &mut records)?;
            let doc = serde_json::json!({ "experiment": "login", "find_limit": limits, "records": records });
            let text = crate::experiments::login::report::limits_table(plan.rate, &limits);
            // A limit is found even when its probes failed: no failure check.
            return Ok(RunOutcome {
                records,
                judged: false,
                print: Print::DocOrText { doc, text },
            });
        }
        let records = runner.grid(&mut measure, &plan.cells())?;
        let doc = serde_json::json!({ "experiment": "login", "records": records });
        let text = crate::experiments::login::report::grid_text(&plan, &records);
        Ok(RunOutcome::grid(records, doc, text))
    })
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct LoginArgs {
    #[command(subcommand)]
    pub command: Option<LoginCommand>,
    #[command(flatten)]
    pub experiment: crate::experiments::login::options::LoginExperimentArgs,
}

impl LoginArgs {
    /// Whether it prints JSON (so an error is printed as JSON too).
    pub fn json(&self) -> bool {
        self.command.is_none() && self.experiment.run.json
    }
}

#[derive(Debug, Subcommand)]
pub enum LoginCommand {
    /// Serve TELNET or rlogin sessions, each running a command on its own pty.
    Serve(ServeArgs),
    /// Internal: write FILE to stdout at a terminal's pace (`netlab output --baud`).
    #[command(hide = true)]
    Pace {
        #[arg(long)]
        bytes_per_s: u64,
        file: std::path::PathBuf,
    },
    /// Internal: one session (fork design) on the socket inherited as fd 3.
    #[command(hide = true)]
    Session {
        #[arg(long, value_parser = ["telnet", "rlogin"])]
        protocol: String,
        #[arg(long)]
        linemode: bool,
        #[arg(long)]
        nodelay: bool,
        #[arg(long)]
        idle_s: u64,
        #[arg(long)]
        peer: SocketAddr,
        /// The server's pty-transfer page, inherited as this descriptor.
        #[arg(long)]
        tally_fd: Option<i32>,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Protocol.
    #[arg(long, default_value = "telnet", value_parser = ["telnet", "rlogin"])]
    pub protocol: String,
    /// Relay design: how bytes move between socket and pty.
    #[arg(long, value_enum, default_value = "fork")]
    pub relay: Relay,
    #[command(flatten)]
    pub bind: crate::options::BindArgs,
    /// Ask clients for LINEMODE (they edit and echo lines locally).
    #[arg(long)]
    pub linemode: bool,
    /// TCP_NODELAY on every session's socket (off, as in telnetd: Nagle
    /// then holds small output writes until the client's delayed ACK).
    #[arg(long)]
    pub nodelay: bool,
    /// Most sessions at once; more are refused.
    #[arg(long, default_value_t = 256, value_parser = crate::options::positive_count)]
    pub max_sessions: usize,
    /// Close sessions without input for this many seconds (1 to 86400).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub idle_timeout: u64,
    /// The command each session runs (default `cat`, not a shell); give it
    /// last: every word after it, dashes included, is the command's.
    #[arg(long, num_args = 1.., allow_hyphen_values = true, default_values = ["cat"])]
    pub command: Vec<String>,
}

pub fn run(args: LoginArgs, out: &mut Output) -> anyhow::Result<()> {
    match args.command {
        None => run_experiment(args.experiment, out),
        Some(LoginCommand::Serve(serve_args)) => serve(serve_args, out),
        Some(LoginCommand::Pace { bytes_per_s, file }) => {
            let data = crate::record::files::read_bounded(&file, 64 << 20, "a file to pace")?;
            Ok(pace(bytes_per_s, &data, &mut std::io::stdout().lock())?)
        }
        Some(LoginCommand::Session {
            protocol,
            linemode,
            nodelay,
            idle_s,
            peer,
            tally_fd,
            command,
        }) => {
            // Without the page the session still serves, uncounted.
            if let Some(fd) = tally_fd
                && let Err(e) = crate::endpoint::login::tally::adopt(fd)
            {
                eprintln!("netlab login session: --tally-fd {fd}: pty transfers not counted: {e}");
            }
            let config = SessionConfig {
                protocol: Protocol::parse(&protocol).expect("checked by clap"),
                linemode,
                command,
                idle: Duration::from_secs(idle_s),
                nodelay,
                guard: None,
            };
            Ok(relay_fork::session_on_fd3(peer, &config)?)
        }
    }
}

fn serve(args: ServeArgs, out: &mut Output) -> anyhow::Result<()> {
    let bind = args.bind.checked(
        "login serve",
        "the protocol carries no encryption and the command runs as this user",
    )?;
    let running = server::Running::start(LoginServeSpec {
        bind,
        relay: args.relay,
        protocol: args.protocol,
        linemode: args.linemode,
        nodelay: args.nodelay,
        max_sessions: args.max_sessions,
        idle_timeout_s: args.idle_timeout,
        command: args.command,
        guard: None,
    })
    .with_context(|| format!("cannot serve on {bind}"))?;
    out.text(&format!("{}\n", running.port()))?;
    wait_for_interrupt();
    running.stop()?;
    Ok(())
}
