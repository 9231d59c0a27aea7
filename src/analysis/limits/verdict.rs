//! A verdict: its factors, each with its share, evidence and fix; the
//! run's phases by interval.

use super::evidence::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What limited a flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Factor {
    /// A link of known rate (netlab's own, or a shaper either end read)
    /// was full.
    Link,
    /// The path's bottleneck, rate unknown beforehand: the delivery rate
    /// sat on a plateau with nothing on either host binding (with a queue
    /// in front of it, or a policer, as its evidence says).
    Path,
    /// The transfer ended in slow start, or within a few round trips of
    /// it: it never reached the path's rate.
    ShortFlow,
    /// The flow lost segments and spent its time recovering: its sending
    /// was held down by the loss (any congestion control).
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

    /// A factor of the network between the hosts: what a mesh's pattern
    /// findings may read (a host's CPU, buffers or application are
    /// evidence about that host, not about a path).
    pub fn is_network(self) -> bool {
        matches!(
            self,
            Factor::Link | Factor::Path | Factor::Loss | Factor::QueueingDelay
        )
    }

    pub fn describe(self) -> &'static str {
        match self {
            Factor::Link => "the link",
            Factor::Path => "the path's bottleneck",
            Factor::ShortFlow => "a short transfer (it ended in slow start)",
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
pub fn phases(intervals: &[IntervalEvidence]) -> Vec<Phase> {
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

/// A verdict's one factor when the evidence decides nothing, with why.
pub(super) fn undecided(why: &str) -> Limit {
    Limit {
        factor: Factor::Undecided,
        share: 1.0,
        evidence: BTreeMap::new(),
        fix: format!("none to give: {why}"),
    }
}
