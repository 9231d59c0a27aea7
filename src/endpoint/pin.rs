//! Pinning an endpoint to one CPU.
//!
//! On a small machine the scheduler decides, call by call, whether the two
//! ends of a round trip share a CPU (a wake-up is a context switch) or not
//! (a wake-up is an inter-processor interrupt to a CPU that may be idle:
//! on a VM, an exit from `HLT` on the host). On this project's 2-vCPU guest
//! that choice moves a loopback round trip between about 12 and 70 µs, far
//! more than anything in the protocol. Pinning makes it a stated parameter
//! of the run instead of the scheduler's.
//!
//! Affinity is per thread, and threads inherit it from the thread that
//! creates them: a server pins each of its top-level threads, and the
//! threads they start follow.

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum PinError {
    #[error("\"{0}\": give two CPU numbers, the client's and the server's (e.g. 0,1)")]
    Pair(String),
    #[error("CPU {cpu} is not one this process may run on (allowed: {allowed})")]
    NotAllowed { cpu: usize, allowed: String },
    #[error("pinning to CPU {cpu}: {source}")]
    Os { cpu: usize, source: nix::Error },
}

/// The CPUs this process may run on, in order.
pub fn allowed_cpus() -> Vec<usize> {
    match sched_getaffinity(Pid::from_raw(0)) {
        Ok(set) => (0..CpuSet::count())
            .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// `0-1,4`-style text for a list of CPUs.
fn describe(cpus: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        while i + 1 < cpus.len() && cpus[i + 1] == cpus[i] + 1 {
            i += 1;
        }
        parts.push(if cpus[i] == start {
            start.to_string()
        } else {
            format!("{start}-{}", cpus[i])
        });
        i += 1;
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(",")
    }
}

/// Checks that `cpu` is one this process may run on.
pub fn check(cpu: usize) -> Result<(), PinError> {
    let allowed = allowed_cpus();
    if allowed.contains(&cpu) {
        Ok(())
    } else {
        Err(PinError::NotAllowed {
            cpu,
            allowed: describe(&allowed),
        })
    }
}

/// `CLIENT,SERVER`: two CPUs this process may run on (`netlab rpc --pin`).
pub fn parse_pair(text: &str) -> Result<(usize, usize), PinError> {
    let usage = || PinError::Pair(text.to_string());
    let (client, server) = text.split_once(',').ok_or_else(usage)?;
    let cpu = |s: &str| s.trim().parse::<usize>().map_err(|_| usage());
    let (client, server) = (cpu(client)?, cpu(server)?);
    check(client)?;
    check(server)?;
    Ok((client, server))
}

/// Pins the calling thread (and the threads it starts from now on) to `cpu`.
pub fn pin_current_thread(cpu: usize) -> Result<(), PinError> {
    check(cpu)?;
    let mut set = CpuSet::new();
    set.set(cpu)
        .map_err(|source| PinError::Os { cpu, source })?;
    sched_setaffinity(Pid::from_raw(0), &set).map_err(|source| PinError::Os { cpu, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_runs_of_cpus() {
        assert_eq!(describe(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(describe(&[3]), "3");
        assert_eq!(describe(&[]), "none");
    }

    #[test]
    fn a_pinned_thread_runs_where_it_was_pinned_and_its_children_follow() {
        let allowed = allowed_cpus();
        let last = *allowed.last().expect("some CPU is allowed");
        std::thread::spawn(move || {
            pin_current_thread(last).unwrap();
            assert_eq!(nix::sched::sched_getcpu().unwrap(), last);
            let child = std::thread::spawn(allowed_cpus).join().unwrap();
            assert_eq!(child, vec![last]);
        })
        .join()
        .unwrap();
        // Only the pinned thread and its children changed.
        assert_eq!(allowed_cpus(), allowed);
    }

    #[test]
    fn a_cpu_outside_the_allowed_set_is_refused_by_name() {
        let err = pin_current_thread(100_000).unwrap_err().to_string();
        assert!(err.contains("CPU 100000 is not one"), "{err}");
    }

    #[test]
    fn a_pair_is_two_allowed_cpus() {
        let first = allowed_cpus()[0];
        assert_eq!(
            parse_pair(&format!("{first}, {first}")).unwrap(),
            (first, first)
        );
        for bad in ["0", "0,x", ",", ""] {
            assert!(matches!(parse_pair(bad), Err(PinError::Pair(_))), "{bad}");
        }
        assert!(matches!(
            parse_pair(&format!("{first},100000")),
            Err(PinError::NotAllowed { cpu: 100000, .. })
        ));
    }
}
