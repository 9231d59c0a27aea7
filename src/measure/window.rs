//! The serving host over a measured window, in vmstat's terms: what a
//! login-load or terminal-output cell samples on the host that runs the
//! server, started and ended by the controller's window edges.
//!
//! Over the window: `/proc/stat` at both edges (CPU us/sy/id, context
//! switches) and every 100 ms (procs_running and procs_blocked, vmstat's r
//! and b), packets at the server's interface (or TCP segments in its
//! namespace), the system calls of every process from the
//! `raw_syscalls:sys_enter` tracepoint through `perf stat -a` when perf can
//! (otherwise the window says why not), and the scheduler's CPU time of the
//! server's process tree.
//!
//! Invariant: the sampler thread runs inside the tree it measures (the
//! serving endpoint is the tree's root), so its own CPU time is taken out
//! of the tree's; what the endpoint's control thread does at the two edges
//! (a few reads of `/proc`) stays in.

use super::ifstat::InterfaceCounters;
use super::netstat::Counters;
use super::procstat::{ProcStatError, StatSnapshot, SystemCpu, system_cpu};
use super::rusage::thread_cpu_ns;
use super::schedstat::TreeTasks;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often vmstat's r and b are sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);

/// What the serving host did over one window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostWindow {
    /// The window's length by the serving host's clock.
    pub seconds: f64,
    pub cpu: SystemCpu,
    /// CPUs of the serving host.
    pub cpus: usize,
    pub procs_running_mean: f64,
    pub procs_blocked_mean: f64,
    /// System calls of every process over the window (None: see `syscalls_source`).
    pub syscalls: Option<u64>,
    /// Where the count came from, or why there is none.
    pub syscalls_source: String,
    /// Packets in and out at the server's interface, or TCP segments in
    /// and out in its namespace when no interface was named.
    pub packets_in: u64,
    pub packets_out: u64,
    /// CPU time (ns) of the server's process tree over the window, the
    /// sampler's own taken out.
    pub tree_ns: u64,
    /// What the tree and its session socket waited on (a terminal-output
    /// window), the watch's own CPU taken out of `tree_ns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waits: Option<super::waits::TreeWaits>,
    /// System calls and context switches of the server's tree alone (the
    /// sampler and the control thread not counted), or why none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree_counts: Option<TreeCounts>,
    #[serde(default)]
    pub tree_counts_source: String,
    /// Pty transfers of the server's processes, where the server counts
    /// them (netlab's relays).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pty_transfers: Option<u64>,
}

/// What the server's own tasks did over a window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TreeCounts {
    pub syscalls: u64,
    pub context_switches: u64,
}

/// `perf stat` counting `events` over a target (`-a`, or `-t TIDS`: those
/// tasks and what they start, by inheritance) until stopped, if perf can.
pub struct PerfCount {
    child: Option<Child>,
    why_not: String,
    events: &'static [&'static str],
}

impl PerfCount {
    pub fn start(target: &[&str], events: &'static [&'static str]) -> PerfCount {
        let mut command = Command::new("perf");
        command
            .args(["stat", "-x,", "-e", &events.join(",")])
            .args(target)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // perf runs until told to stop: if the process that started it
        // dies first (killed mid-cell), perf must die too, and it must not
        // hold a copy of any descriptor it inherited (a pipe someone reads
        // to its end: a controller's or a test's), or that reader waits for
        // ever. Found 2026-12-02: two orphaned `perf stat -a` held the
        // pipes two suite tests read.
        // SAFETY: only async-signal-safe calls between fork and exec;
        // stdin, stdout and stderr are in place before this runs.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Where close_range is missing, the descriptors stay: the
                // death signal above still bounds perf's life.
                let _ = libc::close_range(3, u32::MAX, 0);
                // An endpoint ignores SIGINT, and exec keeps an ignored
                // signal ignored: perf would drop a SIGINT that came before
                // it installs its own handler and then count for ever.
                // Found 2026-12-02: a SIGINT within perf's first ~10 ms
                // left a login server's window open until its controller
                // gave up (30 s). With the default, a SIGINT that early
                // ends perf, and [`PerfCount::stop`] waits for the handler.
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            });
        }
        let spawned = command.spawn();
        let (child, why_not) = match spawned {
            Ok(child) => (Some(child), String::new()),
            Err(e) => (None, format!("perf could not start: {e}")),
        };
        PerfCount {
            child,
            why_not,
            events,
        }
    }

    /// Counts nothing, saying why.
    pub fn none(why: &str) -> PerfCount {
        PerfCount {
            child: None,
            why_not: why.to_string(),
            events: &[],
        }
    }

    /// Stops perf (SIGINT by PID) and returns each event's count, in the
    /// order asked, or why none. perf is given [`PERF_READY`] to install
    /// its SIGINT handler (before that a SIGINT ends it uncounted) and
    /// [`PERF_STOPS`] to print once told; past that it is killed and the
    /// reason says so: a window never waits on perf for ever.
    pub fn stop(mut self) -> Result<Vec<u64>, String> {
        let Some(mut child) = self.child.take() else {
            return Err(std::mem::take(&mut self.why_not));
        };
        let pid = child.id();
        let ready = Instant::now();
        while !catches_sigint(pid) && ready.elapsed() < PERF_READY {
            if matches!(child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        // SAFETY: signalling our own child by PID, not yet waited for.
        unsafe { libc::kill(pid as i32, libc::SIGINT) };
        let told = Instant::now();
        let mut killed = false;
        while !matches!(child.try_wait(), Ok(Some(_))) {
            if told.elapsed() > PERF_STOPS {
                let _ = child.kill();
                killed = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let status = child.wait().ok();
        let mut text = String::new();
        if let Some(mut err) = child.stderr.take() {
            let _ = err.read_to_string(&mut text);
        }
        if killed {
            return Err(format!(
                "perf did not stop within {} s of SIGINT and was killed",
                PERF_STOPS.as_secs()
            ));
        }
        self.events
            .iter()
            .map(|event| {
                text.lines()
                    .find(|l| l.contains(event))
                    .and_then(|l| l.split(',').next())
                    .and_then(|n| n.trim().parse().ok())
                    .ok_or_else(|| match status {
                        Some(s) if s.signal() == Some(libc::SIGINT) => format!(
                            "perf had not begun counting {event} when the window closed (it was not ready within {} s)",
                            PERF_READY.as_secs()
                        ),
                        _ => format!("perf counted no {event}: {}", text.trim()),
                    })
            })
            .collect()
    }
}

/// How long perf is given to start, and to stop once told.
const PERF_READY: Duration = Duration::from_secs(3);
const PERF_STOPS: Duration = Duration::from_secs(5);

/// Whether process `pid` is perf (it has exec'd: before exec the child
/// carries its parent's name and handlers) with a handler for SIGINT
/// (SigCgt in its status).
fn catches_sigint(pid: u32) -> bool {
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return false;
    };
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
    };
    field("Name:") == Some("perf")
        && field("SigCgt:")
            .and_then(|mask| u64::from_str_radix(mask, 16).ok())
            .is_some_and(|mask| mask & (1 << (libc::SIGINT - 1)) != 0)
}

impl Drop for PerfCount {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The machine's busy CPUs (CPU-seconds per second, iowait not counted)
/// over one second: what it does without the experiment, to subtract.
pub fn idle_busy_cpus() -> Result<f64, ProcStatError> {
    let start = (Instant::now(), StatSnapshot::read()?);
    std::thread::sleep(Duration::from_secs(1));
    let end = StatSnapshot::read()?;
    let cpu = system_cpu(&start.1, &end, start.0.elapsed().as_secs_f64());
    Ok((100.0 - cpu.idle_pct - cpu.iowait_pct) / 100.0 * end.per_cpu.len().max(1) as f64)
}

/// Packets (in, out) at `interface`, or TCP segments in this namespace.
fn packets(interface: Option<&str>) -> (u64, u64) {
    match interface {
        Some(name) => {
            InterfaceCounters::read(name).map_or((0, 0), |c| (c.rx_packets, c.tx_packets))
        }
        None => {
            let c = Counters::read();
            (c.get("Tcp.InSegs"), c.get("Tcp.OutSegs"))
        }
    }
}

/// r and b summed over the samples, the sample count, and the sampling
/// thread's own CPU time.
type Procs = (u64, u64, u64, u64);

/// A window in progress.
pub struct Sampler {
    start: Instant,
    stat: StatSnapshot,
    packets: (u64, u64),
    perf: PerfCount,
    tree_perf: PerfCount,
    tree: TreeTasks,
    root: u32,
    interface: Option<String>,
    stop: Arc<AtomicBool>,
    procs: JoinHandle<Procs>,
}

impl Sampler {
    /// Opens a window over the tree rooted at `root` (this process when it
    /// is the server's root), counting packets at `interface`.
    pub fn start(root: u32, interface: Option<String>) -> Result<Sampler, ProcStatError> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let procs = std::thread::Builder::new()
            .name("window-sampler".into())
            .spawn(move || {
                // SAFETY: gettid has no failure mode.
                let _ = tid_tx.send(unsafe { libc::gettid() } as u32);
                let mut procs = (0, 0, 0, 0);
                let own0 = thread_cpu_ns();
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(SAMPLE_EVERY);
                    if let Ok(s) = StatSnapshot::read() {
                        // The sampler itself is running while it reads: not counted.
                        procs.0 += s.procs_running.saturating_sub(1);
                        procs.1 += s.procs_blocked;
                        procs.2 += 1;
                    }
                }
                procs.3 = thread_cpu_ns().saturating_sub(own0);
                procs
            })?;
        // The server's tasks: the tree less this (control) thread and the sampler.
        // SAFETY: gettid has no failure mode.
        let mut own = vec![unsafe { libc::gettid() } as u32];
        own.extend(tid_rx.recv_timeout(Duration::from_secs(5)).ok());
        let tree = TreeTasks::read(root);
        let tids: Vec<u32> = tree.tids().filter(|t| !own.contains(t)).collect();
        Ok(Sampler {
            start: Instant::now(),
            stat: StatSnapshot::read()?,
            packets: packets(interface.as_deref()),
            perf: PerfCount::start(&["-a"], &["raw_syscalls:sys_enter"]),
            tree_perf: if tids.is_empty() {
                PerfCount::none("the server's tree had no task to count")
            } else {
                let list: Vec<String> = tids.iter().map(u32::to_string).collect();
                PerfCount::start(
                    &["-t", &list.join(",")],
                    &["raw_syscalls:sys_enter", "context-switches"],
                )
            },
            tree,
            root,
            interface,
            stop,
            procs,
        })
    }

    /// Closes the window.
    pub fn finish(self) -> Result<HostWindow, ProcStatError> {
        let (stat, packets1, tree) = (
            StatSnapshot::read()?,
            packets(self.interface.as_deref()),
            TreeTasks::read(self.root),
        );
        let seconds = self.start.elapsed().as_secs_f64();
        self.stop.store(true, Ordering::Relaxed);
        let procs = self.procs.join().unwrap_or_default();
        let (syscalls, syscalls_source) = match self.perf.stop() {
            Ok(n) => (
                Some(n[0]),
                "perf stat -a -e raw_syscalls:sys_enter (every process)".to_string(),
            ),
            Err(why) => (None, why),
        };
        let (tree_counts, tree_counts_source) = match self.tree_perf.stop() {
            Ok(n) => (
                Some(TreeCounts {
                    syscalls: n[0],
                    context_switches: n[1],
                }),
                "perf stat -t (the server's tasks and what they started)".to_string(),
            ),
            Err(why) => (None, why),
        };
        Ok(HostWindow {
            seconds,
            cpu: system_cpu(&self.stat, &stat, seconds),
            cpus: stat.per_cpu.len().max(1),
            procs_running_mean: procs.0 as f64 / procs.2.max(1) as f64,
            procs_blocked_mean: procs.1 as f64 / procs.2.max(1) as f64,
            syscalls,
            syscalls_source,
            packets_in: packets1.0.saturating_sub(self.packets.0),
            packets_out: packets1.1.saturating_sub(self.packets.1),
            tree_ns: tree.since(&self.tree).saturating_sub(procs.3),
            waits: None,
            tree_counts,
            tree_counts_source,
            pty_transfers: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_counts_its_own_tree_without_the_sampler() {
        let sampler = Sampler::start(std::process::id(), None).unwrap();
        // Burn 50 ms of this thread's CPU inside the window (CPU time, not
        // wall time: on a loaded machine the thread may wait to run).
        let burn = thread_cpu_ns();
        let mut x = 0u64;
        while thread_cpu_ns() - burn < 50_000_000 {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
        }
        std::thread::sleep(Duration::from_millis(250));
        let window = sampler.finish().unwrap();
        assert!(window.seconds >= 0.3, "{window:?}");
        assert!(window.tree_ns >= 40_000_000, "{window:?}");
        assert!(window.cpus >= 1);
        assert!(window.cpu.idle_pct <= 100.0);
        assert!(
            window.syscalls.is_some() || !window.syscalls_source.is_empty(),
            "a count, or why none"
        );
    }

    #[test]
    fn perf_stopped_as_soon_as_it_starts_still_counts() {
        // A window closed within perf's start: stop waits for perf's SIGINT
        // handler, so the SIGINT is neither lost (perf counting for ever)
        // nor fatal (perf dying uncounted).
        if Command::new("perf").arg("--version").output().is_err() {
            panic!("perf is missing (apt-get install linux-perf)");
        }
        for _ in 0..3 {
            let perf = PerfCount::start(&["-a"], &["context-switches"]);
            let counts = perf.stop();
            assert!(counts.is_ok(), "{counts:?}");
        }
    }
}
