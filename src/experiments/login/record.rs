//! The login-load experiment's cells and results as records carry them:
//! the server under test, the dialect its users speak, the load
//! generator's own account, each design's limit. Data only; `cell` and
//! `endpoint::login` run them.

use crate::endpoint::login::host::{Dialect, Target};
use crate::endpoint::login::typist::TypistReport;
use crate::endpoint::rpm::types::{LoadReport, LoadSockets};
use crate::measure::procstat::SystemCpu;
use crate::record::testbed::{EmulatorReport, LinkFacts, Placement};
use crate::testbed::cgroup::PresetBudget;
use serde::{Deserialize, Serialize};

/// Records written before the placement was recorded ran on loopback.
fn loopback() -> Placement {
    Placement::Loopback
}

/// One cell's parameters.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LoginParams {
    /// The server under load (netlab's relay design, `telnetd` or `sshd`).
    pub relay: Target,
    /// What the clients speak (older records: `telnet` or `rlogin`).
    pub protocol: Dialect,
    /// Where server and users run (older records: loopback).
    #[serde(default = "loopback")]
    pub placement: Placement,
    pub users: usize,
    pub rate: f64,
    pub poisson: bool,
    pub warmup_s: f64,
    pub duration_s: f64,
    /// The server's CPU budget, percent of one CPU (`--host-cpu`; none:
    /// the whole machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpu_pct: Option<f64>,
    /// The 1989-class host the budget stands for (`--host-cpu sun3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpu_preset: Option<PresetBudget>,
    /// `--stall-timeout`: how long no session may get an echo while
    /// keystrokes await one before the cell fails (none: the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall: Option<crate::endpoint::stall::StallBound>,
    /// `--load stream:N`: bulk streams beside the typing, and its fix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<BulkLoad>,
}

/// Bulk TCP streams from the server's end to the users' end (the echoes'
/// way) for the whole cell, through rpm's load-generating connections:
/// 000's typists on 003's queues.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BulkLoad {
    pub streams: usize,
    /// The fix this cell runs with (`LoadFix::name`; `none` without).
    pub fix: String,
    /// The load's sockets as the fix sets them.
    pub sockets: LoadSockets,
}

/// What one cell measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
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
    /// Packets per second into and out of the server's side: TCP segments
    /// on loopback (where in = out), the interface's packets on netns.
    #[serde(alias = "segments_in_per_s")]
    pub packets_in_per_s: f64,
    #[serde(alias = "segments_out_per_s")]
    pub packets_out_per_s: f64,
    /// Where the packet counts came from.
    #[serde(default)]
    pub packets_source: String,
    /// The link of a netns cell.
    #[serde(default)]
    pub link: Option<LinkFacts>,
    /// (Busy CPU time of the machine minus its idle baseline minus the
    /// generator's and its client programs') per keystroke: server,
    /// commands and kernel together, µs.
    pub host_cpu_per_keystroke_us: f64,
    /// CPU time of the server's process tree (server, sessions, commands)
    /// per keystroke, µs, from the scheduler's accounting (see [`tree_cpu_ns`]).
    /// Excludes softirq work done outside those processes.
    pub server_cpu_per_keystroke_us: f64,
    /// The server tree's CPU over the window, in % of one CPU.
    pub server_cpu_pct: f64,
    /// The machine's busy CPUs (in CPU-seconds per second) measured for a
    /// second before the cell (or its sweep), with nothing of netlab's running.
    pub baseline_busy_cpus: f64,
    pub verdict: String,
    /// What decided the verdict ("4.0% of keystrokes never echoed ...",
    /// "3 sessions failed (the first: ...)", "echo p99 120.0 ms, past
    /// 100 ms"); empty in older records.
    #[serde(default)]
    pub criterion: String,
    /// Sessions the server ended before the cell was over, by reason (from its log).
    #[serde(default)]
    pub server_endings: Vec<String>,
    /// The CPU budget as applied, or why it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpu: Option<String>,
    /// How long the budget held the server back over the cell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_throttled_s: Option<f64>,
    /// What the bulk load carried (`--load`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadReport>,
    /// The emulated link's own account (its bottleneck queue's sojourn),
    /// where the emulator carried the link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator: Option<EmulatorReport>,
    /// The server's work per keystroke (older records: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_keystroke: Option<KeystrokeCounts>,
}

/// What the server did per keystroke over the window: the 1989 login
/// model's input (`model::sunos35::PerKeystroke`), measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct KeystrokeCounts {
    /// The server's tasks' system calls and context switches (perf on the
    /// tree; None where perf could not count them).
    pub syscalls: Option<f64>,
    pub context_switches: Option<f64>,
    /// Packets into and out of the server's side (on loopback each
    /// segment is one or the other: half each).
    pub packets_in: f64,
    pub packets_out: f64,
    /// Reads from and writes into the pty master that moved bytes (None:
    /// a server that does not count them, telnetd and sshd).
    pub pty_transfers: Option<f64>,
    /// Where the counts came from, or why one is missing.
    pub source: String,
}

/// The most users one server serves with a normal verdict, as a limit
/// search found it or as its probes' records show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

/// A login record's own part: the load asked for and what the server and its users saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "experiment", rename = "login")]
pub struct LoginData {
    pub params: LoginParams,
    pub result: Option<Box<LoginResult>>,
}

/// A login record.
pub type Record = crate::record::Record<LoginData>;

/// Nothing of a login cell is read by the profile report beyond its profile.
impl crate::record::profile::Profiled for LoginData {}
