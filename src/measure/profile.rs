//! System-wide CPU sampling for CPU-by-layer profiles (#17): the software
//! `cpu-clock` event on every online CPU through `perf_event_open` (the
//! `perf-event2` crate), with kernel and user call chains. A software
//! clock event works on virtual machines, which have no hardware counters;
//! idle CPUs are sampled too (in the idle task), so busy and idle shares
//! come from the same samples.
//!
//! A reader thread drains each CPU's ring buffer (1 MiB, some three
//! seconds of samples with call chains at 999 Hz) every 250 ms, so that a
//! long cell does not overflow it while the profiler itself wakes rarely; records the kernel had to drop are
//! counted (`lost`), never silently missing. Process names come from
//! `/proc` at the start and from the kernel's COMM records after, so a
//! sample of an endpoint that has since exited still says whose it was.

use super::usersyms::{ExecMap, UserSymbols, exec_maps};
use perf_event::data::Record as PerfRecord;
use perf_event::events::Software;
use perf_event::{Builder, SampleFlag, Sampler};
use std::collections::HashMap;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the reader empties the ring buffers: rarely enough not to
/// disturb what is measured, often enough that 1 MiB never fills.
const DRAIN_EVERY: Duration = Duration::from_millis(250);

/// The kernel's call-chain context markers (`PERF_CONTEXT_KERNEL`, `_USER`).
const CONTEXT_KERNEL: u64 = (-128i64) as u64;
const CONTEXT_USER: u64 = (-512i64) as u64;
/// Markers are the highest 4095 values of the address space.
const CONTEXT_MAX: u64 = (-4095i64) as u64;

/// One sample: where a CPU was, and whose thread it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    pub cpu: u32,
    pub pid: u32,
    pub tid: u32,
    /// Kernel frames, leaf first.
    pub kernel: Vec<u64>,
    /// User frames, leaf first (beyond the leaf only where the program
    /// keeps frame pointers).
    pub user: Vec<u64>,
}

/// What a profile saw.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    pub samples: Vec<Sample>,
    /// Records the kernel dropped because a ring buffer was full.
    pub lost: u64,
    pub seconds: f64,
    pub frequency_hz: u64,
    pub cpus: usize,
    /// Process names by PID (`/proc/PID/comm` at the start, COMM records after).
    pub comms: HashMap<u32, String>,
    /// Executable mappings by PID: netlab's processes' at the start
    /// (`/proc/PID/maps`), every process's after (MMAP records).
    pub maps: HashMap<u32, Vec<ExecMap>>,
}

/// What the reader thread collected.
#[derive(Default)]
struct Drained {
    samples: Vec<Sample>,
    lost: u64,
    comms: HashMap<u32, String>,
    maps: HashMap<u32, Vec<ExecMap>>,
}

/// A running profile; [`Profiler::stop`] ends it.
pub struct Profiler {
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<Drained>>,
    started: Instant,
    frequency_hz: u64,
    cpus: usize,
}

fn split_chain(chain: &[u64]) -> (Vec<u64>, Vec<u64>) {
    let (mut kernel, mut user) = (Vec::new(), Vec::new());
    let mut in_user = false;
    for &ip in chain {
        match ip {
            CONTEXT_KERNEL => in_user = false,
            CONTEXT_USER => in_user = true,
            marker if marker >= CONTEXT_MAX => {}
            ip if in_user => user.push(ip),
            ip => kernel.push(ip),
        }
    }
    (kernel, user)
}

fn process_names() -> HashMap<u32, String> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let comm = std::fs::read_to_string(entry.path().join("comm")).ok()?;
            Some((pid, comm.trim().to_string()))
        })
        .collect()
}

/// The executable mappings of the running netlab processes.
fn netlab_maps(comms: &HashMap<u32, String>) -> HashMap<u32, Vec<ExecMap>> {
    comms
        .iter()
        .filter(|(_, comm)| comm.as_str() == "netlab")
        .filter_map(|(&pid, _)| {
            let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
            Some((pid, exec_maps(&maps)))
        })
        .collect()
}

fn drain(sampler: &mut Sampler, drained: &mut Drained) {
    let Drained {
        samples,
        lost,
        comms,
        maps,
    } = drained;
    while let Some(record) = sampler.next_record() {
        match record.parse_record() {
            Ok(PerfRecord::Mmap(mmap)) => maps.entry(mmap.pid).or_default().push(ExecMap {
                start: mmap.addr,
                len: mmap.len,
                pgoff: mmap.pgoff,
                path: std::path::PathBuf::from(
                    String::from_utf8_lossy(&mmap.filename)
                        .trim_end_matches('\0')
                        .to_string(),
                ),
            }),
            Ok(PerfRecord::Sample(sample)) => {
                let (kernel, user) = split_chain(sample.callchain().unwrap_or(&[]));
                samples.push(Sample {
                    cpu: sample.cpu().unwrap_or(0),
                    pid: sample.pid().unwrap_or(0),
                    tid: sample.tid().unwrap_or(0),
                    kernel,
                    user,
                });
            }
            // A thread's own name (a sampler thread, say) is not its
            // process's: only the process's main thread names it.
            Ok(PerfRecord::Comm(comm)) if comm.tid == comm.pid => {
                comms.insert(
                    comm.pid,
                    String::from_utf8_lossy(&comm.comm)
                        .trim_end_matches('\0')
                        .to_string(),
                );
            }
            Ok(PerfRecord::Lost(l)) => *lost += l.lost,
            Ok(PerfRecord::LostSamples(l)) => *lost += l.lost,
            // Other records, and one that does not parse, carry no sample.
            _ => {}
        }
    }
}

/// One sample with names: its kernel frames (leaf first), whether its
/// process is netlab's own (by name: the endpoints are `netlab`), and for
/// netlab's own the function of its user-space leaf where the binary's
/// symbols say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbolised<'a> {
    pub kernel: Vec<&'a str>,
    pub netlab: bool,
    pub user: Option<&'a str>,
}

impl Profile {
    /// Every sample with names, in the order of `samples`.
    pub fn symbolised<'a>(
        &self,
        kernel: &'a super::kallsyms::Kallsyms,
        netlab_symbols: Option<&'a UserSymbols>,
    ) -> Vec<Symbolised<'a>> {
        self.samples
            .iter()
            .map(|s| {
                let netlab = self.comms.get(&s.pid).is_some_and(|c| c == "netlab");
                let user = match (netlab, netlab_symbols, s.user.first()) {
                    (true, Some(symbols), Some(&ip)) => self
                        .maps
                        .get(&s.pid)
                        .into_iter()
                        .flatten()
                        .filter(|m| m.path == symbols.path)
                        .find_map(|m| m.file_offset(ip))
                        .and_then(|offset| symbols.at_offset(offset)),
                    _ => None,
                };
                Symbolised {
                    kernel: s
                        .kernel
                        .iter()
                        .map(|&ip| kernel.lookup(ip).unwrap_or("[unknown]"))
                        .collect(),
                    netlab,
                    user,
                }
            })
            .collect()
    }
}

impl Profiler {
    /// Starts sampling every online CPU at `frequency_hz`. Needs root or
    /// `kernel.perf_event_paranoid` at -1 or below; the error says so.
    pub fn start(frequency_hz: u64) -> io::Result<Profiler> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut samplers = Vec::with_capacity(cpus);
        for cpu in 0..cpus {
            let sampler = Builder::new(Software::CPU_CLOCK)
                .one_cpu(cpu)
                .any_pid()
                .sample_frequency(frequency_hz)
                .sample(SampleFlag::IP | SampleFlag::TID | SampleFlag::CPU | SampleFlag::CALLCHAIN)
                // The builder leaves the kernel out by default: the
                // kernel is most of what a network profile is about.
                .include_kernel()
                .exclude_idle(false)
                .comm(true)
                // Executable mappings: where netlab's own code sits in
                // each endpoint process started during the profile.
                .mmap(true)
                .enabled(false)
                .build()
                .and_then(|counter| counter.sampled(1 << 20))
                .map_err(|e| {
                    io::Error::new(
                        e.kind(),
                        format!(
                            "cannot sample CPU {cpu} with perf_event_open (cpu-clock): {e}; system-wide sampling needs root or kernel.perf_event_paranoid <= -1"
                        ),
                    )
                })?;
            samplers.push(sampler);
        }
        let comms = process_names();
        let maps = netlab_maps(&comms);
        for sampler in &mut samplers {
            sampler.as_counter_mut().enable()?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let reader = std::thread::Builder::new()
            .name("profile-reader".into())
            .spawn(move || {
                let mut drained = Drained {
                    comms,
                    maps,
                    ..Drained::default()
                };
                loop {
                    let last = stopping.load(Ordering::Acquire);
                    for sampler in &mut samplers {
                        if last {
                            let _ = sampler.as_counter_mut().disable();
                        }
                        drain(sampler, &mut drained);
                    }
                    if last {
                        break drained;
                    }
                    std::thread::sleep(DRAIN_EVERY);
                }
            })?;
        Ok(Profiler {
            stop,
            reader: Some(reader),
            started: Instant::now(),
            frequency_hz,
            cpus,
        })
    }

    /// Stops sampling and returns what was seen.
    pub fn stop(mut self) -> io::Result<Profile> {
        self.stop.store(true, Ordering::Release);
        let seconds = self.started.elapsed().as_secs_f64();
        let drained = self
            .reader
            .take()
            .expect("a running profiler has its reader")
            .join()
            .map_err(|_| io::Error::other("the profile reader panicked"))?;
        Ok(Profile {
            samples: drained.samples,
            lost: drained.lost,
            seconds,
            frequency_hz: self.frequency_hz,
            cpus: self.cpus,
            comms: drained.comms,
            maps: drained.maps,
        })
    }
}

impl Drop for Profiler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_splits_at_its_context_markers() {
        let chain = [
            CONTEXT_KERNEL,
            0xffff_ffff_8100_0010,
            0xffff_ffff_8100_0020,
            CONTEXT_USER,
            0x5555_0000_1000,
        ];
        let (kernel, user) = split_chain(&chain);
        assert_eq!(kernel, [0xffff_ffff_8100_0010, 0xffff_ffff_8100_0020]);
        assert_eq!(user, [0x5555_0000_1000]);
        assert_eq!(split_chain(&[]), (vec![], vec![]));
    }

    #[test]
    fn a_busy_loopback_ping_pong_is_sampled_in_the_kernel() {
        let Ok(profiler) = Profiler::start(999) else {
            // Not root: perf_event_open refuses system-wide sampling (the
            // error's wording is tested by the CLI later); CI runs as root.
            return;
        };
        let cost = crate::measure::packet_cost::loopback_packet_cost().unwrap();
        let profile = profiler.stop().unwrap();
        assert!(cost.packets > 0);
        let mine = std::process::id();
        let ours: Vec<&Sample> = profile.samples.iter().filter(|s| s.pid == mine).collect();
        // A quarter second of ping-pong at 999 Hz: tens of samples of this
        // process in the kernel (system calls, TCP, loopback). Other tests
        // of this binary run beside it, so only the kernel samples are
        // counted, not their share.
        assert!(
            ours.len() >= 20,
            "{} samples of ours of {}",
            ours.len(),
            profile.samples.len()
        );
        let in_kernel = ours.iter().filter(|s| !s.kernel.is_empty()).count();
        assert!(
            in_kernel >= 10,
            "{in_kernel} of {} in the kernel",
            ours.len()
        );
        assert!(profile.comms.contains_key(&mine));
    }
}
