//! netlab's user-space wire emulator: the link between two namespaces when
//! the kernel has no netem.
//!
//! Each namespace holds a TUN device carrying its end of the link. The
//! emulator (running in its own endpoint process, so its CPU is its own)
//! opens both devices, then relays IP packets between them, one thread
//! serving both directions: a packet read from A's device is dropped with
//! the loss probability, held until `now + delay ± jitter`, and written into
//! B's device, where B's stack receives it; and the reverse.
//!
//! Invariants and choices:
//! - order is kept per direction: a packet is never released before the one
//!   read before it (netem reorders under jitter; this emulator does not);
//! - the queue of held packets per direction is bounded by the profile's
//!   queue (bytes); a packet arriving to a full queue is dropped and counted
//!   (tail drop), like a router's;
//! - with no delay and no jitter a packet is written as soon as it is read;
//! - timing uses `ppoll` with nanosecond timeouts and a 1 µs timer slack, so
//!   the emulator's own added latency is tens of microseconds, measured per
//!   packet (read to write, beyond the intended delay) and reported;
//! - rate shaping is not done here: tbf on the TUN devices does it, before
//!   packets reach the emulator.

use crate::measure::rusage::ProcessUsage;
pub use crate::record::testbed::EmulatorReport;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One end of the emulated link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunSide {
    /// `/run/netns/NAME` of the namespace holding the device.
    pub netns: PathBuf,
    pub interface: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmulatorSpec {
    pub sides: [TunSide; 2],
    pub delay_us: u64,
    pub jitter_us: u64,
    pub loss_pct: f64,
    /// Bytes held per direction before tail drop.
    pub queue_bytes: u64,
    /// Seed of the loss and jitter generator, so a run can be repeated.
    pub seed: u64,
}

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_NO_PI: libc::c_short = 0x1000;

/// Attaches to the TUN device `side.interface` inside `side.netns`.
pub fn open_tun(side: &TunSide) -> io::Result<OwnedFd> {
    let home = File::open("/proc/thread-self/ns/net")?;
    let target = File::open(&side.netns)?;
    // SAFETY: setns on valid namespace fds affects only this thread.
    if unsafe { libc::setns(target.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let opened = (|| {
        // SAFETY: plain open of a device node.
        let fd = unsafe {
            libc::open(
                c"/dev/net/tun".as_ptr(),
                libc::O_RDWR | libc::O_CLOEXEC | libc::O_NONBLOCK,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd was just opened and is ours.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut ifr = [0u8; 40];
        let name = side.interface.as_bytes();
        if name.len() >= 16 {
            return Err(io::Error::other("interface name too long"));
        }
        ifr[..name.len()].copy_from_slice(name);
        ifr[16..18].copy_from_slice(&(IFF_TUN | IFF_NO_PI).to_ne_bytes());
        // SAFETY: TUNSETIFF reads a struct ifreq (40 bytes) from ifr.
        if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, ifr.as_mut_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(fd)
    })();
    // SAFETY: back to the namespace this thread started in.
    if unsafe { libc::setns(home.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    opened
}

/// A running emulator; [`Emulator::stop`] ends it and returns its report.
pub struct Emulator {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<io::Result<EmulatorReport>>,
    usage_before: ProcessUsage,
    started: Instant,
}

impl Emulator {
    /// Opens both devices and starts relaying.
    pub fn start(spec: EmulatorSpec) -> io::Result<Emulator> {
        let fds = [open_tun(&spec.sides[0])?, open_tun(&spec.sides[1])?];
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let usage_before = ProcessUsage::now();
        let thread = std::thread::Builder::new()
            .name("wire-emulator".into())
            .spawn(move || relay(&spec, &fds, &flag))?;
        Ok(Emulator {
            stop,
            thread,
            usage_before,
            started: Instant::now(),
        })
    }

    pub fn stop(self) -> io::Result<EmulatorReport> {
        self.stop.store(true, Ordering::Relaxed);
        let mut report = self
            .thread
            .join()
            .map_err(|_| io::Error::other("emulator thread panicked"))??;
        report.usage = ProcessUsage::now().since(&self.usage_before);
        report.wall_s = self.started.elapsed().as_secs_f64();
        Ok(report)
    }
}

struct Held {
    release: Instant,
    packet: Vec<u8>,
}

/// The largest IP packet a TUN device can carry.
const MAX_PACKET: usize = 65536;
/// Packets read per direction per wake-up before writing again.
const BATCH: usize = 64;

fn relay(spec: &EmulatorSpec, fds: &[OwnedFd; 2], stop: &AtomicBool) -> io::Result<EmulatorReport> {
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000) };
    let mut rng = fastrand::Rng::with_seed(spec.seed);
    let delay = Duration::from_micros(spec.delay_us);
    let jitter = spec.jitter_us;
    let loss = spec.loss_pct / 100.0;
    let immediate = spec.delay_us == 0 && spec.jitter_us == 0;
    let mut queues: [VecDeque<Held>; 2] = [VecDeque::new(), VecDeque::new()];
    let mut queued_bytes = [0u64; 2];
    let mut spare: Vec<Vec<u8>> = Vec::new();
    let mut report = EmulatorReport::default();
    let mut overhead = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)
        .map_err(|e| io::Error::other(e.to_string()))?;
    let raw = [fds[0].as_raw_fd(), fds[1].as_raw_fd()];
    let mut buf = vec![0u8; MAX_PACKET];

    while !stop.load(Ordering::Relaxed) {
        // Release what is due.
        let now = Instant::now();
        for dir in 0..2 {
            while queues[dir].front().is_some_and(|h| h.release <= now) {
                let held = queues[dir].pop_front().expect("front exists");
                write_packet(raw[1 - dir], &held.packet)?;
                queued_bytes[dir] -= held.packet.len() as u64;
                let late = now.saturating_duration_since(held.release);
                let _ = overhead.record(late.as_micros().max(1) as u64);
                report.forwarded_packets[dir] += 1;
                report.forwarded_bytes[dir] += held.packet.len() as u64;
                spare.push(held.packet);
            }
        }
        let next_release = queues
            .iter()
            .filter_map(|q| q.front().map(|h| h.release))
            .min();
        let timeout = next_release
            .map(|t| t.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_millis(50))
            .min(Duration::from_millis(50));
        let mut pfds = [
            libc::pollfd {
                fd: raw[0],
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: raw[1],
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: two valid pollfds; ts is a valid timespec; no signal mask change.
        let ready = unsafe { libc::ppoll(pfds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
        if ready < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        for dir in 0..2 {
            if pfds[dir].revents & libc::POLLIN == 0 {
                continue;
            }
            for _ in 0..BATCH {
                // SAFETY: buf is valid for MAX_PACKET bytes.
                let n = unsafe { libc::read(raw[dir], buf.as_mut_ptr().cast(), buf.len()) };
                if n < 0 {
                    let e = io::Error::last_os_error();
                    match e.kind() {
                        io::ErrorKind::WouldBlock => break,
                        io::ErrorKind::Interrupted => continue,
                        _ => return Err(e),
                    }
                }
                let n = n as usize;
                let read_at = Instant::now();
                if loss > 0.0 && rng.f64() < loss {
                    report.lost_packets[dir] += 1;
                    continue;
                }
                if immediate {
                    write_packet(raw[1 - dir], &buf[..n])?;
                    let _ = overhead.record(read_at.elapsed().as_micros().max(1) as u64);
                    report.forwarded_packets[dir] += 1;
                    report.forwarded_bytes[dir] += n as u64;
                    continue;
                }
                if queued_bytes[dir] + n as u64 > spec.queue_bytes {
                    report.queue_drops[dir] += 1;
                    continue;
                }
                let offset = if jitter > 0 {
                    rng.u64(0..=2 * jitter) as i64 - jitter as i64
                } else {
                    0
                };
                let wanted = read_at + delay;
                let wanted = if offset >= 0 {
                    wanted + Duration::from_micros(offset as u64)
                } else {
                    wanted - Duration::from_micros((-offset) as u64)
                };
                // Keep order: never before the packet ahead of it.
                let release = queues[dir].back().map_or(wanted, |h| h.release.max(wanted));
                let mut packet = spare.pop().unwrap_or_default();
                packet.clear();
                packet.extend_from_slice(&buf[..n]);
                queued_bytes[dir] += n as u64;
                queues[dir].push_back(Held { release, packet });
                report.max_queued[dir] = report.max_queued[dir].max(queues[dir].len());
            }
        }
    }
    report.overhead_us_p50 = overhead.value_at_quantile(0.5) as f64;
    report.overhead_us_p99 = overhead.value_at_quantile(0.99) as f64;
    report.overhead_us_max = overhead.max() as f64;
    Ok(report)
}

fn write_packet(fd: RawFd, packet: &[u8]) -> io::Result<()> {
    loop {
        // SAFETY: packet is a valid slice.
        let n = unsafe { libc::write(fd, packet.as_ptr().cast(), packet.len()) };
        if n >= 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            // The receiving device's queue is full: the packet is lost, as on a wire.
            io::ErrorKind::WouldBlock => return Ok(()),
            // The namespace is being torn down.
            _ if e.raw_os_error() == Some(libc::EIO) => return Ok(()),
            _ => return Err(e),
        }
    }
}
