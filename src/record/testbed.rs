//! Where a measurement ran, as its record says: the placement, the link
//! profile asked for and how it was built, the wire emulator's counts, the
//! capture's wire view. Data only; `testbed` builds and runs these.

use crate::measure::{ifstat::InterfaceCounters, rusage::ProcessUsage};
use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;
use std::path::PathBuf;

/// How the link is built when a profile could use either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkVia {
    /// veth for unimpaired links; netem or the emulator for delay, jitter, loss.
    #[default]
    Auto,
    /// Always netlab's emulator (to measure the emulator itself).
    Emulator,
}

/// Where the two endpoints of an experiment run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Placement {
    #[default]
    Loopback,
    Netns {
        link: LinkProfile,
        via: LinkVia,
        /// Capture the link on side A; write a pcap there if given.
        capture: bool,
        pcap: Option<std::path::PathBuf>,
        verbose: bool,
    },
    /// Real hosts: each end `local` (the controller's host) or an agent's
    /// `HOST[:PORT]`.
    Remote { from: String, to: String },
}

/// An agent a record's run went through: its host, its clock against the
/// controller's, its limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentFacts {
    /// As the user named it (`HOST[:PORT]`).
    pub agent: String,
    /// The address the controller reached.
    pub address: String,
    pub netlab_version: String,
    pub host: crate::measure::host::HostFacts,
    /// The agent's clock minus the controller's (µs), from the `Hello`
    /// exchange, to within half its round trip.
    pub clock_offset_us: i64,
    /// Round trip of that exchange (µs).
    pub control_rtt_us: u64,
    pub limits: String,
    /// The experiments it serves.
    #[serde(default)]
    pub allow: Vec<String>,
    /// The node it runs on and its labels, as it said.
    #[serde(default, skip_serializing_if = "is_anonymous")]
    pub identity: Identity,
}

fn is_anonymous(identity: &Identity) -> bool {
    *identity == Identity::default()
}

/// Who an agent says it is besides its host's facts: the Kubernetes node
/// it runs on (`NODE_NAME`, from the downward API), and labels such as
/// `zone=a rack=r1` (`--label`, or `NETLAB_LABEL_<KEY>` in the
/// environment, which a DaemonSet fills from its node's labels).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
}

/// The longest label value (as Kubernetes allows).
const LABEL_MAX: usize = 63;

impl Identity {
    /// From `--label KEY=VALUE` flags and the environment (`NODE_NAME`,
    /// `NETLAB_LABEL_<KEY>=VALUE`); a flag overrides the environment's
    /// label of the same key. A malformed label is refused by name.
    pub fn gather(
        flags: &[String],
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Identity, String> {
        let mut identity = Identity::default();
        for (name, value) in env {
            if name == "NODE_NAME" && !value.is_empty() {
                check_label("NODE_NAME", &value)?;
                identity.node = Some(value);
            } else if let Some(key) = name.strip_prefix("NETLAB_LABEL_") {
                check_label(key, &value).map_err(|e| format!("{name}: {e}"))?;
                identity.labels.insert(key.to_string(), value);
            }
        }
        for flag in flags {
            let (key, value) = flag
                .split_once('=')
                .ok_or_else(|| format!("--label {flag:?}: not KEY=VALUE"))?;
            check_label(key, value).map_err(|e| format!("--label {flag:?}: {e}"))?;
            identity.labels.insert(key.to_string(), value.to_string());
        }
        Ok(identity)
    }
}

/// A label's key and value: letters, digits, `.`, `_`, `-` (and `/` in a
/// key's prefix), the key starting with a letter or digit, the value at
/// most 63 characters, as Kubernetes labels are, so they print and sort
/// as they are everywhere.
pub fn check_label(key: &str, value: &str) -> Result<(), String> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if !key.starts_with(|c: char| c.is_ascii_alphanumeric())
        || !key.chars().all(|c| plain(c) || c == '/')
        || key.len() > 253
    {
        return Err(format!(
            "the key {key:?} is not letters, digits, '.', '_', '-', '/' (starting with a letter or digit)"
        ));
    }
    if value.len() > LABEL_MAX || !value.chars().all(plain) {
        return Err(format!(
            "the value {value:?} is not up to {LABEL_MAX} letters, digits, '.', '_', '-'"
        ));
    }
    Ok(())
}

impl Placement {
    /// 1989's "remote": two hosts on a 10 Mbit/s Ethernet, as two namespaces.
    pub fn ether10() -> Placement {
        Placement::Netns {
            link: LinkProfile::named("ether10").expect("a known profile"),
            via: LinkVia::Auto,
            capture: false,
            pcap: None,
            verbose: false,
        }
    }

    /// Builds a netns placement's link with `via` (nothing for the others).
    pub fn set_via(&mut self, how: LinkVia) {
        if let Placement::Netns { via, .. } = self {
            *via = how;
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Placement::Loopback => "loopback",
            Placement::Netns { .. } => "netns",
            Placement::Remote { .. } => "remote",
        }
    }
}

/// A link between the two namespaces. `None` rate means unshaped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkProfile {
    /// The named profile it started from, if any.
    pub name: Option<String>,
    /// Bits per second.
    pub rate_bps: Option<u64>,
    /// One-way delay, each direction.
    pub delay_us: u64,
    /// Uniform jitter added to the delay, ± this much.
    pub jitter_us: u64,
    /// Probability of losing each packet, percent, each direction.
    pub loss_pct: f64,
    pub mtu: u32,
    /// Bytes the bottleneck queue holds (tbf limit, emulator queue).
    pub queue_bytes: Option<u64>,
    /// Offloads switched on both ends' devices (`ethtool -K`): a feature's
    /// short name (tx, rx, tso, gso, gro) and whether it is on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offloads: Vec<(String, bool)>,
    /// netem's further impairments and 1989's Ethernet quirks, beyond the
    /// delay, jitter and loss above.
    #[serde(default, skip_serializing_if = "Impairments::is_plain")]
    pub impair: Box<Impairments>,
    /// How netlab's emulator runs, when it carries the link.
    #[serde(default, skip_serializing_if = "EmulatorTuning::is_default")]
    pub emulator: EmulatorTuning,
}

/// How the wire emulator waits and where it runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct EmulatorTuning {
    /// Spin on the devices instead of sleeping in ppoll: no wake-up on the
    /// path (a few µs added instead of tens), at the price of a whole CPU.
    pub spin: bool,
    /// Pin the emulator's thread to this CPU.
    pub cpu: Option<usize>,
    /// Keep wire-sized packets with their checksums computed in software
    /// (no GSO super-packets, no checksum offload on the TUN devices),
    /// as a 1980s interface would see them.
    pub wire_packets: bool,
}

impl EmulatorTuning {
    pub fn is_default(&self) -> bool {
        *self == EmulatorTuning::default()
    }
}

/// What a link does to packets beyond a fixed delay, uniform jitter and
/// random loss: netem's impairments (tc-netem(8)) and the quirks of 1989's
/// Ethernet interfaces. Percentages are 0-100. Data only; the model that
/// applies them is `testbed::impair`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Impairments {
    /// How the delay varies around its mean (`jitter` is the spread).
    pub distribution: DelayDistribution,
    /// Each delay's dependence on the one before (netem's correlation).
    pub delay_correlation_pct: f64,
    /// Let jitter reorder packets, as netem does without a rate; by
    /// default a packet never overtakes the one sent before it.
    pub jitter_reorders: bool,
    /// Dependence of each random loss decision on the one before.
    pub loss_correlation_pct: f64,
    /// A loss model with memory, instead of `loss_pct`'s independent losses.
    pub loss_model: Option<LossModel>,
    pub duplicate_pct: f64,
    pub duplicate_correlation_pct: f64,
    /// Packets with one bit flipped at a random offset.
    pub corrupt_pct: f64,
    pub corrupt_correlation_pct: f64,
    /// Packets sent at once, ahead of delayed ones (netem's reorder).
    pub reorder_pct: f64,
    pub reorder_correlation_pct: f64,
    /// Reorder only after this many packets were delayed (netem's gap).
    pub reorder_gap: u32,
    /// What a packet costs on the wire beyond its IP bytes, for the rate.
    pub framing: Option<Framing>,
    /// Deliver in slots (netem's slot): bursts at intervals.
    pub slot: Option<Slot>,
    /// Frames the sending interface holds at once (Sun's LANCE driver: 1).
    pub tx_queue: Option<u32>,
    /// Time the driver takes, after a frame ends on the wire, to hand the
    /// interface its next one when its queue was full (LANCE: over 150 µs).
    pub tx_service_us: u64,
    /// A receiver that drops frames arriving closer than this after the
    /// last one it took (the Intel 82586 of Sun's file servers).
    pub rx_min_gap_us: u64,
    /// The bottleneck queue's discipline, in front of the rate: netlab's
    /// own (`testbed::qdisc`), or the kernel's where it has one. None: the
    /// link's queue is netem's and tbf's byte limit (`queue_bytes`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_discipline: Option<QueueDiscipline>,
}

/// A bottleneck queue's discipline and its parameters, as run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum QueueDiscipline {
    /// One FIFO refusing what would pass its limit.
    DropTail { limit: QueueLimit },
    /// CoDel (RFC 8289) on one FIFO of at most `limit_packets`.
    Codel {
        limit_packets: u32,
        target_us: u64,
        interval_us: u64,
        ecn: bool,
    },
    /// FQ-CoDel (RFC 8290): `flows` queues served `quantum` bytes a turn,
    /// each with CoDel, `limit_packets` in all.
    FqCodel(FqCodelQueue),
}

/// FQ-CoDel's parameters (tc-fq_codel(8)'s `limit`, `flows`, `quantum`,
/// `target`, `interval`, `ecn`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FqCodelQueue {
    pub limit_packets: u32,
    pub flows: u32,
    pub quantum: u32,
    pub target_us: u64,
    pub interval_us: u64,
    pub ecn: bool,
}

impl QueueDiscipline {
    /// Its name as `--queue-discipline` takes it.
    pub fn name(&self) -> &'static str {
        match self {
            QueueDiscipline::DropTail { .. } => "droptail",
            QueueDiscipline::Codel { .. } => "codel",
            QueueDiscipline::FqCodel(_) => "fq_codel",
        }
    }
}

/// How much a drop-tail queue holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueLimit {
    Packets(u32),
    Bytes(u64),
}

impl Impairments {
    /// Nothing beyond delay, uniform jitter and independent loss.
    pub fn is_plain(&self) -> bool {
        *self == Impairments::default()
    }
}

/// The shape of the delay around its mean, from netem's tables.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DelayDistribution {
    /// Uniform over mean ± jitter (netem's default).
    #[default]
    Uniform,
    Normal,
    Pareto,
    /// A quarter normal, three quarters Pareto (NIST Net's mix).
    Paretonormal,
}

/// Loss with memory, as netem's `loss state` and `loss gemodel`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "model")]
pub enum LossModel {
    /// Gilbert-Elliott: a good and a bad state; `p` good to bad, `r` bad
    /// to good, and the loss probability in each.
    GilbertElliott {
        p_pct: f64,
        r_pct: f64,
        bad_loss_pct: f64,
        good_loss_pct: f64,
    },
    /// The 4-state Markov model of Salsano et al. (netem's GI model):
    /// transmitted and lost states in gap and burst periods.
    FourState(FourStateLoss),
}

/// The 4-state model's transition probabilities, in percent: from gap
/// transmit (1) to burst loss (3) and to gap loss (4), from burst loss
/// back to gap transmit (31) and to burst transmit (32), and from burst
/// transmit to burst loss (23).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FourStateLoss {
    pub p13_pct: f64,
    pub p31_pct: f64,
    pub p32_pct: f64,
    pub p23_pct: f64,
    pub p14_pct: f64,
}

impl FourStateLoss {
    /// The five in netem's order (`loss state p13 p31 p32 p23 p14`).
    pub fn in_order(&self) -> [f64; 5] {
        [
            self.p13_pct,
            self.p31_pct,
            self.p32_pct,
            self.p23_pct,
            self.p14_pct,
        ]
    }
}

/// Bytes a packet occupies on the wire beyond its IP bytes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Framing {
    /// 10 Mbit/s Ethernet: 14 bytes of header and 4 of FCS, padding to the
    /// 64-byte minimum frame, 8 of preamble and the 12-byte (9.6 µs)
    /// interframe gap.
    Ethernet,
    /// netem's `packetoverhead`, `cellsize`, `celloverhead`.
    Overhead {
        packet: i32,
        cell_size: u32,
        cell_overhead: i32,
    },
}

/// netem's slots: packets leave in bursts, a slot every `min_us..max_us`,
/// each carrying at most `packets` and `bytes` (0: no limit).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Slot {
    pub min_us: u64,
    pub max_us: u64,
    pub packets: u32,
    pub bytes: u32,
}

/// How the link was realised, for the record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Realisation {
    /// A veth pair, tbf on both ends when a rate is set.
    #[default]
    Veth,
    /// A TUN device in each namespace relayed by netlab's user-space emulator
    /// (its link model: the rate, framing and every impairment).
    Emulator,
    /// A veth pair with netem (and tbf) on both ends.
    Netem,
}

/// What the record says about the link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkFacts {
    pub profile: LinkProfile,
    pub realised_by: Realisation,
    /// e.g. "veth + tbf 10 Mbit/s burst 3028 B limit 16384 B, gso_max_segs 1".
    pub detail: String,
    pub namespaces: [String; 2],
    pub interfaces: [String; 2],
    pub addresses: [Ipv4Addr; 2],
    /// Why the realisation was chosen (e.g. "netem is not in this kernel").
    pub note: Option<String>,
    /// `--mptcp`: the second path between the namespaces, if one was built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub second_path: Option<SecondPath>,
}

/// A second link between a testbed's two namespaces, built and shaped as
/// the first, for Multipath TCP's second subflow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SecondPath {
    pub interfaces: [String; 2],
    pub addresses: [Ipv4Addr; 2],
    /// How it is shaped, as the first path's `detail` says it.
    pub detail: String,
    /// What each namespace's MPTCP path manager was told.
    pub path_manager: String,
}

/// Per-direction counts; index 0 is A→B, 1 is B→A.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EmulatorReport {
    pub forwarded_packets: [u64; 2],
    pub forwarded_bytes: [u64; 2],
    pub lost_packets: [u64; 2],
    pub queue_drops: [u64; 2],
    /// Most packets held at once, per direction.
    pub max_queued: [usize; 2],
    /// Time each packet spent in the emulator beyond its intended delay, µs.
    pub overhead_us_p50: f64,
    pub overhead_us_p99: f64,
    pub overhead_us_max: f64,
    /// The emulator process's CPU over its life.
    pub usage: ProcessUsage,
    pub wall_s: f64,
    /// Seed of the loss and jitter generator.
    #[serde(default)]
    pub seed: u64,
    /// What the link model did, per direction.
    #[serde(default)]
    pub model: [ModelCounts; 2],
    /// GSO super-packets read (virtio-net headers on both TUN devices),
    /// per direction: carried whole on an unimpaired link, cut into
    /// [`segments`](Self::segments) for the model on an impaired one.
    #[serde(default)]
    pub super_packets: [u64; 2],
    /// Wire segments cut from super-packets for the link model, per
    /// direction (impaired links).
    #[serde(default)]
    pub segments: [u64; 2],
    /// Super-packets that were not TCP over IPv4 and so were not cut: the
    /// model decided each whole, per direction.
    #[serde(default)]
    pub uncut: [u64; 2],
    /// Packets the receiving TUN device refused as malformed (EINVAL: a
    /// corrupted IP header, as a NIC drops a frame it cannot parse), per
    /// direction: lost on the link.
    #[serde(default)]
    pub device_refused: [u64; 2],
    /// Packets the receiving TUN device had no room for (EAGAIN), per
    /// direction: lost on the link.
    #[serde(default)]
    pub device_full: [u64; 2],
    /// Packets written to a device already down (EIO: the testbed being
    /// torn down), per direction.
    #[serde(default)]
    pub device_gone: [u64; 2],
    /// Packets still held (delayed, queued behind the rate) when the
    /// emulator stopped, per direction: never delivered.
    #[serde(default)]
    pub left_held: [u64; 2],
    /// The bottleneck queue's discipline, when the link has one: what it
    /// did per direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bottleneck: Option<[BottleneckCounts; 2]>,
}

/// What one direction's bottleneck queue did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BottleneckCounts {
    /// The discipline's name (droptail, codel, fq_codel).
    pub discipline: String,
    pub enqueued: u64,
    pub sent: u64,
    /// Dropped by the discipline: refused at the tail, dropped by CoDel
    /// at the head, or pushed out of the fattest flow on overflow.
    pub dropped: u64,
    /// Marked Congestion Experienced instead of dropped (ECN).
    pub marked: u64,
    /// Time packets waited in the queue before the wire took them, ms.
    pub sojourn_ms_p50: f64,
    pub sojourn_ms_p99: f64,
    pub sojourn_ms_max: f64,
    pub max_backlog_packets: u64,
    pub max_backlog_bytes: u64,
    /// Wall-clock time (ns since the Unix epoch) of the timeline's zero,
    /// to align it with what the endpoints saw.
    pub origin_unix_ns: u64,
    /// The queue over time: one sample per [`QUEUE_SAMPLE_MS`] with traffic.
    pub timeline: Vec<QueueSample>,
}

/// The interval of a bottleneck's [`QueueSample`]s.
pub const QUEUE_SAMPLE_MS: u64 = 100;

/// One interval of a bottleneck queue's life, read from the queue itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueSample {
    /// Start of the interval, ms since the emulator started.
    pub t_ms: u64,
    /// Largest backlog seen in the interval.
    pub max_backlog_bytes: u64,
    pub max_backlog_packets: u64,
    /// Mean and largest sojourn of the packets that left in the interval.
    pub sojourn_ms_mean: f64,
    pub sojourn_ms_max: f64,
    pub sent: u64,
    pub dropped: u64,
    pub marked: u64,
}

/// Per direction: what the link model did to the packets it was given.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelCounts {
    pub packets: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub corrupted: u64,
    pub reordered: u64,
    pub queue_drops: u64,
    /// Frames the receiver dropped for arriving too soon after the last.
    pub rx_gap_drops: u64,
    /// Frames that waited for the driver to hand them over (`tx_service`).
    pub tx_service_waits: u64,
    /// On the emulated wire: the gap between one frame's end and the next
    /// one's start, µs (the interframe gap included), when the wire is busy.
    pub wire_gap_us_min: f64,
    pub wire_gap_us_p50: f64,
    /// Frames sent with the wire still busy with the one before (queued).
    pub back_to_back: u64,
    /// Busy time of the emulated wire, ms.
    pub wire_busy_ms: f64,
}

/// One TCP segment of a port-filtered capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineEvent {
    pub t_ns: u64,
    pub src_port: u16,
    pub dst_port: u16,
    pub payload: u32,
    pub flags: u8,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CaptureReport {
    pub wire: WireSummary,
    /// Frames captured.
    pub captured: u64,
    /// Frames the kernel dropped because the capture fell behind.
    pub kernel_drops: u64,
    /// The interface's own counters over the capture's window.
    pub interface: Option<InterfaceCounters>,
    pub pcap: Option<PathBuf>,
    /// `ethernet` or `raw_ip`.
    pub link_type: String,
    /// Events beyond the in-memory cap were counted but not analysed.
    pub truncated: bool,
    /// The segments of a port-filtered capture, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<TimelineEvent>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionSummary {
    pub packets: u64,
    pub bytes: u64,
    pub mean_size: f64,
    /// Counts per [`SIZE_BUCKETS`] bucket.
    pub size_histogram: Vec<u64>,
    pub gap_us_p50: f64,
    pub gap_us_p90: f64,
    pub gap_us_p99: f64,
    pub gap_us_max: f64,
    pub bursts: u64,
    pub mean_burst_packets: f64,
    pub longest_burst_packets: u64,
    /// Time the wire carried nothing, between the first and last packet, ms.
    pub idle_ms: f64,
    /// First to last packet, ms.
    pub span_ms: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WireSummary {
    /// Sent by side A (outgoing on the captured interface).
    pub outgoing: DirectionSummary,
    /// Received by side A.
    pub incoming: DirectionSummary,
}

#[cfg(test)]
mod identity_tests {
    use super::*;

    #[test]
    fn an_agent_s_identity_comes_from_flags_and_the_environment() {
        let env = [
            ("NODE_NAME", "node-7"),
            ("NETLAB_LABEL_zone", "a"),
            ("NETLAB_LABEL_rack", "r1"),
            ("PATH", "/bin"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let flags = [
            "rack=r2".to_string(),
            "topology.kubernetes.io/zone=eu-1".into(),
        ];
        let id = Identity::gather(&flags, env).unwrap();
        assert_eq!(id.node.as_deref(), Some("node-7"));
        assert_eq!(id.labels["zone"], "a");
        assert_eq!(id.labels["rack"], "r2", "a flag overrides the environment");
        assert_eq!(id.labels["topology.kubernetes.io/zone"], "eu-1");
        for (flag, says) in [
            ("zone", "not KEY=VALUE"),
            ("bad key=x", "the key"),
            ("=x", "the key"),
            ("zone=a b", "the value"),
            ("zone=\u{1b}[2J", "the value"),
        ] {
            let e = Identity::gather(&[flag.to_string()], []).unwrap_err();
            assert!(e.contains(says), "{flag}: {e}");
        }
        let long = format!("zone={}", "x".repeat(64));
        assert!(Identity::gather(&[long], []).is_err());
        let e = Identity::gather(&[], [("NETLAB_LABEL_zone".into(), "a\nb".into())]).unwrap_err();
        assert!(e.starts_with("NETLAB_LABEL_zone: "), "{e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_models_with_parameters_of_their_own_read_and_write_as_records_always_held_them() {
        // As records before the parameters were types of their own.
        let fq = r#"{"kind":"fq_codel","limit_packets":10240,"flows":1024,"quantum":1514,"target_us":5000,"interval_us":100000,"ecn":true}"#;
        let loss = r#"{"model":"four_state","p13_pct":2.0,"p31_pct":30.0,"p32_pct":0.0,"p23_pct":100.0,"p14_pct":0.0}"#;
        let read: QueueDiscipline = serde_json::from_str(fq).unwrap();
        assert!(matches!(read, QueueDiscipline::FqCodel(q) if q.flows == 1024 && q.ecn));
        assert_eq!(serde_json::to_string(&read).unwrap(), fq);
        let read: LossModel = serde_json::from_str(loss).unwrap();
        let LossModel::FourState(s) = read else {
            panic!("{read:?}")
        };
        assert_eq!(s.in_order(), [2.0, 30.0, 0.0, 100.0, 0.0]);
        assert_eq!(serde_json::to_string(&read).unwrap(), loss);
    }
}
