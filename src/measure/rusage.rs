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
}

impl ProcessUsage {
    /// Reads the calling process's usage so far.
    pub fn now() -> Self {
        let mut raw: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `raw` is a valid, writable rusage; RUSAGE_SELF cannot fail.
        unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut raw) };
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
        }
    }

    /// User plus system CPU seconds.
    pub fn cpu_s(&self) -> f64 {
        self.user_s + self.sys_s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burning_cpu_shows_up_as_user_time() {
        let before = ProcessUsage::now();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(60) {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        let spent = ProcessUsage::now().since(&before);
        // The test harness runs other threads, but this one alone burned ~60 ms.
        assert!(spent.user_s >= 0.03, "user time {:?}", spent);
        assert!(spent.cpu_s() >= spent.user_s);
    }
}
