//! Per-process CPU, context-switch and fault counters from `getrusage(2)`.
//!
//! Each endpoint runs in its own process, so `RUSAGE_SELF` charges it exactly
//! what it spent: user and system CPU, voluntary context switches (the process
//! blocked, e.g. waiting for the socket), involuntary ones (the scheduler took
//! the CPU away) and page faults. Blind spot: softirq work (TCP receive
//! processing on loopback, for instance) is charged to whichever process
//! happened to be running when it ran, so the split between sender and
//! receiver is approximate; the system-wide figures in [`super::procstat`]
//! catch what is charged to no process.
//!
//! Exact and sampled: the process's CPU time as a whole (`cpu_ns`,
//! `CLOCK_PROCESS_CPUTIME_ID`: every thread's run time, exited threads'
//! included) is the scheduler's own nanosecond accounting, exact for runs
//! of any length;
//! the user/system split (`user_s`, `sys_s`) is apportioned from
//! scheduler-tick samples, so it means something only over many ticks
//! ([`ProcessUsage::split_is_sampled_enough`]).

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A snapshot or a difference of the process's resource usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessUsage {
    /// User-mode CPU seconds.
    pub user_s: f64,
    /// Kernel-mode CPU seconds (system calls, and softirq work charged to us).
    pub sys_s: f64,
    /// Voluntary context switches: the process blocked.
    pub voluntary_cs: u64,
    /// Involuntary context switches: the process was preempted.
    pub involuntary_cs: u64,
    /// Minor page faults (no I/O).
    pub minor_faults: u64,
    /// Major page faults (I/O needed).
    pub major_faults: u64,
    /// CPU time of all the process's threads by the scheduler's exact
    /// accounting (older records: none).
    #[serde(default)]
    pub cpu_ns: Option<u64>,
}

/// The process's CPU time (ns): the scheduler's exact run time of all its
/// threads, those that have exited included (`CLOCK_PROCESS_CPUTIME_ID`;
/// summing the live threads' schedstat would lose an exited thread's time).
pub fn process_cpu_ns() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a writable timespec.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) } == 0;
    ok.then(|| ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// The calling thread's CPU time (ns), user and system (getrusage's
/// total is the scheduler's exact run time; only its split is sampled).
pub fn thread_cpu_ns() -> u64 {
    // SAFETY: getrusage fills the struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    ns(usage.ru_utime) + ns(usage.ru_stime)
}

/// Scheduler ticks a second assumed for the sampled split: Linux's
/// CONFIG_HZ is 100 to 1000; with 250 (a common default) 25 ticks are
/// 100 ms.
const SPLIT_MIN_CPU_S: f64 = 0.1;

impl ProcessUsage {
    /// Reads the calling process's usage so far.
    pub fn now() -> Self {
        Self::of(libc::RUSAGE_SELF, process_cpu_ns())
    }

    /// The calling thread's usage so far (`RUSAGE_THREAD`; `cpu_ns` its
    /// exact run time): one thread of a process that runs several.
    pub fn thread_now() -> Self {
        Self::of(libc::RUSAGE_THREAD, Some(thread_cpu_ns()))
    }

    fn of(who: libc::c_int, cpu_ns: Option<u64>) -> Self {
        let mut raw: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `raw` is a valid, writable rusage; RUSAGE_SELF and
        // RUSAGE_THREAD cannot fail.
        unsafe { libc::getrusage(who, &mut raw) };
        let tv = |t: libc::timeval| {
            Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000).as_secs_f64()
        };
        ProcessUsage {
            user_s: tv(raw.ru_utime),
            sys_s: tv(raw.ru_stime),
            voluntary_cs: raw.ru_nvcsw as u64,
            involuntary_cs: raw.ru_nivcsw as u64,
            minor_faults: raw.ru_minflt as u64,
            major_faults: raw.ru_majflt as u64,
            cpu_ns,
        }
    }

    /// What was spent between `earlier` and `self`.
    pub fn since(&self, earlier: &ProcessUsage) -> ProcessUsage {
        ProcessUsage {
            user_s: (self.user_s - earlier.user_s).max(0.0),
            sys_s: (self.sys_s - earlier.sys_s).max(0.0),
            voluntary_cs: self.voluntary_cs.saturating_sub(earlier.voluntary_cs),
            involuntary_cs: self.involuntary_cs.saturating_sub(earlier.involuntary_cs),
            minor_faults: self.minor_faults.saturating_sub(earlier.minor_faults),
            major_faults: self.major_faults.saturating_sub(earlier.major_faults),
            cpu_ns: match (self.cpu_ns, earlier.cpu_ns) {
                (Some(now), Some(then)) => Some(now.saturating_sub(then)),
                _ => None,
            },
        }
    }

    /// CPU seconds: the scheduler's exact figure where there is one, else
    /// user plus system.
    pub fn cpu_s(&self) -> f64 {
        self.cpu_ns
            .map_or(self.user_s + self.sys_s, |ns| ns as f64 / 1e9)
    }

    /// Whether the user/system split rests on enough scheduler ticks (at
    /// least 100 ms of CPU) to be shown.
    pub fn split_is_sampled_enough(&self) -> bool {
        self.cpu_s() >= SPLIT_MIN_CPU_S
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_burn_is_counted_exactly() {
        let before = ProcessUsage::now();
        let burn = thread_cpu_ns();
        let mut x = 0u64;
        // 3 ms of this thread's CPU: shorter than a scheduler tick at 250 Hz.
        while thread_cpu_ns() - burn < 3_000_000 {
            for _ in 0..1000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
            }
        }
        let spent = ProcessUsage::now().since(&before);
        let ns = spent.cpu_ns.expect("schedstat is readable");
        assert!(ns >= 3_000_000, "{spent:?}");
        assert_eq!(spent.cpu_s(), ns as f64 / 1e9);
        assert!(!spent.split_is_sampled_enough() || spent.cpu_s() >= 0.1);
    }

    #[test]
    fn burning_cpu_shows_up_as_user_time() {
        // Burn 60 ms of this thread's own CPU time, not of the wall clock:
        // on a busy host a wall-clock burn gets a fraction of that (a run
        // beside CPU-bound jobs got 27 ms of user time in 60 ms).
        // The thread's clock is a system call: read it every 100,000 steps
        // (about a millisecond), so the burn stays user time.
        let before = ProcessUsage::now();
        let start = thread_cpu_ns();
        let mut x = 0u64;
        while thread_cpu_ns() - start < 60_000_000 {
            for _ in 0..100_000 {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        let spent = ProcessUsage::now().since(&before);
        // The test harness runs other threads, but this one alone burned 60 ms.
        assert!(spent.user_s >= 0.03, "user time {:?}", spent);
        // The exact total and getrusage's split come from two calls a few
        // µs apart while the harness's other threads run: 1 ms of slack.
        assert!(spent.cpu_s() + 1e-3 >= spent.user_s, "{spent:?}");
    }
}
