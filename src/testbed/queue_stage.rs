//! The emulator's bottleneck queue: IP packets as the TUN devices hand
//! them over, through the link's queue discipline (`testbed::qdisc`) in
//! front of its rate. The link model (`testbed::impair`) then carries each
//! departing packet through the rest of the path (loss, delay, jitter).
//!
//! Pure, like the disciplines: the emulator pushes what it reads, asks
//! when the next departure is due, and pulls the departures due by now,
//! each with the time its last bit leaves the wire. A packet the
//! discipline marks Congestion Experienced has its IP header's ECN field
//! set to CE and its header checksum filled anew (RFC 3168 §5) before it
//! leaves.
//!
//! It keeps what the queue did, read from the queue itself: packets in,
//! out, dropped and marked, their sojourn times, the backlog, and a
//! timeline of [`QUEUE_SAMPLE_MS`] samples so that a run can say which
//! queue held the delay at each moment.
//!
//! Invariants (tests): every packet pushed is sent, dropped, or still
//! queued; a marked packet carries CE and a valid header checksum; the
//! timeline's counts add up to the totals.

use crate::record::testbed::{
    BottleneckCounts, Framing, QUEUE_SAMPLE_MS, QueueDiscipline, QueueLimit, QueueSample,
};
use crate::testbed::impair::wire_bytes;
use crate::testbed::qdisc::bottleneck::{Bottleneck, WireCost};
use crate::testbed::qdisc::droptail::{DropTail, Limit};
use crate::testbed::qdisc::fq_codel::FqCodel;
use crate::testbed::qdisc::{Discipline, Packet, codel};
use crate::wire::ipv4::{Ecn, Ipv4Packet};

/// An IP packet at the bottleneck, with what the discipline reads of it.
#[derive(Debug)]
pub struct WirePacket {
    pub bytes: Vec<u8>,
    flow: u64,
    ect: bool,
}

impl WirePacket {
    /// Classifies `bytes` (an IPv4 packet; anything else is one flow of
    /// its own, never ECN-capable).
    pub fn new(bytes: Vec<u8>) -> WirePacket {
        let (flow, ect) = match Ipv4Packet::new_checked(&bytes[..]) {
            Ok(ip) => (ip.flow_key(), !matches!(ip.ecn(), Ecn::NotEct)),
            Err(_) => (0, false),
        };
        WirePacket { bytes, flow, ect }
    }
}

impl Packet for WirePacket {
    fn wire_len(&self) -> usize {
        self.bytes.len()
    }
    fn flow(&self) -> u64 {
        self.flow
    }
    fn ecn_capable(&self) -> bool {
        self.ect
    }
}

type Queue = Box<dyn Discipline<WirePacket> + Send>;

/// The discipline a link's profile names, as a queue of wire packets.
fn discipline_of(d: &QueueDiscipline, mtu: usize) -> Queue {
    let codel = |target_us: u64, interval_us: u64, ecn: bool| codel::Params {
        target_ns: target_us * 1000,
        interval_ns: interval_us * 1000,
        mtu,
        ecn,
    };
    match *d {
        QueueDiscipline::DropTail { limit } => Box::new(DropTail::new(match limit {
            QueueLimit::Packets(n) => Limit::Packets(n as usize),
            QueueLimit::Bytes(b) => Limit::Bytes(b),
        })),
        QueueDiscipline::Codel {
            limit_packets,
            target_us,
            interval_us,
            ecn,
        } => Box::new(codel::Codel::new(
            codel(target_us, interval_us, ecn),
            limit_packets as usize,
        )),
        QueueDiscipline::FqCodel(q) => {
            Box::new(FqCodel::new(crate::testbed::qdisc::fq_codel::Params {
                flows: q.flows as usize,
                quantum: q.quantum,
                limit: q.limit_packets as usize,
                codel: codel(q.target_us, q.interval_us, q.ecn),
                ..Default::default()
            }))
        }
    }
}

/// A packet leaving the bottleneck: its last bit is off the wire at `end_ns`.
#[derive(Debug)]
pub struct Leaving {
    pub end_ns: u64,
    pub bytes: Vec<u8>,
}

/// One direction's bottleneck queue in the emulator.
pub struct QueueStage {
    bottleneck: Bottleneck<Queue>,
    counts: BottleneckCounts,
    sojourn_us: hdrhistogram::Histogram<u64>,
    sample: Option<QueueSample>,
    sample_sojourn_ms_sum: f64,
    dropped: Vec<WirePacket>,
}

impl QueueStage {
    /// The queue `discipline` in front of a wire of `rate_bps` with
    /// `framing`, for packets up to `mtu`; its timeline starts at
    /// `origin_unix_ns` (wall clock) = 0 on the caller's clock.
    pub fn new(
        discipline: &QueueDiscipline,
        rate_bps: u64,
        framing: Option<Framing>,
        mtu: usize,
        origin_unix_ns: u64,
    ) -> QueueStage {
        let cost: WireCost = Box::new(move |len| {
            let (busy, frame) = wire_bytes(framing, len);
            (frame, busy)
        });
        QueueStage {
            bottleneck: Bottleneck::with_cost(discipline_of(discipline, mtu), rate_bps, cost),
            counts: BottleneckCounts {
                discipline: discipline.name().to_string(),
                origin_unix_ns,
                ..Default::default()
            },
            sojourn_us: hdrhistogram::Histogram::new_with_bounds(1, 600_000_000, 3)
                .expect("valid histogram bounds"),
            sample: None,
            sample_sojourn_ms_sum: 0.0,
            dropped: Vec::new(),
        }
    }

    /// The sample of the interval holding `now_ns`, the one before kept in
    /// the timeline if anything happened in it.
    fn sample_at(&mut self, now_ns: u64) -> &mut QueueSample {
        let t_ms = now_ns / 1_000_000 / QUEUE_SAMPLE_MS * QUEUE_SAMPLE_MS;
        if self.sample.is_some_and(|s| s.t_ms != t_ms) {
            self.close_sample();
        }
        self.sample.get_or_insert(QueueSample {
            t_ms,
            ..Default::default()
        })
    }

    fn close_sample(&mut self) {
        if let Some(mut sample) = self.sample.take() {
            if sample.sent > 0 {
                sample.sojourn_ms_mean = self.sample_sojourn_ms_sum / sample.sent as f64;
            }
            self.sample_sojourn_ms_sum = 0.0;
            self.counts.timeline.push(sample);
        }
    }

    /// Notes the backlog and the drops since the last look.
    fn observe(&mut self, now_ns: u64, spare: &mut Vec<Vec<u8>>) {
        let (bytes, packets) = (
            self.bottleneck.discipline().backlog_bytes(),
            self.bottleneck.discipline().backlog_packets() as u64,
        );
        let dropped = self.dropped.len() as u64;
        let sample = self.sample_at(now_ns);
        sample.max_backlog_bytes = sample.max_backlog_bytes.max(bytes);
        sample.max_backlog_packets = sample.max_backlog_packets.max(packets);
        sample.dropped += dropped;
        self.counts.dropped += dropped;
        self.counts.max_backlog_bytes = self.counts.max_backlog_bytes.max(bytes);
        self.counts.max_backlog_packets = self.counts.max_backlog_packets.max(packets);
        spare.extend(self.dropped.drain(..).map(|p| p.bytes));
    }

    /// A packet read at `now_ns`. Departures due before it must have been
    /// pulled first (the wire took them before it came).
    pub fn push(&mut self, now_ns: u64, bytes: Vec<u8>, spare: &mut Vec<Vec<u8>>) {
        self.counts.enqueued += 1;
        self.bottleneck
            .push(now_ns, WirePacket::new(bytes), &mut self.dropped);
        self.observe(now_ns, spare);
    }

    /// When the wire takes the next packet, if one waits.
    pub fn next_departure(&self) -> Option<u64> {
        self.bottleneck.next_departure::<WirePacket>()
    }

    /// The packets the wire took by `now_ns`, into `out`; what the
    /// discipline dropped on the way out goes back to `spare`.
    pub fn pull(&mut self, now_ns: u64, out: &mut Vec<Leaving>, spare: &mut Vec<Vec<u8>>) {
        for departure in self.bottleneck.pull(now_ns, &mut self.dropped) {
            let mut bytes = departure.packet.bytes;
            if departure.marked {
                // Only an ECN-capable packet is marked; mark_ce leaves any
                // other as it was.
                if let Ok(mut ip) = Ipv4Packet::new_checked(&mut bytes[..])
                    && ip.mark_ce()
                {
                    self.counts.marked += 1;
                    self.sample_at(departure.start_ns).marked += 1;
                }
            }
            let sojourn_ms = departure.sojourn_ns as f64 / 1e6;
            let _ = self.sojourn_us.record((departure.sojourn_ns / 1000).max(1));
            self.counts.sent += 1;
            self.observe(departure.start_ns, spare);
            let sample = self.sample_at(departure.start_ns);
            sample.sent += 1;
            sample.sojourn_ms_max = sample.sojourn_ms_max.max(sojourn_ms);
            self.sample_sojourn_ms_sum += sojourn_ms;
            out.push(Leaving {
                end_ns: departure.end_ns,
                bytes,
            });
        }
        self.observe(now_ns, spare);
    }

    /// Packets the discipline dropped so far.
    pub fn dropped(&self) -> u64 {
        self.counts.dropped
    }

    /// Packets still queued.
    pub fn backlog_packets(&self) -> u64 {
        self.bottleneck.discipline().backlog_packets() as u64
    }

    /// What the queue did, its timeline closed.
    pub fn finish(mut self) -> BottleneckCounts {
        self.close_sample();
        if self.counts.sent > 0 {
            let ms = |q: f64| self.sojourn_us.value_at_quantile(q) as f64 / 1000.0;
            self.counts.sojourn_ms_p50 = ms(0.5);
            self.counts.sojourn_ms_p99 = ms(0.99);
            self.counts.sojourn_ms_max = self.sojourn_us.max() as f64 / 1000.0;
        }
        self.counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::link::queue_discipline;
    use crate::wire::ipv4::Ipv4Packet;
    use std::net::Ipv4Addr;

    /// A TCP/IPv4 packet of `len` bytes from port `sport`, with `ecn`.
    fn packet(len: usize, sport: u16, ecn: u8) -> Vec<u8> {
        let mut bytes = vec![0u8; len];
        let mut ip = Ipv4Packet::new_unchecked(&mut bytes[..]);
        ip.set_header_len(20);
        ip.set_tos(ecn);
        ip.set_total_len(len as u16);
        ip.set_ttl(64);
        ip.set_protocol(6);
        ip.set_src_addr(Ipv4Addr::new(10, 0, 0, 1));
        ip.set_dst_addr(Ipv4Addr::new(10, 0, 0, 2));
        ip.fill_checksum();
        bytes[20..22].copy_from_slice(&sport.to_be_bytes());
        bytes[22..24].copy_from_slice(&5001u16.to_be_bytes());
        bytes
    }

    fn stage(name: &str, queue: Option<&str>) -> QueueStage {
        let size = queue.map(|q| crate::testbed::link::parse_queue_size(q).unwrap());
        let d = queue_discipline(name, size, 10_000_000, 1500).unwrap();
        QueueStage::new(&d, 10_000_000, None, 1500, 0)
    }

    /// A window-based sender (Reno's slow start and additive increase,
    /// halving at most once a round trip on a drop or a CE mark) over a 20 ms round trip
    /// through the 10 Mbit/s stage for 4 s, beside a sparse flow of
    /// 100-byte packets every 50 ms. Returns what left and the counts.
    fn reno(mut s: QueueStage, ecn: u8) -> (Vec<Leaving>, BottleneckCounts) {
        const RTT: u64 = 20_000_000;
        let (mut out, mut spare) = (Vec::new(), Vec::new());
        let (mut cwnd, mut ssthresh, mut in_flight, mut last_cut) = (2.0f64, f64::MAX, 0u64, 0u64);
        // (when, congestion signal) of the acks and losses on their way back.
        let mut feedback: std::collections::VecDeque<(u64, bool)> = Default::default();
        let (mut pushed, mut seen_out, mut seen_dropped) = (0u64, 0usize, 0u64);
        for step in 0..40_000u64 {
            let now = step * 100_000;
            s.pull(now, &mut out, &mut spare);
            for leaving in &out[seen_out..] {
                let ce = Ipv4Packet::new_unchecked(&leaving.bytes[..]).ecn() == Ecn::Ce;
                let sport = u16::from_be_bytes([leaving.bytes[20], leaving.bytes[21]]);
                if sport == 40000 {
                    feedback.push_back((leaving.end_ns + RTT, ce));
                }
            }
            seen_out = out.len();
            while feedback.front().is_some_and(|(at, _)| *at <= now) {
                let (_, congested) = feedback.pop_front().expect("peeked");
                in_flight -= 1;
                if congested && now > last_cut + RTT {
                    cwnd = (cwnd / 2.0).max(2.0);
                    ssthresh = cwnd;
                    last_cut = now;
                } else if cwnd < ssthresh {
                    cwnd += 1.0;
                } else {
                    cwnd += 1.0 / cwnd;
                }
            }
            // Only the bulk flow's packets are dropped here (the sparse
            // flow's are never queued behind enough to be).
            let dropped = s.dropped();
            for _ in seen_dropped..dropped {
                feedback.push_back((now + RTT, true));
            }
            seen_dropped = dropped;
            while (in_flight as f64) < cwnd {
                s.push(now, packet(1500, 40000, ecn), &mut spare);
                in_flight += 1;
                pushed += 1;
            }
            if step % 500 == 0 {
                s.push(now, packet(100, 40001, 0), &mut spare);
                pushed += 1;
            }
        }
        let held = s.backlog_packets();
        let counts = s.finish();
        assert_eq!(counts.enqueued, pushed);
        assert_eq!(counts.sent + counts.dropped + held, pushed, "{counts:?}");
        assert_eq!(counts.sent, out.len() as u64);
        let timeline_sent: u64 = counts.timeline.iter().map(|t| t.sent).sum();
        let timeline_dropped: u64 = counts.timeline.iter().map(|t| t.dropped).sum();
        assert_eq!(
            (timeline_sent, timeline_dropped),
            (counts.sent, counts.dropped)
        );
        (out, counts)
    }

    #[test]
    fn a_deep_drop_tail_queue_fills_to_its_limit() {
        let (out, counts) = reno(stage("droptail", Some("100p")), 0);
        assert_eq!(counts.max_backlog_packets, 100);
        // A full queue of 100 full packets at 10 Mbit/s: 120 ms.
        assert!(
            (100.0..=121.0).contains(&counts.sojourn_ms_p99),
            "{counts:?}"
        );
        let ends: Vec<u64> = out.iter().map(|l| l.end_ns).collect();
        assert!(ends.windows(2).all(|w| w[1] > w[0]));
        assert!(counts.timeline.len() >= 39, "{}", counts.timeline.len());
    }

    #[test]
    fn fq_codel_keeps_the_queue_short_and_marks_what_negotiated_ecn() {
        let (_, plain) = reno(stage("fq_codel", None), 0);
        assert_eq!(plain.marked, 0);
        assert!(plain.dropped > 0);
        // CoDel holds the standing queue near its 5 ms target.
        assert!(plain.sojourn_ms_p50 < 10.0, "{plain:?}");
        let (out, ecn) = reno(stage("fq_codel", None), 0b10);
        assert!(ecn.marked > 0, "{ecn:?}");
        let ce: Vec<&Leaving> = out
            .iter()
            .filter(|l| Ipv4Packet::new_unchecked(&l.bytes[..]).ecn() == Ecn::Ce)
            .collect();
        assert_eq!(ce.len() as u64, ecn.marked);
        assert!(
            ce.iter()
                .all(|l| Ipv4Packet::new_unchecked(&l.bytes[..]).verify_checksum())
        );
        // Marked instead of dropped.
        assert!(
            ecn.dropped < plain.dropped,
            "{} vs {}",
            ecn.dropped,
            plain.dropped
        );
    }

    #[test]
    fn codel_keeps_a_fraction_of_the_drop_tail_queue() {
        let (_, codel) = reno(stage("codel", None), 0);
        let (_, deep) = reno(stage("droptail", Some("1000p")), 0);
        assert!(codel.dropped > 0);
        assert!(
            codel.sojourn_ms_p50 * 4.0 < deep.sojourn_ms_p50,
            "codel {} ms, drop-tail {} ms",
            codel.sojourn_ms_p50,
            deep.sojourn_ms_p50
        );
    }

    #[test]
    fn what_is_not_ipv4_is_one_flow_without_ecn() {
        let p = WirePacket::new(vec![0x60; 60]);
        assert_eq!((p.flow(), p.ecn_capable()), (0, false));
        let p = WirePacket::new(packet(60, 1, 0b01));
        assert!(p.ecn_capable());
        assert_ne!(p.flow(), WirePacket::new(packet(60, 2, 0)).flow());
    }
}
