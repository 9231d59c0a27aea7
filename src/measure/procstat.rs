//! System-wide CPU accounting from `/proc/stat`, as `vmstat` reports it.
//!
//! The kernel keeps, per CPU, the clock ticks (USER_HZ, normally 100/s) spent
//! in user, nice, system, idle, iowait, irq, softirq and steal. Two snapshots
//! a run apart give the split of the whole machine's time over the run, and
//! the busiest single CPU, so that one saturated core on a many-core host is
//! not averaged away. Blind spots: the counters are sampled at tick
//! granularity (10 ms), so runs shorter than a second are coarse; in a VM the
//! host's own interrupt and vhost work is invisible except as `steal`.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Ticks spent in each state by one CPU (or the sum of all, for `cpu`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTicks {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
}

impl CpuTicks {
    fn total(&self) -> u64 {
        self.user
            + self.nice
            + self.system
            + self.idle
            + self.iowait
            + self.irq
            + self.softirq
            + self.steal
    }

    fn since(&self, e: &CpuTicks) -> CpuTicks {
        CpuTicks {
            user: self.user.saturating_sub(e.user),
            nice: self.nice.saturating_sub(e.nice),
            system: self.system.saturating_sub(e.system),
            idle: self.idle.saturating_sub(e.idle),
            iowait: self.iowait.saturating_sub(e.iowait),
            irq: self.irq.saturating_sub(e.irq),
            softirq: self.softirq.saturating_sub(e.softirq),
            steal: self.steal.saturating_sub(e.steal),
        }
    }
}

/// One reading of `/proc/stat`: the aggregate line and one line per CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatSnapshot {
    pub all: CpuTicks,
    pub per_cpu: Vec<CpuTicks>,
    /// The CPU number of each of `per_cpu` (`cpuN`; offline CPUs have no line).
    pub cpu_ids: Vec<u32>,
    pub context_switches: u64,
    pub interrupts: u64,
    /// Runnable tasks at the moment of reading (vmstat's `r`).
    pub procs_running: u64,
    /// Tasks blocked on I/O at the moment of reading (vmstat's `b`).
    pub procs_blocked: u64,
}

#[derive(Debug, Error)]
pub enum ProcStatError {
    #[error("reading /proc/stat: {0}")]
    Io(#[from] std::io::Error),
    #[error("/proc/stat line \"{0}\" is not in the expected format")]
    Format(String),
}

impl StatSnapshot {
    /// Reads `/proc/stat` now.
    pub fn read() -> Result<Self, ProcStatError> {
        Self::parse(&std::fs::read_to_string("/proc/stat")?)
    }

    /// Parses the text of `/proc/stat`.
    pub fn parse(text: &str) -> Result<Self, ProcStatError> {
        let mut all = None;
        let mut per_cpu = Vec::new();
        let mut cpu_ids = Vec::new();
        let mut context_switches = 0;
        let mut interrupts = 0;
        let (mut procs_running, mut procs_blocked) = (0, 0);
        for line in text.lines() {
            let mut fields = line.split_ascii_whitespace();
            let Some(name) = fields.next() else { continue };
            if let Some(number) = name.strip_prefix("cpu") {
                let values: Vec<u64> = fields
                    .map(|f| f.parse::<u64>())
                    .collect::<Result<_, _>>()
                    .map_err(|_| ProcStatError::Format(line.to_string()))?;
                if values.len() < 4 {
                    return Err(ProcStatError::Format(line.to_string()));
                }
                let at = |i: usize| values.get(i).copied().unwrap_or(0);
                let ticks = CpuTicks {
                    user: at(0),
                    nice: at(1),
                    system: at(2),
                    idle: at(3),
                    iowait: at(4),
                    irq: at(5),
                    softirq: at(6),
                    steal: at(7),
                };
                if name == "cpu" {
                    all = Some(ticks);
                } else {
                    let id = number
                        .parse::<u32>()
                        .map_err(|_| ProcStatError::Format(line.to_string()))?;
                    per_cpu.push(ticks);
                    cpu_ids.push(id);
                }
            } else if name == "ctxt" {
                context_switches = fields.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            } else if name == "intr" {
                interrupts = fields.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            } else if name == "procs_running" {
                procs_running = fields.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            } else if name == "procs_blocked" {
                procs_blocked = fields.next().and_then(|v| v.parse().ok()).unwrap_or(0);
            }
        }
        let all = all.ok_or_else(|| ProcStatError::Format("no aggregate cpu line".into()))?;
        Ok(StatSnapshot {
            all,
            per_cpu,
            cpu_ids,
            context_switches,
            interrupts,
            procs_running,
            procs_blocked,
        })
    }
}

/// The machine's CPU split over an interval, in percent of all CPUs' time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SystemCpu {
    pub user_pct: f64,
    pub system_pct: f64,
    pub idle_pct: f64,
    pub iowait_pct: f64,
    pub irq_pct: f64,
    pub softirq_pct: f64,
    pub steal_pct: f64,
    /// Index of the CPU that was least idle over the interval.
    pub busiest_cpu: usize,
    /// That CPU's non-idle percentage (100 = saturated).
    pub busiest_cpu_pct: f64,
    /// Context switches per second, machine-wide.
    pub context_switches_per_s: f64,
    /// Interrupts per second, machine-wide.
    pub interrupts_per_s: f64,
    /// Ticks observed in the aggregate line: small values mean a coarse sample.
    pub ticks: u64,
}

/// One CPU's time over an interval, as shares of it: what a process's own
/// accounting cannot show is the interrupt and softirq work done on its
/// core while it was not the one running (charged to no process).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CoreLoad {
    pub cpu: u32,
    /// Not idle (nor waiting for I/O): every task's time, interrupts,
    /// softirqs and the hypervisor's steal.
    pub busy_share: f64,
    pub softirq_share: f64,
    pub irq_share: f64,
    /// Ticks (USER_HZ, usually 100 a second) the shares are of: under
    /// about 100, each is coarse.
    pub ticks: u64,
}

/// CPU `cpu`'s load between two snapshots (None if either lacks it).
pub fn core_load(before: &StatSnapshot, after: &StatSnapshot, cpu: u32) -> Option<CoreLoad> {
    let at = |s: &StatSnapshot| {
        let i = s.cpu_ids.iter().position(|&id| id == cpu)?;
        s.per_cpu.get(i).copied()
    };
    let d = at(after)?.since(&at(before)?);
    let total = d.total().max(1) as f64;
    Some(CoreLoad {
        cpu,
        busy_share: (d.total() - d.idle - d.iowait) as f64 / total,
        softirq_share: d.softirq as f64 / total,
        irq_share: d.irq as f64 / total,
        ticks: d.total(),
    })
}

/// The CPU split between two snapshots taken `seconds` apart.
pub fn system_cpu(before: &StatSnapshot, after: &StatSnapshot, seconds: f64) -> SystemCpu {
    let d = after.all.since(&before.all);
    let total = d.total().max(1) as f64;
    let pct = |v: u64| 100.0 * v as f64 / total;
    let (busiest_cpu, busiest_cpu_pct) = after
        .per_cpu
        .iter()
        .zip(before.per_cpu.iter())
        .map(|(a, b)| {
            let d = a.since(b);
            let busy = d.total() - d.idle - d.iowait;
            100.0 * busy as f64 / d.total().max(1) as f64
        })
        .enumerate()
        .fold(
            (0, 0.0),
            |best, (i, p)| if p > best.1 { (i, p) } else { best },
        );
    let per_s = |v: u64| {
        if seconds > 0.0 {
            v as f64 / seconds
        } else {
            0.0
        }
    };
    SystemCpu {
        user_pct: pct(d.user + d.nice),
        system_pct: pct(d.system),
        idle_pct: pct(d.idle),
        iowait_pct: pct(d.iowait),
        irq_pct: pct(d.irq),
        softirq_pct: pct(d.softirq),
        steal_pct: pct(d.steal),
        busiest_cpu,
        busiest_cpu_pct,
        context_switches_per_s: per_s(
            after
                .context_switches
                .saturating_sub(before.context_switches),
        ),
        interrupts_per_s: per_s(after.interrupts.saturating_sub(before.interrupts)),
        ticks: d.total(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "cpu  100 0 50 1000 0 0 0 0 0 0\n\
cpu0 50 0 25 500 0 0 0 0 0 0\n\
cpu1 50 0 25 500 0 0 0 0 0 0\n\
intr 1000 0 0\nctxt 5000\nbtime 1\n";
    const AFTER: &str = "cpu  190 0 100 1050 0 0 10 0 0 0\n\
cpu0 140 0 75 500 0 0 10 0 0 0\n\
cpu1 50 0 25 550 0 0 0 0 0 0\n\
intr 3000 0 0\nctxt 7000\nbtime 1\n";

    #[test]
    fn split_and_busiest_cpu() {
        let b = StatSnapshot::parse(BEFORE).unwrap();
        let a = StatSnapshot::parse(AFTER).unwrap();
        let cpu = system_cpu(&b, &a, 2.0);
        // 90 user + 50 system + 50 idle + 10 softirq = 200 ticks.
        assert_eq!(cpu.ticks, 200);
        assert!((cpu.user_pct - 45.0).abs() < 1e-9);
        assert!((cpu.system_pct - 25.0).abs() < 1e-9);
        assert!((cpu.idle_pct - 25.0).abs() < 1e-9);
        assert!((cpu.softirq_pct - 5.0).abs() < 1e-9);
        assert_eq!(cpu.busiest_cpu, 0);
        assert!((cpu.busiest_cpu_pct - 100.0).abs() < 1e-9);
        assert!((cpu.context_switches_per_s - 1000.0).abs() < 1e-9);
        assert!((cpu.interrupts_per_s - 1000.0).abs() < 1e-9);
    }

    #[test]
    fn one_cores_load_by_its_number() {
        let b = StatSnapshot::parse(BEFORE).unwrap();
        let a = StatSnapshot::parse(AFTER).unwrap();
        // cpu0: 90 user + 50 system + 10 softirq, no idle.
        let core = core_load(&b, &a, 0).unwrap();
        assert_eq!(core.ticks, 150);
        assert!((core.busy_share - 1.0).abs() < 1e-9);
        assert!((core.softirq_share - 10.0 / 150.0).abs() < 1e-9);
        let idle = core_load(&b, &a, 1).unwrap();
        assert!(idle.busy_share.abs() < 1e-9);
        assert!(core_load(&b, &a, 7).is_none());
        // An offline CPU leaves a gap in the numbering.
        let gap = StatSnapshot::parse("cpu 1 0 0 1\ncpu0 1 0 0 1\ncpu2 0 0 0 1\n").unwrap();
        assert_eq!(gap.cpu_ids, vec![0, 2]);
    }

    #[test]
    fn reads_this_machine() {
        let s = StatSnapshot::read().unwrap();
        assert!(!s.per_cpu.is_empty());
        assert!(s.all.total() > 0);
    }

    #[test]
    fn rejects_garbage() {
        assert!(StatSnapshot::parse("cpu x y z\n").is_err());
        assert!(StatSnapshot::parse("ctxt 5\n").is_err());
    }
}
