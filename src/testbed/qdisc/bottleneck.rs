//! The bottleneck as the emulator is to run it: a queue discipline in
//! front of a wire of fixed rate. Packets are pushed as they arrive; the
//! wire takes the next packet the discipline gives each time it is free,
//! and a departure says when the packet started and ended serialising and
//! how long it queued. Event-driven and pure: the caller asks when the
//! next departure is due and pulls the departures due by a time.
//!
//! Invariants (tests): departures are serialised back to back at the rate
//! (each starts no earlier than the one before ended, and lasts its bytes
//! at the rate); none starts before its packet arrived; every packet
//! pushed departs, is dropped, or is still queued.

use super::{Discipline, Packet};

/// One packet leaving the bottleneck onto the wire.
#[derive(Debug, Clone, PartialEq)]
pub struct Departure<P> {
    pub packet: P,
    /// When the wire started sending it.
    pub start_ns: u64,
    /// When its last bit left.
    pub end_ns: u64,
    /// Time it spent queued before `start_ns`.
    pub sojourn_ns: u64,
    /// Marked Congestion Experienced by the discipline.
    pub marked: bool,
}

/// What a packet of `len` IP bytes costs on the wire: the bytes its frame
/// takes, and the bytes the wire stays busy (the frame and any gap after).
pub type WireCost = Box<dyn Fn(usize) -> (u64, u64) + Send>;

/// A discipline `D` feeding a wire of `rate_bps`.
pub struct Bottleneck<D> {
    discipline: D,
    rate_bps: u64,
    cost: WireCost,
    /// When the wire is free for the next packet.
    free_at: u64,
}

impl<D: std::fmt::Debug> std::fmt::Debug for Bottleneck<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bottleneck")
            .field("discipline", &self.discipline)
            .field("rate_bps", &self.rate_bps)
            .field("free_at", &self.free_at)
            .finish_non_exhaustive()
    }
}

impl<D> Bottleneck<D> {
    /// A wire that carries the IP bytes and nothing more.
    pub fn new(discipline: D, rate_bps: u64) -> Self {
        Bottleneck::with_cost(
            discipline,
            rate_bps,
            Box::new(|len| (len as u64, len as u64)),
        )
    }

    /// A wire whose framing `cost` gives each packet's frame and busy bytes.
    pub fn with_cost(discipline: D, rate_bps: u64, cost: WireCost) -> Self {
        Bottleneck {
            discipline,
            rate_bps: rate_bps.max(1),
            cost,
            free_at: 0,
        }
    }

    pub fn discipline(&self) -> &D {
        &self.discipline
    }

    /// Time on the wire of a packet of `len` IP bytes (its frame).
    pub fn wire_ns(&self, len: usize) -> u64 {
        self.ns_of((self.cost)(len).0)
    }

    fn ns_of(&self, bytes: u64) -> u64 {
        (u128::from(bytes) * 8 * 1_000_000_000 / u128::from(self.rate_bps)) as u64
    }

    /// Adds a packet arriving at `now_ns` (drops to make room go to
    /// `dropped`).
    pub fn push<P: Packet>(&mut self, now_ns: u64, packet: P, dropped: &mut Vec<P>)
    where
        D: Discipline<P>,
    {
        if self.discipline.backlog_packets() == 0 {
            // The wire was idle: the packet is sent as it arrives.
            self.free_at = self.free_at.max(now_ns);
        }
        self.discipline.enqueue(now_ns, packet, dropped);
    }

    /// When the next departure is due, if a packet waits.
    pub fn next_departure<P: Packet>(&self) -> Option<u64>
    where
        D: Discipline<P>,
    {
        (self.discipline.backlog_packets() > 0).then_some(self.free_at)
    }

    /// The departures due by `now_ns`, in order: each taken from the
    /// discipline at the time the wire fell free. Drops the discipline
    /// makes on the way out go to `dropped`.
    pub fn pull<P: Packet>(&mut self, now_ns: u64, dropped: &mut Vec<P>) -> Vec<Departure<P>>
    where
        D: Discipline<P>,
    {
        let mut out = Vec::new();
        while self.discipline.backlog_packets() > 0 && self.free_at <= now_ns {
            let at = self.free_at;
            let Some(next) = self.discipline.dequeue(at, dropped) else {
                break;
            };
            let (frame, busy) = (self.cost)(next.packet.wire_len());
            let end = at + self.ns_of(frame);
            self.free_at = at + self.ns_of(busy);
            out.push(Departure {
                packet: next.packet,
                start_ns: at,
                end_ns: end,
                sojourn_ns: next.sojourn_ns,
                marked: next.marked,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::codel::{self, Codel};
    use super::super::droptail::{DropTail, Limit};
    use super::super::fq_codel::{self, FqCodel};
    use super::super::testing::TestPacket;
    use super::*;

    const MS: u64 = 1_000_000;
    const RATE: u64 = 50_000_000;

    /// Open-loop arrivals: a bulk flow at `bulk_bps` of 1500-byte packets
    /// and a sparse flow of 100-byte packets every 20 ms, for `for_ns`;
    /// pulls at every arrival and at the end. Returns departures, drops
    /// and every pushed packet's arrival time by id.
    fn run<D: Discipline<TestPacket>>(
        b: &mut Bottleneck<D>,
        bulk_bps: u64,
        for_ns: u64,
    ) -> (Vec<Departure<TestPacket>>, Vec<TestPacket>, Vec<u64>) {
        let gap = 1500 * 8 * 1_000_000_000 / bulk_bps;
        let mut arrivals = Vec::new();
        let (mut departures, mut dropped) = (Vec::new(), Vec::new());
        let (mut bulk_at, mut sparse_at) = (0, 0);
        while bulk_at < for_ns {
            let (at, flow, len) = if sparse_at <= bulk_at {
                let p = (sparse_at, 2, 100);
                sparse_at += 20 * MS;
                p
            } else {
                let p = (bulk_at, 1, 1500);
                bulk_at += gap;
                p
            };
            departures.extend(b.pull(at, &mut dropped));
            let id = arrivals.len() as u64;
            arrivals.push(at);
            b.push(at, TestPacket::plain(id, flow, len), &mut dropped);
        }
        departures.extend(b.pull(u64::MAX / 2, &mut dropped));
        (departures, dropped, arrivals)
    }

    fn check_invariants<D: Discipline<TestPacket>>(
        b: &Bottleneck<D>,
        departures: &[Departure<TestPacket>],
        dropped: &[TestPacket],
        arrivals: &[u64],
    ) {
        for pair in departures.windows(2) {
            assert!(pair[1].start_ns >= pair[0].end_ns, "{pair:?}");
        }
        for d in departures {
            let arrived = arrivals[d.packet.id as usize];
            assert!(d.start_ns >= arrived, "{d:?} arrived {arrived}");
            assert_eq!(d.start_ns - arrived, d.sojourn_ns);
            assert_eq!(d.end_ns - d.start_ns, b.wire_ns(d.packet.len));
        }
        assert_eq!(
            departures.len() + dropped.len() + b.discipline.backlog_packets(),
            arrivals.len()
        );
    }

    fn sojourn_ms(departures: &[Departure<TestPacket>], flow: u64, q: f64) -> f64 {
        let mut s: Vec<u64> = departures
            .iter()
            .filter(|d| d.packet.flow == flow)
            .map(|d| d.sojourn_ns)
            .collect();
        s.sort_unstable();
        s[((s.len() - 1) as f64 * q) as usize] as f64 / MS as f64
    }

    #[test]
    fn framing_counts_on_the_wire_and_the_gap_keeps_it_busy() {
        // Ethernet-like: 18 bytes of frame beyond the packet, then 12 of gap.
        let cost: WireCost = Box::new(|len| (len as u64 + 18, len as u64 + 30));
        let mut b = Bottleneck::with_cost(DropTail::new(Limit::Packets(10)), 10_000_000, cost);
        let mut dropped = Vec::new();
        for id in 0..3 {
            b.push(0, TestPacket::plain(id, 1, 1482), &mut dropped);
        }
        let out = b.pull(u64::MAX / 2, &mut dropped);
        // 1500 bytes of frame: 1.2 ms; the next starts 24 bytes' 9.6 µs later.
        let starts: Vec<u64> = out.iter().map(|d| d.start_ns).collect();
        assert_eq!(starts, [0, 1_209_600, 2_419_200]);
        assert!(out.iter().all(|d| d.end_ns - d.start_ns == 1_200_000));
    }

    #[test]
    fn under_its_rate_nothing_queues() {
        let mut b = Bottleneck::new(DropTail::new(Limit::Packets(100)), RATE);
        let (departures, dropped, arrivals) = run(&mut b, 40_000_000, 500 * MS);
        check_invariants(&b, &departures, &dropped, &arrivals);
        assert!(dropped.is_empty());
        // At most the one packet being sent ahead (240 µs at 50 Mbit/s).
        assert!(
            sojourn_ms(&departures, 1, 1.0) <= 0.25,
            "{}",
            sojourn_ms(&departures, 1, 1.0)
        );
    }

    #[test]
    fn a_deep_drop_tail_queue_holds_its_depth_in_delay() {
        // 60 Mbit/s into 50: the 1000-packet queue fills and stays full;
        // a full queue is 1000 x 1500 B at 50 Mbit/s = 240 ms for everyone.
        let mut b = Bottleneck::new(DropTail::new(Limit::Packets(1000)), RATE);
        let (departures, dropped, arrivals) = run(&mut b, 60_000_000, 3000 * MS);
        check_invariants(&b, &departures, &dropped, &arrivals);
        assert!(!dropped.is_empty());
        for flow in [1, 2] {
            let worst = sojourn_ms(&departures, flow, 0.99);
            assert!(
                (200.0..=241.0).contains(&worst),
                "flow {flow}: p99 {worst} ms"
            );
        }
    }

    #[test]
    fn codel_at_the_bottleneck_drops_what_overstays() {
        let mut b = Bottleneck::new(Codel::new(codel::Params::default(), 1000), RATE);
        let (departures, dropped, arrivals) = run(&mut b, 60_000_000, 3000 * MS);
        check_invariants(&b, &departures, &dropped, &arrivals);
        // An open-loop source ignores the drops, so CoDel's rate keeps
        // climbing; but it has dropped from its queue, not only its tail.
        assert!(b.discipline().vars().count() > 1);
        assert!(!dropped.is_empty());
    }

    #[test]
    fn fq_codel_at_the_bottleneck_keeps_the_sparse_flow_out_of_the_queue() {
        let mut b = Bottleneck::new(FqCodel::new(fq_codel::Params::default()), RATE);
        let (departures, dropped, arrivals) = run(&mut b, 60_000_000, 3000 * MS);
        check_invariants(&b, &departures, &dropped, &arrivals);
        // The sparse flow waits for at most the frame on the wire and one
        // of the bulk flow's quanta; the bulk flow's queue is 10x longer.
        let sparse = sojourn_ms(&departures, 2, 1.0);
        assert!(sparse <= 0.5, "sparse worst {sparse} ms");
        assert!(sojourn_ms(&departures, 1, 0.5) > 10.0 * sparse);
    }
}
