//! The 1990 host model: what a BSD-derived host of 1990 did with each frame
//! that reached its Ethernet interface, as the sources' code did it, with
//! no I/O of its own (the runtime in `wire.rs` moves the frames and keeps
//! time). Each rule names the file it is read from.
//!
//! - **Is it for me?** `ipintr` (4.2BSD sys/netinet/ip_input.c 6.1, 1983):
//!   the interface's own address or its *configured* broadcast address
//!   (`if_broadaddr`), nothing else. 4.3BSD (ip_input.c 7.x, from 6.12,
//!   1985, "receive packets addressed to all 0's or all 1's") also takes
//!   the all-1's and all-0's forms of the net and subnet, 255.255.255.255
//!   and 0.0.0.0: the 1990 VAX here follows 4.3.
//! - **Forward what is not.** 4.2BSD ip_input.c: `int ipforwarding = 1`;
//!   `ip_forward` drops a datagram whose TTL is below `IPTTLDEC` (1), takes
//!   1 off the rest and sends it by the route to its destination, which for
//!   an address on the attached network is back out the interface it came
//!   in on. 4.3BSD's `ip_forward` refuses when `in_interfaces <= 1` (a host
//!   with one interface forwards nothing): the VAX here does not forward.
//! - **The link address of a forwarded datagram.** SunOS 4 (per Spurgeon,
//!   comp.sys.sun, 16 Feb 1990: it forwards a datagram to an IP broadcast
//!   address it does not understand "back out the interface it heard them
//!   on, over and over until the Time To Live field in the packet finally
//!   expires") took the Ethernet address from 4.3BSD's `arpresolve`
//!   (if_ether.c: `in_broadcast(*destip)` → the Ethernet broadcast), and
//!   4.3BSD's `in_broadcast` (in.c) knows the all-1's and all-0's forms of
//!   the net and subnet as broadcasts. So the host's input test (its own
//!   broadcast only) and its output test (every form) disagree: that
//!   disagreement is the loop. Any other address is looked up in the ARP
//!   table; a miss sends an ARP request ("who has") and holds the
//!   datagram, which no reply ever frees here.
//! - **ARP** (4.2BSD if_ether.c `arpinput`, RFC 826): a request for the
//!   host's own address is answered; nothing else is.
//! - **Queues.** Input (`ipintrq`) and output (`if_snd`) queues hold
//!   `IFQ_MAXLEN` = 50 datagrams (4.2BSD sys/net/if.h); a full queue drops
//!   (`IF_DROP`).
//! - **CPU.** Every frame the interface takes in costs the host
//!   [`rx_cost_ns`]: the fixed per-packet cost Van Jacobson observed on a
//!   Sun-3/60 (source 003, `bsd_speedups.per_packet_us.observed_fixed`,
//!   800 µs), the interrupt, the driver and the protocol together. It was
//!   measured for TCP segments; a broadcast datagram's input is of the same
//!   kind (interrupt, copy out of the LANCE, `ipintr`), not measured apart.
//!
//! Left out, and said so in the report: ICMP errors (a copy whose TTL runs
//! out is counted, no time-exceeded is sent), ICMP redirects, RIP's
//! routing-table processing (a RIP datagram that is for the host is taken
//! in and counted, nothing more).

use crate::wire::ether::{ARP_REPLY, ARP_REQUEST, Arp, BROADCAST_MAC, Frame, Ipv4, Mac, Payload};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;

/// `IFQ_MAXLEN` (4.2BSD sys/net/if.h): the depth of `ipintrq` and `if_snd`.
pub const IFQ_MAXLEN: usize = 50;
/// `IPTTLDEC` (4.2BSD sys/netinet/ip.h): what a hop takes off the TTL.
pub const IPTTLDEC: u8 = 1;
/// The UDP port routed listens and supplies on (RFC 1058 §3.1).
pub const RIP_PORT: u16 = 520;
/// The Ethernet type of the VAXcluster's SCS traffic over the NI (LAVC,
/// 60-07).
pub const ETHERTYPE_SCS: u16 = 0x6007;

/// The fixed cost of taking one frame in, in ns, from source 003.
pub fn rx_cost_ns() -> u64 {
    let us = crate::report::historical::figures()
        .bsd_speedups
        .per_packet_us
        .get("observed_fixed")
        .copied()
        .expect(
            "reference/historical-figures.toml gives bsd_speedups.per_packet_us.observed_fixed",
        );
    (us * 1000.0) as u64
}

/// Which 1990 host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    /// SunOS 4 on a Sun-3: 4.2BSD's input test, forwarding on, 4.3BSD's
    /// `in_broadcast` on output.
    Sun,
    /// A VAX on 4.3BSD's rules (and a VAXcluster member's heartbeat):
    /// every broadcast form recognised, no forwarding with one interface.
    Vax,
}

/// One 1990 host's configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HostConfig {
    pub name: String,
    pub kind: Kind,
    pub mac: Mac,
    pub addr: Ipv4Addr,
    pub prefix: u8,
    /// The broadcast address configured on its interface.
    pub broadcast: Ipv4Addr,
    /// `ipforwarding`.
    pub forwarding: bool,
    /// Steve Miller's kernel change: never forward what arrived as a
    /// link-level broadcast.
    pub refuse_link_broadcasts: bool,
}

impl HostConfig {
    fn mask(&self) -> u32 {
        u32::MAX
            .checked_shl(32 - u32::from(self.prefix))
            .unwrap_or(0)
    }

    /// Whether `a` is on this host's network.
    pub fn on_net(&self, a: Ipv4Addr) -> bool {
        u32::from(a) & self.mask() == u32::from(self.addr) & self.mask()
    }

    /// The address with the host part all 0's (`zeros`) or all 1's.
    pub fn net_broadcast(&self, zeros: bool) -> Ipv4Addr {
        let net = u32::from(self.addr) & self.mask();
        Ipv4Addr::from(if zeros { net } else { net | !self.mask() })
    }

    /// `ipintr`'s test: is a datagram to `dst` for this host?
    pub fn for_us(&self, dst: Ipv4Addr) -> bool {
        if dst == self.addr || dst == self.broadcast {
            return true;
        }
        match self.kind {
            Kind::Sun => false,
            Kind::Vax => {
                dst == self.net_broadcast(true)
                    || dst == self.net_broadcast(false)
                    || dst == Ipv4Addr::BROADCAST
                    || dst == Ipv4Addr::UNSPECIFIED
            }
        }
    }

    /// 4.3BSD's `in_broadcast` (in.c), as `arpresolve` asks it.
    pub fn in_broadcast(&self, dst: Ipv4Addr) -> bool {
        dst == self.broadcast
            || dst == self.net_broadcast(true)
            || dst == self.net_broadcast(false)
            || dst == Ipv4Addr::BROADCAST
    }
}

/// What a host counted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostCounters {
    /// Frames the interface took in (to its address or broadcast).
    pub taken_in: u64,
    /// Frames lost because `ipintrq` was full.
    pub input_drops: u64,
    /// Datagrams for this host (`ours`).
    pub for_us: u64,
    /// Datagrams sent on by `ip_forward`.
    pub forwarded: u64,
    /// Datagrams that arrived as link-level broadcasts and were refused
    /// forwarding (the Miller change).
    pub refused_link_broadcast: u64,
    /// Datagrams not for it, not forwarded (`ipforwarding` off).
    pub not_forwarded: u64,
    /// Copies whose TTL ran out here.
    pub ttl_expired: u64,
    /// ARP requests it sent for addresses it could not resolve.
    pub arp_queries: u64,
    /// ARP requests it answered.
    pub arp_replies: u64,
    /// Datagrams lost because `if_snd` was full.
    pub output_drops: u64,
    /// Heartbeats received.
    pub hellos: u64,
}

/// What a host hands the wire: a frame, and whether it is a forwarded copy
/// (and at what hop from its source) for the storm's accounting.
#[derive(Debug, Clone, PartialEq)]
pub struct Outgoing {
    pub bytes: Vec<u8>,
    /// `Some(hop)` for a forwarded datagram: 1 for the first forwarding.
    pub hop: Option<u8>,
}

/// One 1990 host: its queues, its CPU, its ARP table, its counters.
#[derive(Debug)]
pub struct Host {
    pub config: HostConfig,
    input: VecDeque<Vec<u8>>,
    /// The frame being taken in, and when the CPU is done with it.
    working: Option<(u64, Vec<u8>)>,
    pub output: VecDeque<Outgoing>,
    arp: HashMap<Ipv4Addr, Mac>,
    rx_cost_ns: u64,
    /// The TTL the storm's probe left with, to number hops.
    probe_ttl: u8,
    pub counters: HostCounters,
    /// When each heartbeat was taken in (ns).
    pub hello_times: Vec<u64>,
}

impl Host {
    pub fn new(config: HostConfig, rx_cost_ns: u64, probe_ttl: u8) -> Host {
        Host {
            config,
            input: VecDeque::new(),
            working: None,
            output: VecDeque::new(),
            arp: HashMap::new(),
            rx_cost_ns,
            probe_ttl,
            counters: HostCounters::default(),
            hello_times: Vec::new(),
        }
    }

    /// A frame reached the interface: taken in if it is to this
    /// host's address or broadcast, queued unless `ipintrq` is full.
    pub fn arrive(&mut self, frame: Vec<u8>) {
        if frame.len() < 14 {
            return;
        }
        let dst = &frame[0..6];
        if dst != BROADCAST_MAC && dst != self.config.mac {
            return;
        }
        self.counters.taken_in += 1;
        if self.input.len() >= IFQ_MAXLEN {
            self.counters.input_drops += 1;
        } else {
            self.input.push_back(frame);
        }
    }

    /// When the host next needs the runtime: its CPU finishing a frame.
    pub fn deadline(&self) -> Option<u64> {
        self.working.as_ref().map(|(done, _)| *done)
    }

    /// Runs the CPU up to `now`: finishes the frame in hand when its time
    /// has come, and starts the next.
    pub fn run(&mut self, now: u64) {
        loop {
            match self.working.take() {
                Some((done, frame)) if done <= now => {
                    self.handle(done, &frame);
                    if let Some(next) = self.input.pop_front() {
                        self.working = Some((done.max(now) + self.rx_cost_ns, next));
                    }
                }
                Some(working) => {
                    self.working = Some(working);
                    return;
                }
                None => match self.input.pop_front() {
                    Some(next) => self.working = Some((now + self.rx_cost_ns, next)),
                    None => return,
                },
            }
        }
    }

    /// Queues a frame on `if_snd`, dropping it when full.
    pub fn send(&mut self, frame: &Frame, hop: Option<u8>) {
        if self.output.len() >= IFQ_MAXLEN {
            self.counters.output_drops += 1;
            return;
        }
        self.output.push_back(Outgoing {
            bytes: frame.to_bytes(),
            hop,
        });
    }

    fn handle(&mut self, now: u64, bytes: &[u8]) {
        let Ok(frame) = Frame::parse(bytes) else {
            return;
        };
        let link_broadcast = frame.dst == BROADCAST_MAC;
        match frame.payload {
            Payload::Arp(arp) => self.arp_input(&arp),
            Payload::Ipv4(ip) => self.ip_input(ip, link_broadcast),
            Payload::Other(ETHERTYPE_SCS, _) => {
                self.counters.hellos += 1;
                self.hello_times.push(now);
            }
            Payload::Other(..) => {}
        }
    }

    fn arp_input(&mut self, arp: &Arp) {
        let me = self.config.addr;
        if arp.target_ip == me || self.arp.contains_key(&arp.sender_ip) {
            self.arp.insert(arp.sender_ip, arp.sender_mac);
        }
        if arp.op == ARP_REQUEST && arp.target_ip == me {
            self.counters.arp_replies += 1;
            let reply = Frame {
                dst: arp.sender_mac,
                src: self.config.mac,
                payload: Payload::Arp(Arp {
                    op: ARP_REPLY,
                    sender_mac: self.config.mac,
                    sender_ip: me,
                    target_mac: arp.sender_mac,
                    target_ip: arp.sender_ip,
                }),
            };
            self.send(&reply, None);
        }
    }

    fn ip_input(&mut self, mut ip: Ipv4, link_broadcast: bool) {
        if self.config.for_us(ip.dst) {
            self.counters.for_us += 1;
            return;
        }
        if !self.config.forwarding {
            self.counters.not_forwarded += 1;
            return;
        }
        if self.config.refuse_link_broadcasts && link_broadcast {
            self.counters.refused_link_broadcast += 1;
            return;
        }
        if ip.ttl < IPTTLDEC + 1 {
            // 4.2BSD forwarded a TTL of 1 as 0 (`ip_ttl < IPTTLDEC`); 4.3
            // (ip_input.c 7.5, 1987) "drop if ttl reaches 0". The model
            // takes 4.3's: a copy that would leave with TTL 0 dies here.
            self.counters.ttl_expired += 1;
            return;
        }
        ip.ttl -= IPTTLDEC;
        let hop = self.probe_ttl.saturating_sub(ip.ttl);
        let Some(dst) = self.link_address(ip.dst) else {
            return;
        };
        self.counters.forwarded += 1;
        let frame = Frame {
            dst,
            src: self.config.mac,
            payload: Payload::Ipv4(ip),
        };
        self.send(&frame, Some(hop));
    }

    /// `arpresolve`: the Ethernet address for `dst`, or `None` after
    /// asking for it.
    fn link_address(&mut self, dst: Ipv4Addr) -> Option<Mac> {
        if self.config.in_broadcast(dst) {
            return Some(BROADCAST_MAC);
        }
        if let Some(mac) = self.arp.get(&dst) {
            return Some(*mac);
        }
        self.counters.arp_queries += 1;
        let query = arp_query(self.config.mac, self.config.addr, dst);
        self.send(&query, None);
        None
    }
}

/// An ARP request from `mac`/`addr` for `target` (RFC 826).
pub fn arp_query(mac: Mac, addr: Ipv4Addr, target: Ipv4Addr) -> Frame {
    Frame {
        dst: BROADCAST_MAC,
        src: mac,
        payload: Payload::Arp(Arp {
            op: ARP_REQUEST,
            sender_mac: mac,
            sender_ip: addr,
            target_mac: [0; 6],
            target_ip: target,
        }),
    }
}

/// A RIP version 1 response (RFC 1058 §3.1) carrying one route, as routed
/// supplies it every 30 seconds to its interface's broadcast address.
pub fn rip_supply(mac: Mac, src: Ipv4Addr, dst: Ipv4Addr, ttl: u8) -> Frame {
    let mut rip = vec![2, 1, 0, 0]; // command response, version 1
    rip.extend_from_slice(&2u16.to_be_bytes()); // AF_INET
    rip.extend_from_slice(&[0, 0]);
    rip.extend_from_slice(&[0, 0, 0, 0]); // the default route
    rip.extend_from_slice(&[0; 8]);
    rip.extend_from_slice(&1u32.to_be_bytes()); // metric
    Frame {
        dst: BROADCAST_MAC,
        src: mac,
        payload: Payload::Ipv4(Ipv4::udp(src, dst, (RIP_PORT, RIP_PORT), ttl, &rip)),
    }
}

/// A UDP datagram to the unicast address `dst`, sent as a link-level
/// broadcast (Mogul's case, tcp-ip list, 13 June 1985: what a host that
/// forwards anything not for it sends on).
pub fn stray_datagram(mac: Mac, src: Ipv4Addr, dst: Ipv4Addr, ttl: u8) -> Frame {
    Frame {
        dst: BROADCAST_MAC,
        src: mac,
        payload: Payload::Ipv4(Ipv4::udp(src, dst, (RIP_PORT, 9), ttl, b"stray")),
    }
}

/// A heartbeat from `src` to `dst` (SCS hello stand-in), numbered.
pub fn hello(src: Mac, dst: Mac, seq: u32) -> Frame {
    let mut body = b"SCS hello ".to_vec();
    body.extend_from_slice(&seq.to_be_bytes());
    body.resize(46, 0);
    Frame {
        dst,
        src,
        payload: Payload::Other(ETHERTYPE_SCS, body),
    }
}

/// What one frame costs the wire, in ns at `rate_bps`: its bytes padded to
/// the minimum, the FCS (4), preamble and start delimiter (8) and the
/// 9.6 µs interframe gap (12 byte times at 10 Mbit/s).
pub fn wire_time_ns(frame_len: usize, rate_bps: u64) -> u64 {
    let bytes = frame_len.max(crate::wire::ether::MIN_FRAME) + 4 + 8 + 12;
    (bytes as u64 * 8).saturating_mul(1_000_000_000) / rate_bps.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(kind: Kind, last: u8, zeros: bool) -> HostConfig {
        let addr = Ipv4Addr::new(10, 90, 0, last);
        let mut config = HostConfig {
            name: format!("h{last}"),
            kind,
            mac: [2, 0, 0, 0, 0, last],
            addr,
            prefix: 24,
            broadcast: addr,
            forwarding: kind == Kind::Sun,
            refuse_link_broadcasts: false,
        };
        config.broadcast = config.net_broadcast(zeros);
        config
    }

    const ONES: Ipv4Addr = Ipv4Addr::new(10, 90, 0, 255);

    #[test]
    fn a_sun_with_the_zeros_broadcast_forwards_the_ones_broadcast_as_a_link_broadcast() {
        let sun = host(Kind::Sun, 1, true);
        assert!(!sun.for_us(ONES), "4.2BSD's ipintr knows only its own");
        assert!(sun.in_broadcast(ONES), "4.3BSD's in_broadcast knows both");
        let mut h = Host::new(sun, 800_000, 30);
        h.arrive(rip_supply([2, 0, 0, 0, 0, 9], Ipv4Addr::new(10, 90, 0, 9), ONES, 30).to_bytes());
        h.run(0);
        assert_eq!(h.deadline(), Some(800_000), "the CPU takes 800 µs");
        h.run(799_999);
        assert!(h.output.is_empty());
        h.run(800_000);
        let out = h.output.pop_front().expect("forwarded");
        assert_eq!(out.hop, Some(1));
        let frame = Frame::parse(&out.bytes).unwrap();
        assert_eq!(frame.dst, BROADCAST_MAC);
        let Payload::Ipv4(ip) = frame.payload else {
            panic!()
        };
        assert_eq!((ip.dst, ip.ttl), (ONES, 29));
    }

    #[test]
    fn each_fix_of_the_host_stops_the_forwarding() {
        let probe = rip_supply([2, 0, 0, 0, 0, 9], Ipv4Addr::new(10, 90, 0, 9), ONES, 30);
        let forwards = |config: HostConfig| {
            let mut h = Host::new(config, 1000, 30);
            h.arrive(probe.to_bytes());
            h.run(0);
            h.run(1000);
            (h.counters.forwarded, h.counters)
        };
        assert_eq!(forwards(host(Kind::Sun, 1, true)).0, 1);
        assert_eq!(
            forwards(host(Kind::Sun, 1, false)).0,
            0,
            "one broadcast address"
        );
        let mut miller = host(Kind::Sun, 1, true);
        miller.refuse_link_broadcasts = true;
        let (n, counters) = forwards(miller);
        assert_eq!((n, counters.refused_link_broadcast), (0, 1));
        let (n, counters) = forwards(host(Kind::Vax, 1, true));
        assert_eq!(n, 0);
        assert_eq!(counters.for_us, 1, "4.3BSD takes the 1's form as its own");
    }

    #[test]
    fn the_ttl_runs_out_and_full_queues_drop() {
        let mut h = Host::new(host(Kind::Sun, 1, true), 10, 30);
        h.arrive(rip_supply([2, 0, 0, 0, 0, 9], Ipv4Addr::new(10, 90, 0, 9), ONES, 1).to_bytes());
        for _ in 0..IFQ_MAXLEN + 5 {
            h.arrive(
                rip_supply([2, 0, 0, 0, 0, 9], Ipv4Addr::new(10, 90, 0, 9), ONES, 9).to_bytes(),
            );
        }
        assert_eq!(h.counters.input_drops, 6, "ipintrq holds 50 of the 56");
        for t in 0..200 {
            h.run(t * 10);
        }
        assert_eq!(h.counters.ttl_expired, 1);
        assert_eq!(h.counters.forwarded, 49);
        assert_eq!(h.output.len(), 49);
        let probe = rip_supply([2, 0, 0, 0, 0, 9], Ipv4Addr::new(10, 90, 0, 9), ONES, 9);
        h.send(&probe, None);
        h.send(&probe, None);
        assert_eq!(h.output.len(), IFQ_MAXLEN, "if_snd holds 50");
        assert_eq!(h.counters.output_drops, 1);
    }

    #[test]
    fn an_unknown_unicast_is_asked_for_by_arp_and_a_request_for_me_answered() {
        let mut h = Host::new(host(Kind::Sun, 1, true), 10, 30);
        let stray = Frame {
            dst: BROADCAST_MAC,
            src: [2, 0, 0, 0, 0, 9],
            payload: Payload::Ipv4(Ipv4::udp(
                Ipv4Addr::new(10, 90, 0, 9),
                Ipv4Addr::new(10, 90, 0, 77),
                (9, 9),
                30,
                b"x",
            )),
        };
        h.arrive(stray.to_bytes());
        h.arrive(
            arp_query(
                [2, 0, 0, 0, 0, 9],
                Ipv4Addr::new(10, 90, 0, 9),
                Ipv4Addr::new(10, 90, 0, 1),
            )
            .to_bytes(),
        );
        h.arrive(arp_query([2, 0, 0, 0, 0, 9], Ipv4Addr::new(10, 90, 0, 9), ONES).to_bytes());
        for t in 0..10 {
            h.run(t * 10);
        }
        assert_eq!(h.counters.arp_queries, 1);
        assert_eq!(
            h.counters.arp_replies, 1,
            "only the query for its own address"
        );
        assert_eq!(h.output.len(), 2);
    }

    #[test]
    fn a_minimum_frame_takes_67_microseconds_of_a_10_mbit_wire() {
        assert_eq!(wire_time_ns(60, 10_000_000), 67_200);
        assert_eq!(wire_time_ns(1514, 10_000_000), 1_230_400);
    }
}
