//! `--profile`: every cell measured under a system-wide CPU profile
//! ([`crate::measure::profile`]), its samples sorted into layers
//! ([`crate::analysis::layers`]) for the whole system and for each busy
//! process, and the table kept in the cell's record.

use crate::analysis::layers::{Frame, table};
use crate::measure::kallsyms::Kallsyms;
use crate::measure::profile::{Profile, Profiler};
use crate::record::profile::{ProcessLayers, ProfileReport};
use std::io;

/// The sampling rate: 999 Hz, off the 1000 Hz of timers so that samples
/// do not lock step with periodic work.
pub const FREQUENCY_HZ: u64 = 999;

/// What a runner needs to profile cells: the kernel's symbols, read once.
pub struct Profiling {
    kernel: Kallsyms,
}

impl Profiling {
    /// Checks that this host can profile (root or a permissive
    /// `perf_event_paranoid`, visible kernel addresses) before any cell runs.
    pub fn check() -> io::Result<Profiling> {
        let kernel =
            Kallsyms::read().map_err(|e| io::Error::new(e.kind(), format!("--profile: {e}")))?;
        Profiler::start(FREQUENCY_HZ)
            .map_err(|e| io::Error::new(e.kind(), format!("--profile: {e}")))?
            .stop()?;
        Ok(Profiling { kernel })
    }

    pub fn start(&self) -> io::Result<Profiler> {
        Profiler::start(FREQUENCY_HZ)
    }

    /// The layer tables of a finished profile.
    pub fn report(&self, profile: &Profile) -> ProfileReport {
        let named = profile.symbolised(&self.kernel);
        let chains: Vec<Vec<Frame>> = named
            .iter()
            .map(|(names, netlab)| {
                let mut chain: Vec<Frame> =
                    names.iter().map(|n| Frame::Kernel(n.as_str())).collect();
                if chain.is_empty() {
                    chain.push(Frame::User { netlab: *netlab });
                }
                chain
            })
            .collect();
        let system = table(chains.iter().map(|c| c.as_slice()));
        let busy = (system.samples - system.idle).max(1);
        let mut pids: Vec<(u32, u64)> = Vec::new();
        for sample in &profile.samples {
            if sample.pid == 0 {
                continue;
            }
            match pids.iter_mut().find(|(p, _)| *p == sample.pid) {
                Some((_, n)) => *n += 1,
                None => pids.push((sample.pid, 1)),
            }
        }
        pids.sort_by_key(|p| std::cmp::Reverse(p.1));
        let processes = pids
            .into_iter()
            .filter(|(_, n)| n * 20 >= busy)
            .map(|(pid, _)| ProcessLayers {
                pid,
                comm: profile.comms.get(&pid).cloned().unwrap_or_default(),
                table: table(
                    chains
                        .iter()
                        .zip(&profile.samples)
                        .filter(|(_, s)| s.pid == pid)
                        .map(|(c, _)| c.as_slice()),
                ),
            })
            .collect();
        ProfileReport {
            method: format!(
                "perf_event_open cpu-clock at {} Hz on every CPU, kernel call chains symbolised through /proc/kallsyms",
                profile.frequency_hz
            ),
            frequency_hz: profile.frequency_hz,
            seconds: profile.seconds,
            cpus: profile.cpus,
            lost: profile.lost,
            system,
            processes,
        }
    }
}
