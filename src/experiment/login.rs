//! The login-load experiment (000_2144c0e834c30e0c.txt, 1989): N users
//! typing 5 characters a second into `cat > /dev/null` through a login
//! server, and what the host spends on it, in vmstat's terms.
//!
//! One cell = one relay design, protocol and user count. netlab starts its
//! server (`netlab login serve`, a child process), the typist load generator
//! (a thread of this process) opens the sessions, lets them negotiate, types
//! for a warm-up and then for the measured window. Over the window this
//! thread samples the machine: `/proc/stat` at both ends (CPU us/sy/id,
//! context switches) and every 100 ms (procs_running and procs_blocked,
//! vmstat's r and b), `/proc/net/snmp` (TCP segments), and the system calls
//! of every process from the `raw_syscalls:sys_enter` tracepoint through
//! `perf stat -a` when perf can (otherwise the record says why not).
//!
//! Caveats: the counts are machine-wide, so they include the generator, the
//! `cat`s and anything else running; the generator's own CPU is measured
//! (RUSAGE_THREAD) and subtracted, and so is the machine's busy time in a
//! one-second idle sample before the cell, for the host's CPU per
//! keystroke. On loopback every TCP segment is both sent and received, so
//! packets in and out are the same count. A thread waiting in
//! `io_uring_enter` is counted by the kernel as blocked on I/O (vmstat's b,
//! and iowait rather than idle): the `uring` design shows b = 1 and iowait
//! while idle; busy time excludes iowait.

use super::bed::Bed;
use super::launcher::{End, Launcher};
use super::runner::{MeasureCell, Measured, Runner};
use super::servers::{self, ServerSpec, Site, enter_on_this_thread};
pub use super::servers::{Dialect, Target};
use super::{CellError, Interrupted, MeasureError};
use crate::endpoint::login::server::Relay;
use crate::endpoint::login::typist::{self, Connect, READY_MARKER, TypistConfig};
use crate::measure::ifstat::InterfaceCounters;
use crate::measure::netstat::Counters;
use crate::measure::procstat::{StatSnapshot, system_cpu};
pub use crate::measure::schedstat::tree_cpu_ns;
pub use crate::record::login::{LoginParams, LoginResult};
use crate::record::testbed::Placement;
use crate::record::{Record, RecordData};
use std::io::Read;
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

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
    } else if p99_ms > 100.0 {
        "degraded"
    } else {
        "normal"
    }
}

/// `perf stat -a` counting system calls until stopped, if perf can.
struct SyscallCounter(Option<Child>, String);

impl SyscallCounter {
    fn start() -> SyscallCounter {
        let spawned = Command::new("perf")
            .args(["stat", "-a", "-x,", "-e", "raw_syscalls:sys_enter"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn();
        match spawned {
            Ok(child) => SyscallCounter(Some(child), String::new()),
            Err(e) => SyscallCounter(None, format!("perf could not start: {e}")),
        }
    }

    /// Stops perf (SIGINT by PID) and returns the count, or why none.
    fn stop(mut self) -> Result<u64, String> {
        let Some(mut child) = self.0.take() else {
            return Err(std::mem::take(&mut self.1));
        };
        // SAFETY: signalling our own child by PID.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        let mut text = String::new();
        if let Some(mut err) = child.stderr.take() {
            let _ = err.read_to_string(&mut text);
        }
        let _ = child.wait();
        text.lines()
            .find(|l| l.contains("raw_syscalls:sys_enter"))
            .and_then(|l| l.split(',').next())
            .and_then(|n| n.trim().parse().ok())
            .ok_or_else(|| format!("perf counted no raw_syscalls:sys_enter: {}", text.trim()))
    }
}

impl Drop for SyscallCounter {
    fn drop(&mut self) {
        if let Some(child) = &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The command each session runs: it announces itself (what a session
/// driven through a client program waits for), then reads what is typed.
/// Character at a time the terminal echoes and `cat` discards, as in the
/// source; in LINEMODE nothing echoes, so `cat` writes each line back.
pub fn session_command(dialect: Dialect) -> String {
    let ready = String::from_utf8_lossy(READY_MARKER);
    if dialect.linemode() {
        format!("printf '{ready}\\n'; exec cat")
    } else {
        format!("printf '{ready}\\n'; exec cat > /dev/null")
    }
}

/// What the machine does without us: its busy CPUs (CPU-seconds per
/// second, iowait not counted) over one second with nothing of netlab's
/// running, to subtract from a cell's busy time.
pub fn idle_baseline() -> Result<f64, CellError> {
    let idle0 = (Instant::now(), StatSnapshot::read()?);
    std::thread::sleep(Duration::from_secs(1));
    let idle1 = StatSnapshot::read()?;
    let baseline = system_cpu(&idle0.1, &idle1, idle0.0.elapsed().as_secs_f64());
    Ok((100.0 - baseline.idle_pct - baseline.iowait_pct) / 100.0
        * idle1.per_cpu.len().max(1) as f64)
}

/// Runs one cell. `stop` (Ctrl-C) ends the window early; what was measured
/// is returned. `baseline_busy_cpus` is [`idle_baseline`]'s, measured now
/// when `None` (a sweep measures it once, before its cells).
pub fn run_cell(
    params: &LoginParams,
    corpus: &[u8],
    stop: &Arc<AtomicBool>,
    baseline_busy_cpus: Option<f64>,
) -> Result<LoginResult, CellError> {
    params
        .relay
        .speaks(params.protocol)
        .map_err(CellError::Refused)?;
    let baseline_busy_cpus = match baseline_busy_cpus {
        Some(b) => b,
        None => idle_baseline()?,
    };
    let bed = Bed::create(&params.placement)?;
    // The server on side B, the users on side A (netns); or both on loopback.
    let launcher = Launcher::for_bed(bed.as_ref());
    let (site, client_netns, interface) = (
        Site::serving_end(&launcher),
        launcher.netns(End::From),
        launcher.interface(End::To),
    );
    let command = session_command(params.protocol);
    let server = servers::start(
        &ServerSpec {
            target: params.relay,
            dialect: params.protocol,
            command: &command,
            max_sessions: params.users + 16,
            nodelay: false,
        },
        &site,
    )?;
    let connect = match params.protocol.protocol() {
        Some(protocol) => Connect::Socket {
            server: SocketAddr::V4(server.addr),
            protocol,
            linemode: params.protocol.linemode(),
        },
        None => Connect::Program {
            argv: server
                .ssh_argv(&command)
                .expect("an SSH dialect runs against sshd"),
        },
    };
    let config = TypistConfig {
        connect,
        users: params.users,
        rate: params.rate,
        poisson: params.poisson,
        corpus: corpus.to_vec(),
        warmup: Duration::from_secs_f64(params.warmup_s),
        duration: Duration::from_secs_f64(params.duration_s),
    };
    let (edges_tx, edges_rx) = std::sync::mpsc::channel::<bool>();
    // At the window's end the generator waits for this thread's closing
    // sample before it closes its sessions: session processes that exit
    // take their CPU time out of the server's tree.
    let (sampled_tx, sampled_rx) = std::sync::mpsc::channel::<()>();
    let typist_stop = stop.clone();
    let generator = std::thread::Builder::new()
        .name("typist".into())
        .spawn(move || {
            if let Some(path) = &client_netns {
                // Only this thread (and the client programs it starts) moves.
                enter_on_this_thread(path)?;
            }
            typist::run(&config, &typist_stop, &|start| {
                if edges_tx.send(start).is_ok() && !start {
                    let _ = sampled_rx.recv_timeout(Duration::from_secs(10));
                }
            })
        })?;
    // Packets at the server's side: its interface (netns), or TCP segments
    // in its namespace (loopback).
    let packets = || match &interface {
        Some(name) => InterfaceCounters::read_of(server.pid(), name)
            .map_or((0, 0), |c| (c.rx_packets, c.tx_packets)),
        None => {
            let c = Counters::read_of(server.pid());
            (c.get("Tcp.InSegs"), c.get("Tcp.OutSegs"))
        }
    };
    // Sample the machine over the window the generator announces.
    let mut window = None;
    let mut procs = (0u64, 0u64, 0u64);
    while let Ok(start) = edges_rx.recv() {
        if start {
            window = Some((
                Instant::now(),
                StatSnapshot::read()?,
                packets(),
                SyscallCounter::start(),
                tree_cpu_ns(server.pid()),
            ));
            // vmstat-style r and b, every 100 ms until the window ends.
            loop {
                match edges_rx.recv_timeout(Duration::from_millis(100)) {
                    Ok(_) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                        if let Ok(s) = StatSnapshot::read() {
                            // The sampler itself is running while it reads: not counted.
                            procs.0 += s.procs_running.saturating_sub(1);
                            procs.1 += s.procs_blocked;
                            procs.2 += 1;
                        }
                    }
                }
            }
            break;
        }
    }
    let after = (
        Instant::now(),
        StatSnapshot::read()?,
        packets(),
        tree_cpu_ns(server.pid()),
    );
    let _ = sampled_tx.send(());
    let report = generator
        .join()
        .map_err(|_| CellError::Refused("the load generator panicked".into()))??;
    // Sessions the server ended during the run (all end at the stop).
    let server_endings = server.session_endings();
    // The server goes before its namespace.
    drop(server);
    let link = match bed {
        Some(bed) => Some(bed.finish()?.link),
        None => None,
    };
    let Some((t0, stat0, packets0, perf, tree0)) = window else {
        refuse!(
            "the measured window never started: {}",
            report.first_failure.as_deref().unwrap_or("interrupted")
        );
    };
    let seconds = after.0.duration_since(t0).as_secs_f64();
    let cpu = system_cpu(&stat0, &after.1, seconds);
    let (syscalls_per_s, syscalls_source) = match perf.stop() {
        Ok(n) => (
            Some(n as f64 / seconds),
            "perf stat -a -e raw_syscalls:sys_enter (every process)".to_string(),
        ),
        Err(why) => (None, why),
    };
    let packets_source = match &interface {
        Some(name) => format!("interface {name} (server side) rx/tx packets"),
        None => "TCP segments on loopback (every one is both in and out)".to_string(),
    };
    let cpus = stat0.per_cpu.len().max(1) as f64;
    let busy_s = (100.0 - cpu.idle_pct - cpu.iowait_pct) / 100.0 * cpus * seconds;
    let keystrokes = report.keystrokes.max(1) as f64;
    let clients_s = report.own_cpu_s + report.client_programs_cpu_s;
    let host_cpu_per_keystroke_us =
        ((busy_s - baseline_busy_cpus * seconds - clients_s).max(0.0) / keystrokes) * 1e6;
    let server_ns = after.3.saturating_sub(tree0) as f64;
    let server_cpu_per_keystroke_us = server_ns / 1e3 / keystrokes;
    let server_cpu_pct = 100.0 * server_ns / 1e9 / seconds;
    let unechoed_share = report.unechoed as f64 / report.awaited.max(1) as f64;
    let verdict = if report.failed_sessions > 0 {
        "unusable"
    } else {
        verdict(report.echo_p99_ms, unechoed_share)
    };
    Ok(LoginResult {
        params: params.clone(),
        typist: report,
        cpu,
        procs_running_mean: procs.0 as f64 / procs.2.max(1) as f64,
        procs_blocked_mean: procs.1 as f64 / procs.2.max(1) as f64,
        syscalls_per_s,
        syscalls_source,
        packets_in_per_s: after.2.0.saturating_sub(packets0.0) as f64 / seconds,
        packets_out_per_s: after.2.1.saturating_sub(packets0.1) as f64 / seconds,
        packets_source,
        link,
        host_cpu_per_keystroke_us,
        server_cpu_per_keystroke_us,
        server_cpu_pct,
        baseline_busy_cpus,
        verdict: verdict.to_string(),
        server_endings,
    })
}

/// A few kilobytes of plain English to type (netlab ships no corpus file by
/// default; `--corpus FILE` types another text).
pub const DEFAULT_CORPUS: &str = "\
The test faked users typing at an even five characters per second into cooked
mode with echo. Each keystroke crosses the network, wakes the server, enters
the terminal, comes back as an echo and crosses the network again. What the
host spends per keystroke is the price of the relay between socket and pty:
process switches, system calls and copies. A remote-login server that only
switches bytes between two kernel objects pays all of them for every byte.
";

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
        }
    }
}

/// Why a login plan cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("--users: zero users is not an experiment")]
    ZeroUsers,
    #[error("--rate {0}: must be above 0 and at most 1000 characters per second per user")]
    Rate(String),
    #[error("--duration must be above zero")]
    Duration,
}

impl LoginPlan {
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
        if self.users.contains(&0) {
            return Err(PlanError::ZeroUsers);
        }
        if !(self.rate > 0.0 && self.rate <= 1000.0) {
            return Err(PlanError::Rate(self.rate.to_string()));
        }
        if self.duration_s.is_nan() || self.duration_s <= 0.0 {
            return Err(PlanError::Duration);
        }
        Ok(())
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
        }
    }

    /// Every cell once: placements, then protocols, then user counts, then servers.
    pub fn cells(&self) -> Vec<LoginParams> {
        let mut cells = Vec::new();
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
    /// The machine's busy CPUs with nothing of netlab's running, measured
    /// once before the first cell.
    pub baseline_busy_cpus: f64,
    pub stop: Arc<AtomicBool>,
}

impl LoginMeasure {
    /// Measures the idle baseline now, before any cell starts anything.
    pub fn new(corpus: Vec<u8>) -> Result<LoginMeasure, CellError> {
        Ok(LoginMeasure {
            corpus,
            baseline_busy_cpus: idle_baseline()?,
            stop: super::endpoints::interrupt_flag(),
        })
    }
}

impl MeasureCell for LoginMeasure {
    type Cell = LoginParams;

    fn label(&self, cell: &LoginParams) -> String {
        format!(
            "{} {} x{}",
            cell.relay.name(),
            cell.protocol.name(),
            cell.users
        )
    }

    fn measure(&mut self, cell: &LoginParams) -> Result<Measured, Interrupted> {
        let outcome = run_cell(
            cell,
            &self.corpus,
            &self.stop,
            Some(self.baseline_busy_cpus),
        );
        super::measured(cell.placement.name(), outcome, |result| RecordData::Login {
            params: cell.clone(),
            result,
        })
    }
}

/// What the limit search found for one server and protocol.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Limit {
    pub relay: Target,
    pub protocol: Dialect,
    pub placement: String,
    /// The most users served with a "normal" verdict (0: not even the first count).
    pub sustains: usize,
    /// The fewest users seen degraded, if any.
    pub degraded_at: Option<usize>,
    /// Why the search stopped there.
    pub why: String,
}

/// The load generator is the bottleneck rather than the server: it used
/// most of a core, or sent keystrokes late.
pub fn generator_limited(result: &LoginResult) -> Option<String> {
    let t = &result.typist;
    if t.own_cpu_pct() > 80.0 {
        Some(format!(
            "the load generator used {:.0}% of a core",
            t.own_cpu_pct()
        ))
    } else if t.send_lag_p99_ms > 20.0 {
        Some(format!(
            "the load generator sent keystrokes late (p99 {:.1} ms)",
            t.send_lag_p99_ms
        ))
    } else {
        None
    }
}

/// The next user count to probe, or None when the search is over: double
/// while every probe was normal (up to `max`), then bisect between the last
/// normal count `good` and the first degraded one until they are within an
/// eighth of `good` (or 1) of each other.
pub fn next_users(good: usize, bad: Option<usize>, last: usize, max: usize) -> Option<usize> {
    match bad {
        None if last >= max => None,
        None => Some((last * 2).min(max)),
        Some(bad) if bad - good <= (good / 8).max(1) => None,
        Some(bad) => Some((good + bad) / 2),
    }
}

/// Doubles the user count from `start` while the verdict stays normal, then
/// bisects between the last normal and the first degraded count to within
/// an eighth ([`next_users`]). Each probe is a recorded cell, appended to
/// `records`. Stops early, saying so, when the load generator rather than
/// the server is the limit.
pub fn find_limit<M: MeasureCell<Cell = LoginParams>>(
    runner: &mut Runner,
    measure: &mut M,
    template: &LoginParams,
    start: usize,
    max_users: usize,
    records: &mut Vec<Record>,
) -> Result<Limit, MeasureError> {
    let (mut good, mut bad): (usize, Option<(usize, String)>) = (0, None);
    let mut n = start.clamp(1, max_users.max(1));
    let why = loop {
        let record = runner.cell(
            measure,
            &LoginParams {
                users: n,
                ..template.clone()
            },
        )?;
        let verdict = match &record.data {
            RecordData::Login {
                result: Some(r), ..
            } => {
                if let Some(limit) = generator_limited(r) {
                    records.push(record);
                    break format!(
                        "stopped at {n} users: {limit}; the machine is saturated, so {good} is a lower bound for the server"
                    );
                }
                (r.verdict == "normal").then_some(()).ok_or_else(|| {
                    format!("{} (echo p99 {:.1} ms)", r.verdict, r.typist.echo_p99_ms)
                })
            }
            _ => Err(format!(
                "failed: {}",
                record.error.as_deref().unwrap_or("no result")
            )),
        };
        records.push(record);
        match verdict {
            Ok(()) => good = n,
            Err(why) => bad = Some((n, why)),
        }
        match next_users(good, bad.as_ref().map(|b| b.0), n, max_users) {
            Some(next) => n = next,
            None => {
                break match &bad {
                    None => format!("normal up to the cap of {max_users} users"),
                    Some((b, why)) => format!("degraded at {b}: {why}"),
                };
            }
        }
    };
    Ok(Limit {
        relay: template.relay,
        protocol: template.protocol,
        placement: template.placement.name().to_string(),
        sustains: good,
        degraded_at: bad.map(|(b, _)| b),
        why,
    })
}

/// [`find_limit`] for each server, protocol and placement of the plan, in
/// turn, from `start` users up to `max_users`.
pub fn find_limits<M: MeasureCell<Cell = LoginParams>>(
    runner: &mut Runner,
    measure: &mut M,
    plan: &LoginPlan,
    start: usize,
    max_users: usize,
    records: &mut Vec<Record>,
) -> Result<Vec<Limit>, MeasureError> {
    let mut limits = Vec::new();
    let mut seen = Vec::new();
    for template in plan.cells() {
        let key = (
            template.relay,
            template.protocol,
            template.placement.clone(),
        );
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        limits.push(find_limit(
            runner, measure, &template, start, max_users, records,
        )?);
    }
    Ok(limits)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::runner::mock::{Mock, runner};
    use crate::record::login::TypistReport;

    #[test]
    fn the_limit_search_doubles_then_bisects() {
        assert_eq!(next_users(16, None, 16, 3000), Some(32));
        assert_eq!(next_users(2048, None, 2048, 3000), Some(3000));
        assert_eq!(next_users(3000, None, 3000, 3000), None);
        // 512 was normal, 1024 degraded: bisect to within 64.
        assert_eq!(next_users(512, Some(1024), 1024, 3000), Some(768));
        assert_eq!(next_users(768, Some(1024), 768, 3000), Some(896));
        assert_eq!(next_users(896, Some(1024), 896, 3000), Some(960));
        assert_eq!(next_users(960, Some(1024), 960, 3000), None);
        // Degraded from the first probe: search below it.
        assert_eq!(next_users(0, Some(16), 16, 3000), Some(8));
        assert_eq!(next_users(0, Some(1), 1, 3000), None);
    }

    /// A server that echoes in 5 ms up to `limit` users and in 500 ms past it,
    /// with a generator that needs `cpu_per_user` % of a core per user.
    fn server(
        limit: usize,
        cpu_per_user: f64,
    ) -> impl FnMut(&LoginParams) -> Result<Measured, Interrupted> {
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
                data: RecordData::Login {
                    params: cell.clone(),
                    result: Some(Box::new(result)),
                },
                error: None,
            })
        }
    }

    #[test]
    fn the_limit_search_brackets_the_melting_point() {
        let template =
            LoginPlan::quick().cell(Target::Epoll, Dialect::Rlogin, &Placement::Loopback, 16);
        let mut mock = Mock::new(server(700, 0.0));
        let mut records = Vec::new();
        let limit =
            find_limit(&mut runner(), &mut mock, &template, 16, 3000, &mut records).unwrap();
        let probed: Vec<usize> = mock.measured.iter().map(|c| c.users).collect();
        assert_eq!(probed, [16, 32, 64, 128, 256, 512, 1024, 768, 640, 704]);
        assert_eq!(limit.sustains, 640);
        assert_eq!(limit.degraded_at, Some(704));
        assert!(
            limit
                .why
                .starts_with("degraded at 704: degraded (echo p99 500.0 ms)"),
            "{}",
            limit.why
        );
        assert_eq!(records.len(), probed.len(), "every probe is recorded");
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
        let limits = find_limits(&mut runner(), &mut mock, &plan, 16, 3000, &mut records).unwrap();
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
            16,
            100,
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
            16,
            3000,
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
    use crate::testbed::Placement;

    #[test]
    fn records_of_earlier_versions_still_read() {
        // Before dialects and placements: protocol telnet/rlogin, no placement.
        let old = r#"{"relay":"epoll","protocol":"rlogin","users":16,"rate":5.0,
            "poisson":false,"warmup_s":2.0,"duration_s":30.0}"#;
        let params: LoginParams = serde_json::from_str(old).unwrap();
        assert_eq!(params.protocol, Dialect::Rlogin);
        assert_eq!(params.placement, Placement::Loopback);
        assert!(session_command(Dialect::TelnetLinemode).ends_with("exec cat"));
        assert!(session_command(Dialect::Ssh).ends_with("cat > /dev/null"));
    }

    #[test]
    fn verdicts_follow_the_thresholds() {
        assert_eq!(verdict(20.0, 0.0), "normal");
        assert_eq!(verdict(100.0, 0.0), "normal");
        assert_eq!(verdict(150.0, 0.0), "degraded");
        assert_eq!(verdict(1500.0, 0.0), "unusable");
        assert_eq!(verdict(20.0, 0.05), "unusable");
    }
}
