//! netlab's user-space wire emulator: the link between two namespaces when
//! the kernel has no netem, or when the link needs what netem lacks (1989's
//! one-packet driver and slow receiver).
//!
//! Each namespace holds a TUN device carrying its end of the link. The
//! emulator (running in its own endpoint process, so its CPU is its own)
//! opens both devices, then relays IP packets between them, one thread
//! serving both directions: each packet read from one device is handed to
//! that direction's [`LinkModel`] (`testbed::impair`), which decides whether
//! it is lost, duplicated or corrupted, and when it leaves the far end of
//! the link (the wire's rate and framing, the driver's queue, the delay and
//! its distribution, reordering, slots, the receiver); the emulator holds
//! it until then and writes it into the other device, where that stack
//! receives it.
//!
//! Invariants and choices:
//! - every decision is the model's, seeded and recorded, so a run can be
//!   repeated; the emulator only keeps time and moves bytes;
//! - held packets leave in order of their release time (ties in the order
//!   they came), so the model alone decides about order;
//! - with no impairment and no rate a packet is written as soon as it is
//!   read, without the model;
//! - the devices carry GSO super-packets unless the profile asks for wire
//!   packets; on an impaired link each is cut into its wire segments for
//!   the model and runs that leave together are joined again
//!   (`testbed::gso`), so the model decides every wire segment;
//! - timing uses `ppoll` with nanosecond timeouts and a 1 µs timer slack, so
//!   the emulator's own added latency is tens of microseconds, measured per
//!   packet (release time to write) and reported;
//! - the rate is the model's (per wire packet, with its framing); the TUN
//!   devices carry no qdisc of netlab's;
//! - on a link with a queue discipline (`--queue-discipline`), each
//!   direction's packets first meet the bottleneck's queue
//!   (`testbed::queue_stage`: drop-tail, CoDel or FQ-CoDel in front of the
//!   rate, as wire packets, never super-packets); what leaves its wire
//!   then meets the model for the rest of the path (loss, delay, jitter),
//!   and the queue's own counts and timeline go into the report.

use crate::measure::rusage::ProcessUsage;
use crate::record::testbed::EmulatorReport;
use crate::record::testbed::LinkProfile;
use crate::testbed::gso::{Plan, VNET_HDR_LEN, VnetHeader, finalize_checksum};
use crate::testbed::impair::{Fate, LinkModel, passes_untouched};
use crate::testbed::queue_stage::{Leaving, QueueStage};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
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
    /// The link to emulate, each direction alike.
    pub link: LinkProfile,
    /// Bytes held per direction before tail drop.
    pub queue_bytes: u64,
    /// Seed of the model's draws, so a run can be repeated.
    pub seed: u64,
}

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
/// `_IOW('T', 208, unsigned int)`: the offloads user space accepts.
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const IFF_TUN: libc::c_short = 0x0001;
const IFF_TAP: libc::c_short = 0x0002;
const IFF_NO_PI: libc::c_short = 0x1000;
const IFF_VNET_HDR: libc::c_short = 0x4000;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;
const TUN_F_TSO_ECN: libc::c_uint = 0x08;

/// Attaches to the TUN device `side.interface` inside `side.netns`. With
/// `offload`, each packet carries a virtio-net header and the device takes
/// and hands over whole GSO super-packets (up to 64 KB) with checksums
/// left to the receiver's stack, as a virtio NIC does: the stack then
/// segments nothing for this link, and the emulator moves one super-packet
/// where it would move forty-odd wire packets.
pub fn open_tun(side: &TunSide, offload: bool) -> io::Result<OwnedFd> {
    let flags = IFF_TUN | IFF_NO_PI | if offload { IFF_VNET_HDR } else { 0 };
    let fd = open_device(&side.netns, &side.interface, flags)?;
    if offload {
        let offloads = TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 | TUN_F_TSO_ECN;
        // SAFETY: TUNSETOFFLOAD takes the flags as its integer argument.
        if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD, offloads as libc::c_ulong) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(fd)
}

/// Attaches to the TAP device `name` inside the namespace at `netns`: its
/// Ethernet frames, no packet information header (a host in user space on
/// a `testbed::segment` bridge).
pub fn open_tap(netns: &std::path::Path, name: &str) -> io::Result<OwnedFd> {
    open_device(netns, name, IFF_TAP | IFF_NO_PI)
}

/// Opens `/dev/net/tun` inside the namespace at `netns` (this thread
/// only, and back again) and attaches to device `name` with `flags`,
/// non-blocking.
fn open_device(netns: &std::path::Path, name: &str, flags: libc::c_short) -> io::Result<OwnedFd> {
    let home = File::open("/proc/thread-self/ns/net")?;
    let target = File::open(netns)?;
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
        let name = name.as_bytes();
        if name.len() >= 16 {
            return Err(io::Error::other("interface name too long"));
        }
        ifr[..name.len()].copy_from_slice(name);
        ifr[16..18].copy_from_slice(&flags.to_ne_bytes());
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
        // The devices hand over GSO super-packets (up to 64 KB) unless the
        // profile asks for wire packets: an unimpaired, unshaped link passes
        // them on whole; an impaired one cuts each into its wire segments
        // for the model and joins what leaves together (`testbed::gso`).
        let immediate = passes_untouched(&spec.link);
        // A queue discipline sees wire packets, as a router's queue does:
        // its flows, its drops and its marks are per packet.
        let offload =
            !spec.link.emulator.wire_packets && spec.link.impair.queue_discipline.is_none();
        let fds = [
            open_tun(&spec.sides[0], offload)?,
            open_tun(&spec.sides[1], offload)?,
        ];
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let usage_before = ProcessUsage::now();
        let thread = std::thread::Builder::new()
            .name("wire-emulator".into())
            .spawn(move || relay(&spec, &fds, immediate, offload, &flag))?;
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

/// A packet waiting for its release time; ordered by (time, arrival).
struct Held {
    release_ns: u64,
    seq: u64,
    packet: Vec<u8>,
}

impl PartialEq for Held {
    fn eq(&self, other: &Self) -> bool {
        (self.release_ns, self.seq) == (other.release_ns, other.seq)
    }
}
impl Eq for Held {}
impl PartialOrd for Held {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Held {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.release_ns, self.seq).cmp(&(other.release_ns, other.seq))
    }
}

/// The one delivery of a segment the link neither duplicated nor
/// corrupted: its release time.
fn plain_delivery(fate: &Fate) -> Option<u64> {
    match fate.deliveries.as_slice() {
        [only] if only.corrupt.is_none() => Some(only.at_ns),
        _ => None,
    }
}

/// Flips the model's bit in a packet written with a virtio-net header,
/// after completing its partial checksum: the receiver trusts a partial
/// checksum, and only a real one lets it find the flip and drop the
/// packet as a host behind a wire would.
fn corrupt_offloaded(packet: &mut [u8], flip: crate::testbed::impair::Corruption) {
    let (header, ip) = packet.split_at_mut(VNET_HDR_LEN);
    let Ok(vnet) = VnetHeader::parse(header) else {
        return;
    };
    finalize_checksum(&vnet, ip).emit(header.try_into().expect("10 bytes"));
    if let Some(byte) = ip.get_mut(flip.offset) {
        *byte ^= flip.mask;
    }
}

/// Counts a packet the receiving device did not take, by its reason.
fn count_written(report: &mut EmulatorReport, dir: usize, written: Written) {
    match written {
        Written::Passed => {}
        Written::Refused => report.device_refused[dir] += 1,
        Written::Full => report.device_full[dir] += 1,
        Written::Gone => report.device_gone[dir] += 1,
    }
}

/// The bottleneck queue of a link with a discipline (one direction), and
/// the rest of the path after it (the link model without the rate).
struct Queued {
    stage: QueueStage,
    leaving: Vec<Leaving>,
}

/// The queues of both directions, when the link has a discipline, and
/// the models that carry what leaves them: the same profile without its
/// rate and framing (the queue's wire has them) and without a byte limit
/// (the discipline's limit is the queue's).
fn queue_stages(spec: &EmulatorSpec) -> Option<([Queued; 2], LinkProfile)> {
    let discipline = spec.link.impair.queue_discipline?;
    let rate = spec.link.rate_bps?;
    let origin_unix_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let stage = || Queued {
        stage: QueueStage::new(
            &discipline,
            rate,
            spec.link.impair.framing,
            spec.link.mtu as usize,
            origin_unix_ns,
        ),
        leaving: Vec::new(),
    };
    let mut after = spec.link.clone();
    after.rate_bps = None;
    after.impair.framing = None;
    after.impair.queue_discipline = None;
    Some(([stage(), stage()], after))
}

/// Hands what left `queued`'s wire by `now` to the rest of the path: each
/// packet meets `model` at the time its last bit left, and is held until
/// the model's release time.
#[allow(clippy::too_many_arguments)]
fn carry_departures(
    queued: &mut Queued,
    model: &mut LinkModel,
    now: u64,
    held: &mut BinaryHeap<Reverse<Held>>,
    seq: &mut u64,
    spare: &mut Vec<Vec<u8>>,
    max_queued: &mut usize,
) {
    queued.stage.pull(now, &mut queued.leaving, spare);
    for leaving in queued.leaving.drain(..) {
        let fate = model.admit(leaving.end_ns, leaving.bytes.len());
        let copies = fate.deliveries.len();
        let mut bytes = Some(leaving.bytes);
        for (k, delivery) in fate.deliveries.into_iter().enumerate() {
            let mut packet = if k + 1 == copies {
                bytes.take().expect("one owner for the last copy")
            } else {
                let mut copy = spare.pop().unwrap_or_default();
                copy.clear();
                copy.extend_from_slice(bytes.as_ref().expect("not yet given away"));
                copy
            };
            if let Some(flip) = delivery.corrupt
                && let Some(byte) = packet.get_mut(flip.offset)
            {
                *byte ^= flip.mask;
            }
            *seq += 1;
            held.push(Reverse(Held {
                release_ns: delivery.at_ns,
                seq: *seq,
                packet,
            }));
            *max_queued = (*max_queued).max(held.len());
        }
        if let Some(lost) = bytes {
            spare.push(lost);
        }
    }
}

/// The largest IP packet a TUN device can carry, with a virtio-net header.
const MAX_PACKET: usize = 65536 + VNET_HDR_LEN;
/// Packets read per direction per wake-up before writing again.
const BATCH: usize = 64;

/// Relays between the two devices until `stop`; `immediate`: the link
/// does nothing to packets ([`passes_untouched`]); `offload`: the devices
/// were opened with virtio-net headers (each read and write starts with one).
fn relay(
    spec: &EmulatorSpec,
    fds: &[OwnedFd; 2],
    immediate: bool,
    offload: bool,
    stop: &AtomicBool,
) -> io::Result<EmulatorReport> {
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000) };
    let origin = Instant::now();
    let now_ns = || origin.elapsed().as_nanos() as u64;
    let mut relay = Relay::new(spec, [fds[0].as_raw_fd(), fds[1].as_raw_fd()], offload)?;
    let mut buf = vec![0u8; MAX_PACKET];
    let tuning = spec.link.emulator;
    if let Some(cpu) = tuning.cpu {
        pin_to(cpu)?;
    }
    while !stop.load(Ordering::Relaxed) {
        relay.release_due(now_ns())?;
        // Spinning: look and come back at once, never sleep.
        let timeout = if tuning.spin {
            Duration::ZERO
        } else {
            relay
                .next_release()
                .map(|t| Duration::from_nanos(t.saturating_sub(now_ns())))
                .unwrap_or(Duration::from_millis(50))
                .min(Duration::from_millis(50))
        };
        let Some(readable) = relay.wait(timeout)? else {
            continue;
        };
        for (dir, _) in readable.iter().enumerate().filter(|(_, r)| **r) {
            for _ in 0..BATCH {
                // SAFETY: buf is valid for MAX_PACKET bytes.
                let n = unsafe { libc::read(relay.raw[dir], buf.as_mut_ptr().cast(), buf.len()) };
                if n < 0 {
                    let e = io::Error::last_os_error();
                    match e.kind() {
                        io::ErrorKind::WouldBlock => break,
                        io::ErrorKind::Interrupted => continue,
                        _ => return Err(e),
                    }
                }
                let packet = &buf[..n as usize];
                let read_at = now_ns();
                if immediate {
                    relay.pass(dir, packet)?;
                    let _ = relay.overhead.record(((now_ns() - read_at) / 1000).max(1));
                } else {
                    relay.admit(dir, packet, read_at);
                }
            }
        }
    }
    Ok(relay.finish())
}

/// Pins the calling thread to `cpu`.
fn pin_to(cpu: usize) -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t with one CPU set, for this thread (0).
    let pinned = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if pinned != 0 {
        return Err(io::Error::other(format!(
            "cannot pin the emulator to CPU {cpu}: {}",
            io::Error::last_os_error()
        )));
    }
    Ok(())
}

/// The relay's state between wake-ups: each direction's link model, the
/// packets it holds until their release, the bottleneck's queues (with a
/// queue discipline) and the account so far.
struct Relay {
    raw: [RawFd; 2],
    offload: bool,
    /// With a queue discipline, the bottleneck's queue and wire come
    /// first; the models carry what leaves them.
    stages: Option<[Queued; 2]>,
    models: [LinkModel; 2],
    queues: [BinaryHeap<Reverse<Held>>; 2],
    seq: u64,
    /// Packet buffers to reuse.
    spare: Vec<Vec<u8>>,
    fates: Vec<Fate>,
    report: EmulatorReport,
    /// How late each packet left after its release (µs).
    overhead: hdrhistogram::Histogram<u64>,
}

impl Relay {
    fn new(spec: &EmulatorSpec, raw: [RawFd; 2], offload: bool) -> io::Result<Relay> {
        let (stages, after) = match queue_stages(spec) {
            Some((stages, after)) => (Some(stages), after),
            None => (None, spec.link.clone()),
        };
        let queue_bytes = if stages.is_some() {
            u64::MAX
        } else {
            spec.queue_bytes
        };
        Ok(Relay {
            raw,
            offload,
            stages,
            // Each direction draws from its own stream, both from the one seed.
            models: [
                LinkModel::new(&after, queue_bytes, spec.seed),
                LinkModel::new(&after, queue_bytes, spec.seed ^ 0x9e37_79b9_7f4a_7c15),
            ],
            queues: [BinaryHeap::new(), BinaryHeap::new()],
            seq: 0,
            spare: Vec::new(),
            fates: Vec::new(),
            report: EmulatorReport::default(),
            overhead: hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)
                .map_err(|e| io::Error::other(e.to_string()))?,
        })
    }

    /// The virtio-net header's length, where the devices carry one.
    fn header(&self) -> usize {
        if self.offload { VNET_HDR_LEN } else { 0 }
    }

    /// Takes from direction `dir`'s bottleneck queue what its wire sent
    /// by `now`, into the model.
    fn carry(&mut self, dir: usize, now: u64) {
        if let Some(stages) = &mut self.stages {
            carry_departures(
                &mut stages[dir],
                &mut self.models[dir],
                now,
                &mut self.queues[dir],
                &mut self.seq,
                &mut self.spare,
                &mut self.report.max_queued[dir],
            );
        }
    }

    /// Writes what is due by `now`, after taking from the bottleneck's
    /// queues what their wires sent by then.
    fn release_due(&mut self, now: u64) -> io::Result<()> {
        for dir in 0..2 {
            self.carry(dir, now);
        }
        let header = self.header();
        for dir in 0..2 {
            while self.queues[dir]
                .peek()
                .is_some_and(|Reverse(h)| h.release_ns <= now)
            {
                let Reverse(held) = self.queues[dir].pop().expect("peeked");
                let written = write_packet(self.raw[1 - dir], &held.packet)?;
                count_written(&mut self.report, dir, written);
                let late_us = now.saturating_sub(held.release_ns) / 1000;
                let _ = self.overhead.record(late_us.max(1));
                self.report.forwarded_packets[dir] += 1;
                self.report.forwarded_bytes[dir] += held.packet.len().saturating_sub(header) as u64;
                self.spare.push(held.packet);
            }
        }
        Ok(())
    }

    /// When the next held packet is due or the next departs a bottleneck.
    fn next_release(&self) -> Option<u64> {
        let next_departure = self
            .stages
            .iter()
            .flatten()
            .filter_map(|q| q.stage.next_departure())
            .min();
        self.queues
            .iter()
            .filter_map(|q| q.peek().map(|Reverse(h)| h.release_ns))
            .chain(next_departure)
            .min()
    }

    /// Waits up to `timeout` for either device to be readable: which are,
    /// or `None` when a signal cut the wait short.
    fn wait(&self, timeout: Duration) -> io::Result<Option<[bool; 2]>> {
        let mut pfds = self.raw.map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: two valid pollfds; ts is a valid timespec; no signal mask change.
        let ready = unsafe { libc::ppoll(pfds.as_mut_ptr(), 2, &ts, std::ptr::null()) };
        if ready < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(None);
            }
            return Err(e);
        }
        Ok(Some(pfds.map(|p| p.revents & libc::POLLIN != 0)))
    }

    /// Passes `packet` on whole (with offload, its virtio-net header too):
    /// the link does nothing to packets.
    fn pass(&mut self, dir: usize, packet: &[u8]) -> io::Result<()> {
        let written = write_packet(self.raw[1 - dir], packet)?;
        count_written(&mut self.report, dir, written);
        self.report.forwarded_packets[dir] += 1;
        self.report.forwarded_bytes[dir] += packet.len().saturating_sub(self.header()) as u64;
        // The header's gso_type (byte 1) is set on a super-packet.
        if self.offload && packet.len() > VNET_HDR_LEN && packet[1] != 0 {
            self.report.super_packets[dir] += 1;
        }
        Ok(())
    }

    /// Holds `packet` in direction `dir` until `release_ns`.
    fn hold(&mut self, dir: usize, release_ns: u64, packet: Vec<u8>) {
        self.seq += 1;
        let queue = &mut self.queues[dir];
        queue.push(Reverse(Held {
            release_ns,
            seq: self.seq,
            packet,
        }));
        self.report.max_queued[dir] = self.report.max_queued[dir].max(queue.len());
    }

    /// A spare buffer, emptied.
    fn buffer(&mut self) -> Vec<u8> {
        let mut packet = self.spare.pop().unwrap_or_default();
        packet.clear();
        packet
    }

    /// What the link does to `packet`, read from direction `dir` at
    /// `read_at`: into the bottleneck's queue, or through the model into
    /// the held packets (a super-packet segment by segment).
    fn admit(&mut self, dir: usize, packet: &[u8], read_at: u64) {
        if self.stages.is_some() {
            // The wire took what was due before this packet came.
            self.carry(dir, read_at);
            let mut copy = self.buffer();
            copy.extend_from_slice(packet);
            let stages = self.stages.as_mut().expect("checked");
            stages[dir].stage.push(read_at, copy, &mut self.spare);
            return;
        }
        let Some(ip) = packet.get(self.header()..) else {
            return;
        };
        let vnet = self
            .offload
            .then(|| VnetHeader::parse(packet).ok())
            .flatten()
            .unwrap_or_default();
        match vnet.is_gso().then(|| Plan::of(&vnet, ip)) {
            Some(Ok(plan)) => self.admit_segments(dir, &plan, ip, read_at),
            Some(Err(_)) => {
                // Not TCP over IPv4: the model decides it whole.
                self.report.uncut[dir] += 1;
                self.admit_whole(dir, packet, ip.len(), read_at);
            }
            None => self.admit_whole(dir, packet, ip.len(), read_at),
        }
    }

    /// A super-packet: each wire segment meets the model on its own; runs
    /// of segments that leave together, unaltered, go on as one
    /// super-packet again.
    fn admit_segments(&mut self, dir: usize, plan: &Plan, ip: &[u8], read_at: u64) {
        self.report.super_packets[dir] += 1;
        let segments = plan.segments();
        self.report.segments[dir] += segments as u64;
        let mut fates = std::mem::take(&mut self.fates);
        fates.clear();
        fates.extend((0..segments).map(|i| self.models[dir].admit(read_at, plan.wire_len(i))));
        let mut i = 0;
        while i < segments {
            if let Some(at) = plain_delivery(&fates[i]) {
                let run = fates[i + 1..]
                    .iter()
                    .take_while(|f| plain_delivery(f) == Some(at))
                    .count()
                    + 1;
                let mut packet = self.spare.pop().unwrap_or_default();
                plan.emit_run(ip, i, run, &mut packet);
                self.hold(dir, at, packet);
                i += run;
                continue;
            }
            for delivery in &fates[i].deliveries {
                let mut packet = self.spare.pop().unwrap_or_default();
                plan.emit_run(ip, i, 1, &mut packet);
                if let Some(flip) = delivery.corrupt {
                    corrupt_offloaded(&mut packet, flip);
                }
                self.hold(dir, delivery.at_ns, packet);
            }
            i += 1;
        }
        self.fates = fates;
    }

    /// A packet the model decides whole (`ip_len`: its IP length).
    fn admit_whole(&mut self, dir: usize, packet: &[u8], ip_len: usize, read_at: u64) {
        let fate = self.models[dir].admit(read_at, ip_len);
        for delivery in fate.deliveries {
            let mut copy = self.buffer();
            copy.extend_from_slice(packet);
            if let Some(flip) = delivery.corrupt {
                if self.offload {
                    corrupt_offloaded(&mut copy, flip);
                } else {
                    copy[flip.offset] ^= flip.mask;
                }
            }
            self.hold(dir, delivery.at_ns, copy);
        }
    }

    /// The account: each model's counts, what is still held, the
    /// bottlenecks' reports and the lateness.
    fn finish(self) -> EmulatorReport {
        let Relay {
            stages,
            models,
            queues,
            mut report,
            overhead,
            ..
        } = self;
        for (dir, model) in models.iter().enumerate() {
            report.left_held[dir] = queues[dir].len() as u64;
            let counts = model.counts();
            report.lost_packets[dir] = counts.lost;
            report.queue_drops[dir] = counts.queue_drops;
            report.model[dir] = counts;
        }
        if let Some([a, b]) = stages {
            for (dir, queued) in [&a, &b].into_iter().enumerate() {
                report.left_held[dir] += queued.stage.backlog_packets();
            }
            report.bottleneck = Some([a.stage.finish(), b.stage.finish()]);
        }
        report.overhead_us_p50 = overhead.value_at_quantile(0.5) as f64;
        report.overhead_us_p99 = overhead.value_at_quantile(0.99) as f64;
        report.overhead_us_max = overhead.max() as f64;
        report
    }
}

/// What became of a packet handed to the receiving device. Every outcome
/// but `Passed` is a packet the link lost, counted under its own name in
/// the emulator's report.
#[derive(Debug, PartialEq, Eq)]
pub enum Written {
    /// Taken by the receiving stack.
    Passed,
    /// Refused as malformed: the kernel reads the IP version from the
    /// first byte, and a corrupted one is EINVAL. Dropped, as a NIC drops
    /// a frame it cannot parse; the relay goes on.
    Refused,
    /// The device had no room (EAGAIN: its socket's send buffer full).
    Full,
    /// The device is down or its namespace is going away (EIO).
    Gone,
}

pub fn write_packet(fd: RawFd, packet: &[u8]) -> io::Result<Written> {
    loop {
        // SAFETY: packet is a valid slice.
        let n = unsafe { libc::write(fd, packet.as_ptr().cast(), packet.len()) };
        if n >= 0 {
            return Ok(Written::Passed);
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            // The receiving device has no room: lost, as on a wire.
            io::ErrorKind::WouldBlock => return Ok(Written::Full),
            // The device is down: the namespace is being torn down.
            _ if e.raw_os_error() == Some(libc::EIO) => return Ok(Written::Gone),
            _ if e.raw_os_error() == Some(libc::EINVAL) => return Ok(Written::Refused),
            _ => {
                // The relay stops here: say so now, not only at the run's end.
                eprintln!(
                    "netlab emulator: writing a {}-byte packet failed, relay stopped: {e}",
                    packet.len()
                );
                return Err(e);
            }
        }
    }
}
