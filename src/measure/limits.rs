//! The host's resource limits that a load can cross (ptys, descriptors,
//! processes, ephemeral ports), read from `/proc` and `getrlimit(2)`, and
//! the pure check of a run's needs against them: every limit a run would
//! cross is named with its current value and how to raise it, before
//! anything starts (a login run that takes 4,095 of 4,096 ptys and then
//! hangs is what this prevents).

use serde::Serialize;

/// A soft and a hard resource limit (`None`: unlimited).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rlimit {
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

impl Rlimit {
    fn read(resource: libc::__rlimit_resource_t) -> Option<Rlimit> {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one rlimit struct.
        if unsafe { libc::getrlimit(resource, &mut limit) } != 0 {
            return None;
        }
        let finite = |v: libc::rlim_t| (v != libc::RLIM_INFINITY).then_some(v);
        Some(Rlimit {
            soft: finite(limit.rlim_cur),
            hard: finite(limit.rlim_max),
        })
    }
}

/// The limits, as read now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HostLimits {
    /// `kernel.pty.max` and the ptys open now (`kernel.pty.nr`).
    pub pty_max: Option<u64>,
    pub pty_in_use: Option<u64>,
    /// This process's RLIMIT_NOFILE (children inherit it).
    pub nofile: Option<Rlimit>,
    /// This user's RLIMIT_NPROC (not enforced for root).
    pub nproc: Option<Rlimit>,
    pub root: bool,
    /// `kernel.pid_max` and `kernel.threads-max`, and the processes now.
    pub pid_max: Option<u64>,
    pub threads_max: Option<u64>,
    pub processes_now: Option<u64>,
    /// `net.ipv4.ip_local_port_range`.
    pub ephemeral_ports: Option<(u64, u64)>,
}

fn read_number(path: &str) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

impl HostLimits {
    pub fn read() -> HostLimits {
        let ports = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
            .ok()
            .and_then(|s| {
                let mut it = s.split_whitespace().map(|n| n.parse::<u64>().ok());
                Some((it.next()??, it.next()??))
            });
        let processes_now = std::fs::read_dir("/proc").ok().map(|dir| {
            dir.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
                .count() as u64
        });
        HostLimits {
            pty_max: read_number("/proc/sys/kernel/pty/max"),
            pty_in_use: read_number("/proc/sys/kernel/pty/nr"),
            nofile: Rlimit::read(libc::RLIMIT_NOFILE),
            nproc: Rlimit::read(libc::RLIMIT_NPROC),
            // SAFETY: geteuid has no failure mode.
            root: unsafe { libc::geteuid() } == 0,
            pid_max: read_number("/proc/sys/kernel/pid_max"),
            threads_max: read_number("/proc/sys/kernel/threads-max"),
            processes_now,
            ephemeral_ports: ports,
        }
    }

    /// The ptys free now, when the kernel says.
    pub fn ptys_free(&self) -> Option<u64> {
        Some(self.pty_max?.saturating_sub(self.pty_in_use?))
    }
}

/// What a run will hold at its peak, on the host it runs on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Needs {
    /// What the run is, for the message: "login with 100000 users".
    pub what: String,
    pub ptys: u64,
    /// Descriptors the busiest single process holds.
    pub descriptors_per_process: u64,
    /// Processes the run adds.
    pub processes: u64,
    /// Connections from one address to one server: one ephemeral port each.
    pub ephemeral_ports: u64,
}

/// One limit a run would cross.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Crossed {
    pub limit: &'static str,
    pub needed: u64,
    pub available: u64,
    pub how_to_raise: String,
}

impl std::fmt::Display for Crossed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: needs {}, has {} ({})",
            self.limit, self.needed, self.available, self.how_to_raise
        )
    }
}

/// The run's needs against `have`: every limit crossed (empty: it fits).
/// A descriptor need above the soft limit but within the hard one is not
/// crossed: [`raise_nofile`] lifts the soft limit first.
pub fn check(needs: &Needs, have: &HostLimits) -> Vec<Crossed> {
    let mut crossed = Vec::new();
    if needs.ptys > 0
        && let (Some(free), Some(max)) = (have.ptys_free(), have.pty_max)
        && needs.ptys > free
    {
        crossed.push(Crossed {
            limit: "ptys",
            needed: needs.ptys,
            available: free,
            how_to_raise: format!(
                "kernel.pty.max is {max}, {} in use; raise it with `sysctl -w kernel.pty.max={}`",
                have.pty_in_use.unwrap_or(0),
                (have.pty_in_use.unwrap_or(0) + needs.ptys).next_power_of_two()
            ),
        });
    }
    if let Some(hard) = have.nofile.and_then(|l| l.hard)
        && needs.descriptors_per_process > hard
    {
        crossed.push(Crossed {
            limit: "descriptors per process (RLIMIT_NOFILE)",
            needed: needs.descriptors_per_process,
            available: hard,
            how_to_raise: format!(
                "the hard limit is {hard}; raise it in /etc/security/limits.conf (nofile) or with `prlimit --nofile={n}:{n} --pid $$` as root, then start a new shell",
                n = needs.descriptors_per_process
            ),
        });
    }
    // Processes count against the user's limit and the system's, each
    // beside those running now.
    let now = have.processes_now.unwrap_or(0);
    let mut processes = |limit, cap: u64, how_to_raise| {
        if needs.processes + now > cap {
            crossed.push(Crossed {
                limit,
                needed: needs.processes,
                available: cap.saturating_sub(now),
                how_to_raise,
            });
        }
    };
    if !have.root
        && let Some(soft) = have.nproc.and_then(|l| l.soft)
    {
        processes(
            "processes of this user (RLIMIT_NPROC)",
            soft,
            format!(
                "the limit is {soft}; `ulimit -u {}` (up to the hard limit) or limits.conf (nproc)",
                needs.processes + now
            ),
        );
    }
    let system_max = match (have.pid_max, have.threads_max) {
        (Some(p), Some(t)) => Some(p.min(t)),
        (p, t) => p.or(t),
    };
    if let Some(max) = system_max {
        processes(
            "processes on the system (kernel.pid_max, kernel.threads-max)",
            max,
            format!(
                "{max} at most, {now} running; raise kernel.pid_max and kernel.threads-max with sysctl"
            ),
        );
    }
    if let Some((lo, hi)) = have.ephemeral_ports {
        let ports = hi.saturating_sub(lo) + 1;
        if needs.ephemeral_ports > ports {
            crossed.push(Crossed {
                limit: "ephemeral ports (net.ipv4.ip_local_port_range)",
                needed: needs.ephemeral_ports,
                available: ports,
                how_to_raise: format!(
                    "the range is {lo}-{hi}; widen it with `sysctl -w net.ipv4.ip_local_port_range=\"1024 65535\"`"
                ),
            });
        }
    }
    crossed
}

/// A run refused because of [`check`]'s findings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} would cross this host's limits, so nothing was started:\n{}", crossed.iter().map(|c| format!("  {c}")).collect::<Vec<_>>().join("\n"))]
pub struct LimitsCrossed {
    pub what: String,
    pub crossed: Vec<Crossed>,
}

/// [`check`] against this host's limits now, as an error when any is
/// crossed; otherwise lifts the soft descriptor limit to what is needed.
pub fn refuse_or_prepare(needs: Needs) -> Result<(), LimitsCrossed> {
    let crossed = check(&needs, &HostLimits::read());
    if !crossed.is_empty() {
        return Err(LimitsCrossed {
            what: needs.what,
            crossed,
        });
    }
    // Within the hard limit by the check; should it fail anyway, the run
    // meets EMFILE and its cells record it.
    let _ = raise_nofile(needs.descriptors_per_process);
    Ok(())
}

/// Lifts this process's soft RLIMIT_NOFILE to `want` (at most the hard
/// limit) so the run and the children it starts can hold that many
/// descriptors. Returns the soft limit now in force.
pub fn raise_nofile(want: u64) -> std::io::Result<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write one rlimit struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if limit.rlim_cur == libc::RLIM_INFINITY || limit.rlim_cur >= want {
            return Ok(limit.rlim_cur);
        }
        limit.rlim_cur = want.min(limit.rlim_max);
        if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(limit.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn this_vm() -> HostLimits {
        HostLimits {
            pty_max: Some(4096),
            pty_in_use: Some(1),
            nofile: Some(Rlimit {
                soft: Some(1024),
                hard: Some(20000),
            }),
            nproc: Some(Rlimit {
                soft: Some(96365),
                hard: Some(96365),
            }),
            root: true,
            pid_max: Some(32768),
            threads_max: Some(192731),
            processes_now: Some(150),
            ephemeral_ports: Some((32768, 60999)),
        }
    }

    #[test]
    fn a_hundred_thousand_users_cross_every_limit_named_with_its_value() {
        let needs = Needs {
            what: "login with 100000 users".into(),
            ptys: 100_000,
            descriptors_per_process: 200_016,
            processes: 100_000,
            ephemeral_ports: 100_000,
        };
        let crossed = check(&needs, &this_vm());
        let limits: Vec<&str> = crossed.iter().map(|c| c.limit).collect();
        assert_eq!(
            limits,
            [
                "ptys",
                "descriptors per process (RLIMIT_NOFILE)",
                "processes on the system (kernel.pid_max, kernel.threads-max)",
                "ephemeral ports (net.ipv4.ip_local_port_range)"
            ],
            "root is not held to RLIMIT_NPROC"
        );
        assert_eq!(crossed[0].available, 4095);
        assert!(crossed[0].how_to_raise.contains("kernel.pty.max is 4096"));
        assert!(crossed[0].to_string().contains("needs 100000, has 4095"));
        assert_eq!(crossed[3].available, 28232);
    }

    #[test]
    fn what_fits_crosses_nothing_and_a_soft_descriptor_limit_is_not_a_wall() {
        let needs = Needs {
            what: "login with 48 users".into(),
            ptys: 48,
            descriptors_per_process: 5000,
            processes: 96,
            ephemeral_ports: 48,
        };
        assert_eq!(check(&needs, &this_vm()), []);
        let user = HostLimits {
            root: false,
            nproc: Some(Rlimit {
                soft: Some(200),
                hard: Some(200),
            }),
            ..this_vm()
        };
        let crossed = check(&needs, &user);
        assert_eq!(crossed.len(), 1);
        assert_eq!(crossed[0].limit, "processes of this user (RLIMIT_NPROC)");
        assert_eq!(crossed[0].available, 50);
    }

    #[test]
    fn this_hosts_limits_are_read() {
        let have = HostLimits::read();
        assert!(have.nofile.is_some());
        assert!(have.processes_now.unwrap_or(0) > 0);
    }
}
