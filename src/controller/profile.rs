//! `--profile`: every cell measured under a system-wide CPU profile
//! ([`crate::measure::profile`]), its samples sorted into layers
//! ([`crate::analysis::layers`]) for the whole system and for each busy
//! process, and the table kept in the cell's record.

use crate::analysis::layers::{Frame, folded, table};
use crate::measure::kallsyms::Kallsyms;
use crate::measure::profile::{Profile, Profiler};
use crate::measure::usersyms::UserSymbols;
use crate::record::profile::{ProcessLayers, ProfileReport};
use std::io;

/// The sampling rate: 999 Hz, off the 1000 Hz of timers so that samples
/// do not lock step with periodic work.
pub const FREQUENCY_HZ: u64 = 999;

/// The most distinct stacks a record keeps for its flame graph (the rest
/// are one `[rarer stacks]`): a few hundred KB of JSON at most.
pub const MAX_STACKS: usize = 1_500;

/// Each sample as a chain of frames for the layer rules (leaf first), in
/// the order of `profile.samples`: its kernel frames, then (in netlab's
/// processes, where its symbols name it) the netlab function that entered
/// the kernel; or when it has no kernel frames (it was in user space) one
/// user frame, netlab's or another program's.
pub fn chains<'a>(
    profile: &Profile,
    kernel: &'a Kallsyms,
    netlab: Option<&'a UserSymbols>,
) -> Vec<Vec<Frame<'a>>> {
    profile
        .symbolised(kernel, netlab)
        .into_iter()
        .map(|s| {
            let user = Frame::User {
                netlab: s.netlab,
                function: s.user,
            };
            if s.kernel.is_empty() {
                vec![user]
            } else {
                let mut chain: Vec<Frame> = s.kernel.into_iter().map(Frame::Kernel).collect();
                if s.user.is_some() {
                    chain.push(user);
                }
                chain
            }
        })
        .collect()
}

/// The most sampled functions of netlab's own user-space code, at most 10.
fn netlab_functions(chains: &[Vec<Frame>]) -> Vec<(String, u64)> {
    let mut counts: std::collections::HashMap<&str, u64> = std::collections::HashMap::new();
    for chain in chains {
        if let [
            Frame::User {
                netlab: true,
                function: Some(name),
            },
        ] = chain.as_slice()
        {
            *counts.entry(name).or_default() += 1;
        }
    }
    let mut top: Vec<(String, u64)> = counts
        .into_iter()
        .map(|(n, c)| (n.to_string(), c))
        .collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    top.truncate(10);
    top
}

/// What a runner needs to profile cells: the kernel's symbols and
/// netlab's own, read once.
pub struct Profiling {
    kernel: Kallsyms,
    /// netlab's own functions, or why they are not named.
    netlab: Result<UserSymbols, String>,
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
        let netlab = std::env::current_exe()
            .and_then(|exe| UserSymbols::read(&exe))
            .map_err(|e| e.to_string());
        Ok(Profiling { kernel, netlab })
    }

    pub fn start(&self) -> io::Result<Profiler> {
        Profiler::start(FREQUENCY_HZ)
    }

    /// The layer tables of a finished profile.
    pub fn report(&self, profile: &Profile) -> ProfileReport {
        let chains = chains(profile, &self.kernel, self.netlab.as_ref().ok());
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
        let comm = |pid: u32| match profile.comms.get(&pid) {
            Some(comm) => comm.as_str(),
            None if pid == 0 => "swapper",
            None => "[unknown]",
        };
        let folded = folded(
            chains
                .iter()
                .zip(&profile.samples)
                .map(|(c, s)| (comm(s.pid), c.as_slice())),
            MAX_STACKS,
        );
        ProfileReport {
            folded,
            netlab_functions: netlab_functions(&chains),
            method: format!(
                "perf_event_open cpu-clock at {} Hz on every CPU, kernel call chains symbolised through /proc/kallsyms, netlab's user-space leaf {}",
                profile.frequency_hz,
                match &self.netlab {
                    Ok(symbols) => format!("through {}'s symbol table", symbols.path.display()),
                    Err(why) => format!("not named ({why})"),
                }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::profile::Layer;

    #[test]
    fn a_loopback_ping_pong_profiles_into_tcp_among_other_layers() {
        let Ok(profiling) = Profiling::check() else {
            // Not root: no system-wide sampling or kernel addresses; CI is root.
            return;
        };
        let profiler = profiling.start().unwrap();
        crate::measure::packet_cost::loopback_packet_cost().unwrap();
        let profile = profiler.stop().unwrap();
        // This process's samples, sorted into layers: the ping-pong's
        // kernel work includes TCP.
        let mine = std::process::id();
        let chains = chains(&profile, &profiling.kernel, None);
        let ours = table(
            chains
                .iter()
                .zip(&profile.samples)
                .filter(|(_, s)| s.pid == mine)
                .map(|(c, _)| c.as_slice()),
        );
        let tcp = ours
            .shares
            .iter()
            .find(|s| s.layer == Layer::Tcp)
            .map_or(0, |s| s.samples);
        assert!(tcp > 0, "{ours:#?}");
        // The report's system table counts every sample once.
        let report = profiling.report(&profile);
        assert_eq!(report.system.samples, profile.samples.len() as u64);
    }
}
