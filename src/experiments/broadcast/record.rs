//! The broadcast storm as records carry it: the run asked for (hosts, the
//! fix, the bounds) and what it saw (the model's account of the wire and
//! of each 1990 host, the Linux hosts' own counters, the heartbeat).

use super::wire::ModelReport;
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;

/// A 1990 fix, as a factor of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Fix {
    /// No fix: the network as the document found it.
    None,
    /// The same broadcast address (all 1's) on every machine.
    OneBroadcast,
    /// The Suns on a segment of their own, behind an IP router.
    Router,
    /// Kernels that do not forward what arrived as a link-level broadcast.
    NoLinkBroadcastForwarding,
    /// A longer heartbeat timeout (RECNXINTERVAL raised).
    LongerTimeout,
}

impl Fix {
    pub const ALL: [Fix; 5] = [
        Fix::None,
        Fix::OneBroadcast,
        Fix::Router,
        Fix::NoLinkBroadcastForwarding,
        Fix::LongerTimeout,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Fix::None => "none",
            Fix::OneBroadcast => "one broadcast address",
            Fix::Router => "router between segments",
            Fix::NoLinkBroadcastForwarding => "no forwarding of link broadcasts",
            Fix::LongerTimeout => "longer heartbeat timeout",
        }
    }

    /// The document's own words for it (source 003).
    pub fn words(self) -> &'static str {
        match self {
            Fix::None => {
                "\"just a handful of Suns which use the 0's broadcast and which run RIP ... will generate feedback loops quite capable of destroying the network\" (Leonard)"
            }
            Fix::OneBroadcast => {
                "\"if you don't set the broadcast address to be the same thing on *all* your machines ... you *will* have problems\" (Miller)"
            }
            Fix::Router => "\"Put Suns behind IP routers whenever possible.\" (Leonard)",
            Fix::NoLinkBroadcastForwarding => {
                "\"I'd like to see the kernel on lots of machines fixed so that it won't forward things flagged as link-level broadcasts.\" (Miller)"
            }
            Fix::LongerTimeout => {
                "\"Increase the RECNXINTERVAL ... to something like 120 seconds ... better able to weather broadcast storms\" (Leonard)"
            }
        }
    }
}

/// One run of the storm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BroadcastSpec {
    pub hosts: usize,
    pub suns: usize,
    pub linux: usize,
    /// The broadcast address the Suns (and the Linux hosts) are given.
    pub sun_broadcast: Ipv4Addr,
    pub ttl: u8,
    pub max_frames: u64,
    pub max_ms: u64,
    pub hello_ms: u64,
    pub timeout_ms: u64,
    /// The timeout the longer-timeout fix uses.
    pub longer_timeout_ms: u64,
    pub fix: Fix,
    pub rate_bps: u64,
}

impl BroadcastSpec {
    /// The heartbeat's timeout in this run (the fix lengthens it).
    pub fn timeout(&self) -> u64 {
        if self.fix == Fix::LongerTimeout {
            self.longer_timeout_ms
        } else {
            self.timeout_ms
        }
    }
}

/// A Linux host's own account of the run, from its kernel's counters
/// (`/proc/net/snmp`, `/proc/net/netstat`) and its bridge port's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LinuxCounts {
    pub name: String,
    /// `Ip: InReceives`: datagrams its IP layer took in.
    pub in_receives: u64,
    /// `IpExt: InBcastPkts`: of those, to a broadcast address.
    pub in_bcast: u64,
    /// `Ip: ForwDatagrams`: datagrams it forwarded.
    pub forwarded: u64,
    /// Frames it put on the wire (its bridge port's `rx_packets`).
    pub frames_sent: u64,
}

/// What a run saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BroadcastResult {
    pub model: ModelReport,
    pub linux: Vec<LinuxCounts>,
    /// The router's own account (the router fix), when there was one.
    pub router: Option<LinuxCounts>,
    /// A note on what the run could not do or watch.
    pub notes: Vec<String>,
    /// The kernel's IPv4 drops during the run, by function and reason
    /// (`skb:kfree_skb`), when tracefs could be used.
    #[serde(default)]
    pub kernel_drops: Option<Vec<crate::measure::drops::Drops>>,
    /// The stray datagram's address, when one was sent.
    #[serde(default)]
    pub stray: Option<Ipv4Addr>,
}

/// A broadcast record's own part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "experiment", rename = "broadcast")]
pub struct BroadcastData {
    pub params: BroadcastSpec,
    pub result: Option<Box<BroadcastResult>>,
}

impl crate::record::profile::Profiled for BroadcastData {}

/// What the run's figures come to.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Reading {
    /// Forwarded copies of the one probe.
    pub copies: u64,
    /// Copies per hop, first hops first.
    pub hops: Vec<u64>,
    /// Copies at hop 2 over hop 1: how much each round multiplies.
    pub gain: Option<f64>,
    /// The wire's busiest bin, and its mean from the probe to the last
    /// copy, as fractions of 10 Mbit/s.
    pub peak_utilisation: f64,
    pub storm_utilisation: f64,
    /// From the probe to the last copy, ms.
    pub storm_ms: f64,
    pub longest_gap_ms: f64,
    pub survived: bool,
    /// Copies the Linux hosts forwarded, and frames they sent.
    pub linux_forwarded: u64,
    pub linux_frames: u64,
    /// Storm frames the Linux hosts took in.
    pub linux_received: u64,
    /// Datagrams `ip_forward` dropped during the run (the kernel's own
    /// account), when it could be watched.
    pub ip_forward_drops: Option<u64>,
}

impl BroadcastResult {
    pub fn reading(&self, spec: &BroadcastSpec) -> Reading {
        let m = &self.model;
        let bin_ns = (m.bin_ms * 1_000_000) as f64;
        let peak = m.bins.iter().map(|b| b.busy_ns).max().unwrap_or(0) as f64 / bin_ns;
        let (from, to) = (m.probe_ms, m.last_copy_ms.unwrap_or(m.probe_ms));
        let bins: Vec<_> = m
            .bins
            .iter()
            .enumerate()
            .filter(|(i, _)| {
                let t = (*i as u64 * m.bin_ms) as f64;
                t + m.bin_ms as f64 > from && t <= to
            })
            .map(|(_, b)| b.busy_ns)
            .collect();
        let storm_utilisation = if bins.is_empty() {
            0.0
        } else {
            bins.iter().sum::<u64>() as f64 / (bins.len() as f64 * bin_ns)
        };
        let longest = m.longest_gap_ms[0].max(m.longest_gap_ms[1]);
        Reading {
            copies: m.copies,
            hops: m.hops.clone(),
            gain: match m.hops.as_slice() {
                [first, second, ..] if *first > 0 => Some(*second as f64 / *first as f64),
                _ => None,
            },
            peak_utilisation: peak,
            storm_utilisation,
            storm_ms: (to - from).max(0.0),
            longest_gap_ms: longest,
            survived: longest <= spec.timeout() as f64,
            linux_forwarded: self.linux.iter().map(|l| l.forwarded).sum(),
            linux_frames: self.linux.iter().map(|l| l.frames_sent).sum(),
            linux_received: self.linux.iter().map(|l| l.in_bcast).sum(),
            ip_forward_drops: self.kernel_drops.as_ref().map(|drops| {
                drops
                    .iter()
                    .filter(|d| d.function == "ip_forward")
                    .map(|d| d.count)
                    .sum()
            }),
        }
    }
}
