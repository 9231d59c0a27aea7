//! The 1990 hosts at run time: one endpoint process holds every model host,
//! each on its own TAP device, a port of the emulated Ethernet's bridge.
//! The process reads what the bridge floods to each TAP, lets each host's
//! model (`model.rs`) take it in at its CPU's pace, and puts what the hosts
//! send onto the wire one frame at a time at 10 Mbit/s: the wire is one
//! transmit clock the model hosts share, served round-robin (CSMA/CD's
//! fairness, without its collisions), a frame written to its TAP when its
//! last bit would have left.
//!
//! Invariants: the run always ends by itself, at the first of its bounds:
//! the storm has died out (every copy's TTL ran out, or nothing was
//! forwarded) and stayed quiet for `quiet_ms`; `max_frames` frames sent by
//! the model hosts; `max_ms` since the start. The report names which.
//! Frames go only to the TAP devices in the namespace the spec names.

use super::model::{
    Host, HostConfig, HostCounters, arp_query, hello, rip_supply, stray_datagram, wire_time_ns,
};
use crate::endpoint::testbed::Helper;
use serde::{Deserialize, Serialize};
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Instant;

/// The probe: a RIP supply to the all-1's broadcast, then an ARP query for
/// that address, both from one host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// Index of the sending host.
    pub from: usize,
    pub dst: Ipv4Addr,
    pub ttl: u8,
    /// When it is sent, after the heartbeat has run alone.
    pub at_ms: u64,
    /// A datagram to this unused host address, sent as a link-level
    /// broadcast with the probe: what a forwarder should refuse (RFC 1122
    /// §3.3.6), and what a 1990 host asks ARP for.
    pub stray: Option<Ipv4Addr>,
    /// routed's supply interval (4.3BSD routed/table.h: `SUPPLY_INTERVAL`
    /// 30 s): each of `suppliers` (the Suns) supplies to its own broadcast
    /// address at this pace from half-way to the probe, and the probe's
    /// sender supplies again with them (its first supply is the probe).
    pub supply_ms: u64,
    pub suppliers: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    /// `/run/netns/NAME` of the namespace holding the bridge and the TAPs.
    pub netns: PathBuf,
    /// Each host and its TAP device.
    pub hosts: Vec<(HostConfig, String)>,
    pub rate_bps: u64,
    pub rx_cost_ns: u64,
    pub probe: Probe,
    /// The two hosts exchanging heartbeats.
    pub heartbeat: [usize; 2],
    pub hello_ms: u64,
    pub max_frames: u64,
    pub max_ms: u64,
    pub quiet_ms: u64,
    pub bin_ms: u64,
}

/// Which bound ended the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Bound {
    /// Every copy's TTL ran out and the wire went quiet.
    Ttl,
    /// Nothing was forwarded: no storm to stop.
    NoStorm,
    /// The experiment's own cap on frames.
    FrameCap,
    /// The experiment's own cap on time.
    TimeCap,
}

impl Bound {
    pub fn describe(self) -> &'static str {
        match self {
            Bound::Ttl => "the TTL (every copy's ran out)",
            Bound::NoStorm => "nothing to stop (no copy forwarded)",
            Bound::FrameCap => "netlab's frame cap",
            Bound::TimeCap => "netlab's time cap",
        }
    }
}

/// What the wire carried in one bin of time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Bin {
    pub frames: u64,
    /// Forwarded copies among them.
    pub copies: u64,
    /// ns of the bin the wire was busy.
    pub busy_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelReport {
    pub stopped_by: Bound,
    pub elapsed_ms: f64,
    pub probe_ms: f64,
    /// When the last forwarded copy left (ms from the start), if any.
    pub last_copy_ms: Option<f64>,
    /// Frames the model hosts put on the wire.
    pub frames: u64,
    /// Forwarded copies among them.
    pub copies: u64,
    /// Copies by hop (index 0 = hop 1).
    pub hops: Vec<u64>,
    pub bin_ms: u64,
    pub bins: Vec<Bin>,
    pub hosts: Vec<(String, HostCounters)>,
    /// Heartbeats sent each way, and the longest time each receiver went
    /// without one (ms), the end of the run included.
    pub hellos_sent: [u64; 2],
    pub longest_gap_ms: [f64; 2],
    /// Frames dropped because a TAP's write failed (the bridge refused).
    pub write_errors: u64,
}

/// The running model: its thread, and the flag that stops it early.
pub struct StormModel {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<io::Result<ModelReport>>>,
}

fn longest_gap(times: &[u64], end: u64) -> u64 {
    let mut last = 0;
    let mut longest = 0;
    for &t in times {
        longest = longest.max(t.saturating_sub(last));
        last = t;
    }
    longest.max(end.saturating_sub(last))
}

fn run(spec: ModelSpec, stop: &AtomicBool) -> io::Result<ModelReport> {
    let taps: Vec<OwnedFd> = spec
        .hosts
        .iter()
        .map(|(_, tap)| crate::testbed::emulator::open_tap(&spec.netns, tap))
        .collect::<io::Result<_>>()?;
    let mut hosts: Vec<Host> = spec
        .hosts
        .iter()
        .map(|(config, _)| Host::new(config.clone(), spec.rx_cost_ns, spec.probe.ttl))
        .collect();
    let ms = 1_000_000u64;
    let start = Instant::now();
    let now = || start.elapsed().as_nanos() as u64;
    let mut tally = Tally {
        bin_ns: spec.bin_ms.max(1) * ms,
        rate_bps: spec.rate_bps,
        ..Tally::default()
    };
    let mut in_flight: Option<(usize, super::model::Outgoing, u64)> = None;
    let mut wire_free = 0u64;
    let mut turn = 0usize;
    let mut sends = Sends {
        // The Suns' first supplies at half-way to the probe.
        next_supply: spec.probe.at_ms * ms / 2,
        ..Sends::default()
    };
    let [a, b] = spec.heartbeat;
    let mut buf = vec![0u8; 65536];
    let stopped_by = loop {
        let t = now();
        // What the bridge flooded to each host.
        for (tap, host) in taps.iter().zip(&mut hosts) {
            read_flooded(tap, host, &mut buf);
        }
        // A frame whose last bit has left reaches the bridge.
        if let Some((i, out, end)) = in_flight.take() {
            if end <= t {
                // SAFETY: writing our own bytes to our own fd.
                let n = unsafe {
                    libc::write(
                        taps[i].as_raw_fd(),
                        out.bytes.as_ptr().cast(),
                        out.bytes.len(),
                    )
                };
                if n < 0 {
                    tally.write_errors += 1;
                }
                tally.landed(&out, end);
            } else {
                in_flight = Some((i, out, end));
            }
        }
        for host in &mut hosts {
            host.run(t);
        }
        sends.due(&spec, &mut hosts, t);
        let probe_at = spec.probe.at_ms * ms;
        let probe_sent = sends.probe_sent;
        // The wire takes the next frame, each host in turn.
        if in_flight.is_none() {
            let n = hosts.len();
            if let Some(i) = (0..n)
                .map(|k| (turn + k) % n)
                .find(|&i| !hosts[i].output.is_empty())
            {
                let out = hosts[i].output.pop_front().expect("not empty");
                let end = t.max(wire_free) + wire_time_ns(out.bytes.len(), spec.rate_bps);
                wire_free = end;
                in_flight = Some((i, out, end));
                turn = (i + 1) % n;
            }
        }
        // The bounds.
        if tally.frames >= spec.max_frames {
            break Bound::FrameCap;
        }
        if t >= spec.max_ms * ms || stop.load(Ordering::Relaxed) {
            break Bound::TimeCap;
        }
        let copies_pending = hosts
            .iter()
            .any(|h| h.output.iter().any(|o| o.hop.is_some()))
            || in_flight.as_ref().is_some_and(|(_, o, _)| o.hop.is_some());
        let quiet_since = tally.last_copy.unwrap_or(probe_at).max(probe_at);
        if probe_sent && !copies_pending && t >= quiet_since + spec.quiet_ms * ms {
            let expired: u64 = hosts.iter().map(|h| h.counters.ttl_expired).sum();
            break if tally.copies == 0 && expired == 0 {
                Bound::NoStorm
            } else {
                Bound::Ttl
            };
        }
        // Sleep until the next thing to do, or a frame arrives.
        let mut wake = sends
            .next_hello
            .min(spec.max_ms * ms)
            .min(sends.next_supply);
        if !probe_sent {
            wake = wake.min(probe_at);
        }
        if let Some((_, _, end)) = &in_flight {
            wake = wake.min(*end);
        }
        for host in &hosts {
            if let Some(d) = host.deadline() {
                wake = wake.min(d);
            }
        }
        wait_for_any(&taps, wake.saturating_sub(now()));
    };
    let end = now();
    let gap = |receiver: usize| longest_gap(&hosts[receiver].hello_times, end) as f64 / 1e6;
    Ok(ModelReport {
        stopped_by,
        elapsed_ms: end as f64 / 1e6,
        probe_ms: spec.probe.at_ms as f64,
        last_copy_ms: tally.last_copy.map(|t| t as f64 / 1e6),
        frames: tally.frames,
        copies: tally.copies,
        hops: tally.hops,
        bin_ms: spec.bin_ms.max(1),
        bins: tally.bins,
        hellos_sent: sends.hellos_sent,
        longest_gap_ms: [gap(b), gap(a)],
        hosts: hosts
            .iter()
            .map(|h| (h.config.name.clone(), h.counters.clone()))
            .collect(),
        write_errors: tally.write_errors,
    })
}

/// What the model's hosts send on a timer: the heartbeats, the routers'
/// supplies and the probe.
#[derive(Default)]
struct Sends {
    next_hello: u64,
    hello_seq: u32,
    hellos_sent: [u64; 2],
    next_supply: u64,
    supplies: u64,
    probe_sent: bool,
}

impl Sends {
    /// Sends what is due at `t` (ns from the start).
    fn due(&mut self, spec: &ModelSpec, hosts: &mut [Host], t: u64) {
        let ms = 1_000_000u64;
        let [a, b] = spec.heartbeat;
        if t >= self.next_hello {
            self.hello_seq += 1;
            let (ma, mb) = (hosts[a].config.mac, hosts[b].config.mac);
            hosts[a].send(&hello(ma, mb, self.hello_seq), None);
            hosts[b].send(&hello(mb, ma, self.hello_seq), None);
            self.hellos_sent[0] += 1;
            self.hellos_sent[1] += 1;
            self.next_hello += spec.hello_ms.max(1) * ms;
        }
        let probe_at = spec.probe.at_ms * ms;
        let supply_ns = spec.probe.supply_ms.max(1) * ms;
        // The probe is the sender's first supply; the rest follow at
        // routed's pace.
        if t >= self.next_supply {
            let mut senders: Vec<(usize, Ipv4Addr)> = Vec::new();
            if self.supplies > 0 {
                senders.push((spec.probe.from, spec.probe.dst));
            }
            if t >= probe_at / 2 {
                for &i in &spec.probe.suppliers {
                    senders.push((i, hosts[i].config.broadcast));
                }
            }
            for (i, dst) in senders {
                let h = &mut hosts[i];
                let (mac, addr) = (h.config.mac, h.config.addr);
                h.send(&rip_supply(mac, addr, dst, spec.probe.ttl), None);
            }
            self.supplies += 1;
            self.next_supply = probe_at / 2 + self.supplies * supply_ns;
        }
        if !self.probe_sent && t >= probe_at {
            let p = &mut hosts[spec.probe.from];
            let (mac, addr) = (p.config.mac, p.config.addr);
            p.send(&rip_supply(mac, addr, spec.probe.dst, spec.probe.ttl), None);
            p.send(&arp_query(mac, addr, spec.probe.dst), None);
            if let Some(stray) = spec.probe.stray {
                p.send(&stray_datagram(mac, addr, stray, spec.probe.ttl), None);
            }
            self.probe_sent = true;
        }
    }
}

/// Reads every frame the bridge flooded to `host`'s TAP.
fn read_flooded(tap: &OwnedFd, host: &mut Host, buf: &mut [u8]) {
    loop {
        // SAFETY: reading into our own buffer from our own fd.
        let n = unsafe { libc::read(tap.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        host.arrive(buf[..n as usize].to_vec());
    }
}

/// Sleeps up to `wait_ns`, or until a frame arrives on any TAP.
fn wait_for_any(taps: &[OwnedFd], wait_ns: u64) {
    if wait_ns == 0 {
        return;
    }
    let mut fds: Vec<libc::pollfd> = taps
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ts = libc::timespec {
        tv_sec: (wait_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (wait_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: fds and ts outlive the call.
    unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
}

/// What the wire carried: frames and copies, by bin and by hop.
#[derive(Default)]
struct Tally {
    bin_ns: u64,
    rate_bps: u64,
    bins: Vec<Bin>,
    hops: Vec<u64>,
    frames: u64,
    copies: u64,
    write_errors: u64,
    /// When the last forwarded copy's last bit left (ns from the start).
    last_copy: Option<u64>,
}

impl Tally {
    fn bin(&mut self, at: u64) -> &mut Bin {
        let slot = (at / self.bin_ns) as usize;
        if self.bins.len() <= slot {
            self.bins.resize(slot + 1, Bin::default());
        }
        &mut self.bins[slot]
    }

    /// Counts `out`, whose last bit left the wire at `end`.
    fn landed(&mut self, out: &super::model::Outgoing, end: u64) {
        self.frames += 1;
        self.bin(end).frames += 1;
        if let Some(hop) = out.hop {
            self.copies += 1;
            self.bin(end).copies += 1;
            self.last_copy = Some(end);
            let h = usize::from(hop.max(1)) - 1;
            if self.hops.len() <= h {
                self.hops.resize(h + 1, 0);
            }
            self.hops[h] += 1;
        }
        // The busy time, split over the bins it spans.
        let mut from = end.saturating_sub(wire_time_ns(out.bytes.len(), self.rate_bps));
        while from < end {
            let upto = ((from / self.bin_ns + 1) * self.bin_ns).min(end);
            self.bin(from).busy_ns += upto - from;
            from = upto;
        }
    }
}

impl StormModel {
    pub fn start(spec: ModelSpec) -> io::Result<StormModel> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("storm-model".into())
            .spawn(move || run(spec, &flag))?;
        Ok(StormModel {
            stop,
            thread: Some(thread),
        })
    }

    /// Waits for the run to end by its own bounds and takes its report.
    pub fn finish(mut self) -> io::Result<ModelReport> {
        let thread = self.thread.take().expect("started");
        thread
            .join()
            .map_err(|_| io::Error::other("the model's thread panicked"))?
    }
}

impl Drop for StormModel {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Helper for StormModel {
    const ROLE: &'static str = "storm-model";
    type Spec = ModelSpec;
    type Report = ModelReport;
    fn doing(spec: &ModelSpec) -> String {
        format!(
            "starting {} 1990 hosts on their TAP devices",
            spec.hosts.len()
        )
    }
    fn start(spec: ModelSpec) -> io::Result<StormModel> {
        StormModel::start(spec)
    }
    fn stop(self) -> io::Result<ModelReport> {
        self.finish()
    }
}

/// The 1990 hosts' role.
pub type ModelRole = crate::endpoint::testbed::HelperRole<StormModel>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receiver_silenced_at_the_end_counts_its_silence() {
        assert_eq!(longest_gap(&[100, 200, 300], 1000), 700);
        assert_eq!(longest_gap(&[100, 600, 700], 750), 500);
        assert_eq!(longest_gap(&[], 50), 50);
    }
}
