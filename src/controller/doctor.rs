//! `netlab doctor`: what this host can and cannot do for netlab, one
//! capability at a time, each with the fix when it is missing. Every check
//! tries the real thing where it is cheap and harmless (a scratch pair of
//! namespaces for the queueing disciplines, removed at once; opening
//! `/dev/net/tun`; an io_uring of two entries; a quarter-second of perf
//! sampling) rather than guessing from version numbers.

use crate::measure::host::on_path;
use crate::measure::limits::HostLimits;
use serde::Serialize;

/// Whether a capability is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Present and usable.
    Ok,
    /// Present, with a limit worth knowing.
    Limited,
    /// Absent: what needs it is skipped or refused.
    Missing,
}

/// One line of the doctor's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Capability {
    pub name: String,
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What uses it, so a reader knows what a gap costs.
    pub used_by: &'static str,
    /// How to get it, when it is not fully there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Capability {
    fn new(name: &str, used_by: &'static str, found: Result<String, (String, String)>) -> Self {
        match found {
            Ok(detail) => Capability {
                name: name.into(),
                status: Status::Ok,
                detail,
                used_by,
                fix: None,
            },
            Err((detail, fix)) => Capability {
                name: name.into(),
                status: Status::Missing,
                detail,
                used_by,
                fix: Some(fix),
            },
        }
    }

    fn limited(mut self, fix: String) -> Self {
        self.status = Status::Limited;
        self.fix = Some(fix);
        self
    }
}

/// The programs netlab runs beside its own code, each with its Debian
/// package and what needs it.
pub const PEERS: [(&str, &str, &str); 16] = [
    (
        "iperf3",
        "iperf3",
        "the comparison with iperf3 (scripts/bench-vs-peers)",
    ),
    ("telnet", "telnet", "interop with the Debian TELNET client"),
    (
        "rlogin",
        "rsh-redone-client",
        "interop with the Debian rlogin client",
    ),
    (
        "/usr/sbin/telnetd",
        "inetutils-telnetd",
        "login and output --relay telnetd",
    ),
    (
        "socat",
        "socat",
        "login and output --relay telnetd (inetd's part)",
    ),
    (
        "/usr/sbin/sshd",
        "openssh-server",
        "login and output --relay sshd",
    ),
    (
        "ssh",
        "openssh-client",
        "login and output --relay sshd (the clients)",
    ),
    ("rpcbind", "rpcbind", "rpc serve --register"),
    ("rpcinfo", "rpcbind", "interop with rpcinfo"),
    ("sockperf", "sockperf", "latency comparisons with sockperf"),
    (
        "qperf",
        "qperf",
        "latency and bandwidth comparisons with qperf",
    ),
    (
        "/usr/bin/chromium",
        "chromium",
        "the report's rendering test (PNG of the page)",
    ),
    ("ip", "iproute2", "--placement netns and every testbed"),
    ("tc", "iproute2", "shaped links (tbf, netem)"),
    ("ethtool", "ethtool", "ablate's offload factors"),
    (
        "tcpdump",
        "tcpdump",
        "benchmarks' captures (netlab's own --capture needs none)",
    ),
];

fn program(name: &str) -> bool {
    if name.starts_with('/') {
        std::path::Path::new(name).is_file()
    } else {
        on_path(name)
    }
}

fn sysctl(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Every check, in the order the report prints them.
pub fn examine() -> Vec<Capability> {
    let limits = HostLimits::read();
    let net_admin = crate::testbed::netns::has_net_admin();
    let mut found = vec![privileges(&limits, net_admin)];
    found.extend(namespaces_and_qdiscs(net_admin));
    found.extend(kernel_features());
    found.extend(load_limits(&limits));
    found.extend(peers());
    found
}

/// Root and CAP_NET_ADMIN.
fn privileges(limits: &HostLimits, net_admin: bool) -> Capability {
    Capability::new(
        "root and CAP_NET_ADMIN",
        "namespaces, links, offloads, CPU budgets, sshd cells, --profile",
        match (limits.root, net_admin) {
            (true, true) => Ok("running as root with CAP_NET_ADMIN".into()),
            (root, admin) => Err((
                format!(
                    "{}, {}",
                    if root { "root" } else { "not root" },
                    if admin {
                        "CAP_NET_ADMIN held"
                    } else {
                        "no CAP_NET_ADMIN"
                    }
                ),
                "run netlab as root (sudo) for the netns placement and everything it builds".into(),
            )),
        },
    )
}

/// Namespaces and the qdiscs, tried on a scratch pair of namespaces.
fn namespaces_and_qdiscs(net_admin: bool) -> Vec<Capability> {
    let mut found = Vec::new();
    let qdiscs = if net_admin {
        crate::testbed::netns::probe_qdiscs().map_err(|e| e.to_string())
    } else {
        Err("needs CAP_NET_ADMIN".to_string())
    };
    found.push(Capability::new(
        "network namespaces",
        "--placement netns, ablate's link factors, the lab's 10 Mbit/s sections",
        match &qdiscs {
            Ok(_) => Ok("a pair made, joined by veth and removed".into()),
            Err(e) => Err((
                format!("could not make a pair: {e}"),
                "run as root; install iproute2 (apt-get install iproute2)".into(),
            )),
        },
    ));
    let qdisc = |name: &str, used_by, result: Option<&Result<(), String>>, fix: String| {
        Capability::new(
            name,
            used_by,
            match result {
                Some(Ok(())) => Ok("added to a scratch namespace's loopback and removed".into()),
                Some(Err(e)) => Err((format!("refused: {}", e.trim()), fix)),
                None => Err(("not tried: no namespaces".into(), fix)),
            },
        )
    };
    let q = qdiscs.as_ref().ok();
    found.push(qdisc(
        "tbf",
        "rate-limited links (every link profile with a rate)",
        q.map(|q| &q.tbf),
        "a kernel with CONFIG_NET_SCH_TBF (modprobe sch_tbf)".into(),
    ));
    found.push(qdisc(
        "netem",
        "delay, jitter and loss on veth links",
        q.map(|q| &q.netem),
        "modprobe sch_netem, or a kernel with CONFIG_NET_SCH_NETEM; meanwhile netlab's user-space emulator applies the same impairments (slower on impaired links: one wire packet at a time, about 2 Gbit/s)".into(),
    ));
    for (name, result, config) in [
        (
            "fq_codel",
            q.map(|q| &q.fq_codel),
            "CONFIG_NET_SCH_FQ_CODEL (modprobe sch_fq_codel)",
        ),
        (
            "codel",
            q.map(|q| &q.codel),
            "CONFIG_NET_SCH_CODEL (modprobe sch_codel)",
        ),
    ] {
        found.push(qdisc(
            name,
            "--queue-discipline on a veth link (the kernel's, when present)",
            result,
            format!("{config}; meanwhile netlab's emulator runs the RFC's discipline itself (--queue-discipline uses it and says so)"),
        ));
    }

    found
}

/// The kernel features the emulator, the relays, `--profile` and CPU
/// budgets use, each tried for real.
fn kernel_features() -> Vec<Capability> {
    let mut found = Vec::new();
    found.push(Capability::new(
        "TUN",
        "the wire emulator (--link-via emulator, delay/loss without netem)",
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/net/tun")
            .map(|_| "/dev/net/tun opens read-write".to_string())
            .map_err(|e| {
                (
                    format!("/dev/net/tun: {e}"),
                    "modprobe tun; as root (or with CAP_NET_ADMIN); in a container, pass /dev/net/tun in".into(),
                )
            }),
    ));

    let disabled = sysctl("/proc/sys/kernel/io_uring_disabled");
    found.push(Capability::new(
        "io_uring",
        "login and output --relay uring",
        io_uring::IoUring::new(2)
            .map(|_| {
                format!(
                    "a ring of 2 entries made{}",
                    disabled
                        .as_deref()
                        .map(|d| format!(" (kernel.io_uring_disabled = {d})"))
                        .unwrap_or_default()
                )
            })
            .map_err(|e| {
                (
                    format!("io_uring_setup: {e}"),
                    "sysctl -w kernel.io_uring_disabled=0 (2 disables it for all, 1 for users outside kernel.io_uring_group)".into(),
                )
            }),
    ));

    let paranoid = sysctl("/proc/sys/kernel/perf_event_paranoid").unwrap_or_else(|| "?".into());
    found.push(Capability::new(
        "perf events",
        "--profile (CPU by layer, flame graphs); the login test's system calls",
        super::profile::Profiling::check()
            .map(|_| {
                format!(
                    "cpu-clock sampling with kernel call chains works (perf_event_paranoid = {paranoid})"
                )
            })
            .map_err(|e| {
                (
                    format!("{e} (perf_event_paranoid = {paranoid})"),
                    "run as root, or sysctl -w kernel.perf_event_paranoid=1 and kernel.kptr_restrict=0".into(),
                )
            }),
    ));

    found.push(Capability::new(
        "cgroup CPU controller",
        "login --host-cpu (a 1989-class host), the lab's limits section",
        crate::testbed::cgroup::describe().map_err(|e| {
            (
                e.to_string(),
                "mount cgroup v2 with the cpu controller enabled (or v1's cpu hierarchy) writable; run as root".into(),
            )
        }),
    ));

    found
}

/// The limits a load can cross: ptys, descriptors, processes.
fn load_limits(limits: &HostLimits) -> Vec<Capability> {
    let mut found = Vec::new();
    let ptys = Capability::new(
        "ptys",
        "login and output (a pty per session)",
        match (limits.pty_max, limits.pty_in_use) {
            (Some(max), Some(used)) => Ok(format!(
                "kernel.pty.max {max}, {used} in use: {} free",
                max.saturating_sub(used)
            )),
            _ => Err((
                "/proc/sys/kernel/pty unreadable".into(),
                "mount devpts and /proc".into(),
            )),
        },
    );
    found.push(match limits.ptys_free() {
        Some(free) if free < 1024 => ptys.limited(format!(
            "login loads above {free} users are refused; sysctl -w kernel.pty.max=8192"
        )),
        _ => ptys,
    });

    let show = |l: Option<crate::measure::limits::Rlimit>| match l {
        Some(l) => format!(
            "soft {}, hard {}",
            l.soft.map_or("unlimited".into(), |v| v.to_string()),
            l.hard.map_or("unlimited".into(), |v| v.to_string())
        ),
        None => "unreadable".into(),
    };
    let nofile = Capability::new(
        "RLIMIT_NOFILE",
        "login loads (a single-process relay holds two to six descriptors a session)",
        Ok(show(limits.nofile)),
    );
    let hard = limits.nofile.and_then(|l| l.hard);
    found.push(match hard {
        Some(hard) if hard < 8192 => nofile.limited(format!(
            "netlab lifts the soft limit to the hard one itself; a hard limit of {hard} holds about {} users: raise nofile in /etc/security/limits.conf",
            hard.saturating_sub(64) / 6
        )),
        _ => nofile,
    });
    let nproc = Capability::new(
        "RLIMIT_NPROC",
        "login loads (the fork design forks two processes a session)",
        Ok(format!(
            "{}{}",
            show(limits.nproc),
            if limits.root {
                " (root is not held to it)"
            } else {
                ""
            }
        )),
    );
    let soft = limits.nproc.and_then(|l| l.soft);
    found.push(match soft {
        Some(soft) if !limits.root && soft < 4096 => nproc.limited(format!(
            "about {} fork-design users; ulimit -u or limits.conf (nproc)",
            soft / 2
        )),
        _ => nproc,
    });

    found
}

/// Each peer program the experiments drive.
fn peers() -> Vec<Capability> {
    let mut found = Vec::new();
    for (name, package, used_by) in PEERS {
        let short = name.rsplit('/').next().unwrap_or(name);
        found.push(Capability::new(
            short,
            used_by,
            if program(name) {
                Ok(format!("{name} found"))
            } else {
                Err((
                    format!("{name} not found"),
                    format!("apt-get install {package}"),
                ))
            },
        ));
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_capability_missing_or_limited_names_its_fix() {
        let found = examine();
        assert!(found.len() >= 11 + PEERS.len(), "{found:?}");
        for c in &found {
            assert_eq!(c.fix.is_some(), c.status != Status::Ok, "{c:?}");
            assert!(!c.detail.is_empty() && !c.used_by.is_empty(), "{c:?}");
        }
        // What this process is, it reports as it is.
        let root = found
            .iter()
            .find(|c| c.name == "root and CAP_NET_ADMIN")
            .unwrap();
        assert_eq!(
            root.status == Status::Ok,
            crate::testbed::netns::has_net_admin() && unsafe { libc::geteuid() } == 0
        );
    }
}
