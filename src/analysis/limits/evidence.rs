//! What the verdict reads about a flow, as a record has it.

use super::thresholds::*;
use std::collections::BTreeMap;

/// One side of a flow, as the record has it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SideEvidence {
    /// The side's wall time from its first byte to its last, s.
    pub wall_s: f64,
    /// CPU time (user + system) over it, s.
    pub cpu_s: f64,
    /// The user-mode part: the application's own work between its reads or
    /// writes (producing, verifying), outside the kernel, s.
    pub user_s: Option<f64>,
    pub syscalls: u64,
    pub voluntary_cs: u64,
    pub involuntary_cs: u64,
    /// The socket's buffer at the end (`SO_RCVBUF` or `SO_SNDBUF`), bytes.
    pub socket_buffer: Option<u64>,
    /// Whether the buffer was set by the user (which turns autotuning off).
    pub buffer_set: bool,
    /// The namespace's autotuning maximum (`tcp_rmem` or `tcp_wmem`), bytes.
    pub buffer_max: Option<u64>,
    /// The data path's thread runnable but waiting for a CPU, s (with a
    /// CPU budget, this includes the time the budget held it back).
    pub run_delay_s: Option<f64>,
    /// The CPU budget the data path ran under, as a fraction of one CPU
    /// (a cgroup quota: `--sender-cpu`, `--receiver-cpu`).
    pub cpu_budget: Option<f64>,
    /// Time the budget's group was throttled, having spent its quota, s.
    pub throttled_s: Option<f64>,
    /// The side's namespace's TCP counters over the run (`TcpExt.*` and
    /// `Tcp.*` by full name), if they were read: namespace-wide, so on
    /// loopback both ends' and all other traffic's.
    pub counters: Option<BTreeMap<String, u64>>,
    /// The core the data path ended on, and that core's load over the
    /// run: busy (every task, interrupts, softirqs) and the interrupt and
    /// softirq part alone, which no process is charged for.
    pub core: Option<CoreEvidence>,
    /// The interface the flow left (sender) or entered (receiver) by, and
    /// the packets it dropped or failed in that direction over the run
    /// (`/proc/net/dev`'s drop and errs; all its traffic's).
    pub interface: Option<InterfaceDrops>,
    /// `--tls`: the side's time in its TLS record layer.
    pub record_layer: Option<RecordLayer>,
}

/// A side's TLS record layer over the run: sealing (the sender) or
/// opening (the receiver) records in user space.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordLayer {
    /// `sealing` or `opening`.
    pub work: String,
    /// Time in it, s.
    pub seconds: f64,
    /// The negotiated suite (`TLS13_AES_128_GCM_SHA256`).
    pub suite: String,
    /// The cipher alone on the side's core, ns per KB of plaintext.
    pub alone_ns_per_kb: Option<f64>,
    /// Whether the side's kernel has kTLS, to carry the records itself.
    pub kernel_tls: bool,
}

/// A side whose record layer took at least this share of its CPU time
/// has the encryption as the larger part of its per-byte cost: the copy
/// into the socket is the rest.
pub const RECORD_LAYER_BOUND: f64 = 0.5;

impl RecordLayer {
    /// `sealing TLS records (TLS13_AES_128_GCM_SHA256: 95 ns per KB; the
    /// cipher alone on this core 87)`, for `bytes` of plaintext.
    pub fn clause(&self, bytes: u64) -> String {
        let kb = (bytes as f64 / 1024.0).max(1e-9);
        format!(
            "{} TLS records ({}: {:.0} ns per KB{})",
            self.work,
            self.suite,
            self.seconds * 1e9 / kb,
            self.alone_ns_per_kb.map_or(String::new(), |a| format!(
                "; the cipher alone on its core {a:.0}"
            ))
        )
    }

    /// What moves the records off the CPU, or onto a cheaper path.
    pub fn fixes(&self) -> &'static str {
        if self.kernel_tls {
            "hand the records to the kernel (kTLS: the copy into the socket then seals them), a NIC that offloads TLS, or spread connections over cores (-P)"
        } else {
            "kTLS would let the kernel seal during its copy, but this kernel has none (CONFIG_TLS off); a NIC that offloads TLS, or spread connections over cores (-P)"
        }
    }
}

/// One interface's drops and errors in the flow's direction.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InterfaceDrops {
    pub name: String,
    pub dropped: u64,
    pub errors: u64,
}

/// One core's load over a side's data path (`/proc/stat`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CoreEvidence {
    pub cpu: u32,
    pub busy_share: f64,
    /// Softirq and hard interrupt time together.
    pub interrupt_share: f64,
}

/// A core whose interrupt and softirq work was at least this share of the
/// run takes a side's time that the side's own accounting does not show.
pub const INTERRUPT_WORK: f64 = 0.1;

/// A side whose own work outside its reads or writes took this share of
/// the run drains or fills its socket only between times.
pub const OWN_WORK: f64 = 0.3;

impl SideEvidence {
    /// The share of its CPU time its TLS record layer took.
    pub fn record_share(&self) -> Option<f64> {
        let layer = self.record_layer.as_ref()?;
        (self.cpu_s > 0.0).then(|| (layer.seconds / self.cpu_s).min(1.0))
    }

    /// The share of the run the application spent on its own CPU outside
    /// the kernel: between its reads or writes.
    pub fn own_work_share(&self) -> Option<f64> {
        let user = self.user_s?;
        (self.wall_s > 0.0).then(|| user / self.wall_s)
    }

    pub(super) fn utilisation(&self) -> f64 {
        if self.wall_s > 0.0 {
            self.cpu_s / self.wall_s
        } else {
            0.0
        }
    }

    /// The CPU it could have had: its budget, or one core (a data path
    /// is one thread).
    pub(super) fn capacity(&self) -> f64 {
        self.cpu_budget.map_or(1.0, |b| b.clamp(1e-3, 1.0))
    }

    /// Its CPU as a share of what it could have had: at or above
    /// [`SATURATED`], it was CPU-bound, whether by its core or its budget.
    pub(super) fn load(&self) -> f64 {
        self.utilisation() / self.capacity()
    }

    /// Its CPU with its core's interrupt and softirq work added, as a
    /// share of one core: what a sender's writes cost where the packet
    /// work they set off runs on their own core (loopback and veth hand
    /// the receive path to the sender's softirq), without a budget.
    pub(super) fn load_with_interrupts(&self) -> f64 {
        match (self.core, self.cpu_budget.filter(|&b| b < 1.0)) {
            (Some(core), None) => self.utilisation() + core.interrupt_share,
            _ => self.load(),
        }
    }

    /// The share of the run its budget held it back.
    pub(super) fn throttled(&self) -> f64 {
        self.throttled_s.unwrap_or(0.0) / self.wall_s.max(1e-9)
    }

    /// The share of the run it waited for a CPU that other work held (its
    /// run delay less what its own budget held it back), if measured.
    pub(super) fn waited(&self) -> Option<f64> {
        Some((self.run_delay_s? - self.throttled_s.unwrap_or(0.0)).max(0.0) / self.wall_s.max(1e-9))
    }

    /// [`waited`](Self::waited), when that is at least [`CONTENDED`] of the
    /// run, or a tenth when running and waiting together would have
    /// saturated it.
    pub(super) fn contended(&self) -> Option<f64> {
        let waited = self.waited()?;
        (waited >= CONTENDED || (waited >= 0.1 && self.load() + waited >= SATURATED))
            .then_some(waited)
    }
}

/// The sender's `struct tcp_info` at the end, as far as the verdict reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SenderTcp {
    pub srtt_us: u32,
    pub min_rtt_us: Option<u32>,
    pub snd_mss: u32,
    pub snd_cwnd: u32,
    pub total_retrans: u32,
    pub data_segs_out: Option<u32>,
    pub busy_us: Option<u64>,
    pub rwnd_limited_us: Option<u64>,
    pub sndbuf_limited_us: Option<u64>,
    /// The congestion control in force (`bbr` paces and does not read
    /// loss as congestion; the others are loss-based).
    pub congestion_control: Option<String>,
    /// The kernel's delivery-rate estimate at the end (`tcpi_delivery_rate`),
    /// bits/s.
    pub delivery_rate_bps: Option<u64>,
    /// The slow-start threshold at the end (`tcpi_snd_ssthresh`): at
    /// [`INFINITE_SSTHRESH`] or above, a loss-based control never left
    /// slow start.
    pub snd_ssthresh: Option<u32>,
    /// Bytes sent, retransmissions included (`tcpi_bytes_sent`, 4.19),
    /// and of them retransmitted (`tcpi_bytes_retrans`).
    pub bytes_sent: Option<u64>,
    pub bytes_retrans: Option<u64>,
    /// BBR's bandwidth estimate at the end (`TCP_CC_INFO`'s
    /// `bbr_bw_lo/hi`), bits/s.
    pub bbr_bw_bps: Option<u64>,
}

impl SenderTcp {
    /// The verdict's view of a sender's `struct tcp_info`, with the
    /// congestion control and BBR's bandwidth estimate read beside it.
    pub fn of(
        t: &crate::measure::tcpinfo::TcpInfo,
        congestion_control: Option<String>,
        bbr_bw_bps: Option<u64>,
    ) -> SenderTcp {
        SenderTcp {
            srtt_us: t.rtt_us,
            min_rtt_us: t.min_rtt_us,
            snd_mss: t.snd_mss,
            snd_cwnd: t.snd_cwnd,
            total_retrans: t.total_retrans,
            data_segs_out: t.data_segs_out,
            busy_us: t.busy_time_us,
            rwnd_limited_us: t.rwnd_limited_us,
            sndbuf_limited_us: t.sndbuf_limited_us,
            congestion_control,
            // TCP_INFO gives bytes per second.
            delivery_rate_bps: t.delivery_rate_bps.map(|r| r.saturating_mul(8)),
            snd_ssthresh: t.snd_ssthresh,
            bytes_sent: t.bytes_sent,
            bytes_retrans: t.bytes_retrans,
            bbr_bw_bps,
        }
    }
}

/// `TCP_INFINITE_SSTHRESH` (include/net/tcp.h).
pub const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// One sample of the sender's TCP_INFO during the run: each interval of
/// `--interval`, or the verdict's own quiet samples. The chrono shares
/// are of the interval; the rest is read at its end.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct IntervalEvidence {
    pub start_s: f64,
    pub end_s: f64,
    pub busy: f64,
    pub rwnd_limited: f64,
    pub sndbuf_limited: f64,
    pub app_limited: Option<bool>,
    /// The kernel's delivery-rate estimate at the interval's end, bits/s
    /// (BBR's bandwidth estimate where the sample has one).
    pub delivery_rate_bps: Option<f64>,
    /// The smoothed RTT at its end, µs.
    pub rtt_us: Option<u32>,
    /// `tcpi_ca_state` at its end: 0 open, 1 disorder, 2 CWR, 3 recovery,
    /// 4 loss.
    pub ca_state: Option<u8>,
    /// Segments retransmitted in the interval.
    pub retransmits: u32,
    /// The congestion window at its end, segments.
    pub cwnd: u32,
}

/// `tcpi_ca_state`'s recovery (fast retransmit) and loss (RTO) states.
pub const CA_RECOVERY: u8 = 3;
pub const CA_LOSS: u8 = 4;

/// A shaper or policer one end of the flow read on its own interface,
/// before and after the flow (a qdisc, a class or a police action).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShaperEvidence {
    /// Which end read it (`sender`, `receiver`, or the agent's name).
    pub host: String,
    pub interface: String,
    /// `egress` (the flow leaves by it) or `ingress` (it enters by it).
    pub direction: String,
    /// The qdisc or class as tc names it: `tbf 1:`, `htb class 1:10`,
    /// `ingress police`.
    pub kind: String,
    /// Its rate, bits/s.
    pub rate_bps: u64,
    /// Over the flow: packets dropped, times it held a packet back, and
    /// the largest backlog seen (bytes) where read.
    pub drops: u64,
    pub overlimits: u64,
    pub backlog_bytes: Option<u64>,
}

impl ShaperEvidence {
    /// `tbf 1: on eth0 of sender (egress, 30.0 Mbit/s)`.
    pub fn describe(&self) -> String {
        format!(
            "{} on {} of {} ({}, {:.1} Mbit/s)",
            self.kind,
            self.interface,
            self.host,
            self.direction,
            self.rate_bps as f64 / 1e6
        )
    }
}

impl SenderTcp {
    /// What the congestion window allows over the smoothed round trip,
    /// bits/s.
    pub(super) fn cwnd_rate_bps(&self) -> f64 {
        f64::from(self.snd_cwnd) * f64::from(self.snd_mss) * 8.0
            / (f64::from(self.srtt_us.max(1)) / 1e6)
    }

    pub(super) fn loss_based(&self) -> bool {
        !self
            .congestion_control
            .as_deref()
            .is_some_and(|cc| cc.starts_with("bbr"))
    }
}

/// The path as the record knows it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PathEvidence {
    /// The bottleneck link's rate, bits/s, where known (an emulated or
    /// shaped link), and what said so.
    pub rate_bps: Option<u64>,
    pub rate_source: String,
    /// Bytes on the wire per payload byte (headers and framing), ≥ 1.
    pub overhead: f64,
    /// Time the emulated wire was busy in the flow's direction, s.
    pub wire_busy_s: Option<f64>,
    /// The queue in front of the link, bytes, and its drops.
    pub queue_bytes: Option<u64>,
    pub queue_drops: Option<u64>,
    /// The wire emulator's CPU over its life, as a share of its wall time
    /// (it carries both directions), when it carried the link.
    pub emulator_busy: Option<f64>,
    /// Whether `rate_bps` is the bottleneck's own rate (a link profile, a
    /// shaper read at either end) rather than an upper bound (an
    /// interface's reported speed, which a slower hop beyond it may
    /// undercut).
    pub rate_exact: bool,
    /// Shapers and policers the ends read on the flow's way out of the
    /// sender and into the receiver.
    pub shapers: Vec<ShaperEvidence>,
    /// What an end could not read about its side of the path (its
    /// qdiscs without CAP_NET_ADMIN, its counters), in words.
    pub unread: Vec<String>,
}

/// Everything the verdict reads about one flow.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FlowEvidence {
    /// Payload delivered, bytes, over the receiver's wall time.
    pub bytes: u64,
    /// Bytes per write.
    pub record: u64,
    pub sender: SideEvidence,
    pub receiver: SideEvidence,
    pub tcp: Option<SenderTcp>,
    pub path: PathEvidence,
    /// The sender's own pacing, bits/s (`--rate`), if any.
    pub paced_bps: Option<u64>,
    /// Per interval (`--interval`), the sender's samples; empty without
    /// intervals.
    pub intervals: Vec<IntervalEvidence>,
    /// The verdict's own samples of the sender's TCP_INFO, taken without
    /// `--interval` (read only when `intervals` is empty).
    pub samples: Vec<IntervalEvidence>,
    /// The TCP handshake, as the sender's `connect` took it, s.
    pub handshake_s: Option<f64>,
    /// A Multipath TCP connection of this many subflows (any: the
    /// sender's TCP_INFO is one subflow's and is left out).
    pub subflows: usize,
}

impl FlowEvidence {
    /// The run's samples: its intervals, or the verdict's own.
    pub fn series(&self) -> &[IntervalEvidence] {
        if self.intervals.is_empty() {
            &self.samples
        } else {
            &self.intervals
        }
    }
}
