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

use crate::endpoint::login::protocol::Protocol;
use crate::endpoint::login::server::Relay;
use crate::endpoint::login::typist::{self, TypistConfig, TypistReport};
use crate::measure::netstat::Counters;
use crate::measure::procstat::{StatSnapshot, SystemCpu, system_cpu};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// The server a cell loads: one of netlab's relay designs, or a real one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Target {
    Fork,
    Epoll,
    Splice,
    Uring,
    /// inetutils telnetd (Debian inetutils-telnetd), started per connection
    /// by socat as inetd would, running the same command: TELNET only.
    Telnetd,
}

impl Target {
    pub fn name(self) -> &'static str {
        match self.relay() {
            Some(relay) => relay.name(),
            None => "telnetd",
        }
    }

    /// netlab's design, or None for a real server.
    pub fn relay(self) -> Option<Relay> {
        match self {
            Target::Fork => Some(Relay::Fork),
            Target::Epoll => Some(Relay::Epoll),
            Target::Splice => Some(Relay::Splice),
            Target::Uring => Some(Relay::Uring),
            Target::Telnetd => None,
        }
    }

    pub fn of(relay: Relay) -> Target {
        match relay {
            Relay::Fork => Target::Fork,
            Relay::Epoll => Target::Epoll,
            Relay::Splice => Target::Splice,
            Relay::Uring => Target::Uring,
        }
    }
}

/// One cell's parameters.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LoginParams {
    /// The server under load (netlab's relay design, or `telnetd`).
    pub relay: Target,
    pub protocol: Protocol,
    pub users: usize,
    pub rate: f64,
    pub poisson: bool,
    pub warmup_s: f64,
    pub duration_s: f64,
}

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

/// What one cell measured.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LoginResult {
    pub params: LoginParams,
    pub typist: TypistReport,
    /// Machine-wide over the window.
    pub cpu: SystemCpu,
    /// vmstat's r and b: means of 100 ms samples over the window.
    pub procs_running_mean: f64,
    pub procs_blocked_mean: f64,
    pub syscalls_per_s: Option<f64>,
    /// Where the system-call count came from, or why there is none.
    pub syscalls_source: String,
    /// TCP segments per second (on loopback, in = out).
    pub segments_in_per_s: f64,
    pub segments_out_per_s: f64,
    /// (Busy CPU time of the machine minus its idle baseline minus the
    /// generator's) per keystroke: server, commands and kernel together, µs.
    pub host_cpu_per_keystroke_us: f64,
    /// CPU time of the server's process tree (server, sessions, commands)
    /// per keystroke, µs, from the scheduler's accounting (see [`tree_cpu_ns`]).
    /// Excludes softirq work done outside those processes.
    pub server_cpu_per_keystroke_us: f64,
    /// The server tree's CPU over the window, in % of one CPU.
    pub server_cpu_pct: f64,
    /// The machine's busy CPUs (in CPU-seconds per second) measured for a
    /// second before the cell, with nothing of netlab's running.
    pub baseline_busy_cpus: f64,
    pub verdict: String,
    /// Sessions the server ended before the cell was over, by reason (from its log).
    #[serde(default)]
    pub server_endings: Vec<String>,
}

/// CPU time (ns, from the scheduler's own accounting in
/// `/proc/PID/task/TID/schedstat`) of a process, all its threads and all its
/// descendants: the server side of a cell, sessions and commands included.
/// Exact to the nanosecond, unlike tick-sampled `/proc/stat`.
pub fn tree_cpu_ns(root: u32) -> u64 {
    let mut total = 0;
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            if let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) {
                total += text
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0);
            }
            if let Ok(children) = std::fs::read_to_string(task.path().join("children")) {
                stack.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<u32>().ok()),
                );
            }
        }
    }
    total
}

/// The server process of a cell and its log; killed by PID (SIGINT, then
/// SIGKILL) on drop.
struct ServerProcess {
    child: Child,
    log: tempfile::NamedTempFile,
    /// A file the server runs (telnetd's command), removed with the server.
    _script: Option<tempfile::TempPath>,
}

impl ServerProcess {
    /// Why sessions ended early, from the server's log: each distinct
    /// reason with how many sessions it ended.
    fn session_endings(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.log.path()).unwrap_or_default();
        let mut counts: std::collections::BTreeMap<String, usize> = Default::default();
        for line in text.lines() {
            if let Some((_, why)) = line.split_once("session ended: ") {
                let why = why.split(" (").next().unwrap_or(why).to_string();
                *counts.entry(why).or_default() += 1;
            }
        }
        counts
            .into_iter()
            .map(|(why, n)| format!("{n} x {why}"))
            .collect()
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // socat leaves its per-connection telnetds running when it stops:
        // note every descendant now and kill what is left, by PID, after.
        let descendants = descendants(self.child.id());
        self.stop_root();
        for pid in descendants {
            // SAFETY: a process this cell started (directly or through socat).
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        }
    }
}

/// Every descendant of `root` (not `root` itself).
fn descendants(root: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut stack = vec![root];
    while let Some(pid) = stack.pop() {
        if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
            for task in tasks.flatten() {
                if let Ok(children) = std::fs::read_to_string(task.path().join("children")) {
                    for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                        found.push(child);
                        stack.push(child);
                    }
                }
            }
        }
    }
    found
}

impl ServerProcess {
    fn stop_root(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: signalling our own child by PID.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// inetutils telnetd behind socat on a free loopback port, running
/// `cat > /dev/null` (through a script: telnetd's -E takes one word).
fn start_telnetd(params: &LoginParams) -> anyhow::Result<(ServerProcess, SocketAddr)> {
    const TELNETD: &str = "/usr/sbin/telnetd";
    if params.protocol != Protocol::Telnet {
        anyhow::bail!("telnetd speaks TELNET only; use --protocol telnet");
    }
    if !std::path::Path::new(TELNETD).exists() {
        anyhow::bail!("{TELNETD} is missing (apt-get install inetutils-telnetd)");
    }
    let log = tempfile::NamedTempFile::new()?;
    let script = tempfile::Builder::new()
        .prefix("netlab-typist-cat")
        .tempfile()?;
    std::fs::write(script.path(), "#!/bin/sh\nexec cat > /dev/null\n")?;
    std::fs::set_permissions(
        script.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    let script = script.into_temp_path();
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let child = Command::new("socat")
        .arg(format!(
            "TCP-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork,backlog=1024"
        ))
        .arg(format!("EXEC:{TELNETD} -h -E {},nofork", script.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log.reopen()?)
        .spawn()
        .map_err(|e| {
            anyhow::anyhow!("cannot start socat for telnetd (apt-get install socat): {e}")
        })?;
    let server = ServerProcess {
        child,
        log,
        _script: Some(script),
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + Duration::from_secs(5);
    // socat listens shortly after it starts; a probe connection would be
    // served (and counted), so wait for the listening socket instead.
    while !listening(port) {
        if Instant::now() > deadline {
            anyhow::bail!("socat never listened on port {port}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((server, addr))
}

/// Whether something listens on 127.0.0.1:`port` (from /proc/net/tcp).
fn listening(port: u16) -> bool {
    let want = format!("0100007F:{port:04X} 00000000:0000 0A");
    std::fs::read_to_string("/proc/net/tcp").is_ok_and(|t| t.contains(&want))
}

fn start_server(params: &LoginParams) -> anyhow::Result<(ServerProcess, SocketAddr)> {
    let Some(relay) = params.relay.relay() else {
        return start_telnetd(params);
    };
    let exe = std::env::current_exe()?;
    let log = tempfile::NamedTempFile::new()?;
    let mut child = Command::new(exe)
        .args(["login", "serve", "--port", "0", "--relay", relay.name()])
        .args(["--protocol", params.protocol.name()])
        .args(["--max-sessions", &(params.users + 16).to_string()])
        .args(["--idle-timeout", "3600"])
        .args(["--command", "sh", "-c", "exec cat > /dev/null"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log.reopen()?)
        .spawn()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line)?;
    let server = ServerProcess {
        child,
        log,
        _script: None,
    };
    let port: u16 = line
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("the login server did not start (printed {line:?})"))?;
    Ok((server, SocketAddr::from(([127, 0, 0, 1], port))))
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

/// Runs one cell. `stop` (Ctrl-C) ends the window early; what was measured
/// is returned.
pub fn run_cell(
    params: &LoginParams,
    corpus: &[u8],
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<LoginResult> {
    // What the machine does without us, to subtract from the busy time.
    let idle0 = (Instant::now(), StatSnapshot::read()?);
    std::thread::sleep(Duration::from_secs(1));
    let idle1 = StatSnapshot::read()?;
    let baseline = system_cpu(&idle0.1, &idle1, idle0.0.elapsed().as_secs_f64());
    let baseline_busy_cpus = (100.0 - baseline.idle_pct - baseline.iowait_pct) / 100.0
        * idle1.per_cpu.len().max(1) as f64;
    let (server, addr) = start_server(params)?;
    let config = TypistConfig {
        server: addr,
        protocol: params.protocol,
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
            typist::run(&config, &typist_stop, &|start| {
                if edges_tx.send(start).is_ok() && !start {
                    let _ = sampled_rx.recv_timeout(Duration::from_secs(10));
                }
            })
        })?;
    // Sample the machine over the window the generator announces.
    let mut window = None;
    let mut procs = (0u64, 0u64, 0u64);
    while let Ok(start) = edges_rx.recv() {
        if start {
            window = Some((
                Instant::now(),
                StatSnapshot::read()?,
                Counters::read(),
                SyscallCounter::start(),
                tree_cpu_ns(server.child.id()),
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
        Counters::read(),
        tree_cpu_ns(server.child.id()),
    );
    let _ = sampled_tx.send(());
    let report = generator
        .join()
        .map_err(|_| anyhow::anyhow!("the load generator panicked"))??;
    // Sessions the server ended during the run (all end at the stop).
    let server_endings = server.session_endings();
    drop(server);
    let Some((t0, stat0, counters0, perf, tree0)) = window else {
        anyhow::bail!(
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
    let per_s = |name: &str| after.2.get(name).saturating_sub(counters0.get(name)) as f64 / seconds;
    let cpus = stat0.per_cpu.len().max(1) as f64;
    let busy_s = (100.0 - cpu.idle_pct - cpu.iowait_pct) / 100.0 * cpus * seconds;
    let keystrokes = report.keystrokes.max(1) as f64;
    let host_cpu_per_keystroke_us =
        ((busy_s - baseline_busy_cpus * seconds - report.own_cpu_s).max(0.0) / keystrokes) * 1e6;
    let server_ns = after.3.saturating_sub(tree0) as f64;
    let server_cpu_per_keystroke_us = server_ns / 1e3 / keystrokes;
    let server_cpu_pct = 100.0 * server_ns / 1e9 / seconds;
    let unechoed_share = report.unechoed as f64 / keystrokes;
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
        segments_in_per_s: per_s("Tcp.InSegs"),
        segments_out_per_s: per_s("Tcp.OutSegs"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_follow_the_thresholds() {
        assert_eq!(verdict(20.0, 0.0), "normal");
        assert_eq!(verdict(100.0, 0.0), "normal");
        assert_eq!(verdict(150.0, 0.0), "degraded");
        assert_eq!(verdict(1500.0, 0.0), "unusable");
        assert_eq!(verdict(20.0, 0.05), "unusable");
    }
}
