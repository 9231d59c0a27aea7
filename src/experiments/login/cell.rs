//! The login-load experiment (000_2144c0e834c30e0c.txt, 1989): N users
//! typing 5 characters a second into `cat > /dev/null` through a login
//! server, and what the host spends on it, in vmstat's terms.
//!
//! One cell = one relay design, protocol and user count. The launcher
//! starts the serving end at `To` (netlab's server, telnetd or sshd:
//! [`crate::experiments::login::servers`]) and the typing end at `From` (the typist load
//! generator, an endpoint too): on loopback, in two namespaces, or on
//! agents' hosts. The typist opens the sessions, lets them negotiate,
//! types for a warm-up and then for the measured window, whose edges it
//! announces; the serving end samples its host over that window
//! ([`crate::measure::window`]): `/proc/stat` at both ends (CPU us/sy/id,
//! context switches) and every 100 ms (vmstat's r and b), packets, the
//! system calls of every process through `perf stat -a` when perf can
//! (otherwise the record says why not), and its server tree's CPU.
//!
//! Caveats: the counts are machine-wide, so they include the `cat`s and
//! anything else running, and, when both ends share a host, the
//! generator, whose own CPU is measured (RUSAGE_THREAD, and its client
//! programs') and subtracted then; the host's busy time in a one-second
//! idle sample before its first cell is subtracted too, for the host's
//! CPU per keystroke. On loopback every TCP segment is both sent and
//! received, so packets in and out are the same count. The window's edges
//! reach the serving end one control round trip after the typist's (well
//! under a millisecond locally; an RTT between agents). A thread waiting
//! in `io_uring_enter` is counted by the kernel as blocked on I/O
//! (vmstat's b, and iowait rather than idle): the `uring` design shows
//! b = 1 and iowait while idle; busy time excludes iowait.

use crate::controller::helpers::Bed;
use crate::controller::launcher::{End, Launcher};
use crate::controller::processes::EndpointProcess;
use crate::controller::refuse;
use crate::controller::resume::CellKey;
use crate::controller::runner::{MeasureCell, Measured, Runner};
use crate::controller::{CellError, Interrupted, MeasureError};
use crate::endpoint::login::clients::LoginTarget;
use crate::endpoint::login::clients::MAX_CORPUS;
use crate::endpoint::login::clients::TypeSpec;
use crate::endpoint::login::host::DEFAULT_CORPUS;
use crate::endpoint::login::host::Dialect;
use crate::endpoint::login::host::SessionCommand;
use crate::endpoint::login::host::Target;
use crate::endpoint::login::server::Relay;
use crate::endpoint::login::typist::TypistReport;
use crate::endpoint::stall::StallBound;
use crate::experiments::login::analysis::{
    DISTURBED_PROBES, Probe, Tally, boundary, disturbed_stop_why, disturbed_why, held_below,
    lower_bound_why, not_normal_why, tallies,
};
use crate::experiments::login::load::LoadFix;
use crate::experiments::login::record::Record;
use crate::experiments::login::record::{BulkLoad, LoginData};
use crate::experiments::login::record::{KeystrokeCounts, Limit, LoginParams, LoginResult};
use crate::experiments::login::role::Type;
use crate::experiments::login::servers::{self, ServerSpec};
use crate::measure::window::{HostWindow, idle_busy_cpus};
use crate::record::testbed::Placement;
use crate::testbed::cgroup::HostPreset;
use crate::testbed::cgroup::PresetBudget;
use std::collections::HashMap;
use std::time::Duration;

/// The echo delay past which a typist notices it (see [`verdict`]).
pub const NOTICEABLE_MS: f64 = 100.0;

/// How responsive the sessions felt, by the 99th-percentile echo delay.
///
/// Thresholds: 100 ms is about where a delay between action and response
/// stops being perceived as instantaneous (Card, Moran and Newell, *The
/// Psychology of Human-Computer Interaction*, 1983: the perceptual
/// processor's cycle of ~100 ms; Miller, 1968, "Response time in
/// man-computer conversational transactions", for keystroke echo within
/// 0.1-0.2 s); past 1 s a typist loses the flow of typing (Miller's 1-2 s
/// limit for conversational continuity).
pub fn verdict(p99_ms: f64, unechoed_share: f64) -> &'static str {
    if unechoed_share > 0.01 || p99_ms > 1000.0 {
        "unusable"
    } else if p99_ms > NOTICEABLE_MS {
        "degraded"
    } else {
        "normal"
    }
}

/// The verdict and what decided it, in a few words: sessions that
/// failed, keystrokes never echoed, or the echo's p99 against its lines.
pub fn judged(report: &crate::endpoint::login::typist::TypistReport) -> (&'static str, String) {
    let unechoed_share = report.unechoed as f64 / report.awaited.max(1) as f64;
    if report.failed_sessions > 0 {
        return (
            "unusable",
            format!(
                "{} session{} failed{}",
                report.failed_sessions,
                if report.failed_sessions == 1 { "" } else { "s" },
                report
                    .first_failure
                    .as_deref()
                    .map_or(String::new(), |f| format!(" (the first: {f})"))
            ),
        );
    }
    let word = verdict(report.echo_p99_ms, unechoed_share);
    let criterion = if unechoed_share > 0.01 {
        format!(
            "{:.1}% of keystrokes never echoed ({} of {}, {} s after the window)",
            100.0 * unechoed_share,
            report.unechoed,
            report.awaited,
            crate::endpoint::login::typist::ECHO_DRAIN.as_secs()
        )
    } else {
        let line = match word {
            "unusable" => ", past 1 s",
            "degraded" => ", past 100 ms",
            _ => "",
        };
        format!("echo p99 {:.1} ms{line}", report.echo_p99_ms)
    };
    (word, criterion)
}

/// Runs one cell. `baseline_busy_cpus` is the serving host's busy CPUs
/// when idle: measured now when `None` (here for a local serving end, by
/// the serving end itself on an agent), before the server starts. Ctrl-C
/// drops the cell (the runner keeps what was recorded before it).
pub fn run_cell(
    params: &LoginParams,
    corpus: &[u8],
    baseline_busy_cpus: Option<f64>,
) -> Result<LoginResult, CellError> {
    params
        .relay
        .speaks(params.protocol)
        .map_err(CellError::Refused)?;
    if corpus.len() > MAX_CORPUS {
        refuse!(
            "a corpus of {} bytes is over the {MAX_CORPUS} a typing end takes",
            corpus.len()
        );
    }
    let serving_here = serving_host(&params.placement) == "local";
    let baseline_busy_cpus = match baseline_busy_cpus {
        Some(b) => Some(b),
        None if serving_here => Some(idle_busy_cpus()?),
        None => None,
    };
    let bed = Bed::create(&params.placement)?;
    // The server at `To` (side B, the `--to` host), the users at `From`.
    let launcher = Launcher::for_run(&params.placement, bed.as_ref())?;
    let mut server = servers::start(
        &server_spec(params, baseline_busy_cpus.is_none()),
        &launcher,
    )?;
    let baseline_busy_cpus = baseline_busy_cpus
        .or(server.idle_busy_cpus)
        .ok_or_else(|| CellError::Refused("the serving end measured no idle baseline".into()))?;
    // The bulk load first, so that its queues are standing by the window.
    let load = params
        .load
        .as_ref()
        .map(|l| crate::experiments::login::load::start(l, &launcher))
        .transpose()?;
    let mut typist = launcher.spawn("typist", End::From)?;
    let (report, window) = match type_to(&mut typist, &mut server, params, corpus) {
        Ok((report, window)) => (*report, window),
        Err(e) => return Err(server.failed(e)),
    };
    typist.finish();
    let carried = load.map(|l| l.stop()).transpose()?;
    let host_cpu = server.cpu_budget.clone();
    // Sessions the server ended during the run (all end at the stop).
    let host = server.stop()?;
    let (link, emulator) = match bed.map(Bed::finish).transpose()? {
        Some(finished) => (Some(finished.link), finished.emulator),
        None => (None, None),
    };
    let Some(window) = window else {
        refuse!(
            "the measured window never started: {}",
            report.first_failure.as_deref().unwrap_or("interrupted")
        );
    };
    let seconds = window.seconds.max(1e-9);
    let (packets, server, packets_source) = packets_of(
        launcher.interface(End::To),
        report.segments,
        &window,
        serving_here,
    );
    let keystrokes = report.keystrokes.max(1) as f64;
    let host_cpu_per_keystroke_us =
        host_cpu_per_keystroke_us(&window, &report, baseline_busy_cpus, launcher.same_host());
    let server_ns = window.tree_ns as f64;
    let per_keystroke = per_keystroke(&window, server, keystrokes);
    let (verdict, criterion) = judged(&report);
    Ok(LoginResult {
        params: params.clone(),
        typist: report,
        cpu: window.cpu,
        procs_running_mean: window.procs_running_mean,
        procs_blocked_mean: window.procs_blocked_mean,
        syscalls_per_s: window.syscalls.map(|n| n as f64 / seconds),
        syscalls_source: window.syscalls_source,
        packets_in_per_s: packets.0 as f64 / seconds,
        packets_out_per_s: packets.1 as f64 / seconds,
        packets_source,
        link,
        host_cpu_per_keystroke_us,
        server_cpu_per_keystroke_us: server_ns / 1e3 / keystrokes,
        server_cpu_pct: 100.0 * server_ns / 1e9 / seconds,
        baseline_busy_cpus,
        verdict: verdict.to_string(),
        criterion,
        server_endings: host.endings,
        host_cpu,
        server_throttled_s: host.throttled_s,
        load: carried,
        emulator,
        per_keystroke: Some(per_keystroke),
    })
}

/// The login server a cell runs: its relay design and protocol, sessions
/// that discard what is typed (echoing it), room for every user, and the
/// 1989-class budget when the cell has one. `measure_idle`: the serving
/// end measures its idle baseline before it starts.
fn server_spec(params: &LoginParams, measure_idle: bool) -> ServerSpec {
    ServerSpec {
        target: params.relay,
        dialect: params.protocol,
        session: SessionCommand::Discard {
            linemode: params.protocol.linemode(),
        },
        max_sessions: params.users + 16,
        nodelay: false,
        measure_idle,
        cpu_budget_pct: params.host_cpu_pct,
    }
}

/// The serving host's CPU a keystroke, net of its idle baseline and (when
/// both ends share the host) of the load generator's own.
fn host_cpu_per_keystroke_us(
    window: &HostWindow,
    report: &TypistReport,
    baseline_busy_cpus: f64,
    same_host: bool,
) -> f64 {
    let seconds = window.seconds.max(1e-9);
    let busy_s = (100.0 - window.cpu.idle_pct - window.cpu.iowait_pct) / 100.0
        * window.cpus as f64
        * seconds;
    let keystrokes = report.keystrokes.max(1) as f64;
    // The generator's CPU is the serving host's only when both ends share it.
    let clients_s = if same_host {
        report.own_cpu_s + report.client_programs_cpu_s
    } else {
        0.0
    };
    ((busy_s - baseline_busy_cpus * seconds - clients_s).max(0.0) / keystrokes) * 1e6
}

/// Has the typist type to the server as the cell says: its users log in,
/// type for the warm-up and the window, and leave; the typist's report
/// and the serving host's window.
fn type_to(
    typist: &mut EndpointProcess,
    server: &mut servers::ServerProcess,
    params: &LoginParams,
    corpus: &[u8],
) -> Result<(Box<TypistReport>, Option<HostWindow>), CellError> {
    let spec = TypeSpec {
        target: LoginTarget {
            stall: params.stall.unwrap_or_default(),
            ..server.target(params.protocol)
        },
        users: params.users,
        rate: params.rate,
        poisson: params.poisson,
        corpus: corpus.to_vec(),
        warmup_s: params.warmup_s,
        duration_s: params.duration_s,
    };
    // Sessions negotiate (10 s plus 20 ms a user at most), type, close.
    let timeout = Duration::from_secs_f64(
        params.warmup_s + params.duration_s + 60.0 + 0.02 * params.users as f64,
    );
    servers::drive(typist, server, Type(spec), timeout)
}

/// The packets a cell counts, the server's (in, out) share of them, and
/// where they were read. Packets at the server's interface where it has
/// its own (`interface`); otherwise the sessions' own sockets' segments
/// (the host's TCP counters would count every other connection beside the
/// run too). On loopback the host counts each segment both in and out,
/// half of them the server's.
fn packets_of(
    interface: Option<String>,
    segments: Option<crate::endpoint::login::typist::SessionSegments>,
    window: &crate::measure::window::HostWindow,
    serving_here: bool,
) -> ((u64, u64), (f64, f64), String) {
    match (interface, segments) {
        (Some(name), _) => {
            let n = (window.packets_in, window.packets_out);
            let source = format!("interface {name} (server side) rx/tx packets");
            (n, (n.0 as f64, n.1 as f64), source)
        }
        (None, Some(s)) => {
            let n = (s.typed, s.echoed);
            let source = "TCP segments of the run's sessions (TCP_INFO of the typists' sockets)";
            (n, (n.0 as f64, n.1 as f64), source.to_string())
        }
        (None, None) if serving_here => {
            let n = (window.packets_in, window.packets_out);
            let half = n.0 as f64 / 2.0;
            let source = "TCP segments on loopback (every one is both in and out)";
            (n, (half, half), source.to_string())
        }
        (None, None) => {
            let n = (window.packets_in, window.packets_out);
            let source = "TCP segments of the serving host (every connection's)";
            (n, (n.0 as f64, n.1 as f64), source.to_string())
        }
    }
}

/// The server's work per keystroke over `window`, `packets` its (in, out).
fn per_keystroke(
    window: &crate::measure::window::HostWindow,
    (packets_in, packets_out): (f64, f64),
    keystrokes: f64,
) -> KeystrokeCounts {
    let per = |n: f64| n / keystrokes;
    let mut source = vec![window.tree_counts_source.clone()];
    if window.pty_transfers.is_none() {
        source.push("pty transfers: not counted by this server".to_string());
    }
    KeystrokeCounts {
        syscalls: window.tree_counts.map(|c| per(c.syscalls as f64)),
        context_switches: window.tree_counts.map(|c| per(c.context_switches as f64)),
        packets_in: per(packets_in),
        packets_out: per(packets_out),
        pty_transfers: window.pty_transfers.map(|n| per(n as f64)),
        source: source.join("; "),
    }
}

/// The grid of a login-load run, and the typing every cell does.
#[derive(Debug, Clone, PartialEq)]
pub struct LoginPlan {
    pub users: Vec<usize>,
    pub relays: Vec<Target>,
    pub protocols: Vec<Dialect>,
    pub placements: Vec<Placement>,
    /// Characters per second per user.
    pub rate: f64,
    pub poisson: bool,
    pub warmup_s: f64,
    pub duration_s: f64,
    /// The server's CPU budget, percent of one CPU (`--host-cpu`).
    pub host_cpu_pct: Option<f64>,
    /// The preset the budget was derived from, and how.
    pub host_cpu_preset: Option<PresetBudget>,
    /// `--stall-timeout` (none: the default bound).
    pub stall: Option<StallBound>,
    /// `--load stream:N` and its fixes.
    pub load: Option<LoadPlan>,
}

/// The bulk load beside every cell, and the fixes it is run with: each
/// fix on the placements it applies to (a discipline's on the netns ones).
#[derive(Debug, Clone, PartialEq)]
pub struct LoadPlan {
    pub streams: usize,
    pub fixes: Vec<(LoadFix, Vec<Placement>)>,
    /// The load's congestion control where the fix sets none (None: the
    /// host's default).
    pub congestion: Option<String>,
}

impl Default for LoginPlan {
    /// The 1989 test: 16, 32 and 48 users typing 5 characters a second over
    /// rlogin through each of netlab's designs that answer at once, 30 s
    /// windows after 2 s of warm-up, on loopback.
    fn default() -> Self {
        LoginPlan {
            users: vec![16, 32, 48],
            relays: Relay::ALL.into_iter().map(Target::of).collect(),
            protocols: vec![Dialect::Rlogin],
            placements: vec![Placement::Loopback],
            rate: 5.0,
            poisson: false,
            warmup_s: 2.0,
            duration_s: 30.0,
            host_cpu_pct: None,
            host_cpu_preset: None,
            stall: None,
            load: None,
        }
    }
}

/// Why a login plan cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Bounds(#[from] crate::experiments::login::bounds::BoundsError),
    #[error("{0}")]
    HostCpu(String),
    #[error("--host-cpu {0}: give a percent of one CPU or a preset (sun3, vax750)")]
    UnknownPreset(String),
    #[error(
        "--host-cpu {0} is derived from this host's packet cost; a server on an agent needs a percent"
    )]
    PresetOnAgent(String),
    #[error("measuring this host's cost of a TCP packet: {0}")]
    PacketCost(String),
    #[error(
        "--host-cpu {given}% is below what one session typing {rate} chars/s needs here: at least {need:.3}% of one CPU ({PACKETS_PER_KEYSTROKE} packets a keystroke at {packet_us:.1} µs each, measured now); a smaller budget would measure nothing but itself"
    )]
    BelowOneSession {
        given: f64,
        need: f64,
        rate: f64,
        packet_us: f64,
    },
    #[error("--corpus {path}: {reason}")]
    Corpus { path: String, reason: String },
    #[error("the corpus has no typeable characters")]
    EmptyCorpus,
    #[error(transparent)]
    Limits(#[from] crate::measure::limits::LimitsCrossed),
}

/// Packets a keystroke costs the server at least: its segment in, the echo
/// out, the echo's ACK in (2.99 measured on loopback, docs/EXPERIMENTS.md).
pub const PACKETS_PER_KEYSTROKE: f64 = 3.0;

/// Refuses a budget below what one session typing `rate` characters a
/// second needs on this host, its packets at `packet_us` each.
pub fn check_one_session(percent: f64, rate: f64, packet_us: f64) -> Result<(), PlanError> {
    let need = rate * PACKETS_PER_KEYSTROKE * packet_us / 1e4;
    if percent < need {
        return Err(PlanError::BelowOneSession {
            given: percent,
            need,
            rate,
            packet_us,
        });
    }
    Ok(())
}

/// `--host-cpu TEXT`: a percent of one CPU as given, or a preset's percent
/// from this host's cost of a TCP packet (measured now, or the stored
/// calibration at `calibration`), with its derivation. A preset needs the
/// server here: the cost is this host's.
pub fn host_budget(
    text: &str,
    placements: &[Placement],
    calibration: Option<&std::path::Path>,
) -> Result<(f64, Option<PresetBudget>), PlanError> {
    if let Ok(percent) = text.parse::<f64>() {
        return Ok((percent, None));
    }
    let preset = HostPreset::parse(text).ok_or_else(|| PlanError::UnknownPreset(text.into()))?;
    if placements.iter().any(|p| serving_host(p) != "local") {
        return Err(PlanError::PresetOnAgent(text.into()));
    }
    let calibrated = calibrate(calibration).map_err(|e| PlanError::PacketCost(e.to_string()))?;
    let (percent, budget) = preset.budget_calibrated(&calibrated);
    Ok((percent, Some(budget)))
}

/// This host's cost of a small TCP packet: the stored calibration at
/// `path`, or measured now.
pub fn calibrate(
    path: Option<&std::path::Path>,
) -> Result<crate::testbed::calibration::Calibrated, crate::testbed::calibration::CalibrationError>
{
    use crate::testbed::calibration;
    match path {
        Some(path) => calibration::load(path, &crate::measure::host::HostFacts::gather()),
        None => calibration::measure_now(),
    }
}

/// What the simulated users type: the file at `path`, or the built-in
/// paragraph; refused when nothing in it can be typed.
pub fn corpus(path: Option<&std::path::Path>) -> Result<Vec<u8>, PlanError> {
    let corpus = match path {
        Some(path) => crate::record::files::read_bounded(path, MAX_CORPUS as u64, "a corpus")
            .map_err(|e| PlanError::Corpus {
                path: path.display().to_string(),
                reason: e.to_string(),
            })?,
        None => DEFAULT_CORPUS.as_bytes().to_vec(),
    };
    if crate::endpoint::login::typist::keystrokes_of(&corpus).is_empty() {
        return Err(PlanError::EmptyCorpus);
    }
    Ok(corpus)
}

impl LoginPlan {
    /// The lab's smoke profile: 16 and 48 users, 0.6 s windows.
    pub fn smoke() -> Self {
        LoginPlan {
            users: vec![16, 48],
            warmup_s: 0.2,
            duration_s: 0.6,
            ..LoginPlan::default()
        }
    }

    /// The lab's quick profile: 16 and 48 users, 1.5 s windows.
    pub fn quick() -> Self {
        LoginPlan {
            users: vec![16, 48],
            warmup_s: 0.5,
            duration_s: 1.5,
            ..LoginPlan::default()
        }
    }

    pub fn full() -> Self {
        LoginPlan::default()
    }

    pub fn validate(&self) -> Result<(), PlanError> {
        use crate::experiments::login::bounds;
        for &users in &self.users {
            bounds::check_users(users)?;
        }
        bounds::check_typing(1, self.rate, self.warmup_s, self.duration_s)?;
        if let Some(percent) = self.host_cpu_pct {
            bounds::check_budget(percent)?;
        }
        Ok(())
    }

    /// What the plan's largest cell holds at once on this host, when both
    /// ends run here (loopback, netns): the busiest relay's server
    /// ([`bounds::serving_needs`]) and the typist beside it. None when
    /// every placement runs on agents (their hosts' limits are theirs, and
    /// each agent checks its own).
    ///
    /// [`bounds::serving_needs`]: crate::experiments::login::bounds::serving_needs
    pub fn needs(&self, most_users: usize) -> Option<crate::measure::limits::Needs> {
        use crate::experiments::login::bounds::{per_session, typing_needs};
        let here = self
            .placements
            .iter()
            .any(|p| !matches!(p, Placement::Remote { .. }));
        if !here {
            return None;
        }
        let n = most_users as u64;
        let most = |pick: fn((u64, u64)) -> u64| {
            self.relays
                .iter()
                .map(|r| pick(per_session(*r)))
                .max()
                .unwrap_or(2)
        };
        let typist = typing_needs(most_users, false);
        Some(crate::measure::limits::Needs {
            what: format!("login with {most_users} users"),
            ptys: n,
            descriptors_per_process: (most(|c| c.0) * n + 64).max(typist.descriptors_per_process),
            processes: most(|c| c.1) * n,
            ephemeral_ports: typist.ephemeral_ports,
        })
    }

    /// Checks [`LoginPlan::needs`] for `most_users` against this host's
    /// limits before anything starts, and lifts the soft descriptor limit
    /// when the hard one allows what the run needs.
    pub fn check_limits(&self, most_users: usize) -> Result<(), PlanError> {
        let Some(needs) = self.needs(most_users) else {
            return Ok(());
        };
        Ok(crate::measure::limits::refuse_or_prepare(needs)?)
    }

    /// Drops the server's CPU budget when the server runs here and this
    /// host has no CPU controller, saying why: the run goes on without it.
    pub fn drop_budget_unless_available(&mut self) -> Option<String> {
        let serving_here = self.placements.iter().all(|p| serving_host(p) == "local");
        if self.host_cpu_pct.is_none() || !serving_here {
            return None;
        }
        let why = crate::testbed::cgroup::available().err()?;
        self.host_cpu_pct = None;
        self.host_cpu_preset = None;
        Some(format!("--host-cpu ignored: {why}"))
    }

    /// One cell of this plan's typing.
    pub fn cell(
        &self,
        relay: Target,
        protocol: Dialect,
        placement: &Placement,
        users: usize,
    ) -> LoginParams {
        LoginParams {
            relay,
            protocol: relay.dialect_for(protocol),
            placement: placement.clone(),
            users,
            rate: self.rate,
            poisson: self.poisson,
            warmup_s: self.warmup_s,
            duration_s: self.duration_s,
            host_cpu_pct: self.host_cpu_pct,
            host_cpu_preset: self.host_cpu_preset.clone(),
            stall: self.stall,
            load: None,
        }
    }

    /// Every cell once: placements, then protocols, then user counts, then servers.
    pub fn cells(&self) -> Vec<LoginParams> {
        let mut cells = Vec::new();
        if let Some(load) = &self.load {
            // Each fix on its own placements, then as without a load.
            for (fix, placements) in &load.fixes {
                for placement in placements {
                    for &protocol in &self.protocols {
                        for &users in &self.users {
                            for &relay in &self.relays {
                                let mut cell = self.cell(relay, protocol, placement, users);
                                let mut sockets = fix.sockets();
                                if sockets.congestion.is_none() {
                                    sockets.congestion = load.congestion.clone();
                                }
                                cell.load = Some(BulkLoad {
                                    streams: load.streams,
                                    fix: fix.name().to_string(),
                                    sockets,
                                });
                                if !cells.contains(&cell) {
                                    cells.push(cell);
                                }
                            }
                        }
                    }
                }
            }
            return cells;
        }
        for placement in &self.placements {
            for &protocol in &self.protocols {
                for &users in &self.users {
                    for &relay in &self.relays {
                        let cell = self.cell(relay, protocol, placement, users);
                        if !cells.contains(&cell) {
                            cells.push(cell);
                        }
                    }
                }
            }
        }
        cells
    }
}

/// Loads each cell's server with simulated users typing `corpus`.
pub struct LoginMeasure {
    pub corpus: Vec<u8>,
    /// Each serving host's busy CPUs with nothing of netlab's running
    /// (`local`, or the agent's name), measured once, before its first cell.
    pub baselines: HashMap<String, f64>,
}

impl LoginMeasure {
    /// Measures this host's idle baseline now, before any cell starts
    /// anything; an agent's is measured by its first cell's serving end.
    pub fn new(corpus: Vec<u8>) -> Result<LoginMeasure, CellError> {
        Ok(LoginMeasure {
            corpus,
            baselines: HashMap::from([("local".to_string(), idle_busy_cpus()?)]),
        })
    }
}

/// The host serving a cell: `local`, or its agent's name.
pub fn serving_host(placement: &Placement) -> &str {
    match placement {
        Placement::Remote { to, .. } => to,
        _ => "local",
    }
}

impl MeasureCell for LoginMeasure {
    type Cell = LoginParams;
    type Data = LoginData;

    fn label(&self, cell: &LoginParams) -> String {
        format!(
            "{} {} x{}",
            cell.relay.name(),
            cell.protocol.name(),
            cell.users
        )
    }

    fn key(&self, cell: &LoginParams) -> CellKey {
        // What the users type is part of the cell.
        CellKey::of("login", &(cell, &*String::from_utf8_lossy(&self.corpus)))
    }

    fn measure(&mut self, cell: &LoginParams) -> Result<Measured<LoginData>, Interrupted> {
        let host = serving_host(&cell.placement);
        let outcome = run_cell(cell, &self.corpus, self.baselines.get(host).copied());
        if let Ok(result) = &outcome {
            self.baselines
                .entry(host.to_string())
                .or_insert(result.baseline_busy_cpus);
        }
        crate::controller::measured(cell.placement.name(), outcome, |result| LoginData {
            params: cell.clone(),
            result,
        })
    }
}

/// The pause before a disturbed count is probed again (not in tests: the
/// mock's runs take no time and nothing disturbs them).
#[cfg(not(test))]
const DISTURBED_PAUSE: Duration = Duration::from_secs(10);
#[cfg(test)]
const DISTURBED_PAUSE: Duration = Duration::from_millis(1);

/// The probes a search's confirmation adds: both sides of the boundary
/// repeated once and agreeing, or each needing a third probe to decide.
pub const CONFIRMING: (usize, usize) = (2, 4);

/// How far a limit search goes, and how fine it bisects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitSearch {
    /// The first count probed (then doubled).
    pub start: usize,
    /// The most users ever probed.
    pub max_users: usize,
    /// Bisect until the last normal and the first degraded count are within
    /// `good / resolution` of each other: 8 (an eighth) for `--find-limit`
    /// and the lab's `--full`, 2 (a half) in its quick and smoke profiles.
    pub resolution: usize,
    /// Keystrokes a probe's window holds at least (stretched to hold them):
    /// [`PROBE_ECHOES`] but in the lab's smoke profile.
    pub echoes: usize,
}

/// The next user count to probe, or None when the search is over: double
/// while every probe was normal (up to `max`), then bisect between the last
/// normal count `good` and the first degraded one until they are within
/// `good / resolution` (or 1) of each other.
pub fn next_users(
    good: usize,
    bad: Option<usize>,
    last: usize,
    max: usize,
    resolution: usize,
) -> Option<usize> {
    match bad {
        None if last >= max => None,
        None => Some((last * 2).min(max)),
        Some(bad) if bad - good <= (good / resolution.max(1)).max(1) => None,
        Some(bad) => Some((good + bad) / 2),
    }
}

/// Doubles the user count from `search.start` while the verdict stays
/// normal, then bisects between the last normal and the first degraded
/// count to the search's resolution ([`next_users`]), then confirms the
/// boundary: the last normal count and the first that was not are probed
/// again until each has a majority of at least two probes ([`Tally`]). A
/// count whose majority turns moves the boundary and the search goes on
/// from there. Each probe is a recorded cell, appended to `records`.
/// Stops early, saying so, when the load generator rather than the server
/// is the limit.
pub fn find_limit<M: MeasureCell<Cell = LoginParams, Data = LoginData>>(
    runner: &mut Runner,
    measure: &mut M,
    template: &LoginParams,
    search: LimitSearch,
    records: &mut Vec<Record>,
) -> Result<Limit, MeasureError> {
    let LimitSearch {
        start,
        max_users,
        resolution,
        echoes,
    } = search;
    let mut probed: Vec<(usize, Probe)> = Vec::new();
    let mut n = start.clamp(1, max_users.max(1));
    let server = format!("{} {}", template.relay.name(), template.protocol.name());
    let mut probes = 0;
    let mut disturbed_in_a_row = 0;
    // The lowest count the machine's disturbance kept from being judged,
    // and why; and how many counts it has kept so.
    let mut ceiling: Option<(usize, String)> = None;
    let mut ceilings = 0;
    let why = loop {
        probes += 1;
        let outcome = probe_at(runner, measure, template, n, echoes, records)?;
        if let Probe::Disturbed(why) = &outcome {
            disturbed_in_a_row += 1;
            runner.say(&format!(
                "{server}: probe {probes}, {n} users: not judged, {why}"
            ));
            if disturbed_in_a_row < DISTURBED_PROBES {
                pause_for_a_disturbance();
                continue;
            }
            // Not judged: a ceiling the search stays under. What holds
            // below it is still worth knowing (a normal verdict under
            // steal stands), as a lower bound.
            disturbed_in_a_row = 0;
            ceiling = Some((n, disturbed_why(why)));
            ceilings += 1;
            if ceilings >= MAX_CEILINGS {
                // A machine this disturbed would hold the search for
                // minutes more: what held below is the answer it gives.
                break disturbed_stop_why(n, &disturbed_why(why), below(&tallies(&probed), n));
            }
        } else {
            disturbed_in_a_row = 0;
            if let Probe::GeneratorLimited(limit) = &outcome {
                let good = below(&tallies(&probed), ceiling_of(&ceiling));
                runner.say(&format!(
                    "{server}: probe {probes}, {n} users: the load generator is the limit ({limit}); {good} is a lower bound"
                ));
                break lower_bound_why(n, limit, good);
            }
            let said = match &outcome {
                Probe::Normal => "normal".to_string(),
                Probe::Worse(why) => why.clone(),
                Probe::GeneratorLimited(_) | Probe::Disturbed(_) => {
                    unreachable!("ended or repeated above")
                }
            };
            probed.push((n, outcome));
            let counts = tallies(&probed);
            let (good, bad) = boundary(&counts);
            runner.say(&format!(
                "{server}: probe {probes}, {n} users: {said}; so far {}",
                so_far(good.map_or(0, |g| g.users), bad.map(|b| b.users))
            ));
        }
        match next_count(&probed, &ceiling, n, max_users, resolution) {
            Ok(next) => {
                if probed.iter().any(|(users, _)| *users == next) {
                    runner.say(&format!("{server}: confirming {next} users"));
                }
                n = next;
            }
            Err(why) => break why,
        }
    };
    let counts = tallies(&probed);
    let (_, bad) = boundary(&counts);
    Ok(Limit {
        relay: template.relay,
        protocol: template.protocol,
        placement: template.placement.name().to_string(),
        sustains: below(&counts, ceiling_of(&ceiling)),
        degraded_at: bad.map(|b| b.users),
        why,
    })
}

/// One probe of a limit search: the template's cell at `n` users, for a
/// window that holds `echoes` keystrokes; its record is appended to
/// `records`, and its verdict returned.
fn probe_at<M: MeasureCell<Cell = LoginParams, Data = LoginData>>(
    runner: &mut Runner,
    measure: &mut M,
    template: &LoginParams,
    n: usize,
    echoes: usize,
    records: &mut Vec<Record>,
) -> Result<Probe, MeasureError> {
    let record = runner.cell(
        measure,
        &LoginParams {
            users: n,
            duration_s: probe_window_s(template, n, echoes),
            ..template.clone()
        },
    )?;
    let outcome = crate::experiments::login::analysis::probe(&record)
        // Not a login record (a measure of the wrong experiment).
        .unwrap_or_else(|| Probe::Worse("failed: no login result".into()));
    records.push(record);
    Ok(outcome)
}

/// Where a limit search goes after a probe of `n` users: the next count
/// to probe (doubling, bisecting, a third probe for a tied count, or a
/// confirmation of either side of the boundary), or why it has ended.
fn next_count(
    probed: &[(usize, Probe)],
    ceiling: &Option<(usize, String)>,
    n: usize,
    max_users: usize,
    resolution: usize,
) -> Result<usize, String> {
    let counts = tallies(probed);
    let (_, bad) = boundary(&counts);
    let top = ceiling_of(ceiling);
    let good = held_below(&counts, top);
    let good_users = good.map_or(0, |g| g.users);
    // The first count not normal, or not judged, whichever is lower.
    let bad_users = bad
        .map(|b| b.users)
        .into_iter()
        .chain(ceiling.as_ref().map(|c| c.0))
        .min();
    let largest = counts.last().map_or(n, |t| t.users);
    let last = if bad_users.is_none() { largest } else { n };
    let unprobed = |users: &usize| !counts.iter().any(|t| t.users == *users);
    let tied = counts.iter().any(|t| t.users == n && t.normal == t.worse);
    // A count whose probes disagree is decided by a third before the
    // search moves on from it.
    let next = tied
        .then_some(n)
        .or_else(|| {
            next_users(good_users, bad_users, last, max_users, resolution)
                .filter(unprobed)
                .filter(|&m| m < top)
        })
        .or_else(|| {
            // The search has converged: confirm both sides of it (a
            // side above the ceiling is left as it is).
            bad_users?;
            [good, bad.filter(|b| b.users < top)]
                .into_iter()
                .flatten()
                .find(|t| !t.is_confirmed())
                .map(|t| t.users)
        });
    next.ok_or_else(|| match (ceiling, bad) {
        (Some((at, why)), bad) if bad.is_none_or(|b| *at < b.users) => {
            disturbed_stop_why(*at, why, good_users)
        }
        (_, Some(bad)) => not_normal_why(bad),
        (_, None) => format!("normal up to the cap of {max_users} users"),
    })
}

/// Gives a passing disturbance (a neighbour's burst on the VM's host)
/// [`DISTURBED_PAUSE`] to pass before the same count again; a stop ends
/// the wait.
fn pause_for_a_disturbance() {
    let until = std::time::Instant::now() + DISTURBED_PAUSE;
    while std::time::Instant::now() < until && !crate::measure::stop::requested() {
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Counts a search lets the machine's disturbance keep from being judged
/// before it stops under the last of them: each costs
/// [`DISTURBED_PROBES`] probes and their pauses (about half a minute).
const MAX_CEILINGS: usize = 2;

/// The users under a ceiling of `ceiling_of` ([`usize::MAX`]: none).
fn ceiling_of(ceiling: &Option<(usize, String)>) -> usize {
    ceiling.as_ref().map_or(usize::MAX, |c| c.0)
}

/// [`held_below`]'s users (0: nothing held).
fn below(counts: &[Tally], top: usize) -> usize {
    held_below(counts, top).map_or(0, |t| t.users)
}

/// Where a search stands, in words.
fn so_far(good: usize, bad: Option<usize>) -> String {
    match (good, bad) {
        (0, None) => "nothing normal yet".into(),
        (good, None) => format!("normal up to {good}"),
        (0, Some(bad)) => format!("not normal even at {bad}"),
        (good, Some(bad)) => format!("the limit is between {good} (normal) and {bad}"),
    }
}

impl LimitSearch {
    /// The fewest and the most probes a search can take: a server that
    /// degrades at the second count, and one that degrades only at the
    /// cap (doubling all the way, then bisecting), each with its boundary
    /// confirmed ([`CONFIRMING`]).
    pub fn probe_range(&self) -> (usize, usize) {
        let start = self.start.clamp(1, self.max_users.max(1));
        let bisections = (self.resolution.max(2) as f64).log2().ceil() as usize;
        let mut doublings = 1;
        let mut n = start;
        while n < self.max_users {
            n = (n * 2).min(self.max_users);
            doublings += 1;
        }
        (
            (2 + bisections).min(doublings + bisections) + CONFIRMING.0,
            doublings + bisections + CONFIRMING.1,
        )
    }

    /// The counts the two extremes of [`probe_range`](Self::probe_range)
    /// probe, for their time.
    fn extremes(&self) -> (Vec<usize>, Vec<usize>) {
        let start = self.start.clamp(1, self.max_users.max(1));
        let (fewest, most) = self.probe_range();
        let quick = (0..fewest)
            .map(|i| {
                if i == 0 {
                    start
                } else {
                    (start * 2).min(self.max_users)
                }
            })
            .collect();
        let mut slow = Vec::new();
        let mut n = start;
        while slow.len() < most {
            slow.push(n);
            n = (n * 2).min(self.max_users);
        }
        (quick, slow)
    }
}

/// Echoes a probe's window holds at least: its verdict is the echo p99,
/// here the 4th-worst of them, not the worst of a handful (a 1 s window
/// of 16 users held 80, and one late echo decided the probe). The lab's
/// smoke profile, which checks the pipeline rather than the limit, asks
/// for a quarter of it.
pub const PROBE_ECHOES: usize = 400;
/// The longest window a probe is stretched to.
const PROBE_WINDOW_MAX_S: f64 = 20.0;

/// A probe's window at `users`: the template's, stretched until it holds
/// `echoes` keystrokes (at most [`PROBE_WINDOW_MAX_S`]).
pub fn probe_window_s(template: &LoginParams, users: usize, echoes: usize) -> f64 {
    let needed = echoes as f64 / (users.max(1) as f64 * template.rate);
    template.duration_s.max(needed.min(PROBE_WINDOW_MAX_S))
}

/// About how long a probe of `users` takes: its window, its warm-up, the
/// logins and the server's start and stop (about 1.5 s here, plus 5 ms a
/// user logging in: measured 2026-11-26, 32 epoll users in 7.4 s with a
/// 6 s window).
pub fn probe_seconds(template: &LoginParams, users: usize, echoes: usize) -> f64 {
    template.warmup_s + probe_window_s(template, users, echoes) + 1.5 + 0.005 * users as f64
}

/// What a search will take, said before it starts.
pub fn search_plan_line(template: &LoginParams, search: &LimitSearch, servers: usize) -> String {
    let (fewest, most) = search.probe_range();
    let (quick, slow) = search.extremes();
    let seconds = |counts: &[usize]| {
        counts
            .iter()
            .map(|&n| probe_seconds(template, n, search.echoes))
            .sum::<f64>()
    };
    let minutes = |s: f64| s / 60.0;
    let probes = if fewest == most {
        format!("{fewest}")
    } else {
        format!("{fewest} to {most}")
    };
    format!(
        "find-limit: {servers} server{} to search, each from {} users, doubling up to {} then bisecting to within 1/{} of the limit and repeating the counts on either side until each has a majority of two: {probes} probes a server, each the logins, {} s of warm-up and at least {} s measured, stretched to hold {} keystrokes (about {:.0} s at {} users); expect about {:.1} to {:.1} min in all",
        if servers == 1 { "" } else { "s" },
        search.start,
        search.max_users,
        search.resolution,
        template.warmup_s,
        template.duration_s,
        search.echoes,
        probe_seconds(template, search.start, search.echoes),
        search.start,
        minutes(seconds(&quick)) * servers as f64,
        minutes(seconds(&slow)) * servers as f64,
    )
}

/// [`find_limit`] for each server, protocol and placement of the plan, in
/// turn, each searched as `search` says, the expected time said first.
pub fn find_limits<M: MeasureCell<Cell = LoginParams, Data = LoginData>>(
    runner: &mut Runner,
    measure: &mut M,
    plan: &LoginPlan,
    search: LimitSearch,
    records: &mut Vec<Record>,
) -> Result<Vec<Limit>, MeasureError> {
    let mut limits = Vec::new();
    let mut templates = Vec::new();
    let mut seen = Vec::new();
    for template in plan.cells() {
        let key = (
            template.relay,
            template.protocol,
            template.placement.clone(),
        );
        if !seen.contains(&key) {
            seen.push(key);
            templates.push(template);
        }
    }
    if let Some(first) = templates.first() {
        runner.say(&search_plan_line(first, &search, templates.len()));
    }
    for template in &templates {
        let limit = find_limit(runner, measure, template, search, records)?;
        runner.say(&format!(
            "{} {}: {}",
            template.relay.name(),
            template.protocol.name(),
            match limit.degraded_at {
                Some(bad) => format!("sustains {} users, not {bad}", limit.sustains),
                None => format!("sustains {} users ({})", limit.sustains, limit.why),
            }
        ));
        limits.push(limit);
    }
    Ok(limits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::runner::mock::{Mock, runner};
    use crate::endpoint::login::typist::TypistReport;

    #[test]
    fn a_search_says_how_long_it_will_take_and_where_it_stands() {
        let search = LimitSearch {
            start: 16,
            max_users: 3000,
            resolution: 8,
            echoes: PROBE_ECHOES,
        };
        // Degrading at 32: 16, 32, then three bisections; degrading only
        // at 3000: 16 .. 2048, 3000 (nine), then three; each then repeats
        // both sides of the boundary (two more, or four with third probes).
        assert_eq!(search.probe_range(), (5 + 2, 12 + 4));
        let capped = LimitSearch {
            max_users: 16,
            ..search
        };
        assert_eq!(capped.probe_range().1, 1 + 3 + 4);
        let template = LoginParams {
            warmup_s: 1.0,
            duration_s: 5.0,
            ..LoginPlan::quick().cells()[0].clone()
        };
        let line = search_plan_line(&template, &search, 2);
        assert!(line.contains("2 servers"), "{line}");
        assert!(line.contains("7 to 16 probes a server"), "{line}");
        // The lab's quick search, from 64 to 128: five, and the confirmation.
        let doubling_once = LimitSearch {
            start: 64,
            max_users: 128,
            ..search
        };
        let line = search_plan_line(&template, &doubling_once, 2);
        assert!(line.contains("7 to 9 probes a server"), "{line}");
        assert!(
            line.contains("1 s of warm-up and at least 5 s measured, stretched to hold 400"),
            "{line}"
        );
        // A probe's window holds at least 400 keystrokes, up to 20 s.
        let short = LoginParams {
            duration_s: 1.0,
            rate: 5.0,
            ..template.clone()
        };
        assert_eq!(probe_window_s(&short, 16, PROBE_ECHOES), 5.0);
        assert_eq!(probe_window_s(&short, 200, PROBE_ECHOES), 1.0);
        assert_eq!(probe_window_s(&short, 1, PROBE_ECHOES), 20.0);
        assert_eq!(probe_window_s(&short, 16, 100), 1.25);
        // Seven probes of about 8 s, twice: about 1.9 min at the least.
        assert!(line.contains("expect about 1.9 to"), "{line}");
        assert_eq!(so_far(0, None), "nothing normal yet");
        assert_eq!(so_far(32, None), "normal up to 32");
        assert_eq!(so_far(0, Some(16)), "not normal even at 16");
        assert_eq!(
            so_far(40, Some(48)),
            "the limit is between 40 (normal) and 48"
        );
    }

    #[test]
    fn the_limit_search_doubles_then_bisects() {
        assert_eq!(next_users(16, None, 16, 3000, 8), Some(32));
        assert_eq!(next_users(2048, None, 2048, 3000, 8), Some(3000));
        assert_eq!(next_users(3000, None, 3000, 3000, 8), None);
        // 512 was normal, 1024 degraded: bisect to within 64.
        assert_eq!(next_users(512, Some(1024), 1024, 3000, 8), Some(768));
        assert_eq!(next_users(768, Some(1024), 768, 3000, 8), Some(896));
        assert_eq!(next_users(896, Some(1024), 896, 3000, 8), Some(960));
        assert_eq!(next_users(960, Some(1024), 960, 3000, 8), None);
        // Degraded from the first probe: search below it.
        assert_eq!(next_users(0, Some(16), 16, 3000, 8), Some(8));
        assert_eq!(next_users(0, Some(1), 1, 3000, 8), None);
    }

    /// A server that echoes in 5 ms up to `limit` users and in 500 ms past it,
    /// with a generator that needs `cpu_per_user` % of a core per user.
    fn server(
        limit: usize,
        cpu_per_user: f64,
    ) -> impl FnMut(&LoginParams) -> Result<Measured<LoginData>, Interrupted> {
        move |cell: &LoginParams| {
            let p99 = if cell.users <= limit { 5.0 } else { 500.0 };
            let result = LoginResult {
                verdict: verdict(p99, 0.0).into(),
                typist: TypistReport {
                    echo_p99_ms: p99,
                    own_cpu_s: cpu_per_user * cell.users as f64 / 100.0,
                    window_s: 1.0,
                    ..TypistReport::default()
                },
                ..LoginResult::default()
            };
            Ok(Measured {
                placement: cell.placement.name().into(),
                data: LoginData {
                    params: cell.clone(),
                    result: Some(Box::new(result)),
                },
                error: None,
            })
        }
    }

    /// `--find-limit`'s search.
    const EIGHTH: LimitSearch = LimitSearch {
        start: 16,
        max_users: 3000,
        resolution: 8,
        echoes: PROBE_ECHOES,
    };

    #[test]
    fn a_coarser_search_stops_sooner_and_the_records_say_what_it_found() {
        let template =
            LoginPlan::quick().cell(Target::Epoll, Dialect::Rlogin, &Placement::Loopback, 16);
        let mut mock = Mock::new(server(700, 0.0));
        let mut records = Vec::new();
        let half = LimitSearch {
            resolution: 2,
            ..EIGHTH
        };
        let limit = find_limit(&mut runner(), &mut mock, &template, half, &mut records).unwrap();
        let probed: Vec<usize> = mock.measured.iter().map(|c| c.users).collect();
        assert_eq!(probed, [16, 32, 64, 128, 256, 512, 1024, 768, 512, 768]);
        assert_eq!((limit.sustains, limit.degraded_at), (512, Some(768)));
        // The report reads the same limit back from the records alone.
        let seen = crate::experiments::login::analysis::limits(&records, template.host_cpu_pct);
        assert_eq!(seen, std::slice::from_ref(&limit));
    }

    #[test]
    fn the_limit_search_brackets_the_melting_point() {
        let template =
            LoginPlan::quick().cell(Target::Epoll, Dialect::Rlogin, &Placement::Loopback, 16);
        let mut mock = Mock::new(server(700, 0.0));
        let mut records = Vec::new();
        let limit = find_limit(&mut runner(), &mut mock, &template, EIGHTH, &mut records).unwrap();
        let probed: Vec<usize> = mock.measured.iter().map(|c| c.users).collect();
        // Doubling, bisecting, then 640 and 704 again: each side confirmed.
        assert_eq!(
            probed,
            [16, 32, 64, 128, 256, 512, 1024, 768, 640, 704, 640, 704]
        );
        assert_eq!(limit.sustains, 640);
        assert_eq!(limit.degraded_at, Some(704));
        assert_eq!(
            limit.why,
            "704 users degraded in 2 of 2 probes: echo p99 500.0 ms"
        );
        assert_eq!(records.len(), probed.len(), "every probe is recorded");
    }

    #[test]
    fn a_boundary_that_does_not_repeat_moves_and_the_search_goes_on() {
        let template =
            LoginPlan::quick().cell(Target::Fork, Dialect::Rlogin, &Placement::Loopback, 16);
        // Melts past 96 users, but the first probe of 112 was lucky and the
        // second of 96 unlucky: only majorities of two decide.
        let mut seen: HashMap<usize, usize> = HashMap::new();
        let mut mock = Mock::new(move |cell: &LoginParams| {
            let time = seen.entry(cell.users).or_default();
            *time += 1;
            let limit = match (cell.users, *time) {
                (112, 1) => 200,
                (96, 2) => 50,
                _ => 96,
            };
            server(limit, 0.0)(cell)
        });
        let search = LimitSearch {
            start: 64,
            max_users: 128,
            ..EIGHTH
        };
        let mut records = Vec::new();
        let limit = find_limit(&mut runner(), &mut mock, &template, search, &mut records).unwrap();
        let probed: Vec<usize> = mock.measured.iter().map(|c| c.users).collect();
        // 112 held once and 120 did not; confirming, 112 failed, a third
        // probe failed it again, and the boundary moved down: 104 failed;
        // 96 failed once, a third probe held, and 104 failed again.
        assert_eq!(probed, [64, 128, 96, 112, 120, 112, 112, 104, 96, 96, 104]);
        assert_eq!((limit.sustains, limit.degraded_at), (96, Some(104)));
        assert_eq!(
            limit.why,
            "104 users degraded in 2 of 2 probes: echo p99 500.0 ms"
        );
        let seen = crate::experiments::login::analysis::limits(&records, template.host_cpu_pct);
        assert_eq!(seen, std::slice::from_ref(&limit));
    }

    #[test]
    fn a_disturbed_probe_is_repeated_and_a_count_never_judged_stops_the_search() {
        let template = LoginParams {
            host_cpu_pct: Some(4.0),
            ..LoginPlan::quick().cell(Target::Fork, Dialect::Rlogin, &Placement::Loopback, 16)
        };
        let search = LimitSearch {
            start: 32,
            max_users: 128,
            ..EIGHTH
        };
        // `steal(users, time)`: the steal over the window of that probe,
        // percent of the machine; the server melts past 96 users.
        let mock = |steal: fn(usize, usize) -> f64| {
            let mut seen: HashMap<usize, usize> = HashMap::new();
            Mock::new(move |cell: &LoginParams| {
                let time = seen.entry(cell.users).or_default();
                *time += 1;
                let mut measured = server(96, 0.0)(cell)?;
                if let Some(result) = &mut measured.data.result {
                    result.params = cell.clone();
                    result.cpu.steal_pct = steal(cell.users, *time);
                }
                Ok(measured)
            })
        };
        // The first probe of 64 lost 5% of the machine to the hypervisor
        // (half the 4% budget is 2) and still held: it stands, normal.
        let mut held = mock(|users, time| if users == 64 && time == 1 { 5.0 } else { 0.1 });
        let mut records = Vec::new();
        let limit = find_limit(&mut runner(), &mut held, &template, search, &mut records).unwrap();
        let probed: Vec<usize> = held.measured.iter().map(|c| c.users).collect();
        assert_eq!(&probed[..3], [32, 64, 128]);
        assert_eq!((limit.sustains, limit.degraded_at), (96, Some(104)));
        // The first probe of 128 (past the melting point) was disturbed:
        // repeated, then judged.
        let mut once = mock(|users, time| if users == 128 && time == 1 { 5.0 } else { 0.1 });
        let mut records = Vec::new();
        let limit = find_limit(&mut runner(), &mut once, &template, search, &mut records).unwrap();
        let probed: Vec<usize> = once.measured.iter().map(|c| c.users).collect();
        assert_eq!(&probed[..4], [32, 64, 128, 128]);
        assert_eq!((limit.sustains, limit.degraded_at), (96, Some(104)));
        let seen = crate::experiments::login::analysis::limits(&records, template.host_cpu_pct);
        assert_eq!(seen, std::slice::from_ref(&limit));
        // Every probe of 128 disturbed: three, then a ceiling the search
        // stays under; it finds the limit below it as before.
        let mut always = mock(|users, _| if users == 128 { 5.0 } else { 0.1 });
        let mut records = Vec::new();
        let limit =
            find_limit(&mut runner(), &mut always, &template, search, &mut records).unwrap();
        let probed: Vec<usize> = always.measured.iter().map(|c| c.users).collect();
        assert_eq!(&probed[..6], [32, 64, 128, 128, 128, 96]);
        assert!(probed[5..].iter().all(|&u| u < 128), "{probed:?}");
        assert_eq!((limit.sustains, limit.degraded_at), (96, Some(104)));
        let seen = crate::experiments::login::analysis::limits(&records, template.host_cpu_pct);
        assert_eq!(seen, std::slice::from_ref(&limit));
        // Every count past the melting point disturbed: each becomes the
        // ceiling in turn, and at the second (MAX_CEILINGS) the search
        // ends with what held below it, a lower bound.
        let mut past = mock(|users, _| if users > 96 { 5.0 } else { 0.1 });
        let mut records = Vec::new();
        let limit = find_limit(&mut runner(), &mut past, &template, search, &mut records).unwrap();
        assert_eq!((limit.sustains, limit.degraded_at), (96, None));
        assert!(
            limit.why.starts_with("stopped at 112 users, not judged: the machine was disturbed in 3 probes in a row (the hypervisor took 5.0% of a CPU"),
            "{}",
            limit.why
        );
        assert!(
            limit.why.ends_with("96 held before, a lower bound"),
            "{}",
            limit.why
        );
        let seen = crate::experiments::login::analysis::limits(&records, template.host_cpu_pct);
        assert_eq!(seen, std::slice::from_ref(&limit));
    }

    #[test]
    fn every_server_gets_its_own_search() {
        let plan = LoginPlan {
            users: vec![16, 32],
            relays: vec![Target::Fork, Target::Epoll],
            ..LoginPlan::quick()
        };
        let mut mock = Mock::new(server(100, 0.0));
        let mut records = Vec::new();
        let limits = find_limits(&mut runner(), &mut mock, &plan, EIGHTH, &mut records).unwrap();
        let servers: Vec<Target> = limits.iter().map(|l| l.relay).collect();
        assert_eq!(
            servers,
            [Target::Fork, Target::Epoll],
            "once each, not per user count"
        );
        assert!(
            limits
                .iter()
                .all(|l| l.sustains == 96 && l.degraded_at == Some(104))
        );
        assert_eq!(records.len(), mock.measured.len());
    }

    #[test]
    fn the_limit_search_stops_at_the_cap_and_at_a_saturated_generator() {
        let template =
            LoginPlan::quick().cell(Target::Fork, Dialect::Rlogin, &Placement::Loopback, 16);
        let mut records = Vec::new();
        let mut never_melts = Mock::new(server(usize::MAX, 0.0));
        let limit = find_limit(
            &mut runner(),
            &mut never_melts,
            &template,
            LimitSearch {
                max_users: 100,
                ..EIGHTH
            },
            &mut records,
        )
        .unwrap();
        assert_eq!((limit.sustains, limit.degraded_at), (100, None));
        assert_eq!(limit.why, "normal up to the cap of 100 users");
        // 0.2% of a core per user: past 400 users the generator is the limit.
        let mut busy_generator = Mock::new(server(usize::MAX, 0.2));
        let limit = find_limit(
            &mut runner(),
            &mut busy_generator,
            &template,
            EIGHTH,
            &mut records,
        )
        .unwrap();
        assert_eq!(limit.sustains, 256);
        assert!(
            limit
                .why
                .starts_with("stopped at 512 users: the load generator used 102% of a core"),
            "{}",
            limit.why
        );
    }
    use crate::record::testbed::Placement;

    #[test]
    fn records_of_earlier_versions_still_read() {
        // Before dialects and placements: protocol telnet/rlogin, no placement.
        let old = r#"{"relay":"epoll","protocol":"rlogin","users":16,"rate":5.0,
            "poisson":false,"warmup_s":2.0,"duration_s":30.0}"#;
        let params: LoginParams = serde_json::from_str(old).unwrap();
        assert_eq!(params.protocol, Dialect::Rlogin);
        assert_eq!(params.placement, Placement::Loopback);
    }

    #[test]
    fn verdicts_follow_the_thresholds() {
        assert_eq!(verdict(20.0, 0.0), "normal");
        assert_eq!(verdict(100.0, 0.0), "normal");
        assert_eq!(verdict(150.0, 0.0), "degraded");
        assert_eq!(verdict(1500.0, 0.0), "unusable");
        assert_eq!(verdict(20.0, 0.05), "unusable");
    }

    #[test]
    fn every_verdict_names_the_criterion_that_decided_it() {
        let report = |p99: f64, unechoed: u64, failed: usize| TypistReport {
            echo_p99_ms: p99,
            unechoed,
            awaited: 1000,
            failed_sessions: failed,
            first_failure: (failed > 0).then(|| "fork: EAGAIN".to_string()),
            ..Default::default()
        };
        assert_eq!(
            judged(&report(12.0, 0, 0)),
            ("normal", "echo p99 12.0 ms".to_string())
        );
        assert_eq!(
            judged(&report(120.0, 0, 0)),
            ("degraded", "echo p99 120.0 ms, past 100 ms".to_string())
        );
        assert_eq!(
            judged(&report(1500.0, 0, 0)),
            ("unusable", "echo p99 1500.0 ms, past 1 s".to_string())
        );
        // A fine echo time beside "unusable" says what made it so.
        assert_eq!(
            judged(&report(12.0, 40, 0)),
            (
                "unusable",
                "4.0% of keystrokes never echoed (40 of 1000, 2 s after the window)".to_string()
            )
        );
        assert_eq!(
            judged(&report(12.0, 0, 3)),
            (
                "unusable",
                "3 sessions failed (the first: fork: EAGAIN)".to_string()
            )
        );
    }
}
