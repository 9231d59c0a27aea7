//! A bulk transfer's two ends as they exchange and report it: the
//! strategies and socket options each end uses, the amount, what each end
//! measured (its system calls, CPU, TCP_INFO, intervals, zero-copy
//! completions, UDP's datagrams and losses), and the bounds of UDP's
//! datagrams and pace. Data only; `transfer` and `udp` measure, and
//! stream's records (`experiments::stream::record`) carry these as they are.

use crate::measure::{
    ifstat::InterfaceCounters, netstat::Counters, rusage::ProcessUsage, tcpinfo::TcpInfo,
};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The shortest and longest UDP test datagrams (header included; IPv4's
/// largest UDP payload).
pub const MIN_LENGTH: usize = crate::wire::udpstream::HEADER_LEN + 8;
pub const MAX_LENGTH: usize = 65_507;

/// How the sender hands bytes to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum SendStrategy {
    /// One `write(2)` per record.
    Write,
    /// sosend-style: each record handed over in `write(2)`s of at most `chunk` bytes.
    Chunked { chunk: usize },
    /// One `writev(2)` gathering `records` records at a time.
    Writev { records: usize },
    /// `sendfile(2)` from a page-cached file holding the pattern.
    Sendfile,
    /// `splice(2)` file → pipe → socket.
    Splice,
    /// `send(2)` with `MSG_ZEROCOPY`, completions reaped from the error queue.
    Zerocopy,
}

impl SendStrategy {
    /// The short name used on the command line and in tables.
    pub fn name(&self) -> &'static str {
        match self {
            SendStrategy::Write => "write",
            SendStrategy::Chunked { .. } => "chunked",
            SendStrategy::Writev { .. } => "writev",
            SendStrategy::Sendfile => "sendfile",
            SendStrategy::Splice => "splice",
            SendStrategy::Zerocopy => "zerocopy",
        }
    }
}

/// How the receiver takes bytes from the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum RecvStrategy {
    /// `read(2)` into a buffer of `buffer` bytes (and verify, if asked).
    Read { buffer: usize },
    /// `splice(2)` socket → pipe → /dev/null: no user-space copy, no verification.
    Splice,
    /// `TCP_ZEROCOPY_RECEIVE`: the socket's pages mapped into the receiver
    /// `buffer` bytes at a time (and verified, if asked), what cannot be
    /// mapped read into a `buffer`-byte buffer.
    Zerocopy { buffer: usize },
}

impl RecvStrategy {
    /// The short name used on the command line and in tables.
    pub fn name(&self) -> &'static str {
        match self {
            RecvStrategy::Read { .. } => "read",
            RecvStrategy::Splice => "splice",
            RecvStrategy::Zerocopy { .. } => "zerocopy",
        }
    }

    /// Whether the receiver sees the bytes, so that it can verify them.
    pub fn sees_bytes(&self) -> bool {
        !matches!(self, RecvStrategy::Splice)
    }
}

/// Socket options applied before connecting (sender) or listening
/// (receiver), and the CPU budget each end's data path runs under.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SocketOptions {
    pub nodelay: bool,
    pub sndbuf: Option<usize>,
    pub rcvbuf: Option<usize>,
    /// Congestion control algorithm (`TCP_CONGESTION`).
    pub congestion_control: Option<String>,
    /// `TCP_MAXSEG` before connecting (sender) or listening (receiver):
    /// the largest segment either end sends (4108 on loopback gives whole
    /// 4 KB pages of payload with timestamps, what zero-copy receive maps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mss: Option<u32>,
    /// `SO_RCVLOWAT` on the receiving socket, set after its first read (so
    /// the first byte is timed as it comes): a read then waits until this
    /// many bytes are ready or the stream ends, and the sender's kernel
    /// wakes the receiver that much less often. Read receivers only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcvlowat: Option<u32>,
    /// TCP `--rate`: the kernel paces the sender's connection at this
    /// many bits per second (SO_MAX_PACING_RATE; TCP's own pacing, no fq
    /// needed since Linux 4.13).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing_bps: Option<u64>,
    /// `--sender-cpu` / `--receiver-cpu`: the sending or receiving end's
    /// data path runs in a cgroup of this many percent of one CPU
    /// (`testbed::cgroup`), the rest of its process (control, samplers)
    /// outside it where the hierarchy allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_cpu_pct: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_cpu_pct: Option<f64>,
    /// `--stall-timeout`: how long either end waits without a byte moving
    /// before the cell fails (none: [`crate::endpoint::stall::DEFAULT_STALL`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall: Option<crate::endpoint::stall::StallBound>,
    /// `--mptcp`: both ends open Multipath TCP sockets (RFC 8684), and
    /// the kernel's path manager adds subflows over the paths it knows.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mptcp: bool,
}

impl SocketOptions {
    /// The progress bound in force.
    pub fn stall_bound(&self) -> crate::endpoint::stall::StallBound {
        self.stall.unwrap_or_default()
    }
}

impl SocketOptions {
    /// Each end's CPU budget, by the end's name (`--sender-cpu`, `--receiver-cpu`).
    pub fn cpu_budgets(&self) -> [(&'static str, Option<f64>); 2] {
        [
            ("sender", self.sender_cpu_pct),
            ("receiver", self.receiver_cpu_pct),
        ]
    }
}

/// How much the sender sends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Amount {
    Bytes(u64),
    Seconds(f64),
}

/// Counts specific to `MSG_ZEROCOPY` sends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ZerocopyStats {
    /// Sends whose completion was reported.
    pub completed: u64,
    /// Of those, sends the kernel had to copy after all (always the case on
    /// loopback, where the receiver would otherwise read the sender's pages).
    pub copied: u64,
}

/// One interval of a sender's data path (`--interval T`), from TCP_INFO
/// read at the interval's end.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalSample {
    /// Seconds from the start of the data path to the interval's start and end.
    pub start_s: f64,
    pub end_s: f64,
    /// Bytes the peer acknowledged in the interval (TCP_INFO `bytes_acked`;
    /// where the kernel does not say, the bytes handed to it).
    pub bytes: u64,
    pub mbit_s: f64,
    /// Segments retransmitted in the interval.
    pub retransmits: u32,
    /// At the interval's end: congestion window (segments), smoothed RTT,
    /// and the kernel's delivery rate estimate.
    pub cwnd: u32,
    pub rtt_us: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_rate_mbit_s: Option<f64>,
    /// The sender's time in the interval by Linux's chrono accounting
    /// (differences of `tcpi_busy_time`, `tcpi_rwnd_limited`,
    /// `tcpi_sndbuf_limited` over it), as shares of the interval; absent
    /// on a kernel before 4.10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chrono: Option<ChronoShares>,
    /// The kernel's last delivery-rate sample was application-limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_limited: Option<bool>,
    /// `tcpi_ca_state` at the interval's end (3 recovery, 4 loss).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_state: Option<u8>,
    /// BBR's bandwidth estimate at the interval's end (TCP_CC_INFO), Mbit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bbr_bw_mbit_s: Option<f64>,
    /// At the interval's end: the RTT's variation (µs), the path MTU, the
    /// sender's MSS and the peer's advertised window (bytes), for
    /// iperf3's interval fields (records before 2026-11-29: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rttvar_us: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pmtu: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mss: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snd_wnd: Option<u32>,
}

/// Shares of an interval: data in flight (busy), of which stalled by the
/// receive window and by the send buffer; the rest of the interval the
/// sender had nothing in flight.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ChronoShares {
    pub busy: f64,
    pub rwnd_limited: f64,
    pub sndbuf_limited: f64,
}

impl ChronoShares {
    /// The part of the interval that held the flow most, in a word:
    /// `rwnd`, `sndbuf`, `cwnd` (busy, neither stalled: the window, pacing,
    /// the path or the CPU) or `idle` (nothing in flight).
    pub fn dominant(&self) -> &'static str {
        crate::analysis::limits::chrono_dominant(self.busy, self.rwnd_limited, self.sndbuf_limited)
    }
}

/// `--udp`: datagrams of `length` bytes (header included) paced at
/// `rate_bps` bits per second of UDP payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdpPace {
    pub rate_bps: u64,
    pub length: usize,
}

/// The fastest UDP rate netlab paces: 100 Gbit/s.
pub const MAX_UDP_RATE_BPS: u64 = 100_000_000_000;

impl UdpPace {
    /// Whether the pace is one a sender can keep: checked by the controller
    /// from its options and again by an agent from the controller's
    /// request (a zero length or rate would panic or stall the sender).
    pub fn check(&self) -> Result<(), String> {
        let (lo, hi) = (MIN_LENGTH, MAX_LENGTH);
        if !(lo..=hi).contains(&self.length) {
            return Err(format!(
                "a UDP length of {} bytes: give {lo} to {hi} (netlab's header is 24)",
                self.length
            ));
        }
        if self.rate_bps == 0 || self.rate_bps > MAX_UDP_RATE_BPS {
            return Err(format!(
                "a UDP rate of {} bit/s: give more than 0 and at most {MAX_UDP_RATE_BPS}",
                self.rate_bps
            ));
        }
        Ok(())
    }
}

/// One-way latency percentiles, µs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

/// What a UDP run's end saw. The sender fills `sent` and `send_errors`;
/// the receiver the rest (`sent` from the end marker, when it came, else
/// from the sender's report: see `end_seen`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpStats {
    /// Data datagrams sent.
    pub sent: Option<u64>,
    /// Sends the kernel refused (ENOBUFS, ECONNREFUSED): not on the wire.
    pub send_errors: u64,
    /// Distinct data datagrams received.
    pub received: u64,
    /// Sent and never received (needs `sent`).
    pub lost: Option<u64>,
    pub lost_pct: Option<f64>,
    /// Copies of a datagram already received.
    pub duplicates: u64,
    /// Datagrams that arrived after one with a higher sequence number.
    pub reordered: u64,
    /// RFC 3550's interarrival jitter (section 6.4.1), ms, as iperf3
    /// reports it: J += (|D| - J) / 16 over consecutive arrivals.
    pub jitter_ms: f64,
    /// One-way latency, when both ends read the same clock (one host:
    /// loopback or namespaces); None between hosts.
    pub latency: Option<Latency>,
    /// Datagrams that were not netlab's (wrong magic, short, bad payload).
    pub malformed: u64,
    /// Whether the end marker arrived. Else the receiver stopped after
    /// two seconds of silence, and `sent` and `lost` are counted against
    /// the sender's own report (or unknown where there is none).
    pub end_seen: bool,
    /// Data datagrams that arrived after the end marker: they overtook it
    /// on a reordering path. Counted as received; a receiver that stopped
    /// at the marker would have called them lost.
    #[serde(default)]
    pub after_end: u64,
    /// Datagrams the receiving socket dropped because its buffer was full
    /// (`SO_RXQ_OVFL`, as of the last datagram read): loss at the receiver,
    /// not on the path. None where the kernel does not report it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_drops: Option<u64>,
    /// Datagrams the receiving namespace's IP and UDP layers dropped before
    /// any socket held them, by counter (`netstat::UDP_RECEIVE_DROPS`:
    /// corrupted headers and checksums, no socket on the port), only those
    /// that saw any. Namespace-wide: on loopback, other traffic's too.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stack_drops: BTreeMap<String, u64>,
}

/// Where a UDP run's lost datagrams went, each site by its own counter
/// (None: that counter was not there to read, e.g. no emulator).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UdpLossSites {
    /// Sent and never received.
    pub lost: u64,
    /// Sends the sender's kernel refused (ENOBUFS): they never left it.
    pub refused_at_send: u64,
    /// Dropped by the sender's own device (its interface's `tx_dropped`:
    /// a full TUN ring or transmit queue), over all its traffic.
    pub sender_device: Option<u64>,
    /// Dropped below the sender's socket, at its qdisc (tbf's full queue)
    /// or device queue: the sender namespace's `Udp.SndbufErrors`, which
    /// the kernel counts when it drops a send the application was not told
    /// of (no IP_RECVERR). None where the counter was not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sender_queue: Option<u64>,
    /// Lost by the emulated link's model (random loss, a corrupted frame
    /// the device refused), in the run's direction.
    pub on_the_link: Option<u64>,
    /// Dropped at the full queue in front of the link.
    pub link_queue: Option<u64>,
    /// Not taken by the receiving TUN device: no room (EAGAIN), the device
    /// down (EIO), its `rx_dropped`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiving_device: Option<u64>,
    /// Still held by the emulator when it stopped (delayed past the
    /// receiver's end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_on_the_link: Option<u64>,
    /// Dropped by the receiving host's IP or UDP layer before any socket
    /// held them (`UdpStats::stack_drops`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver_stack: Option<u64>,
    /// Dropped by the receiving socket's full buffer: in a namespace of
    /// its own, the namespace's `Udp.RcvbufErrors` (its socket's
    /// `SO_RXQ_OVFL` also counts checksum failures found as datagrams were
    /// read, which are `receiver_stack`'s); elsewhere `SO_RXQ_OVFL`.
    pub receiver_socket: Option<u64>,
    /// Read by the receiver but not as sent (payload or header corrupted
    /// past the checksums, or not netlab's).
    #[serde(default)]
    pub arrived_malformed: u64,
    /// Lost beyond what those counters explain (a drop the host cannot
    /// see: a NIC's, a switch's); counters that saw more than was lost
    /// (other traffic, the end markers) leave this at zero.
    pub unexplained: u64,
    /// Drops the counters saw beyond the datagrams lost: packets other than
    /// the data (the end markers, other traffic) that the same places
    /// dropped. Zero when every drop counted was a lost datagram.
    #[serde(default)]
    pub counted_beyond_lost: u64,
    /// What the jitter came from, where it is known.
    pub jitter_cause: String,
}

/// What `TCP_ZEROCOPY_RECEIVE` did for a receiver.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ZerocopyReceiveStats {
    /// Bytes the kernel mapped into the receiver: no copy.
    pub mapped: u64,
    /// Bytes copied after all: payload not in whole, page-aligned pages (the
    /// kernel's skip hint, read with read(2), and tails under a page the
    /// kernel copied itself). Every byte is one or the other.
    pub copied: u64,
    /// `getsockopt(TCP_ZEROCOPY_RECEIVE)` calls.
    pub calls: u64,
    /// Why nothing could be mapped at all (the socket refused mmap or the
    /// option), when so: then every byte was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unavailable: Option<String>,
}

impl ZerocopyReceiveStats {
    /// The share of the bytes that were mapped, in percent.
    pub fn mapped_pct(&self) -> f64 {
        let total = self.mapped + self.copied;
        if total == 0 {
            0.0
        } else {
            100.0 * self.mapped as f64 / total as f64
        }
    }
}

/// What one endpoint measured over its data path.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EndpointReport {
    pub role: String,
    pub pid: u32,
    /// Payload bytes this side moved.
    pub bytes: u64,
    /// Data-path system calls made (write/read/sendfile/splice/... each counts one).
    pub syscalls: u64,
    /// Wall time of the data path: sender from the first send to the peer's
    /// close (all data delivered); receiver from the first byte to end of stream.
    pub wall_s: f64,
    pub usage: ProcessUsage,
    pub tcp_info: Option<TcpInfo>,
    /// Deltas of the kernel's protocol counters in this endpoint's namespace.
    pub counters: Counters,
    /// Congestion control the socket actually used.
    pub congestion_control: Option<String>,
    /// TCP_MAXSEG of the socket.
    pub mss: Option<u32>,
    /// The receiver compared every byte with the pattern.
    pub verified: bool,
    pub zerocopy: Option<ZerocopyStats>,
    /// The sender's intervals (`--interval`), in order; they add up to the
    /// bytes the peer acknowledged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<IntervalSample>,
    /// Without `--interval`, the sender's own quiet samples of TCP_INFO
    /// for the limits verdict (its delivery-rate plateau, its RTT while
    /// it ran, its time in recovery), taken at the clock checks every
    /// [`crate::endpoint::bulk::schedule::VERDICT_SAMPLE_S`]; not
    /// printed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<IntervalSample>,
    /// The sender's TCP handshake, as its `connect` took it, s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshake_s: Option<f64>,
    /// BBR's bandwidth estimate at the end (TCP_CC_INFO), bits/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bbr_bw_bps: Option<u64>,
    /// The shapers on this end's side of the path (the sender's egress
    /// interface, the receiver's ifb devices), with what they dropped and
    /// held back over the flow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shapers: Vec<crate::measure::qdisc::Shaper>,
    /// What this end could not read of its shapers, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shapers_unread: Option<String>,
    /// `--udp`: what this end counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<UdpStats>,
    /// The receiver's zero-copy receive, when it used it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zerocopy_receive: Option<ZerocopyReceiveStats>,
    /// The CPU this endpoint was on when its data path started and ended
    /// (`sched_getcpu`): on loopback, whether both ends shared a core changes
    /// throughput by tens of percent.
    #[serde(default)]
    pub cpus: Option<(u32, u32)>,
    /// The change in this endpoint's interface counters over the data path
    /// (netns placement).
    #[serde(default)]
    pub interface: Option<InterfaceCounters>,
    /// The data path's thread: time runnable but waiting for a CPU over the
    /// data path (its `schedstat` run delay), s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_delay_s: Option<f64>,
    /// The TCP socket's buffer at the end (receive or send, by role).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer: Option<SocketBuffer>,
    /// The CPU budget the data path ran under (`--sender-cpu`,
    /// `--receiver-cpu`) and how long the scheduler held it back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_budget: Option<BudgetUse>,
    /// The core the data path ended on (`cpus.1`), and that core's load
    /// over the data path from `/proc/stat`: its softirq and interrupt
    /// time is charged to no process, so the side's own CPU time misses it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core: Option<crate::measure::procstat::CoreLoad>,
    /// `--tls`: what this end's TLS did and cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsStats>,
    /// `--quic`: what this end's QUIC did and cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<QuicStats>,
    /// `--mptcp`: the connection's subflows as this end saw them at its
    /// end of the data path, or that it fell back to plain TCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mptcp: Option<MptcpStats>,
    /// The speed the data connection's interface reports (ethtool's
    /// Speed): the path's rate where no link profile says it, on a real
    /// path between hosts. None on loopback and where the driver has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_speed: Option<crate::measure::ifstat::LinkSpeed>,
}

/// One end of an `--mptcp` connection, read after its last byte moved
/// (a sender's acknowledged bytes, a receiver's received ones, per
/// subflow) and before it closed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MptcpStats {
    /// The subflows, the one that opened the connection first; empty if
    /// it fell back or they could not be read.
    pub subflows: Vec<crate::measure::mptcp::Subflow>,
    /// The peer did not answer MP_CAPABLE: the connection was plain TCP.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fell_back: bool,
    /// Why the subflows could not be read, if they could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unread: Option<String>,
}

impl MptcpStats {
    /// Reads `fd`'s connection: never fails, says what it could not read.
    pub fn read(fd: std::os::fd::BorrowedFd<'_>) -> MptcpStats {
        use crate::measure::mptcp::{Connection, subflows};
        match subflows(fd) {
            Ok(Connection::Multipath(subflows)) => MptcpStats {
                subflows,
                ..MptcpStats::default()
            },
            Ok(Connection::FellBack) => MptcpStats {
                fell_back: true,
                ..MptcpStats::default()
            },
            Err(e) => MptcpStats {
                unread: Some(e.to_string()),
                ..MptcpStats::default()
            },
        }
    }

    /// Each subflow's share of the bytes it carried for this end
    /// (`sending`: acknowledged; else received), in subflow order; empty
    /// where nothing was carried.
    pub fn shares(&self, sending: bool) -> Vec<f64> {
        let total: u64 = self.subflows.iter().map(|s| s.carried(sending)).sum();
        if total == 0 {
            return Vec::new();
        }
        self.subflows
            .iter()
            .map(|s| s.carried(sending) as f64 / total as f64)
            .collect()
    }
}

/// One end of a `--tls` stream: the session it negotiated, the time its
/// data path spent in the record layer, and its cipher alone on its core.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TlsStats {
    /// The negotiated suite and version as rustls names them
    /// (`TLS13_AES_128_GCM_SHA256`, `TLSv1_3`).
    pub suite: String,
    pub version: String,
    /// The library that made the records, with its crypto.
    pub library: String,
    /// The TLS handshake, from the first flight to the keys (outside the
    /// data path's wall time), s.
    pub handshake_s: f64,
    /// Time in the record layer over the data path: the sender's sealing
    /// (rustls framing, copying into the record and encrypting), the
    /// receiver's opening (decrypting and rustls' copy out), s.
    pub record_s: f64,
    /// Bytes of TLS on the wire over the data path (headers, inner types
    /// and tags included), each direction the end sent or read.
    pub wire_bytes: u64,
    /// Plaintext per record at most, bytes.
    pub record_bytes: usize,
    /// The cipher alone on this end's core at set-up, at `record_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cipher_alone: Option<crate::checksum::aead::CipherRate>,
    /// Whether the kernel could have taken the records over.
    pub kernel_tls: crate::endpoint::tls::KernelTls,
}

impl TlsStats {
    /// The record layer's share of the end's wall time.
    pub fn share_of(&self, wall_s: f64) -> f64 {
        if wall_s > 0.0 {
            (self.record_s / wall_s).min(1.0)
        } else {
            0.0
        }
    }
}

/// One end of a `--quic` stream: its session, its packet protection
/// (counted, and timed one packet in `sampled_every`), its UDP system
/// calls and their batches, and quinn's view of the path.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QuicStats {
    /// The negotiated suite (`TLS13_AES_128_GCM_SHA256`).
    pub suite: String,
    pub library: String,
    /// The QUIC handshake, s (outside the data path's wall time).
    pub handshake_s: f64,
    /// Whether GSO and GRO were asked for, and the largest GSO batch the
    /// socket allowed (1: none).
    pub gso: bool,
    pub max_gso_segments: u64,
    /// Packets this end protected and removed protection from, and the
    /// time each took (scaled from the sampled packets), s.
    pub sealed_packets: u64,
    pub opened_packets: u64,
    pub seal_s: f64,
    pub open_s: f64,
    pub sampled_every: u64,
    /// Send calls and the datagrams in them; receive calls that returned
    /// datagrams, and the datagrams.
    pub udp_sends: u64,
    pub datagrams_sent: u64,
    pub udp_receives: u64,
    pub datagrams_received: u64,
    /// quinn's path at the end: packets it judged lost, congestion
    /// events, smoothed RTT (µs), congestion window (bytes), MTU.
    pub lost_packets: u64,
    pub congestion_events: u64,
    pub rtt_us: f64,
    pub cwnd: u64,
    pub mtu: u16,
    /// The cipher alone on this end's core, 1200-byte packets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cipher_alone: Option<crate::checksum::aead::CipherRate>,
    /// `sealing` (the sender) or `opening` (the receiver): its own work.
    pub record_layer: String,
}

impl QuicStats {
    /// The time this end spent protecting and unprotecting packets, s.
    pub fn crypto_s(&self) -> f64 {
        self.seal_s + self.open_s
    }
}

/// A data path's CPU budget as it was applied.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BudgetUse {
    /// Percent of one CPU (the cgroup's quota over its period).
    pub percent: f64,
    /// Time the group was throttled, having used its quota (the cgroup's
    /// `cpu.stat`), s; absent where the kernel does not say.
    pub throttled_s: Option<f64>,
}

/// A TCP socket's buffer at the end of its data path, and what bounded it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketBuffer {
    /// `SO_RCVBUF` (receiver) or `SO_SNDBUF` (sender), bytes, as the kernel
    /// reports it (twice what was asked, for its bookkeeping).
    pub bytes: u64,
    /// Set with `--rcvbuf`/`--sndbuf`, which turns autotuning off.
    pub set: bool,
    /// The namespace's autotuning maximum (`net.ipv4.tcp_rmem` or
    /// `tcp_wmem`, third field), bytes, if it could be read.
    pub autotune_max: Option<u64>,
}
