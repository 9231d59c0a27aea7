//! The fixed CPU cost of one small TCP packet on this host, measured: a
//! one-byte ping-pong between two threads over loopback with TCP_NODELAY,
//! the process's exact CPU time (`CLOCK_PROCESS_CPUTIME_ID`) divided by the
//! packets. Each packet pays what a keystroke through a login server pays:
//! a send and a receive system call, TCP output and input, the loopback
//! device and its softirq, and the wake-up of a sleeping thread. It is the
//! figure a 1989 host's per-packet cost is scaled against (`--host-cpu
//! sun3`); docs/MEASUREMENT.md says where it is blind (work the kernel
//! does on behalf of the process in other contexts is not counted).
//!
//! The two ends run on two CPUs (the caller's and the next it may use),
//! so each wake-up crosses CPUs, as a keystroke's does between the typing
//! users and a budgeted server: an inter-processor interrupt and, on a
//! VM, the host's cost of waking an idle vCPU. Left to the scheduler, the
//! ends share a CPU in some batches and not in others, and the median
//! moved by ±12% between runs (27.8-35.5 µs, five runs of 100 batches on
//! this project's 2-vCPU guest, 2026-12-02); pinned apart, ±3.5%
//! (29.9-32.1 µs). Pinned together the cost is a quarter of that (7-9 µs:
//! no idle vCPU to wake), which is not what the server pays. With one CPU
//! allowed, both run on it, and the record says so. The caller's own
//! affinity is restored afterwards.

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;
use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};

/// One calibration: the median batch and the spread of the batches.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PacketCost {
    /// CPU per packet, µs: the median of the batches.
    pub us_per_packet: f64,
    /// The cheapest and the dearest batch, µs per packet.
    pub min_us: f64,
    pub max_us: f64,
    /// Packets measured over all batches.
    pub packets: u64,
    /// Every batch's CPU per packet, µs, in the order measured (older
    /// calibrations: none kept).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub batches_us: Vec<f64>,
    /// The CPUs the two ends ran on (None: left to the scheduler, as
    /// before 2026-12-02, or the pinning was refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<[usize; 2]>,
}

/// How long a calibration runs: `batches` of `round_trips` each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Calibration {
    pub batches: usize,
    pub round_trips: u32,
}

impl Calibration {
    /// Before a run: 80 batches of 500 round trips, about 40 ms each here
    /// (3 s in all; five runs 29.8-31.6 µs, where 40 batches of 1,000 gave
    /// 27.3-31.2). Eighty batches give the median a 95% order-statistic
    /// interval between the 32nd and the 49th batch.
    pub const BEFORE_A_RUN: Calibration = Calibration {
        batches: 80,
        round_trips: 500,
    };
    /// `netlab calibrate`: 400 batches (about 15 s), a calibration to store.
    pub const STORED: Calibration = Calibration {
        batches: 400,
        round_trips: 500,
    };
}

/// Measures [`PacketCost`] on 127.0.0.1 (an ephemeral port, nothing else
/// touched), [`Calibration::BEFORE_A_RUN`].
pub fn loopback_packet_cost() -> io::Result<PacketCost> {
    measure(Calibration::BEFORE_A_RUN)
}

/// Restores the calling thread's affinity when dropped.
struct Affinity(Option<CpuSet>);

impl Drop for Affinity {
    fn drop(&mut self) {
        if let Some(set) = &self.0 {
            let _ = sched_setaffinity(Pid::from_raw(0), set);
        }
    }
}

/// Pins the calling thread to `cpu`; whether it took.
fn pin(cpu: usize) -> bool {
    let mut set = CpuSet::new();
    set.set(cpu).is_ok() && sched_setaffinity(Pid::from_raw(0), &set).is_ok()
}

/// Measures [`PacketCost`] with `calibration`'s batches, the ends on the
/// CPU the caller is on and the next allowed one.
pub fn measure(calibration: Calibration) -> io::Result<PacketCost> {
    let Calibration {
        batches,
        round_trips,
    } = calibration;
    if batches == 0 || round_trips == 0 {
        return Err(io::Error::other(
            "a calibration needs batches of round trips",
        ));
    }
    let allowed = sched_getaffinity(Pid::from_raw(0)).ok();
    let _restore = Affinity(allowed);
    // SAFETY: sched_getcpu has no preconditions.
    let here = usize::try_from(unsafe { libc::sched_getcpu() }).ok();
    let other = here.and_then(|here| {
        let set = allowed.as_ref()?;
        let count = CpuSet::count();
        (1..count)
            .map(|step| (here + step) % count)
            .find(|&cpu| set.is_set(cpu).unwrap_or(false))
            .or(Some(here))
    });
    let cpus = here.zip(other).filter(|&(here, _)| pin(here));
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let echo = std::thread::spawn(move || -> io::Result<()> {
        if let Some((_, echo_cpu)) = cpus {
            pin(echo_cpu);
        }
        let (mut peer, _) = listener.accept()?;
        peer.set_nodelay(true)?;
        let mut byte = [0u8; 1];
        // Echo until the client closes.
        while peer.read(&mut byte)? == 1 {
            peer.write_all(&byte)?;
        }
        Ok(())
    });
    let mut client = TcpStream::connect(addr)?;
    client.set_nodelay(true)?;
    let round_trip = |client: &mut TcpStream| -> io::Result<()> {
        let mut byte = [b'x'];
        client.write_all(&byte)?;
        client.read_exact(&mut byte)
    };
    // Warm the path (connection, caches).
    for _ in 0..500 {
        round_trip(&mut client)?;
    }
    let cpu_ns = || {
        super::rusage::process_cpu_ns()
            .ok_or_else(|| io::Error::other("CLOCK_PROCESS_CPUTIME_ID is unavailable"))
    };
    let mut batches_us = Vec::with_capacity(batches);
    for _ in 0..batches {
        // A stored calibration runs for minutes if asked: a stop ends it
        // between batches (the echo thread ends when `client` closes).
        super::stop::check()?;
        let before = cpu_ns()?;
        for _ in 0..round_trips {
            round_trip(&mut client)?;
        }
        let spent_ns = cpu_ns()?.saturating_sub(before);
        batches_us.push(spent_ns as f64 / 1e3 / (2 * round_trips) as f64);
    }
    drop(client);
    echo.join()
        .map_err(|_| io::Error::other("the echo thread panicked"))??;
    let mut sorted = batches_us.clone();
    sorted.sort_by(f64::total_cmp);
    let median = super::median_of_sorted(&sorted).unwrap_or(0.0);
    Ok(PacketCost {
        us_per_packet: median,
        min_us: sorted[0],
        max_us: sorted[sorted.len() - 1],
        packets: 2 * round_trips as u64 * batches as u64,
        batches_us,
        cpus: cpus.map(|(a, b)| [a, b]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packet_costs_some_cpu_and_the_batches_bracket_the_median() {
        let before = sched_getaffinity(Pid::from_raw(0)).unwrap();
        let cost = measure(Calibration {
            batches: 9,
            round_trips: 500,
        })
        .unwrap();
        assert!(cost.us_per_packet > 0.0, "{cost:?}");
        assert!(cost.min_us <= cost.us_per_packet && cost.us_per_packet <= cost.max_us);
        assert_eq!(cost.packets, 9_000);
        assert_eq!(cost.batches_us.len(), 9);
        let [client, echo] = cost.cpus.expect("pinned");
        if std::thread::available_parallelism().unwrap().get() > 1 {
            assert_ne!(client, echo, "a CPU each");
        }
        // The caller's affinity is as it was.
        let after = sched_getaffinity(Pid::from_raw(0)).unwrap();
        for cpu in 0..CpuSet::count() {
            assert_eq!(before.is_set(cpu).unwrap(), after.is_set(cpu).unwrap());
        }
        assert!(
            measure(Calibration {
                batches: 0,
                round_trips: 1
            })
            .is_err()
        );
    }
}
