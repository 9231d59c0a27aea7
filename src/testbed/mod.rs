//! Where endpoints run: the `loopback` placement (both on this host over
//! 127.0.0.1) and the `netns` placement (two network namespaces joined by an
//! emulated link), with link profiles, netlab's wire emulator and the wire
//! view. See `docs/TESTBED.md`.

pub mod calibration;
pub mod capture;
pub mod cgroup;
pub mod emulator;
pub mod gso;
pub mod impair;
pub mod link;
pub mod netns;
pub mod qdisc;
pub mod queue_stage;
pub mod scratch;
pub mod segment;

/// Whether process `pid` is a live netlab process: the rule by which
/// `netlab testbed clean` tells a leftover (namespace, cgroup, sshd test
/// user) from one still in use. A zombie has no command line, and a PID
/// reused by another program has another one: both count as gone.
pub fn netlab_runs(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).contains("netlab"))
        .unwrap_or(false)
}
