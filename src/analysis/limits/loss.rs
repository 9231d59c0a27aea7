//! Loss under any congestion control, measured by what the kernel saw:
//! the share of bytes retransmitted (`tcpi_bytes_retrans` over
//! `tcpi_bytes_sent`, else segments), the share of the run spent in
//! recovery (`tcpi_ca_state` sampled through the run), and bytes
//! delivered against bytes sent. Mathis, Semke, Mahdavi and Ott's bound
//! (1997: rate ≤ MSS/RTT × C/√p) holds only for a loss-based control's
//! sawtooth; it is shown as evidence for one, never used as the rule.

use super::buffers::{RoundTrip, receive_drops};
use super::evidence::*;
use super::series::Series;
use super::thresholds::*;
use super::verdict::*;
use std::collections::BTreeMap;

/// A flow that retransmitted at least this share of its bytes lost
/// enough to matter.
pub const LOSS_SHARE: f64 = 0.001;

/// A flow that spent at least this share of the run in recovery (or
/// loss) was held by it: that time its window was cut or frozen.
pub const RECOVERY_SHARE: f64 = 0.1;

/// Recovery this much of the run is loss that held the flow whatever a
/// host did: weighed against a host's CPU ([`against_host`]).
pub const HEAVY_RECOVERY: f64 = 0.3;

/// Without samples of the recovery state, a retransmitted share this
/// large is taken as binding.
pub const HEAVY_LOSS: f64 = 0.01;

/// What loss cost a flow.
#[derive(Debug, Clone, PartialEq)]
pub struct LossCost {
    pub retrans_share: f64,
    pub retrans_segments: u32,
    pub recovery_share: Option<f64>,
    /// Bytes delivered over bytes sent (retransmissions included).
    pub delivered_of_sent: Option<f64>,
    /// Segments the receiver's own kernel dropped for want of room.
    pub receiver_drops: u64,
}

impl LossCost {
    pub fn evidence(&self, evidence: &mut BTreeMap<String, f64>) {
        evidence.insert("retransmitted_pct".into(), 100.0 * self.retrans_share);
        evidence.insert(
            "retransmitted_segments".into(),
            f64::from(self.retrans_segments),
        );
        if let Some(r) = self.recovery_share {
            evidence.insert("recovery_time_pct".into(), 100.0 * r);
        }
        if let Some(d) = self.delivered_of_sent {
            evidence.insert("delivered_of_sent_pct".into(), 100.0 * d);
        }
        if self.receiver_drops > 0 {
            evidence.insert(
                "receiver_dropped_segments".into(),
                self.receiver_drops as f64,
            );
        }
    }

    /// Whether the loss held the flow: enough retransmitted, and enough
    /// of the run in recovery (or, unsampled, a heavy loss), or a
    /// loss-based control's window, cut by the loss, binding the flow.
    pub fn binding(&self, window_cut_by_loss: bool) -> bool {
        self.retrans_share >= LOSS_SHARE
            && (window_cut_by_loss
                || self
                    .recovery_share
                    .map_or(self.retrans_share >= HEAVY_LOSS, |r| r >= RECOVERY_SHARE))
    }
}

/// What the flow's loss cost it; None when nothing was retransmitted.
pub(super) fn cost(flow: &FlowEvidence, tcp: &SenderTcp, series: &Series) -> Option<LossCost> {
    if tcp.total_retrans == 0 && tcp.bytes_retrans.unwrap_or(0) == 0 {
        return None;
    }
    let retrans_share = crate::measure::tcpinfo::retransmitted_share(
        tcp.bytes_retrans,
        tcp.bytes_sent,
        tcp.total_retrans,
        tcp.data_segs_out,
    )?;
    Some(LossCost {
        retrans_share,
        retrans_segments: tcp.total_retrans,
        recovery_share: series.recovery_share,
        delivered_of_sent: tcp
            .bytes_sent
            .filter(|&s| s > 0)
            .map(|sent| flow.bytes as f64 / sent as f64),
        receiver_drops: receive_drops(&flow.receiver),
    })
}

/// Where the ends saw the loss happen, from their own counters: the
/// receiver's kernel (no room in its queues), either end's interface, a
/// shaper's queue; none of them, the path beyond both hosts.
fn where_lost(flow: &FlowEvidence, cost: &LossCost, loss_based: bool) -> String {
    if cost.receiver_drops > 0 {
        return format!(
            "the receiver's kernel dropped {} segments for want of room in its queue (TcpExt RcvPruned, TCPRcvQDrop, TCPBacklogDrop, TCPZeroWindowDrop) against {} retransmitted: give the receiver a larger buffer or a faster reader",
            cost.receiver_drops, cost.retrans_segments
        );
    }
    let mut sites = Vec::new();
    for (side, who) in [(&flow.sender, "sender"), (&flow.receiver, "receiver")] {
        if let Some(i) = side.interface.as_ref().filter(|i| i.dropped + i.errors > 0) {
            sites.push(format!(
                "the {who}'s interface {} dropped {} and failed {} packets",
                i.name, i.dropped, i.errors
            ));
        }
    }
    for shaper in flow.path.shapers.iter().filter(|s| s.drops > 0) {
        sites.push(format!(
            "{} dropped {} packets",
            shaper.describe(),
            shaper.drops
        ));
    }
    if !sites.is_empty() {
        return format!(
            "{} (against {} retransmitted): {}",
            sites.join("; "),
            cost.retrans_segments,
            "there is the loss: a shaper's queue too short for the flow's bursts, or an interface that cannot keep up"
        );
    }
    let counted = [&flow.sender, &flow.receiver]
        .iter()
        .filter(|side| side.interface.is_some())
        .count();
    let cure = if loss_based {
        "find the loss (a bad link, a full queue without ECN, a policer); a control that does not read loss as congestion (bbr) loses less rate to it"
    } else {
        "find the loss (a bad link, a full queue, a policer): even a control that does not back off on loss spends its recoveries retransmitting"
    };
    if counted == 2 {
        format!(
            "no counter either end read saw it (the receiver's kernel, both interfaces, the shapers either end read): the loss is on the path between them, or in a firewall rule (no counter read here sees one); {cure}"
        )
    } else {
        format!("the receiver's kernel dropped none: the loss is on the path; {cure}")
    }
}

/// Heavy loss (recovery [`HEAVY_RECOVERY`] of the run) beside a host
/// found CPU-bound. A side that only waited for its CPU some of the run,
/// and was neither running nor waiting most of it, was idle because of
/// the loss: the loss is primary. A side at its CPU's bound while the
/// loss held the flow most of the run: either could be the limit (loss
/// recovery costs CPU too), and the verdict says it cannot tell. None:
/// the host's verdict stands.
pub(super) fn against_host(busy: &Busy, host: &Limit) -> Option<Limit> {
    let cost = busy.loss.as_ref()?;
    let recovery = cost.recovery_share?;
    if recovery < HEAVY_RECOVERY || !cost.binding(false) {
        return None;
    }
    let flow = busy.flow;
    let occupied = |side: &SideEvidence| {
        side.utilisation() + side.run_delay_s.unwrap_or(0.0) / side.wall_s.max(1e-9)
    };
    if host.factor == Factor::CpuContention
        && occupied(&flow.sender).max(occupied(&flow.receiver)) < 0.5
    {
        let mut limit = judge_binding(busy, cost)?;
        limit
            .evidence
            .extend(host.evidence.iter().map(|(k, v)| (format!("also_{k}"), *v)));
        limit.fix.push_str(&format!(
            "; {} was also named, but neither side was running or waiting for a CPU half the run",
            host.factor.describe()
        ));
        return Some(limit);
    }
    if !matches!(host.factor, Factor::SenderCpu | Factor::ReceiverCpu) {
        return None;
    }
    let mut evidence = host.evidence.clone();
    cost.evidence(&mut evidence);
    Some(Limit {
        factor: Factor::Undecided,
        share: busy.share,
        evidence,
        fix: format!(
            "undecided between {} at its bound and loss: {:.2}% of the bytes retransmitted and {:.0}% of the run in recovery (recovering costs the CPU too); run it again without the loss, or with that side on a core of its own, to tell",
            host.factor.describe(),
            100.0 * cost.retrans_share,
            100.0 * recovery
        ),
    })
}

/// Loss as the primary cause, when it bound the flow.
pub(super) fn judge(busy: &Busy) -> Option<Limit> {
    judge_binding(busy, busy.loss.as_ref()?)
}

/// [`judge`] over the flow's loss cost.
fn judge_binding(busy: &Busy, cost: &LossCost) -> Option<Limit> {
    let delivered_bps = busy.round_trip.delivered_bps;
    // A loss-based control halves its window at each loss (its slow-start
    // threshold then set): a window at the delivered rate is the loss's.
    // Its typical window is the samples' median; the end's one reading
    // lands anywhere on the sawtooth, up to a peak half again the rate.
    let window_bps = busy
        .series
        .window_rate_bps
        .unwrap_or_else(|| busy.tcp.cwnd_rate_bps());
    let window_cut = busy.tcp.loss_based()
        && busy.tcp.snd_ssthresh.is_some_and(|s| s < INFINITE_SSTHRESH)
        && window_bps <= WINDOW_SLACK * delivered_bps;
    if !cost.binding(window_cut) {
        return None;
    }
    let mut evidence = BTreeMap::from([
        ("delivered_mbit_s".to_string(), delivered_bps / 1e6),
        ("srtt_ms".to_string(), f64::from(busy.tcp.srtt_us) / 1e3),
    ]);
    cost.evidence(&mut evidence);
    if window_cut {
        evidence.insert("cwnd_rate_mbit_s".into(), window_bps / 1e6);
    }
    if let Some(rate) = busy.flow.path.rate_bps {
        evidence.insert("link_mbit_s".into(), rate as f64 / 1e6);
    }
    let mathis = if busy.tcp.loss_based() {
        let p = cost.retrans_share.max(1e-9);
        let srtt = f64::from(busy.tcp.srtt_us.max(1)) / 1e6;
        let bound = f64::from(busy.tcp.snd_mss) * 8.0 / srtt * MATHIS_C / p.sqrt();
        evidence.insert("mathis_bound_mbit_s".into(), bound / 1e6);
        format!(
            "; for a loss-based control Mathis' bound at this loss is {:.1} Mbit/s",
            bound / 1e6
        )
    } else {
        String::new()
    };
    let source = where_lost(busy.flow, cost, busy.tcp.loss_based());
    let below = busy.flow.path.rate_bps.map_or(String::new(), |rate| {
        format!(
            ", {:.0}% of the link's {:.1} Mbit/s",
            100.0 * delivered_bps / rate as f64,
            rate as f64 / 1e6
        )
    });
    Some(Limit {
        factor: Factor::Loss,
        share: busy.share,
        evidence,
        fix: format!(
            "{:.2}% of the bytes were retransmitted{}{}{}, and the flow delivered {:.1} Mbit/s{below}{mathis}; {source}",
            100.0 * cost.retrans_share,
            if window_cut {
                format!(
                    "; {} halved its window at each loss and the window ({:.1} Mbit/s over the round trip) held the flow",
                    busy.tcp
                        .congestion_control
                        .as_deref()
                        .unwrap_or("the congestion control"),
                    window_bps / 1e6
                )
            } else {
                String::new()
            },
            cost.recovery_share.map_or(String::new(), |r| format!(
                " and {:.0}% of the run went to loss recovery",
                100.0 * r
            )),
            cost.delivered_of_sent.map_or(String::new(), |d| format!(
                " ({:.1}% of what was sent arrived as new data)",
                100.0 * d
            )),
            delivered_bps / 1e6,
        ),
    })
}

/// The flow's busy time as the families read it, gathered once.
pub(super) struct Busy<'a> {
    pub(super) flow: &'a FlowEvidence,
    pub(super) tcp: &'a SenderTcp,
    /// The share of the run it is.
    pub(super) share: f64,
    pub(super) round_trip: &'a RoundTrip,
    pub(super) series: &'a Series,
    /// What loss cost the flow, if it lost anything.
    pub(super) loss: Option<LossCost>,
}
