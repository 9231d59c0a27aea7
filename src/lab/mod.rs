//! The lab: every landed experiment in its quick (or full) profile, its
//! plan built from each experiment's own plan type, run section by section
//! through one runner; each finished section goes to the caller to print. What the lab runs depends on
//! this host (root for the netns placement, telnetd and sshd where they are
//! installed); what it leaves out is listed with the reason.

pub mod report;

use crate::analysis::costmodel::CostModel;
use crate::endpoint::login::host::DEFAULT_CORPUS;
use crate::endpoint::login::host::Dialect;
use crate::endpoint::login::host::Target;
use crate::endpoint::login::server::Relay;
use crate::experiment::profile::Profiling;
use crate::experiment::runner::Runner;
use crate::experiment::{CellError, MeasureError};
use crate::experiments::cksum::cell::{CksumMeasure, CksumPlan, PlanError};
use crate::experiments::login::cell::LoginMeasure;
use crate::experiments::login::cell::{LimitSearch, LoginPlan, find_limits};
use crate::experiments::login::record::LoginParams;
use crate::experiments::output::cell::OutputMeasure;
use crate::experiments::output::cell::OutputPlan;
use crate::experiments::output::record::OutputParams;
use crate::experiments::rpc::cell::RpcMeasure;
use crate::experiments::rpc::plan::{Explained, measure_and_explain};
use crate::experiments::rpc::plan::{RpcPlan, remote_1989};
use crate::experiments::stream::cell::StreamConfig;
use crate::experiments::stream::cell::{StreamCell, StreamMeasure};
use crate::experiments::stream::record::Amount;
use crate::experiments::stream::record::Record as StreamRecord;
use crate::experiments::sweep::cell::SweepConfig;
use crate::experiments::sweep::cell::{self as sweep, Precision, PrecisionReport, SweepSummary};
use crate::record::testbed::Placement;
use crate::testbed::cgroup::{self, HostPreset};
use crate::testbed::netns::has_net_admin;
use crate::units::format_size;

/// Van Jacobson's "sound barrier" (003) on `ether10`: Sun's if_le.c
/// handing the LANCE one frame at a time, each hand-over after the
/// interrupt's service (his "more than 150us", then the service that
/// gives his 550 KB/s), and the same with a 32-frame queue (his fix). 1 MB
/// in 8 KB records each; a queue deep enough that tail drop plays no part.
pub fn sound_barrier(ether10: &Placement) -> Vec<StreamConfig> {
    let barrier_service_us = crate::testbed::impair::service_for_throughput(
        1408 + 40,
        10_000_000,
        Some(crate::record::testbed::Framing::Ethernet),
        550.0 * 1024.0 * 1448.0 / 1408.0,
    )
    .round() as u64;
    [(1, 150), (1, barrier_service_us), (32, 150)]
        .into_iter()
        .map(|(queue, service_us)| {
            let mut placement = ether10.clone();
            if let Placement::Netns { link, .. } = &mut placement {
                link.impair.tx_queue = Some(queue);
                link.impair.tx_service_us = service_us;
                link.queue_bytes = Some(256 << 10);
            }
            StreamConfig {
                amount: Amount::Bytes(1 << 20),
                record: 8192,
                placement,
                ..StreamConfig::joy_1981()
            }
        })
        .collect()
}

/// Everything a lab run measures, in the order it runs.
#[derive(Debug, Clone)]
pub struct LabPlan {
    /// 1981: Bill Joy's 4 MB in 1 KB records, on loopback.
    pub joy: StreamConfig,
    pub joy_repeat: u32,
    /// The same over an emulated 10 Mbit/s Ethernet (as root).
    pub joy_ether10: Option<StreamConfig>,
    pub ether10_repeat: u32,
    /// 1988's sound barrier on that Ethernet (as root): Sun's one-packet
    /// driver at two service times, then a deep queue.
    pub barrier: Vec<StreamConfig>,
    /// 1989: Sun RPC time per call vs argument size.
    pub rpc: RpcPlan,
    /// 1988: throughput vs record size.
    pub sweep: SweepConfig,
    /// The sweep's precision target (the full profile: ±5%, in 10 minutes).
    pub sweep_precision: Option<Precision>,
    /// 1988: checksum and copy costs per KB.
    pub cksum: CksumPlan,
    /// 1989: users typing through each relay design and real server.
    pub login: LoginPlan,
    pub login_cells: Vec<LoginParams>,
    /// 1987: text typed to a terminal through each design and real server.
    pub output: OutputPlan,
    pub output_cells: Vec<OutputParams>,
    /// Where the checksum costs are measured: this host, or an agent.
    pub cksum_on: Option<String>,
    /// Why there is no run over the emulated Ethernet, if there is none.
    pub ether10_skipped: String,
    /// What of the login and output sections was left out, and why.
    pub login_skipped: Vec<String>,
    pub output_skipped: Vec<String>,
    /// 1989's shape: each of netlab's designs' limit on a 1989-class host
    /// (none across hosts: the preset is calibrated on the serving host).
    pub limits: Option<DesignLimits>,
    /// Profile the 1981 stream cells by layer (where this host can), to set
    /// beside Berkeley's split; off across hosts (the sampler sees this
    /// host only).
    pub profile_joy: bool,
}

/// Each relay design's limit (the most users it serves normally) under a
/// preset CPU budget, as `netlab login --host-cpu PRESET --find-limit`.
#[derive(Debug, Clone)]
pub struct DesignLimits {
    pub preset: HostPreset,
    /// Designs, windows and the first count (its budget is set at run time).
    pub login: LoginPlan,
    pub search: LimitSearch,
}

impl DesignLimits {
    fn new(login: &LoginPlan, relays: Vec<Target>, search: LimitSearch) -> DesignLimits {
        DesignLimits {
            preset: HostPreset::Sun3,
            login: LoginPlan {
                users: vec![search.start],
                relays,
                protocols: vec![Dialect::Rlogin],
                placements: vec![Placement::Loopback],
                ..login.clone()
            },
            search,
        }
    }

    /// The plan with its budget: this host's packet cost measured now.
    /// Why not, when this host cannot give a server a budget.
    pub fn budgeted(&self) -> Result<LoginPlan, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("a CPU budget needs root (a cgroup of the CPU controller)".into());
        }
        cgroup::available().map_err(|e| e.to_string())?;
        let (percent, preset) = self
            .preset
            .budget_here()
            .map_err(|e| format!("cannot measure this host's cost of a TCP packet: {e}"))?;
        cgroup::check(percent).map_err(|e| e.to_string())?;
        Ok(LoginPlan {
            host_cpu_pct: Some(percent),
            host_cpu_preset: Some(preset),
            ..self.login.clone()
        })
    }
}

/// Joy's 4 MB transfers per loopback run (about half a second here).
pub const JOY_LOOPBACK_TRANSFERS: u64 = 64;

/// The profile's counts; everything else is each experiment's own plan.
struct Counts {
    joy_repeat: u32,
    ether10_repeat: u32,
    /// The limit search's designs, windows and resolution.
    limit_relays: Vec<Target>,
    limit_windows: LoginPlan,
    limit_search: LimitSearch,
    sweep_precision: Option<Precision>,
}

impl LabPlan {
    /// About two minutes on a 2-core machine.
    pub fn quick() -> LabPlan {
        Self::build(
            Counts {
                joy_repeat: 5,
                ether10_repeat: 2,
                // 1989's pair: a process per session, as the normal
                // rlogind, against the kernel-assisted analogue (splice);
                // up to 128 users, 1 s windows, one bisection: about a
                // minute (logging 128 users in under a 3% budget is most
                // of it).
                limit_relays: vec![Target::Fork, Target::Splice],
                limit_windows: LoginPlan {
                    warmup_s: 0.3,
                    duration_s: 1.0,
                    ..LoginPlan::quick()
                },
                limit_search: LimitSearch {
                    start: 16,
                    max_users: 128,
                    resolution: 2,
                },
                sweep_precision: None,
            },
            RpcPlan::quick(),
            SweepConfig::quick(),
            CksumPlan::quick(),
            LoginPlan::quick(),
            OutputPlan::quick(),
        )
    }

    /// The source documents' repetition counts and longer runs.
    pub fn full() -> LabPlan {
        Self::build(
            Counts {
                joy_repeat: 20,
                ether10_repeat: 5,
                limit_relays: Relay::ALL.into_iter().map(Target::of).collect(),
                limit_windows: LoginPlan {
                    warmup_s: 1.0,
                    duration_s: 5.0,
                    ..LoginPlan::full()
                },
                limit_search: LimitSearch {
                    start: 16,
                    max_users: 1024,
                    resolution: 8,
                },
                // Each point's median within ±5% (95%), the sweep within
                // ten minutes, at most 20 runs a size.
                sweep_precision: Some(Precision {
                    half_width: 0.05,
                    level: 0.95,
                    budget: std::time::Duration::from_secs(600),
                    max_runs: 20,
                }),
            },
            RpcPlan::full(),
            SweepConfig::full(),
            CksumPlan::full(),
            LoginPlan::full(),
            OutputPlan::full(),
        )
    }

    fn build(
        counts: Counts,
        rpc: RpcPlan,
        sweep: SweepConfig,
        cksum: CksumPlan,
        login: LoginPlan,
        output: OutputPlan,
    ) -> LabPlan {
        let limits = Some(DesignLimits::new(
            &counts.limit_windows,
            counts.limit_relays.clone(),
            counts.limit_search,
        ));
        // On loopback Joy's 4 MB take a few ms, too short for the CPU
        // figures to mean much (a cold start, a page fault, one tick of
        // the sampled user/system split): each run moves the transfer
        // JOY_LOOPBACK_TRANSFERS times over and the report gives the time
        // per 4 MB. Over the emulated Ethernet 4 MB already take 3.4 s.
        let joy = StreamConfig {
            amount: Amount::Bytes(JOY_LOOPBACK_TRANSFERS * (4 << 20)),
            ..StreamConfig::joy_1981()
        };
        let ether10 = has_net_admin().then(remote_1989);
        // netlab's designs over rlogin; the real servers beside them
        // (telnetd over TELNET, sshd over SSH) where this machine has them.
        let mut servers: Vec<(Target, Dialect)> = Relay::ALL
            .into_iter()
            .map(|relay| (Target::of(relay), Dialect::Rlogin))
            .collect();
        if std::path::Path::new("/usr/sbin/telnetd").exists() {
            servers.push((Target::Telnetd, Dialect::Telnet));
        }
        // SAFETY: geteuid has no preconditions.
        if std::path::Path::new("/usr/sbin/sshd").exists() && unsafe { libc::geteuid() } == 0 {
            servers.push((Target::Sshd, Dialect::Ssh));
        }
        let mut login_cells = Vec::new();
        for &users in &login.users {
            for &(relay, protocol) in &servers {
                login_cells.push(login.cell(relay, protocol, &Placement::Loopback, users));
            }
        }
        // Over a 10 Mbit/s Ethernet too, one design at the first count: the
        // packets in and out are then the interface's, as in 1989's vmstat.
        if let Some(netns) = &ether10 {
            login_cells.push(login.cell(Target::Epoll, Dialect::Rlogin, netns, login.users[0]));
        }
        let mut output_cells = output.cells();
        let real: Vec<Target> = servers
            .iter()
            .filter(|(t, _)| t.relay().is_none())
            .map(|(t, _)| *t)
            .collect();
        output_cells.extend(
            OutputPlan {
                relays: real,
                protocols: vec![Dialect::Telnet],
                ..output.clone()
            }
            .cells(),
        );
        if let Some(netns) = &ether10 {
            output_cells.extend(
                OutputPlan {
                    relays: vec![Target::Epoll],
                    protocols: vec![Dialect::Rlogin],
                    placements: vec![netns.clone()],
                    ..output.clone()
                }
                .cells(),
            );
        }
        let barrier = ether10.as_ref().map_or_else(Vec::new, sound_barrier);
        LabPlan {
            barrier,
            // The 1981 transfer over the Ethernet is watched on the wire.
            joy_ether10: ether10.map(|mut placement| {
                if let Placement::Netns { capture, .. } = &mut placement {
                    *capture = true;
                }
                StreamConfig {
                    placement,
                    ..StreamConfig::joy_1981()
                }
            }),
            joy,
            joy_repeat: counts.joy_repeat,
            ether10_repeat: counts.ether10_repeat,
            rpc,
            sweep,
            sweep_precision: counts.sweep_precision,
            cksum,
            login,
            login_cells,
            output,
            output_cells,
            cksum_on: None,
            profile_joy: true,
            ether10_skipped:
                "stream over netns ether10 (the netns placement needs CAP_NET_ADMIN; run as root)"
                    .into(),
            login_skipped: Vec::new(),
            output_skipped: Vec::new(),
            limits,
        }
    }

    /// The same lab across a real path: the sending, calling and typing
    /// ends at `from`, the receiving and serving ends (and the checksum
    /// costs) at `to`, each `local` or an agent. RPC's "local" column is
    /// both ends on `to`, as in 1989. The emulated Ethernet is not built
    /// (the path is the real network's); login and output run netlab's
    /// own designs where `serves(agent, experiment)` says both ends allow
    /// them, and the real servers (whose presence on an agent's host this
    /// host cannot see) are left to `netlab login --relay telnetd,sshd`.
    /// [`LabPlan::across`] with what the agents reached said they serve.
    pub fn across_agents(self, from: &str, to: &str) -> LabPlan {
        let agents = crate::experiment::remote::facts();
        let serves = |end: &str, experiment: &str| {
            end == "local"
                || agents
                    .iter()
                    .any(|a| a.agent == end && a.allow.iter().any(|e| e == experiment))
        };
        self.across(from, to, &serves)
    }

    pub fn across(mut self, from: &str, to: &str, serves: &dyn Fn(&str, &str) -> bool) -> LabPlan {
        let path = Placement::Remote {
            from: from.to_string(),
            to: to.to_string(),
        };
        // A real path's speed is unknown: the source's 4 MB.
        self.joy = StreamConfig {
            placement: path.clone(),
            ..StreamConfig::joy_1981()
        };
        self.joy_ether10 = None;
        self.barrier.clear();
        self.profile_joy = false;
        self.ether10_skipped = format!(
            "stream over an emulated 10 Mbit/s Ethernet: this lab runs across the real path from {from} to {to}"
        );
        self.rpc.placements = vec![
            Placement::Remote {
                from: to.to_string(),
                to: to.to_string(),
            },
            path.clone(),
        ];
        self.rpc.skipped.clear();
        self.sweep.base.placement = path.clone();
        self.cksum_on = (to != "local").then(|| to.to_string());
        let both = |experiment: &str| {
            [from, to]
                .into_iter()
                .filter(|end| !serves(end, experiment))
                .map(|end| format!("{experiment} from {from} to {to}: agent {end} does not serve {experiment} (start it with --allow {experiment})"))
                .collect::<Vec<String>>()
        };
        self.login_skipped = both("login");
        self.login_cells = if self.login_skipped.is_empty() {
            let mut cells = Vec::new();
            for &users in &self.login.users {
                for relay in Relay::ALL {
                    cells.push(
                        self.login
                            .cell(Target::of(relay), Dialect::Rlogin, &path, users),
                    );
                }
            }
            cells
        } else {
            Vec::new()
        };
        self.output_skipped = both("output");
        self.output_cells = if self.output_skipped.is_empty() {
            OutputPlan {
                placements: vec![path.clone()],
                ..self.output.clone()
            }
            .cells()
        } else {
            Vec::new()
        };
        if self.login_skipped.is_empty() || self.output_skipped.is_empty() {
            self.login_skipped.push(format!(
                "telnetd and sshd across agents (this host cannot see whether the agent's host has them): netlab login --relay telnetd,sshd --from {from} --to {to}, and the same for output"
            ));
        }
        self.limits = None;
        self.login_skipped.push(format!(
            "each design's limit on a 1989-class host (--host-cpu sun3 is calibrated on the serving host, this one): netlab login --host-cpu PERCENT --find-limit --from {from} --to {to}"
        ));
        self
    }
}

/// What one step of the lab measured, for the report layer to present.
#[derive(Debug)]
pub enum Section {
    /// A note on what was left out and why.
    Skipped(String),
    /// Bulk transfers of one configuration (`title` describes it).
    Stream {
        title: String,
        records: Vec<StreamRecord>,
    },
    /// 1988's sound barrier: the one-packet driver's runs.
    Barrier { records: Vec<StreamRecord> },
    /// The RPC table's grid and its explained cliffs.
    Rpc { title: String, explained: Explained },
    /// Throughput vs record size, summarised.
    Sweep {
        title: String,
        summary: SweepSummary,
        records: Vec<StreamRecord>,
        /// What the full profile's precision target reached.
        precision: Option<Box<PrecisionReport>>,
    },
    /// Checksum and copy costs, and the sweep's per-byte cost they explain.
    Cksum {
        batches: u32,
        records: Vec<crate::experiments::cksum::record::Record>,
        sweep_model: Option<CostModel>,
    },
    /// Users typing through each server.
    Login {
        window_s: f64,
        records: Vec<crate::experiments::login::record::Record>,
    },
    /// Each design's limit under a 1989-class budget: the search's probes.
    LoginLimits {
        records: Vec<crate::experiments::login::record::Record>,
    },
    /// Text typed to a terminal through each server.
    Output {
        bytes: u64,
        records: Vec<crate::experiments::output::record::Record>,
    },
}

/// Runs the plan, section by section, through `runner`, handing each
/// finished section to `show` (which prints it) before the next starts.
pub fn run<E>(
    plan: &LabPlan,
    runner: &mut Runner,
    show: &mut dyn FnMut(Section) -> Result<(), E>,
) -> Result<(), E>
where
    E: From<MeasureError> + From<CellError> + From<PlanError> + From<std::io::Error>,
{
    // Limits first: nothing runs if a later section could not.
    let cksum_specs = plan.cksum.specs()?;

    // 1981: Bill Joy's 4 MB in 1024-byte records, profiled by layer when
    // this host can (root) to set beside Berkeley's split of its CPU.
    let restore = match (
        plan.profile_joy && !runner.is_profiling(),
        Profiling::check(),
    ) {
        (true, Ok(profiling)) => Some(runner.swap_profiling(Some(profiling))),
        (true, Err(e)) => {
            eprintln!("lab: stream cells not profiled by layer: {e}");
            None
        }
        (false, _) => None,
    };
    let joy = &plan.joy;
    eprintln!("lab: stream, {} ({} runs)", joy.describe(), plan.joy_repeat);
    let records = runner.grid(
        &mut StreamMeasure::default(),
        &StreamCell::repeats(joy, plan.joy_repeat),
    )?;
    show(Section::Stream {
        title: joy.describe(),
        records,
    })?;

    // 1981 again, over a 10 Mbit/s Ethernet between two hosts (namespaces).
    match &plan.joy_ether10 {
        Some(over_ether) => {
            eprintln!(
                "lab: stream over netns ether10, {} ({} runs)",
                over_ether.describe(),
                plan.ether10_repeat
            );
            let cells = StreamCell::repeats(over_ether, plan.ether10_repeat);
            let records = runner.grid(&mut StreamMeasure::default(), &cells)?;
            show(Section::Stream {
                title: format!(
                    "{} over an emulated 10 Mbit/s Ethernet",
                    over_ether.describe()
                ),
                records,
            })?;
        }
        None => show(Section::Skipped(plan.ether10_skipped.clone()))?,
    }
    if let Some(before) = restore {
        runner.swap_profiling(before);
    }

    // 1988: Sun's one-packet LANCE driver and its "sound barrier".
    if !plan.barrier.is_empty() {
        eprintln!(
            "lab: 1988's sound barrier over netns ether10 ({} runs)",
            plan.barrier.len()
        );
        let cells: Vec<StreamCell> = plan
            .barrier
            .iter()
            .flat_map(|config| StreamCell::repeats(config, 1))
            .collect();
        let records = runner.grid(&mut StreamMeasure::default(), &cells)?;
        show(Section::Barrier { records })?;
    }

    // 1989: Sun RPC time per call vs argument size, its cliffs and their causes.
    for note in &plan.rpc.skipped {
        show(Section::Skipped(note.clone()))?;
    }
    eprintln!(
        "lab: rpc, {} calls x {} reps per cell, {} placement(s)",
        plan.rpc.calls,
        plan.rpc.reps,
        plan.rpc.placements.len()
    );
    let explained = measure_and_explain(runner, &mut RpcMeasure, &plan.rpc)?;
    show(Section::Rpc {
        title: plan.rpc.title(),
        explained,
    })?;

    // 1988: throughput vs write size.
    let sweep = &plan.sweep;
    let first = sweep.records.first().copied().unwrap_or(0);
    let sizes = format!(
        "{}..{}",
        format_size(first),
        format_size(sweep.records.last().copied().unwrap_or(first))
    );
    eprintln!(
        "lab: sweep stream over {sizes} ({} s per run, {} runs per size)",
        match sweep.base.amount {
            Amount::Seconds(s) => s,
            Amount::Bytes(_) => 0.0,
        },
        sweep.repeat
    );
    let swept = sweep::run(
        runner,
        &mut StreamMeasure::default(),
        sweep,
        plan.sweep_precision.as_ref(),
    )?;
    let (summary, records) = (swept.summary, swept.records);
    let precision = swept.precision.map(Box::new);
    let sweep_model = summary.model;
    show(Section::Sweep {
        title: format!("record sizes {sizes}; each point {}", sweep.base.describe()),
        summary,
        records,
        precision,
    })?;

    // 1988: the per-KB costs of copying and checksumming, and what they explain.
    let sizes: Vec<String> = plan.cksum.sizes.iter().map(|&s| format_size(s)).collect();
    eprintln!("lab: cksum over {}", sizes.join(","));
    let records = runner.grid(
        &mut CksumMeasure {
            on: plan.cksum_on.clone(),
        },
        &cksum_specs,
    )?;
    show(Section::Cksum {
        batches: plan.cksum.batches,
        records,
        sweep_model,
    })?;

    // 1989: users typing through rlogind, one relay design against
    // another; the real servers beside them where this machine has them.
    for note in &plan.login_skipped {
        show(Section::Skipped(note.clone()))?;
    }
    let most_users = plan.login.users.iter().copied().max().unwrap_or(0);
    let login_fits = plan.login.check_limits(most_users);
    if let Err(why) = &login_fits {
        show(Section::Skipped(format!("login: {why}")))?;
    }
    if !plan.login_cells.is_empty() && login_fits.is_ok() {
        eprintln!(
            "lab: login, {:?} users typing 5 chars/s through each relay design ({} s windows)",
            plan.login.users, plan.login.duration_s
        );
        let mut typing = LoginMeasure::new(DEFAULT_CORPUS.as_bytes().to_vec())?;
        let records = runner.grid(&mut typing, &plan.login_cells)?;
        show(Section::Login {
            window_s: plan.login.duration_s,
            records,
        })?;
    }

    // 1989's shape: where each design melts on a 1989-class host.
    if let Some(limits) = &plan.limits {
        match limits.budgeted() {
            Err(why) => show(Section::Skipped(format!(
                "each design's limit on a 1989-class host: {why}"
            )))?,
            Ok(budgeted) => {
                if let Err(why) = budgeted.check_limits(limits.search.max_users) {
                    show(Section::Skipped(format!(
                        "each design's limit on a 1989-class host: {why}"
                    )))?;
                    return run_output(plan, runner, show);
                }
                if let Some(preset) = &budgeted.host_cpu_preset {
                    eprintln!(
                        "lab: login limits on a 1989-class host, --host-cpu {}",
                        preset.derivation
                    );
                }
                let mut typing = LoginMeasure::new(DEFAULT_CORPUS.as_bytes().to_vec())?;
                let mut records = Vec::new();
                find_limits(runner, &mut typing, &budgeted, limits.search, &mut records)?;
                show(Section::LoginLimits { records })?;
            }
        }
    }

    run_output(plan, runner, show)
}

/// 1987: text typed to a terminal through each design, per KB.
fn run_output<E>(
    plan: &LabPlan,
    runner: &mut Runner,
    show: &mut dyn FnMut(Section) -> Result<(), E>,
) -> Result<(), E>
where
    E: From<MeasureError> + From<CellError> + From<PlanError> + From<std::io::Error>,
{
    for note in &plan.output_skipped {
        show(Section::Skipped(note.clone()))?;
    }
    if plan.output_cells.is_empty() {
        return Ok(());
    }
    eprintln!(
        "lab: output, {} typed through each relay design",
        plan.output.size
    );
    let records = runner.grid(&mut OutputMeasure, &plan.output_cells)?;
    show(Section::Output {
        bytes: plan.output.size,
        records,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quick_profile_keeps_the_lab_short_and_the_full_one_the_sources_counts() {
        let quick = LabPlan::quick();
        assert_eq!(quick.joy.record, 1024);
        assert_eq!(
            quick.joy.amount,
            Amount::Bytes(JOY_LOOPBACK_TRANSFERS * (4 << 20))
        );
        assert_eq!((quick.rpc.calls, quick.rpc.reps), (20, 3));
        assert_eq!(quick.sweep.records.first(), Some(&64));
        assert_eq!(quick.sweep.records.last(), Some(&(1 << 20)));
        assert_eq!(quick.login.users, [16, 48]);
        assert_eq!(quick.output.size, 1 << 20);
        let full = LabPlan::full();
        assert_eq!((full.rpc.calls, full.rpc.reps), (100, 20));
        assert_eq!(full.sweep.records.first(), Some(&16));
        assert_eq!(full.sweep.records.last(), Some(&(4 << 20)));
        assert_eq!(full.login.users, [16, 32, 48]);
    }

    #[test]
    fn across_a_path_every_end_is_an_agent_and_nothing_is_emulated() {
        let remote = |from: &str, to: &str| Placement::Remote {
            from: from.into(),
            to: to.into(),
        };
        let plan = LabPlan::quick().across("a:5310", "b:5310", &|_, _| true);
        assert_eq!(plan.joy.placement, remote("a:5310", "b:5310"));
        assert!(plan.joy_ether10.is_none());
        assert!(plan.barrier.is_empty());
        assert!(plan.ether10_skipped.contains("real path"));
        assert_eq!(
            plan.rpc.placements,
            [remote("b:5310", "b:5310"), remote("a:5310", "b:5310")],
            "1989's local column is both ends on --to"
        );
        assert_eq!(plan.sweep.base.placement, remote("a:5310", "b:5310"));
        assert_eq!(plan.cksum_on.as_deref(), Some("b:5310"));
        assert!(!plan.login_cells.is_empty());
        assert!(
            plan.login_cells
                .iter()
                .all(|c| c.placement == remote("a:5310", "b:5310") && c.relay.relay().is_some())
        );
        assert!(
            plan.output_cells
                .iter()
                .all(|c| c.placement == remote("a:5310", "b:5310"))
        );
        // An agent that does not allow login: no login cells, and why.
        let plan = LabPlan::quick().across("local", "b:5310", &|end, experiment| {
            end == "local" || experiment != "login"
        });
        assert!(plan.login_cells.is_empty());
        assert!(
            plan.login_skipped[0].contains("--allow login"),
            "{:?}",
            plan.login_skipped
        );
        assert!(!plan.output_cells.is_empty());
    }

    #[test]
    fn doubling_ends_at_the_top() {
        assert_eq!(
            crate::experiments::sweep::cell::doubling(64, 512),
            [64, 128, 256, 512]
        );
    }
}
