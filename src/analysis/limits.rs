//! What limited a TCP flow, named from the kernel's own accounting: a
//! ranked verdict of factors, each with its share of the run, the evidence
//! it rests on and the fix an engineer would try. Pure functions over
//! what a run recorded ([`FlowEvidence`]); nothing here measures.
//!
//! The sender's time, by Linux's chrono accounting (`tcp_chrono_*`,
//! reported in `struct tcp_info` since 4.10): `tcpi_busy_time` is the time
//! the connection had data in flight, of which `tcpi_rwnd_limited` was
//! stalled by the peer's receive window and `tcpi_sndbuf_limited` by the
//! send buffer; the rest of the busy time was limited by the congestion
//! window, pacing, the path or the sender's own CPU. Time not busy is
//! application-limited: nothing was waiting to be sent. These are
//! cumulative over the connection's life, and each flow is a fresh
//! connection, so the end values are the run's.
//!
//! How the busy time is split (mechanisms, not cases):
//! - a side that kept its CPU at least [`SATURATED`] busy limited whatever
//!   it was doing (a sender CPU-bound still has data in flight on
//!   loopback, so the chrono calls it busy);
//! - a link whose rate is known and whose wire was busy (or whose payload
//!   rate was within [`LINK_FULL`] of its rate) is full;
//! - a flow at its window's rate (window / RTT, with the window about
//!   half the socket buffer the kernel reports, [`WINDOW_OF_BUFFER`]) is
//!   limited by that buffer even when the chrono does not say so: a
//!   pacing congestion control (bbr) stops at its pacing gate before the
//!   window test that starts the chrono's `rwnd_limited`;
//! - a loss-based congestion control that lost segments is bounded by the
//!   loss (Mathis, Semke, Mahdavi and Ott, 1997: rate ≤ MSS/RTT × C/√p,
//!   C = √(3/2));
//! - otherwise the congestion control had not opened its window further.
//!
//! Queueing delay (smoothed RTT over `min_rtt`) is named beside the
//! primary factor when it is a large part of the round trip. Counters a
//! record lacks are listed in [`Verdict::missing`], never taken as zero.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A side whose CPU was busy at least this fraction of the run is
/// saturated (one transfer thread on one core).
pub const SATURATED: f64 = 0.85;

/// A side that waited for a CPU at least this share of the run (the
/// scheduler's run delay) lost a fifth of its time to other work.
pub const CONTENDED: f64 = 0.2;

/// A link whose payload rate is within this fraction of its rate, or
/// whose wire was busy at least this fraction of the run, is full.
pub const LINK_FULL: f64 = 0.85;

/// Queueing delay is named when it is at least this share of the
/// smoothed RTT (and at least [`QUEUE_MIN_MS`]).
pub const QUEUE_SHARE: f64 = 0.2;
pub const QUEUE_MIN_MS: f64 = 1.0;

/// Records this small or smaller cost about as much per call as per
/// byte: a system call and a wake-up are of the order of a microsecond on
/// current x86, a copy a few tenths of a nanosecond per byte (see
/// `netlab cksum`), so below about 16 KB the per-call cost is at least a
/// third of the whole and shrinking it is the first fix.
pub const SMALL_RECORD: u64 = 16 * 1024;

/// The share of a socket's reported buffer that holds data: the kernel
/// doubles what was asked for its bookkeeping (socket(7)) and advertises
/// about half the receive buffer as window (`tcp_adv_win_scale`, or the
/// measured `scaling_ratio` since 6.7, up to about 0.9).
pub const WINDOW_OF_BUFFER: f64 = 0.5;

/// A flow within this fraction of a window's rate is at that window.
pub const AT_WINDOW: f64 = 0.8;

/// A congestion window whose rate (cwnd × MSS / smoothed RTT) exceeds
/// the delivered rate by more than this did not bind.
pub const WINDOW_SLACK: f64 = 1.5;

/// With nothing at its bound, a part of the flow busy at least this share
/// of the run is named as the likeliest limit.
pub const BUSIEST: f64 = 0.5;

/// Mathis et al.'s constant for periodic loss with delayed ACKs off, √(3/2).
pub const MATHIS_C: f64 = 1.224_744_871;

/// What limited a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Factor {
    /// The path's bottleneck link was full.
    Link,
    /// The path lost segments and the congestion window was held down.
    Loss,
    /// The congestion control's window or pacing had not opened further
    /// (slow start, a short run, bbr's estimate of the path).
    CongestionWindow,
    /// The queue in front of the link added delay.
    QueueingDelay,
    /// The receiver's advertised window (its buffer) was too small.
    ReceiveWindow,
    /// The sender's socket buffer was too small.
    SendBuffer,
    /// The sender's CPU, per byte (copies).
    SenderCpu,
    /// The receiver's CPU.
    ReceiverCpu,
    /// The cost of each system call and wake-up (small records).
    PerCall,
    /// A side was runnable but waiting for a CPU: other work on its core.
    CpuContention,
    /// The user-space wire emulator carrying the link.
    Emulator,
    /// The application had nothing to send: its pacing or its producer.
    Application,
    /// The evidence was missing or conflicted (named in the verdict).
    Undecided,
}

impl Factor {
    /// A factor of a host's CPU (its own, its budget, its calls, or the
    /// CPU it waited for).
    pub fn is_cpu(self) -> bool {
        matches!(
            self,
            Factor::SenderCpu | Factor::ReceiverCpu | Factor::PerCall | Factor::CpuContention
        )
    }

    pub fn describe(self) -> &'static str {
        match self {
            Factor::Link => "the link",
            Factor::Loss => "loss on the path",
            Factor::CongestionWindow => "the congestion control's window or pacing",
            Factor::QueueingDelay => "queueing delay",
            Factor::ReceiveWindow => "the receive window",
            Factor::SendBuffer => "the send buffer",
            Factor::SenderCpu => "the sender's CPU",
            Factor::ReceiverCpu => "the receiver's CPU",
            Factor::PerCall => "system calls and wake-ups per record",
            Factor::CpuContention => "CPU contention (runnable, waiting for a core)",
            Factor::Emulator => "the wire emulator's CPU",
            Factor::Application => "the application (its pacing or its producer)",
            Factor::Undecided => "undecided",
        }
    }
}

/// One factor of a verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    pub factor: Factor,
    /// Its share of the run (0..1): the time it held the flow back; for
    /// queueing delay, its share of the smoothed round trip.
    pub share: f64,
    /// The numbers it rests on, by name (units in the name).
    pub evidence: BTreeMap<String, f64>,
    /// What an engineer would try.
    pub fix: String,
}

/// A flow's limits, ranked: the first is the primary factor.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub limits: Vec<Limit>,
    /// Evidence the record lacked, and what the verdict could not see.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// With `--interval`: the run in phases, each a run of intervals that
    /// the same part of the sender's time held most (the chrono accounting
    /// per interval), with how many of their ends the kernel marked its
    /// delivery rate application-limited.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<Phase>,
}

/// Consecutive intervals held most by the same part of the sender's time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    pub from_s: f64,
    pub to_s: f64,
    /// `rwnd`, `sndbuf`, `cwnd` (in flight, neither stalled) or `idle`
    /// (nothing in flight): [`chrono_dominant`].
    pub held_by: String,
    pub intervals: u32,
    /// Intervals whose end carried `tcpi_delivery_rate_app_limited`.
    pub app_limited: u32,
}

/// The sender's time in one interval by the chrono accounting, as shares
/// of the interval, and the kernel's app-limited bit at its end.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct IntervalChrono {
    pub start_s: f64,
    pub end_s: f64,
    pub busy: f64,
    pub rwnd_limited: f64,
    pub sndbuf_limited: f64,
    pub app_limited: Option<bool>,
    /// The kernel's delivery-rate estimate at the interval's end, bits/s.
    pub delivery_rate_bps: Option<f64>,
}

/// The part of an interval that held the flow most, in a word: `rwnd`,
/// `sndbuf`, `cwnd` (busy, neither stalled: the window, pacing, the path
/// or the CPU) or `idle` (nothing in flight).
pub fn chrono_dominant(busy: f64, rwnd_limited: f64, sndbuf_limited: f64) -> &'static str {
    let rest = (busy - rwnd_limited - sndbuf_limited).max(0.0);
    let idle = (1.0 - busy).max(0.0);
    [
        ("rwnd", rwnd_limited),
        ("sndbuf", sndbuf_limited),
        ("cwnd", rest),
        ("idle", idle),
    ]
    .into_iter()
    .max_by(|a, b| a.1.total_cmp(&b.1))
    .map_or("-", |(word, _)| word)
}

/// The run's intervals grouped into phases (see [`Verdict::phases`]).
pub fn phases(intervals: &[IntervalChrono]) -> Vec<Phase> {
    let mut phases: Vec<Phase> = Vec::new();
    for i in intervals {
        let held_by = chrono_dominant(i.busy, i.rwnd_limited, i.sndbuf_limited);
        let app = u32::from(i.app_limited == Some(true));
        match phases.last_mut() {
            Some(last) if last.held_by == held_by => {
                last.to_s = i.end_s;
                last.intervals += 1;
                last.app_limited += app;
            }
            _ => phases.push(Phase {
                from_s: i.start_s,
                to_s: i.end_s,
                held_by: held_by.into(),
                intervals: 1,
                app_limited: app,
            }),
        }
    }
    phases
}

impl Verdict {
    pub fn primary(&self) -> Option<&Limit> {
        self.limits.first()
    }

    /// One line: the primary factor, its share and its fix, then the others.
    pub fn headline(&self) -> String {
        let Some(first) = self.primary() else {
            return "limited by: undecided (no evidence)".into();
        };
        let mut line = format!(
            "limited by {} ({:.0}% of the run): {}",
            first.factor.describe(),
            100.0 * first.share,
            first.fix
        );
        for other in &self.limits[1..] {
            let how_much = match (
                other.evidence.get("queueing_ms"),
                other.evidence.get("min_rtt_ms"),
            ) {
                (Some(queue), Some(path)) => format!("{queue:.1} ms over a {path:.1} ms path"),
                _ => format!("{:.0}% of the run", 100.0 * other.share),
            };
            line.push_str(&format!("; also {} ({how_much})", other.factor.describe()));
        }
        if self.phases.len() > 1 {
            let said: Vec<String> = self
                .phases
                .iter()
                .map(|p| format!("{} {:.1}-{:.1} s", p.held_by, p.from_s, p.to_s))
                .collect();
            line.push_str(&format!("; by interval: {}", said.join(", ")));
        }
        if !self.missing.is_empty() {
            line.push_str(&format!(" [not seen: {}]", self.missing.join("; ")));
        }
        line
    }
}

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

/// The receiver's kernel making room in its receive queue, and the
/// segments it dropped for want of it (`tcp_prune_queue`,
/// `tcp_data_queue`, `tcp_add_backlog`): the names in `TcpExt`.
const RECEIVE_QUEUE: [&str; 8] = [
    "PruneCalled",
    "RcvPruned",
    "OfoPruned",
    "TCPRcvCollapsed",
    "TCPRcvQDrop",
    "TCPBacklogDrop",
    "TCPZeroWindowDrop",
    "TCPToZeroWindowAdv",
];

/// Of [`RECEIVE_QUEUE`], those that count dropped segments.
const RECEIVE_DROPS: [&str; 4] = [
    "RcvPruned",
    "TCPRcvQDrop",
    "TCPBacklogDrop",
    "TCPZeroWindowDrop",
];

/// The receiver's queue counters that moved, and the names the record
/// lacks (None: no counters at all).
fn receive_queue(side: &SideEvidence) -> Option<(BTreeMap<String, f64>, Vec<&'static str>)> {
    let counters = side.counters.as_ref()?;
    let mut moved = BTreeMap::new();
    let mut lacking = Vec::new();
    for name in RECEIVE_QUEUE {
        match counters.get(&format!("TcpExt.{name}")) {
            Some(&n) if n > 0 => {
                moved.insert(name.to_string(), n as f64);
            }
            Some(_) => {}
            None => lacking.push(name),
        }
    }
    Some((moved, lacking))
}

/// Segments the receiver's kernel dropped for want of room.
fn receive_drops(side: &SideEvidence) -> u64 {
    side.counters.as_ref().map_or(0, |c| {
        RECEIVE_DROPS
            .iter()
            .map(|name| c.get(&format!("TcpExt.{name}")).copied().unwrap_or(0))
            .sum()
    })
}

/// A side whose own work outside its reads or writes took this share of
/// the run drains or fills its socket only between times.
pub const OWN_WORK: f64 = 0.3;

impl SideEvidence {
    /// The share of the run the application spent on its own CPU outside
    /// the kernel: between its reads or writes.
    pub fn own_work_share(&self) -> Option<f64> {
        let user = self.user_s?;
        (self.wall_s > 0.0).then(|| user / self.wall_s)
    }

    fn utilisation(&self) -> f64 {
        if self.wall_s > 0.0 {
            self.cpu_s / self.wall_s
        } else {
            0.0
        }
    }

    /// The CPU it could have had: its budget, or one core (a data path
    /// is one thread).
    fn capacity(&self) -> f64 {
        self.cpu_budget.map_or(1.0, |b| b.clamp(1e-3, 1.0))
    }

    /// Its CPU as a share of what it could have had: at or above
    /// [`SATURATED`], it was CPU-bound, whether by its core or its budget.
    fn load(&self) -> f64 {
        self.utilisation() / self.capacity()
    }

    /// The share of the run its budget held it back.
    fn throttled(&self) -> f64 {
        self.throttled_s.unwrap_or(0.0) / self.wall_s.max(1e-9)
    }

    /// The share of the run it waited for a CPU that other work held (not
    /// its own budget), when that is at least [`CONTENDED`] of the run, or
    /// a tenth when running and waiting together would have saturated it.
    fn contended(&self) -> Option<f64> {
        let waited =
            (self.run_delay_s? - self.throttled_s.unwrap_or(0.0)).max(0.0) / self.wall_s.max(1e-9);
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
}

impl SenderTcp {
    fn loss_based(&self) -> bool {
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
    /// Per interval (`--interval`), the sender's chrono shares; empty
    /// without intervals.
    pub intervals: Vec<IntervalChrono>,
}

/// Bytes as people read a buffer size: 152 KB, 5.7 MB.
fn mb(bytes: f64) -> String {
    let bytes = bytes.max(0.0);
    if bytes >= 1024.0 * 1024.0 {
        format!("{:.1} MB", bytes / (1024.0 * 1024.0))
    } else {
        format!("{:.0} KB", (bytes / 1024.0).ceil())
    }
}

/// The verdict for one flow.
pub fn judge(flow: &FlowEvidence) -> Verdict {
    let mut verdict = Verdict::default();
    let wall = flow.sender.wall_s.max(flow.receiver.wall_s);
    if wall <= 0.0 || flow.bytes == 0 {
        verdict.missing.push("the flow moved no bytes".into());
        verdict.limits.push(undecided("nothing was delivered"));
        return verdict;
    }
    let delivered_bps = flow.bytes as f64 * 8.0 / flow.receiver.wall_s.max(1e-9);
    let Some(tcp) = &flow.tcp else {
        verdict
            .missing
            .push("the sender's TCP_INFO (no chrono accounting)".into());
        cpu_only(flow, &mut verdict);
        return verdict;
    };
    let round_trip = RoundTrip {
        rtt_s: f64::from(tcp.min_rtt_us.unwrap_or(tcp.srtt_us).max(1)) / 1e6,
        link_bps: flow.path.rate_bps.map(|r| r as f64),
        delivered_bps,
    };
    let (Some(busy), Some(rwnd), Some(sndbuf)) =
        (tcp.busy_us, tcp.rwnd_limited_us, tcp.sndbuf_limited_us)
    else {
        verdict.missing.push(
            "tcpi_busy_time, tcpi_rwnd_limited, tcpi_sndbuf_limited (a kernel before 4.10)".into(),
        );
        cpu_only(flow, &mut verdict);
        return verdict;
    };
    let share = |us: u64| (us as f64 / 1e6 / flow.sender.wall_s.max(1e-9)).min(1.0);
    let rwnd_share = share(rwnd);
    let sndbuf_share = share(sndbuf);
    let busy_share = share(busy);
    let rest_share = (busy_share - rwnd_share - sndbuf_share).max(0.0);
    let idle_share = (1.0 - busy_share).max(0.0);

    if rwnd_share > 0.0 {
        // A window held shut by a receiver short of CPU is that CPU.
        verdict.limits.push(
            receiver_short_of_cpu(flow, rwnd_share)
                .unwrap_or_else(|| receive_window(flow, rwnd_share, &round_trip)),
        );
    }
    if sndbuf_share > 0.0 {
        verdict
            .limits
            .push(send_buffer(flow, sndbuf_share, &round_trip));
    }
    if rest_share > 0.0 {
        verdict
            .limits
            .push(busy_time(flow, tcp, rest_share, &round_trip));
    }
    if idle_share > 0.0 {
        verdict
            .limits
            .push(idle_time(flow, idle_share, &round_trip));
    }
    match receive_queue(&flow.receiver) {
        None => verdict
            .missing
            .push("the receiver's TcpExt counters (receive-queue pruning and drops)".into()),
        Some((_, lacking)) if !lacking.is_empty() => verdict.missing.push(format!(
            "TcpExt {} (this kernel does not count them)",
            lacking.join(", ")
        )),
        Some(_) => {}
    }
    rank(&mut verdict);
    if let Some(queue) = queueing(flow, tcp) {
        match verdict.limits.first_mut() {
            // A side short of CPU acknowledges late: the round trip grows
            // at the host, not in a queue on the path, so the delay is
            // that side's evidence rather than a factor of its own.
            Some(first) if first.factor.is_cpu() => first.evidence.extend(queue.evidence),
            _ => {
                verdict.limits.push(queue);
                rank(&mut verdict);
            }
        }
    }
    verdict.phases = phases(&flow.intervals);
    let marked: Vec<bool> = flow
        .intervals
        .iter()
        .filter_map(|i| i.app_limited)
        .collect();
    if let Some(first) = verdict.limits.first_mut()
        && !marked.is_empty()
    {
        // The kernel's own word on whether the sender ran out of data:
        // beside an application verdict it confirms it; beside any other
        // it says how often the flow was not pushing.
        let share = marked.iter().filter(|&&m| m).count() as f64 / marked.len() as f64;
        first
            .evidence
            .insert("app_limited_interval_ends_pct".into(), 100.0 * share);
    }
    verdict
}

fn undecided(why: &str) -> Limit {
    Limit {
        factor: Factor::Undecided,
        share: 1.0,
        evidence: BTreeMap::new(),
        fix: format!("none to give: {why}"),
    }
}

/// Largest share first; factors under 1% of the run are left out unless
/// nothing else is left.
fn rank(verdict: &mut Verdict) {
    let mut merged: Vec<Limit> = Vec::new();
    for limit in verdict.limits.drain(..) {
        match merged.iter_mut().find(|m| m.factor == limit.factor) {
            Some(same) => same.share = (same.share + limit.share).min(1.0),
            None => merged.push(limit),
        }
    }
    verdict.limits = merged;
    verdict.limits.sort_by(|a, b| b.share.total_cmp(&a.share));
    if verdict.limits.len() > 1 {
        let first = verdict.limits[0].clone();
        verdict.limits.retain(|l| l.share >= 0.01);
        if verdict.limits.is_empty() {
            verdict.limits.push(first);
        }
    }
}

/// Without the chrono accounting: a saturated side, or undecided.
fn cpu_only(flow: &FlowEvidence, verdict: &mut Verdict) {
    let (sender, receiver) = (flow.sender.load(), flow.receiver.load());
    if sender >= SATURATED && sender >= receiver {
        verdict.limits.push(sender_cpu(flow, sender.min(1.0)));
    } else if receiver >= SATURATED {
        verdict.limits.push(receiver_cpu(flow, receiver.min(1.0)));
    } else {
        let mut limit = undecided(
            "neither side's CPU was saturated and the kernel's accounting of the sender's time is missing",
        );
        limit
            .evidence
            .insert("sender_cpu_pct".into(), 100.0 * flow.sender.utilisation());
        limit.evidence.insert(
            "receiver_cpu_pct".into(),
            100.0 * flow.receiver.utilisation(),
        );
        verdict.limits.push(limit);
    }
}

/// How a buffer-bound verdict names one side's buffer.
struct BufferWords {
    factor: Factor,
    /// The chrono's share, as evidence.
    stalled: &'static str,
    /// "receive" or "send".
    noun: &'static str,
    sysctl: &'static str,
    option: &'static str,
    /// Why a buffer over twice the BDP still filled.
    filled: &'static str,
}

const RECEIVING: BufferWords = BufferWords {
    factor: Factor::ReceiveWindow,
    stalled: "rwnd_limited_share",
    noun: "receive",
    sysctl: "tcp_rmem",
    option: "--rcvbuf",
    filled: "and still filled: the reader fell behind (its reads, its CPU, its wake-ups)",
};

const SENDING: BufferWords = BufferWords {
    factor: Factor::SendBuffer,
    stalled: "sndbuf_limited_share",
    noun: "send",
    sysctl: "tcp_wmem",
    option: "--sndbuf",
    filled: "and still filled with unacknowledged data (loss recovery holds it longer): raise net.ipv4.tcp_wmem's maximum further, or find the loss",
};

/// The receive buffer held the flow; what the receiver's kernel did to
/// fit the queue into it (pruned, collapsed, dropped, a zero window
/// advertised) is its evidence, and says the reader fell behind.
fn receive_window(flow: &FlowEvidence, share: f64, round_trip: &RoundTrip) -> Limit {
    let mut limit = buffer_limit(&flow.receiver, &RECEIVING, share, round_trip);
    let reader = &flow.receiver;
    if reader.syscalls > 0 {
        limit.evidence.insert(
            "receiver_bytes_per_read".into(),
            flow.bytes as f64 / reader.syscalls as f64,
        );
    }
    if let Some(own) = reader.own_work_share() {
        limit
            .evidence
            .insert("receiver_outside_read_pct".into(), 100.0 * own);
        if own >= OWN_WORK {
            limit.fix.push_str(&format!(
                "; the reader spent {:.0}% of the run on its own work between reads, draining the buffer only between",
                100.0 * own
            ));
        }
    }
    if let Some((moved, _)) = receive_queue(&flow.receiver)
        && !moved.is_empty()
    {
        let said: Vec<String> = moved
            .iter()
            .map(|(name, n)| format!("{name} {n:.0}"))
            .collect();
        limit.fix.push_str(&format!(
            "; the receiver's kernel made room in its queue ({}): the reader fell behind its buffer",
            said.join(", ")
        ));
        limit.evidence.extend(moved);
    }
    limit
}

fn send_buffer(flow: &FlowEvidence, share: f64, round_trip: &RoundTrip) -> Limit {
    buffer_limit(&flow.sender, &SENDING, share, round_trip)
}

/// The round trip a window is spent over, and the rates it is set against.
struct RoundTrip {
    /// `min_rtt` (the path's own), or the smoothed RTT without it, s.
    rtt_s: f64,
    /// The bottleneck link's rate, where known.
    link_bps: Option<f64>,
    delivered_bps: f64,
}

impl RoundTrip {
    /// The bandwidth-delay product of the link, where its rate is known.
    fn link_bdp(&self) -> Option<f64> {
        self.link_bps.map(|r| r / 8.0 * self.rtt_s)
    }

    /// What the flow delivered per round trip.
    fn delivered_per_rtt(&self) -> f64 {
        self.delivered_bps / 8.0 * self.rtt_s
    }

    /// The rate a buffer of `bytes` allows: about half of it is window.
    fn window_rate(&self, bytes: u64) -> f64 {
        bytes as f64 * WINDOW_OF_BUFFER * 8.0 / self.rtt_s
    }
}

/// A side's buffer held the flow: what it was, the rate it allows over
/// this round trip, what the path needs (twice the link's BDP, as the
/// kernel keeps about half a buffer for data; where the link's rate is
/// unknown, what 1 Gbit/s would need), and the fix for how it was bounded
/// (set by an option, or autotuning's maximum). A buffer over twice what
/// the flow delivered per round trip that still filled was not too small:
/// its side fell behind.
fn buffer_limit(
    side: &SideEvidence,
    words: &BufferWords,
    share: f64,
    round_trip: &RoundTrip,
) -> Limit {
    let mut evidence = BTreeMap::from([
        (words.stalled.to_string(), share),
        ("rtt_ms".to_string(), round_trip.rtt_s * 1e3),
    ]);
    if let Some(bdp) = round_trip.link_bdp() {
        evidence.insert("bdp_bytes".into(), bdp);
    }
    if let Some(buffer) = side.socket_buffer {
        evidence.insert(format!("{}_buffer_bytes", words.noun), buffer as f64);
        evidence.insert(
            "window_rate_mbit_s".into(),
            round_trip.window_rate(buffer) / 1e6,
        );
    }
    if let Some(max) = side.buffer_max {
        evidence.insert(format!("{}_max_bytes", words.sysctl), max as f64);
    }
    let per_rtt = round_trip
        .link_bdp()
        .unwrap_or(round_trip.delivered_per_rtt());
    let target = match round_trip.link_bdp() {
        Some(bdp) => format!("at least twice the BDP, {}", mb(2.0 * bdp)),
        None => format!(
            "twice the rate you want times the round trip ({} for 1 Gbit/s over these {:.1} ms)",
            mb(2.0 * 1e9 / 8.0 * round_trip.rtt_s),
            round_trip.rtt_s * 1e3
        ),
    };
    let holds = side.socket_buffer.map_or(String::new(), |b| {
        format!(
            ": it allows about {:.1} Mbit/s over this {:.1} ms round trip",
            round_trip.window_rate(b) / 1e6,
            round_trip.rtt_s * 1e3
        )
    });
    let roomy = side.socket_buffer.filter(|&b| b as f64 >= 2.0 * per_rtt);
    let fix = if let Some(buffer) = roomy {
        format!(
            "the {} buffer ({}) is over twice {} ({}) {}",
            words.noun,
            mb(buffer as f64),
            if round_trip.link_bps.is_some() {
                "the BDP"
            } else {
                "what the flow delivered per round trip"
            },
            mb(per_rtt),
            words.filled
        )
    } else if side.buffer_set {
        format!(
            "the {} buffer was set ({}, {}){}{holds}; raise it to {target}, or leave it unset",
            words.noun,
            words.option,
            side.socket_buffer.map_or("?".into(), |b| mb(b as f64)),
            if words.factor == Factor::ReceiveWindow {
                ", which turns autotuning off"
            } else {
                ""
            },
        )
    } else {
        format!(
            "net.ipv4.{}'s maximum{} bounds the {} buffer{holds}; raise the maximum to {target}",
            words.sysctl,
            side.buffer_max
                .map_or(String::new(), |m| format!(" (now {})", mb(m as f64))),
            words.noun,
        )
    };
    Limit {
        factor: words.factor,
        share,
        evidence,
        fix,
    }
}

fn sender_cpu(flow: &FlowEvidence, share: f64) -> Limit {
    let records = (flow.bytes as f64 / flow.record.max(1) as f64).max(1.0);
    let side = &flow.sender;
    let mut evidence = BTreeMap::from([
        ("sender_cpu_pct".to_string(), 100.0 * side.utilisation()),
        ("cpu_us_per_record".to_string(), side.cpu_s * 1e6 / records),
        (
            "calls_per_record".to_string(),
            side.syscalls as f64 / records,
        ),
        (
            "context_switches_per_record".to_string(),
            (side.voluntary_cs + side.involuntary_cs) as f64 / records,
        ),
        ("record_bytes".to_string(), flow.record as f64),
    ]);
    core_evidence(side, "sender", &mut evidence);
    if let Some(fix) = budget_bound(side, "sender", "--sender-cpu", &mut evidence) {
        return Limit {
            factor: Factor::SenderCpu,
            share,
            evidence,
            fix,
        };
    }
    if flow.record <= SMALL_RECORD {
        Limit {
            factor: Factor::PerCall,
            share,
            fix: format!(
                "{}-byte writes cost a system call each ({:.2} µs of CPU per record): use 64 KB records",
                flow.record,
                side.cpu_s * 1e6 / records
            ),
            evidence,
        }
    } else {
        Limit {
            factor: Factor::SenderCpu,
            share,
            fix: format!(
                "the sender's core is saturated copying ({:.0} ns per KB): send without the copy (--strategy sendfile, splice or zerocopy) or spread flows over cores (-P)",
                side.cpu_s * 1e9 / (flow.bytes as f64 / 1024.0)
            ),
            evidence,
        }
    }
}

/// Re-attributes a saturated sender's CPU by a cost model's split of one
/// record's time (`fixed_share`: the per-call part, 0..1): per call when
/// that part is the larger, per byte otherwise. A single run cannot split
/// its own cost, so [`judge`] goes by [`SMALL_RECORD`]; a sweep, which
/// fits the split over sizes, calls this.
pub fn attribute_cpu(verdict: &mut Verdict, fixed_share: f64, record: u64) {
    for limit in &mut verdict.limits {
        if !matches!(limit.factor, Factor::PerCall | Factor::SenderCpu) {
            continue;
        }
        limit
            .evidence
            .insert("model_fixed_share".into(), fixed_share);
        let per_record = limit.evidence.get("cpu_us_per_record").copied();
        if fixed_share >= 0.5 {
            limit.factor = Factor::PerCall;
            limit.fix = format!(
                "{record}-byte writes: the fitted fixed cost per call is {:.0}% of each record's time{}: larger records spread it",
                100.0 * fixed_share,
                per_record.map_or(String::new(), |us| format!(
                    " ({us:.2} µs of CPU per record)"
                ))
            );
        } else if limit.factor == Factor::PerCall {
            limit.factor = Factor::SenderCpu;
            limit.fix = format!(
                "{record}-byte writes: the fitted per-byte cost is {:.0}% of each record's time: the copy dominates; send without it (--strategy sendfile, splice or zerocopy)",
                100.0 * (1.0 - fixed_share)
            );
        }
    }
}

/// A flow at the pacing rate its sender asked for (`--rate`): the
/// application's own limit, whether the kernel's pacing gate (busy time)
/// or the application's sleeps (idle time) held it.
fn paced(flow: &FlowEvidence, share: f64, delivered_bps: f64) -> Option<Limit> {
    let rate = flow.paced_bps? as f64;
    (delivered_bps >= AT_WINDOW * rate / flow.path.overhead.max(1.0)).then(|| Limit {
        factor: Factor::Application,
        share,
        evidence: BTreeMap::from([
            ("paced_mbit_s".to_string(), rate / 1e6),
            ("delivered_mbit_s".to_string(), delivered_bps / 1e6),
        ]),
        fix: format!(
            "the sender asked to be paced at {:.1} Mbit/s (--rate) and ran at {:.1}: raise or drop the rate",
            rate / 1e6,
            delivered_bps / 1e6
        ),
    })
}

/// A side whose CPU held the flow back: saturated, then contended; the
/// sender first. The slower end bounds a stream however the sender's
/// chrono labels the time (a pacing control, or a write blocked on a full
/// buffer while the receiver waits for a core).
fn cpu_limit(flow: &FlowEvidence, share: f64) -> Option<Limit> {
    let (sender, receiver) = (flow.sender.load(), flow.receiver.load());
    if sender >= SATURATED && sender >= receiver {
        return Some(sender_cpu(flow, share));
    }
    if receiver >= SATURATED {
        return Some(receiver_cpu(flow, share));
    }
    if let Some(limit) = core_bound(&flow.sender, "sender", Factor::SenderCpu, share)
        .or_else(|| core_bound(&flow.receiver, "receiver", Factor::ReceiverCpu, share))
    {
        return Some(limit);
    }
    if let Some(waited) = flow.sender.contended() {
        return Some(contention("sender", &flow.sender, waited, share));
    }
    flow.receiver
        .contended()
        .map(|waited| contention("receiver", &flow.receiver, waited, share))
}

/// The receiver alone short of CPU: saturated (or at its budget), its
/// core saturated by interrupt work, or waiting for a core.
fn receiver_short_of_cpu(flow: &FlowEvidence, share: f64) -> Option<Limit> {
    let side = &flow.receiver;
    if side.load() >= SATURATED {
        return Some(receiver_cpu(flow, share));
    }
    core_bound(side, "receiver", Factor::ReceiverCpu, share).or_else(|| {
        side.contended()
            .map(|w| contention("receiver", side, w, share))
    })
}

/// A side's core, as evidence: which, how busy, and how much of it was
/// interrupt and softirq work.
fn core_evidence(side: &SideEvidence, who: &str, evidence: &mut BTreeMap<String, f64>) {
    if let Some(core) = side.core {
        evidence.insert(format!("{who}_core"), f64::from(core.cpu));
        evidence.insert(format!("{who}_core_busy_pct"), 100.0 * core.busy_share);
        evidence.insert(
            format!("{who}_core_softirq_pct"),
            100.0 * core.interrupt_share,
        );
    }
}

/// A side whose core was saturated while the side itself was not, the
/// difference being interrupt and softirq work charged to no process:
/// CPU-bound on its core though its own accounting says otherwise.
fn core_bound(side: &SideEvidence, who: &str, factor: Factor, share: f64) -> Option<Limit> {
    let core = side.core?;
    if core.busy_share < SATURATED
        || core.interrupt_share < INTERRUPT_WORK
        || side.utilisation() < CONTENDED
    {
        return None;
    }
    let mut evidence = BTreeMap::from([(format!("{who}_cpu_pct"), 100.0 * side.utilisation())]);
    core_evidence(side, who, &mut evidence);
    Some(Limit {
        factor,
        share,
        evidence,
        fix: format!(
            "the {who}'s core (CPU {}) was busy {:.0}% of the run, {:.0}% of it interrupt and softirq work that no process is charged for (the {who} itself ran {:.0}%): the core is saturated though the {who} is not; steer the packet work to another core (RPS/RFS, the interface's IRQ affinity) or pin the {who} away from it",
            core.cpu,
            100.0 * core.busy_share,
            100.0 * core.interrupt_share,
            100.0 * side.utilisation()
        ),
    })
}

/// A side held to a CPU budget that it used up (or that throttled it):
/// the budget's fix, with its evidence added.
fn budget_bound(
    side: &SideEvidence,
    who: &str,
    option: &str,
    evidence: &mut BTreeMap<String, f64>,
) -> Option<String> {
    let budget = side.cpu_budget.filter(|&b| b < 1.0)?;
    evidence.insert(format!("{who}_budget_pct"), 100.0 * budget);
    evidence.insert(format!("{who}_budget_used_pct"), 100.0 * side.load());
    if let Some(t) = side.throttled_s {
        evidence.insert(format!("{who}_throttled_share"), side.throttled());
        evidence.insert(format!("{who}_throttled_s"), t);
    }
    Some(format!(
        "the {who}'s data path is held to {:.1}% of one CPU (a cgroup quota, {option}) and used {:.0}% of it{}: lift or raise the budget, or spend less CPU per byte (larger records, zero-copy)",
        100.0 * budget,
        100.0 * side.load().min(1.0),
        side.throttled_s.map_or(String::new(), |_| format!(
            ", throttled {:.0}% of the run",
            100.0 * side.throttled()
        ))
    ))
}

fn contention(who: &str, side: &SideEvidence, waited: f64, share: f64) -> Limit {
    let mut evidence = BTreeMap::from([
        (format!("{who}_cpu_pct"), 100.0 * side.utilisation()),
        (format!("{who}_run_delay_share"), waited),
        (
            format!("{who}_involuntary_switches"),
            side.involuntary_cs as f64,
        ),
    ]);
    core_evidence(side, who, &mut evidence);
    let other = match side.core {
        Some(core) if core.interrupt_share >= INTERRUPT_WORK => format!(
            "other work shares its core, {:.0}% of that core's time interrupt and softirq work (packet processing, charged to no process); give it a core of its own (pin it away from the packet work, or steer that with RPS/RFS)",
            100.0 * core.interrupt_share
        ),
        _ => "other work shares its core; give it a core of its own (pin the ends apart, stop the competing load)".into(),
    };
    Limit {
        factor: Factor::CpuContention,
        share,
        evidence,
        fix: format!(
            "the {who} was runnable but waiting for a CPU {:.0}% of the run (it ran {:.0}%): {other}",
            100.0 * waited,
            100.0 * side.utilisation()
        ),
    }
}

fn receiver_cpu(flow: &FlowEvidence, share: f64) -> Limit {
    let side = &flow.receiver;
    let reads = side.syscalls.max(1) as f64;
    let mut evidence = BTreeMap::from([
        ("receiver_cpu_pct".to_string(), 100.0 * side.utilisation()),
        ("bytes_per_read".to_string(), flow.bytes as f64 / reads),
        (
            "context_switches_per_read".to_string(),
            (side.voluntary_cs + side.involuntary_cs) as f64 / reads,
        ),
    ]);
    core_evidence(side, "receiver", &mut evidence);
    if let Some(fix) = budget_bound(side, "receiver", "--receiver-cpu", &mut evidence) {
        return Limit {
            factor: Factor::ReceiverCpu,
            share,
            evidence,
            fix,
        };
    }
    Limit {
        factor: Factor::ReceiverCpu,
        share,
        evidence,
        fix: format!(
            "the receiver's core is saturated ({:.0} bytes per read): read larger chunks, receive without the copy (--recv splice or zerocopy), or spread flows over cores (-P)",
            flow.bytes as f64 / reads
        ),
    }
}

/// Busy time not stalled by a buffer: the sender's CPU, the link, loss or
/// a window still opening.
fn busy_time(flow: &FlowEvidence, tcp: &SenderTcp, share: f64, round_trip: &RoundTrip) -> Limit {
    let delivered_bps = round_trip.delivered_bps;
    let rtt_s = round_trip.rtt_s;
    if let Some(limit) = paced(flow, share, delivered_bps) {
        return limit;
    }
    // A full link comes first: the flow got the path's rate, whatever
    // else was near its own limit (named beside it, in the fix).
    let host = cpu_limit(flow, share);
    let wall = flow.sender.wall_s.max(1e-9);
    if let Some(rate) = flow.path.rate_bps {
        let payload_rate = rate as f64 / flow.path.overhead.max(1.0);
        let wire_busy = flow.path.wire_busy_s.map(|s| s / wall);
        let full =
            delivered_bps >= LINK_FULL * payload_rate || wire_busy.is_some_and(|b| b >= LINK_FULL);
        if full {
            let mut evidence = BTreeMap::from([
                ("delivered_mbit_s".to_string(), delivered_bps / 1e6),
                ("link_payload_mbit_s".to_string(), payload_rate / 1e6),
                ("link_mbit_s".to_string(), rate as f64 / 1e6),
            ]);
            if let Some(b) = wire_busy {
                evidence.insert("wire_busy_share".into(), b);
            }
            let hosts = match &host {
                None => "nothing on either host limits this flow".to_string(),
                Some(near) => {
                    evidence.extend(near.evidence.clone());
                    format!(
                        "{} was near its own limit too, and would bind on a faster link ({})",
                        near.factor.describe(),
                        near.fix
                    )
                }
            };
            return Limit {
                factor: Factor::Link,
                share,
                evidence,
                fix: format!(
                    "the link is full: {:.1} of {:.1} Mbit/s of payload ({}); {hosts}",
                    delivered_bps / 1e6,
                    payload_rate / 1e6,
                    flow.path.rate_source
                ),
            };
        }
    }
    if let Some(limit) = host {
        return limit;
    }
    let window_rate = |buffer: Option<u64>| buffer.map(|b| round_trip.window_rate(b));
    for (bound, receiving) in [
        (window_rate(flow.receiver.socket_buffer), true),
        (window_rate(flow.sender.socket_buffer), false),
    ] {
        if bound.is_some_and(|b| delivered_bps >= AT_WINDOW * b) {
            let mut limit = if receiving {
                receive_window(flow, share, round_trip)
            } else {
                send_buffer(flow, share, round_trip)
            };
            limit
                .evidence
                .insert("delivered_mbit_s".into(), delivered_bps / 1e6);
            return limit;
        }
    }
    let segments = tcp.data_segs_out.unwrap_or(0);
    if tcp.total_retrans > 0 && segments > 0 && tcp.loss_based() {
        let p = f64::from(tcp.total_retrans) / f64::from(segments);
        let srtt = f64::from(tcp.srtt_us.max(1)) / 1e6;
        let mathis_bps = f64::from(tcp.snd_mss) * 8.0 / srtt * MATHIS_C / p.sqrt();
        let dropped_here = receive_drops(&flow.receiver);
        let mut evidence = BTreeMap::from([
            ("loss_rate".to_string(), p),
            (
                "retransmitted_segments".to_string(),
                f64::from(tcp.total_retrans),
            ),
            ("mathis_bound_mbit_s".to_string(), mathis_bps / 1e6),
            ("delivered_mbit_s".to_string(), delivered_bps / 1e6),
            ("srtt_ms".to_string(), srtt * 1e3),
        ]);
        let (source, cure) = if dropped_here > 0 {
            evidence.insert("receiver_dropped_segments".into(), dropped_here as f64);
            (
                format!(
                    "the receiver's kernel dropped {dropped_here} segments for want of room in its queue (TcpExt RcvPruned, TCPRcvQDrop, TCPBacklogDrop, TCPZeroWindowDrop) against {} retransmitted",
                    tcp.total_retrans
                ),
                "give the receiver a larger buffer or a faster reader",
            )
        } else {
            (
                "the receiver's kernel dropped none: the loss is on the path".to_string(),
                "find the loss, or use a congestion control that does not read loss as congestion (bbr)",
            )
        };
        return Limit {
            factor: Factor::Loss,
            share,
            evidence,
            fix: format!(
                "{:.2}% of segments were retransmitted: the loss-bounded rate (Mathis) is {:.1} Mbit/s against {:.1} measured; {source}; {cure}",
                100.0 * p,
                mathis_bps / 1e6,
                delivered_bps / 1e6
            ),
        };
    }
    let window_bytes = f64::from(tcp.snd_cwnd) * f64::from(tcp.snd_mss);
    let cwnd_rate = window_bytes * 8.0 / f64::from(tcp.srtt_us.max(1)) * 1e6;
    if cwnd_rate > WINDOW_SLACK * delivered_bps {
        // The window allowed far more than the flow moved: it did not
        // bind. The busiest part of the flow is the likeliest limit.
        return busiest(flow, share, cwnd_rate, delivered_bps);
    }
    let mut evidence = BTreeMap::from([
        ("cwnd_segments".to_string(), f64::from(tcp.snd_cwnd)),
        (
            "cwnd_rate_mbit_s".to_string(),
            window_bytes * 8.0 / rtt_s / 1e6,
        ),
        ("delivered_mbit_s".to_string(), delivered_bps / 1e6),
        ("min_rtt_ms".to_string(), rtt_s * 1e3),
    ]);
    if tcp.total_retrans > 0 {
        evidence.insert(
            "retransmitted_segments".into(),
            f64::from(tcp.total_retrans),
        );
    }
    // The plateau of the kernel's delivery-rate samples (per interval, or
    // the last): the path's rate as TCP measured it, where nothing else
    // says what the path carries.
    let plateau = flow
        .intervals
        .iter()
        .filter(|i| i.app_limited != Some(true))
        .filter_map(|i| i.delivery_rate_bps)
        .fold(None, |max: Option<f64>, r| {
            Some(max.map_or(r, |m| m.max(r)))
        })
        .or(tcp.delivery_rate_bps.map(|r| r as f64));
    if let Some(plateau) = plateau {
        evidence.insert("delivery_rate_plateau_mbit_s".into(), plateau / 1e6);
    }
    let cc = tcp
        .congestion_control
        .as_deref()
        .unwrap_or("the congestion control");
    let fix = if tcp.loss_based() {
        format!(
            "no loss, no full link, no window or buffer at its rate, no saturated CPU: {cc}'s window ({} segments) was still opening; run longer (the run was {wall:.1} s) or raise the initial window (ip route ... initcwnd)",
            tcp.snd_cwnd
        )
    } else {
        format!(
            "no full link, no window or buffer at its rate, no saturated CPU: {cc} paced the flow at its estimate of the path ({} segments in its window{}{}); run longer (the run was {wall:.1} s) or compare with a loss-based control (--cc cubic)",
            tcp.snd_cwnd,
            if tcp.total_retrans > 0 {
                format!(
                    ", {} segments retransmitted: it does not back off on loss",
                    tcp.total_retrans
                )
            } else {
                String::new()
            },
            plateau.map_or(String::new(), |p| format!(
                "; the kernel's delivery rate peaked at {:.1} Mbit/s against {:.1} delivered: {}",
                p / 1e6,
                delivered_bps / 1e6,
                if delivered_bps >= LINK_FULL * p {
                    "the flow ran at the path's rate as TCP measured it"
                } else {
                    "the path carried more at times"
                }
            ))
        )
    };
    Limit {
        factor: Factor::CongestionWindow,
        share,
        evidence,
        fix,
    }
}

/// Nothing reached its bound: the busiest of the sender, the receiver and
/// the wire emulator, if it was busy at least [`BUSIEST`] of the run; else
/// undecided, with what was seen.
fn busiest(flow: &FlowEvidence, share: f64, cwnd_rate: f64, delivered_bps: f64) -> Limit {
    let parts = [
        (Factor::SenderCpu, flow.sender.load()),
        (Factor::ReceiverCpu, flow.receiver.load()),
        (Factor::Emulator, flow.path.emulator_busy.unwrap_or(0.0)),
    ];
    let (factor, busy) = parts
        .into_iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .expect("three parts");
    let mut evidence = BTreeMap::from([
        ("sender_cpu_pct".to_string(), 100.0 * parts[0].1),
        ("receiver_cpu_pct".to_string(), 100.0 * parts[1].1),
        ("cwnd_rate_mbit_s".to_string(), cwnd_rate / 1e6),
        ("delivered_mbit_s".to_string(), delivered_bps / 1e6),
    ]);
    if let Some(emulator) = flow.path.emulator_busy {
        evidence.insert("emulator_cpu_pct".into(), 100.0 * emulator);
    }
    if busy < BUSIEST {
        return Limit {
            factor: Factor::Undecided,
            share,
            evidence,
            fix: format!(
                "nothing reached its bound (no buffer or window at its rate, no full link, no loss that bounds this congestion control) and no part was busier than {:.0}% of the run: the wake-ups between the parts (not measured per flow) are the likeliest cause",
                100.0 * busy
            ),
        };
    }
    let who = match factor {
        Factor::SenderCpu => "the sender",
        Factor::ReceiverCpu => "the receiver",
        _ => "the wire emulator (a user-space process carrying every packet)",
    };
    Limit {
        factor,
        share,
        evidence,
        fix: format!(
            "nothing else reached its bound and {who} was busy {:.0}% of the run, the busiest part of the flow: {}",
            100.0 * busy,
            match factor {
                Factor::Emulator =>
                    "use a veth link (netem or tbf) where the kernel has them, or an unimpaired link (super-packets)",
                _ => "give it a core of its own, or less work per byte (larger records, zero-copy)",
            }
        ),
    }
}

/// Time with nothing in flight: the sender's pacing, its CPU, or the cost
/// of each call and wake-up.
fn idle_time(flow: &FlowEvidence, share: f64, round_trip: &RoundTrip) -> Limit {
    if let Some(limit) = paced(flow, share, round_trip.delivered_bps) {
        return limit;
    }
    if let Some(limit) = cpu_limit(flow, share) {
        return limit;
    }
    let records = (flow.bytes as f64 / flow.record.max(1) as f64).max(1.0);
    let switches = (flow.sender.voluntary_cs + flow.sender.involuntary_cs) as f64 / records;
    if flow.record <= SMALL_RECORD && flow.sender.load() + flow.receiver.load() >= SATURATED {
        // Neither side saturated, but together they keep a core busy:
        // they take turns, each waking the other.
        let mut limit = sender_cpu(flow, share);
        limit.factor = Factor::PerCall;
        limit.evidence.insert(
            "receiver_cpu_pct".into(),
            100.0 * flow.receiver.utilisation(),
        );
        limit.fix = format!(
            "{}-byte records cost a system call and a wake-up each ({switches:.2} context switches per record, the two sides taking turns): use 64 KB records",
            flow.record
        );
        return limit;
    }
    let mut evidence = BTreeMap::from([
        (
            "sender_cpu_pct".to_string(),
            100.0 * flow.sender.utilisation(),
        ),
        ("context_switches_per_record".to_string(), switches),
    ]);
    let own = flow.sender.own_work_share();
    if let Some(own) = own {
        evidence.insert("sender_outside_write_pct".into(), 100.0 * own);
    }
    let fix = match own {
        Some(own) if own >= OWN_WORK => format!(
            "the sender had nothing in flight: it spent {:.0}% of the run producing data between its writes: a cheaper producer, or more threads producing",
            100.0 * own
        ),
        _ => format!(
            "the sender had nothing in flight and its CPU was not saturated: it waited between writes ({switches:.2} sleeps per record) for its producer (disk, a pipe, a slow read), which fed it too slowly"
        ),
    };
    Limit {
        factor: Factor::Application,
        share,
        evidence,
        fix,
    }
}

/// Queueing delay beside the primary factor, when it is a large part of
/// the round trip.
fn queueing(flow: &FlowEvidence, tcp: &SenderTcp) -> Option<Limit> {
    let min = f64::from(tcp.min_rtt_us?) / 1e3;
    let srtt = f64::from(tcp.srtt_us) / 1e3;
    let delay = srtt - min;
    if delay < QUEUE_MIN_MS || delay < QUEUE_SHARE * srtt {
        return None;
    }
    let mut evidence = BTreeMap::from([
        ("srtt_ms".to_string(), srtt),
        ("min_rtt_ms".to_string(), min),
        ("queueing_ms".to_string(), delay),
    ]);
    if let Some(drops) = flow.path.queue_drops {
        evidence.insert("queue_drops".into(), drops as f64);
    }
    let queue = flow.path.queue_bytes.map_or("the queue".to_string(), |b| {
        format!("the {} queue", mb(b as f64))
    });
    Some(Limit {
        factor: Factor::QueueingDelay,
        share: delay / srtt,
        evidence,
        fix: format!(
            "{queue} in front of the link adds {delay:.0} ms to a {min:.0} ms path: shrink it or use fq_codel"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(cpu_s: f64) -> SideEvidence {
        SideEvidence {
            wall_s: 2.0,
            cpu_s,
            syscalls: 1000,
            ..SideEvidence::default()
        }
    }

    fn tcp(busy_s: f64, rwnd_s: f64, sndbuf_s: f64) -> SenderTcp {
        SenderTcp {
            srtt_us: 40_500,
            min_rtt_us: Some(40_000),
            snd_mss: 1448,
            // 40 Mbit/s over 40.5 ms: the fixture's flow, window-bound.
            snd_cwnd: 150,
            total_retrans: 0,
            data_segs_out: Some(10_000),
            busy_us: Some((busy_s * 1e6) as u64),
            rwnd_limited_us: Some((rwnd_s * 1e6) as u64),
            sndbuf_limited_us: Some((sndbuf_s * 1e6) as u64),
            congestion_control: Some("cubic".into()),
            delivery_rate_bps: None,
        }
    }

    fn flow(tcp: SenderTcp) -> FlowEvidence {
        FlowEvidence {
            bytes: 10_000_000,
            record: 128 * 1024,
            sender: side(0.1),
            receiver: side(0.1),
            tcp: Some(tcp),
            path: PathEvidence::default(),
            paced_bps: None,
            intervals: Vec::new(),
        }
    }

    fn primary(flow: &FlowEvidence) -> Factor {
        judge(flow).primary().unwrap().factor
    }

    #[test]
    fn a_full_link_is_named_with_its_rate() {
        let mut f = flow(tcp(2.0, 0.0, 0.0));
        f.bytes = 11_500_000; // 46 Mbit/s over 2 s
        f.path = PathEvidence {
            rate_bps: Some(50_000_000),
            rate_source: "the emulated link".into(),
            overhead: 1.04,
            wire_busy_s: Some(1.9),
            ..PathEvidence::default()
        };
        let v = judge(&f);
        assert_eq!(v.primary().unwrap().factor, Factor::Link, "{v:?}");
        assert!(
            v.headline().contains("the link is full: 46.0 of 48.1"),
            "{}",
            v.headline()
        );
    }

    #[test]
    fn a_stalled_receive_window_is_the_receiver_unless_its_cpu_is_full() {
        let mut f = flow(tcp(2.0, 1.5, 0.0));
        f.receiver.socket_buffer = Some(65536);
        f.receiver.buffer_set = true;
        let v = judge(&f);
        assert_eq!(v.primary().unwrap().factor, Factor::ReceiveWindow, "{v:?}");
        assert!(v.primary().unwrap().fix.contains("--rcvbuf"));
        f.receiver.cpu_s = 1.95;
        assert_eq!(primary(&f), Factor::ReceiverCpu);
    }

    #[test]
    fn a_side_that_spent_its_cpu_budget_is_cpu_bound_though_its_core_was_mostly_idle() {
        // The receiver ran 30% of the run on a 30% budget and waited the
        // rest (its run delay includes the throttled time): its budget,
        // not contention, held the flow; the sender saw a full window.
        let mut f = flow(tcp(2.0, 1.5, 0.0));
        f.receiver.cpu_s = 0.6;
        f.receiver.run_delay_s = Some(1.3);
        assert_eq!(primary(&f), Factor::CpuContention, "unbudgeted: it waited");
        f.receiver.cpu_budget = Some(0.3);
        f.receiver.throttled_s = Some(1.2);
        let v = judge(&f);
        let first = v.primary().unwrap();
        assert_eq!(first.factor, Factor::ReceiverCpu, "{v:?}");
        assert!(first.fix.contains("30.0% of one CPU"), "{}", first.fix);
        assert!(first.fix.contains("--receiver-cpu"), "{}", first.fix);
        assert!((first.evidence["receiver_throttled_share"] - 0.6).abs() < 1e-9);
        // A sender on a budget it does not reach is not held by it.
        let mut f = flow(tcp(2.0, 0.0, 0.0));
        f.sender.cpu_budget = Some(0.5);
        f.sender.cpu_s = 0.2;
        assert_ne!(primary(&f), Factor::SenderCpu);
        // One that reaches it is, with nothing in flight between its slices.
        let mut f = flow(tcp(0.7, 0.0, 0.0));
        f.sender.cpu_budget = Some(0.3);
        f.sender.cpu_s = 0.59;
        f.sender.throttled_s = Some(1.3);
        let v = judge(&f);
        assert_eq!(v.primary().unwrap().factor, Factor::SenderCpu, "{v:?}");
        assert!(v.primary().unwrap().fix.contains("--sender-cpu"));
    }

    #[test]
    fn round_trips_stretched_by_a_side_short_of_cpu_are_its_evidence_not_a_queue() {
        let mut t = tcp(2.0, 1.8, 0.0);
        t.min_rtt_us = Some(20);
        t.srtt_us = 2_000;
        let mut f = flow(t);
        f.receiver.cpu_s = 1.95;
        let v = judge(&f);
        assert_eq!(v.primary().unwrap().factor, Factor::ReceiverCpu);
        assert!(
            v.limits.iter().all(|l| l.factor != Factor::QueueingDelay),
            "{v:?}"
        );
        assert!(v.primary().unwrap().evidence.contains_key("queueing_ms"));
        // With the receiver's CPU to spare, the same delay is a queue.
        f.receiver.cpu_s = 0.1;
        let v = judge(&f);
        assert!(
            v.limits.iter().any(|l| l.factor == Factor::QueueingDelay),
            "{v:?}"
        );
    }

    fn counters(pairs: &[(&str, u64)]) -> Option<BTreeMap<String, u64>> {
        let mut all: BTreeMap<String, u64> = RECEIVE_QUEUE
            .iter()
            .map(|name| (format!("TcpExt.{name}"), 0))
            .collect();
        for (name, n) in pairs {
            all.insert(format!("TcpExt.{name}"), *n);
        }
        Some(all)
    }

    #[test]
    fn a_receiver_that_pruned_its_queue_fell_behind_its_buffer() {
        let mut f = flow(tcp(2.0, 1.5, 0.0));
        f.receiver.counters = counters(&[("PruneCalled", 12), ("TCPToZeroWindowAdv", 30)]);
        let v = judge(&f);
        let first = v.primary().unwrap();
        assert_eq!(first.factor, Factor::ReceiveWindow);
        assert_eq!(first.evidence["PruneCalled"], 12.0);
        assert!(first.fix.contains("reader fell behind"), "{}", first.fix);
        assert!(v.missing.is_empty(), "{:?}", v.missing);
        // Without the counters the verdict says it could not see them.
        f.receiver.counters = None;
        assert!(judge(&f).missing.iter().any(|m| m.contains("TcpExt")));
        // A kernel that lacks some names them.
        let mut partial = counters(&[]).unwrap();
        partial.remove("TcpExt.TCPZeroWindowDrop");
        f.receiver.counters = Some(partial);
        assert!(
            judge(&f)
                .missing
                .iter()
                .any(|m| m.contains("TCPZeroWindowDrop"))
        );
    }

    #[test]
    fn loss_says_whether_the_receiver_dropped_the_segments_or_the_path_did() {
        let mut t = tcp(2.0, 0.0, 0.0);
        t.total_retrans = 100;
        t.snd_cwnd = 20;
        let mut f = flow(t);
        f.bytes = 2_000_000;
        f.receiver.counters = counters(&[]);
        let v = judge(&f);
        assert_eq!(v.primary().unwrap().factor, Factor::Loss, "{v:?}");
        assert!(v.primary().unwrap().fix.contains("loss is on the path"));
        f.receiver.counters = counters(&[("TCPRcvQDrop", 60), ("TCPBacklogDrop", 20)]);
        let v = judge(&f);
        let first = v.primary().unwrap();
        assert_eq!(first.evidence["receiver_dropped_segments"], 80.0);
        assert!(first.fix.contains("dropped 80 segments"), "{}", first.fix);
    }

    #[test]
    fn a_side_whose_core_was_full_of_softirq_work_is_cpu_bound_on_that_core() {
        // Nothing at its bound, the window allowing far more, the
        // receiver running 55% of the run: by its own accounting not
        // saturated, but its core was busy 97%, 40% of it softirq.
        let mut t = tcp(2.0, 0.0, 0.0);
        t.snd_cwnd = 2_000;
        let mut f = flow(t);
        f.receiver.cpu_s = 1.1;
        f.receiver.core = Some(CoreEvidence {
            cpu: 1,
            busy_share: 0.97,
            interrupt_share: 0.4,
        });
        let v = judge(&f);
        let first = v.primary().unwrap();
        assert_eq!(first.factor, Factor::ReceiverCpu, "{v:?}");
        assert!(first.fix.contains("CPU 1"), "{}", first.fix);
        assert_eq!(first.evidence["receiver_core_softirq_pct"], 40.0);
        // The same core busy with tasks alone (no interrupt work) is not
        // this: the run delay would name the contention.
        f.receiver.core = Some(CoreEvidence {
            cpu: 1,
            busy_share: 0.97,
            interrupt_share: 0.02,
        });
        assert_ne!(judge(&f).primary().unwrap().fix, first.fix);
    }

    #[test]
    fn a_full_send_buffer_is_named() {
        let mut f = flow(tcp(2.0, 0.0, 1.6));
        f.sender.buffer_max = Some(4 << 20);
        let v = judge(&f);
        assert_eq!(v.primary().unwrap().factor, Factor::SendBuffer);
        assert!(
            v.primary()
                .unwrap()
                .fix
                .contains("tcp_wmem's maximum (now 4.0 MB)"),
            "{v:?}"
        );
    }

    #[test]
    fn loss_gives_the_mathis_bound() {
        let mut t = tcp(2.0, 0.0, 0.0);
        t.total_retrans = 100;
        let v = judge(&flow(t));
        let first = v.primary().unwrap();
        assert_eq!(first.factor, Factor::Loss);
        // 1448 B × 8 / 40.5 ms × 1.2247 / √0.01
        let want = 1448.0 * 8.0 / 0.0405 * MATHIS_C / 0.1 / 1e6;
        assert!((first.evidence["mathis_bound_mbit_s"] - want).abs() < 0.01);
    }

    #[test]
    fn a_saturated_sender_with_small_records_is_per_call() {
        let mut f = flow(tcp(2.0, 0.0, 0.0));
        f.sender.cpu_s = 1.96;
        f.record = 1024;
        f.sender.syscalls = 10_000_000 / 1024;
        let v = judge(&f);
        assert_eq!(v.primary().unwrap().factor, Factor::PerCall, "{v:?}");
        assert!(v.headline().contains("use 64 KB records"));
        f.record = 128 * 1024;
        assert_eq!(primary(&f), Factor::SenderCpu);
    }

    #[test]
    fn pacing_and_idle_time_are_the_application() {
        let mut f = flow(tcp(0.4, 0.0, 0.0));
        f.paced_bps = Some(10_000_000);
        assert_eq!(primary(&f), Factor::Application);
        f.paced_bps = None;
        assert_eq!(primary(&f), Factor::Application);
    }

    #[test]
    fn the_applications_own_work_between_its_calls_is_named() {
        // A reader busy 60% of the run verifying what it read, its buffer
        // full behind it: the window, with the reader's own work named.
        let mut f = flow(tcp(2.0, 1.5, 0.0));
        f.receiver.socket_buffer = Some(65536);
        f.receiver.buffer_set = true;
        f.receiver.cpu_s = 1.4;
        f.receiver.user_s = Some(1.2);
        let v = judge(&f);
        let window = v.primary().unwrap();
        assert_eq!(window.factor, Factor::ReceiveWindow, "{v:?}");
        assert_eq!(window.evidence["receiver_outside_read_pct"], 60.0);
        assert_eq!(window.evidence["receiver_bytes_per_read"], 10_000.0);
        assert!(
            window.fix.contains("own work between reads"),
            "{}",
            window.fix
        );
        f.receiver.user_s = Some(0.1);
        assert!(!judge(&f).primary().unwrap().fix.contains("own work"));

        // An idle sender that spent half the run producing: its producer.
        let mut f = flow(tcp(0.4, 0.0, 0.0));
        f.sender.cpu_s = 1.1;
        f.sender.user_s = Some(1.0);
        let v = judge(&f);
        let app = v.primary().unwrap();
        assert_eq!(app.factor, Factor::Application, "{v:?}");
        assert!(
            app.fix.contains("producing data between its writes"),
            "{}",
            app.fix
        );
        f.sender.user_s = Some(0.05);
        assert!(
            judge(&f)
                .primary()
                .unwrap()
                .fix
                .contains("waited between writes")
        );
    }

    #[test]
    fn intervals_make_phases_and_carry_the_app_limited_bit() {
        let interval = |start: f64, busy, rwnd, sndbuf, app| IntervalChrono {
            start_s: start,
            end_s: start + 0.5,
            busy,
            rwnd_limited: rwnd,
            sndbuf_limited: sndbuf,
            app_limited: Some(app),
            delivery_rate_bps: None,
        };
        let mut f = flow(tcp(2.0, 1.5, 0.0));
        f.receiver.socket_buffer = Some(65536);
        f.receiver.buffer_set = true;
        f.intervals = vec![
            interval(0.0, 1.0, 0.1, 0.6, false),
            interval(0.5, 1.0, 0.8, 0.0, false),
            interval(1.0, 1.0, 0.9, 0.0, true),
            interval(1.5, 0.2, 0.1, 0.0, true),
        ];
        let v = judge(&f);
        let held: Vec<(&str, u32, u32)> = v
            .phases
            .iter()
            .map(|p| (p.held_by.as_str(), p.intervals, p.app_limited))
            .collect();
        assert_eq!(held, [("sndbuf", 1, 0), ("rwnd", 2, 1), ("idle", 1, 1)]);
        assert_eq!(v.phases[1].from_s, 0.5);
        assert_eq!(v.phases[1].to_s, 1.5);
        assert_eq!(
            v.primary().unwrap().evidence["app_limited_interval_ends_pct"],
            50.0
        );
        assert!(
            v.headline()
                .contains("by interval: sndbuf 0.0-0.5 s, rwnd 0.5-1.5 s")
        );
        // Without intervals, no phases and no such evidence.
        f.intervals.clear();
        let v = judge(&f);
        assert!(v.phases.is_empty());
        assert!(
            !v.primary()
                .unwrap()
                .evidence
                .contains_key("app_limited_interval_ends_pct")
        );
        assert!(!v.headline().contains("by interval"));
    }

    #[test]
    fn queueing_delay_is_named_beside_the_link() {
        let mut t = tcp(2.0, 0.0, 0.0);
        t.srtt_us = 91_000;
        let mut f = flow(t);
        f.path.queue_bytes = Some(512 * 1024);
        let v = judge(&f);
        let queue = v
            .limits
            .iter()
            .find(|l| l.factor == Factor::QueueingDelay)
            .expect("queueing named");
        assert!(
            queue.fix.contains("adds 51 ms to a 40 ms path"),
            "{}",
            queue.fix
        );
    }

    #[test]
    fn missing_accounting_is_said_not_taken_as_zero() {
        let mut t = tcp(2.0, 0.0, 0.0);
        t.busy_us = None;
        let v = judge(&flow(t));
        assert!(!v.missing.is_empty());
        assert_eq!(v.primary().unwrap().factor, Factor::Undecided);
        let mut f = flow(tcp(2.0, 0.0, 0.0));
        f.tcp = None;
        f.sender.cpu_s = 1.9;
        let v = judge(&f);
        assert_eq!(v.primary().unwrap().factor, Factor::SenderCpu);
        assert!(v.missing[0].contains("TCP_INFO"));
    }

    #[test]
    fn a_flow_at_its_receive_window_s_rate_is_the_window_whatever_the_chrono_says() {
        // bbr stops at its pacing gate before the window test, so the
        // chrono calls the time busy; 64 KB of window over 20 ms is
        // 26 Mbit/s, and the flow ran at 31.
        let mut t = tcp(3.0, 0.0, 0.0);
        t.min_rtt_us = Some(20_000);
        t.srtt_us = 20_300;
        t.congestion_control = Some("bbr".into());
        t.snd_cwnd = 60;
        let mut f = flow(t);
        f.sender.wall_s = 3.0;
        f.receiver.wall_s = 3.0;
        f.bytes = 31_100_000 * 3 / 8;
        f.receiver.socket_buffer = Some(131_072);
        f.receiver.buffer_set = true;
        let v = judge(&f);
        assert_eq!(v.primary().unwrap().factor, Factor::ReceiveWindow, "{v:?}");
        // A buffer far above the flow's window rate is not the limit.
        f.receiver.socket_buffer = Some(32 << 20);
        assert_eq!(primary(&f), Factor::CongestionWindow);
    }

    #[test]
    fn a_cost_model_splits_a_saturated_sender_by_its_fixed_share() {
        let mut f = flow(tcp(2.0, 0.0, 0.0));
        f.sender.cpu_s = 1.96;
        f.record = 1024;
        let mut v = judge(&f);
        attribute_cpu(&mut v, 0.3, 1024);
        assert_eq!(v.primary().unwrap().factor, Factor::SenderCpu, "{v:?}");
        f.record = 64 * 1024;
        let mut v = judge(&f);
        attribute_cpu(&mut v, 0.7, 64 * 1024);
        assert_eq!(v.primary().unwrap().factor, Factor::PerCall, "{v:?}");
    }

    #[test]
    fn a_side_waiting_for_a_busy_core_is_contention_not_its_producer() {
        let mut f = flow(tcp(0.5, 0.0, 0.0));
        f.record = 1024;
        f.sender.cpu_s = 0.8;
        f.sender.run_delay_s = Some(1.0);
        let v = judge(&f);
        assert_eq!(v.primary().unwrap().factor, Factor::CpuContention, "{v:?}");
        assert!(
            v.headline().contains("waiting for a CPU 50%"),
            "{}",
            v.headline()
        );
        // Without the run delay, the same run is the producer's.
        f.sender.run_delay_s = None;
        assert_eq!(primary(&f), Factor::Application);
    }

    #[test]
    fn loss_does_not_bound_a_control_that_ignores_it() {
        let mut t = tcp(2.0, 0.0, 0.0);
        t.total_retrans = 100;
        t.congestion_control = Some("bbr".into());
        let v = judge(&flow(t));
        assert_eq!(v.primary().unwrap().factor, Factor::CongestionWindow);
        assert!(
            v.headline().contains("does not back off on loss"),
            "{}",
            v.headline()
        );
    }

    #[test]
    fn one_factor_from_two_parts_of_the_run_is_named_once() {
        let mut f = flow(tcp(1.5, 0.0, 0.0));
        f.sender.cpu_s = 1.9;
        let v = judge(&f);
        assert_eq!(v.limits.len(), 1, "{v:?}");
        assert!((v.limits[0].share - 1.0).abs() < 1e-9);
    }

    #[test]
    fn with_nothing_at_its_bound_the_busiest_part_is_named_or_undecided() {
        let mut t = tcp(2.0, 0.0, 0.0);
        t.snd_cwnd = 1000;
        let mut f = flow(t);
        f.path.emulator_busy = Some(0.8);
        let v = judge(&f);
        assert_eq!(v.primary().unwrap().factor, Factor::Emulator, "{v:?}");
        f.path.emulator_busy = None;
        f.receiver.cpu_s = 1.6;
        assert_eq!(primary(&f), Factor::ReceiverCpu);
        f.receiver.cpu_s = 0.1;
        assert_eq!(primary(&f), Factor::Undecided);
    }

    #[test]
    fn a_window_still_opening_is_named_when_nothing_else_is() {
        assert_eq!(primary(&flow(tcp(2.0, 0.0, 0.0))), Factor::CongestionWindow);
    }

    #[test]
    fn bbr_at_its_delivery_rate_plateau_says_so() {
        // 40 Mbit/s delivered; the kernel's samples peaked at 41 outside
        // app-limited intervals (the 90 in one that was is not the path's).
        let mut t = tcp(2.0, 0.0, 0.0);
        t.congestion_control = Some("bbr".into());
        let mut f = flow(t);
        let sample = |rate: f64, app| IntervalChrono {
            end_s: 1.0,
            busy: 1.0,
            app_limited: Some(app),
            delivery_rate_bps: Some(rate),
            ..IntervalChrono::default()
        };
        f.intervals = vec![sample(39e6, false), sample(41e6, false), sample(90e6, true)];
        let v = judge(&f);
        let first = v.primary().unwrap();
        assert_eq!(first.factor, Factor::CongestionWindow, "{v:?}");
        assert_eq!(first.evidence["delivery_rate_plateau_mbit_s"], 41.0);
        assert!(
            first.fix.contains(
                "peaked at 41.0 Mbit/s against 40.0 delivered: the flow ran at the path's rate"
            ),
            "{}",
            first.fix
        );
    }
}
