//! Queue disciplines for the emulated link's bottleneck: drop-tail,
//! CoDel (RFC 8289) and FQ-CoDel (RFC 8290), written from their RFCs as
//! systems under study, because the kernels netlab runs on may lack
//! `fq_codel`, `cake` and `fq`.
//!
//! Each discipline is pure: it holds packets and is told the time on every
//! call, so a test drives it with synthetic arrivals and departures, and
//! the wire emulator with the times its link model gives. The caller
//! dequeues when the link is free to send; what a discipline drops on the
//! way in or out goes to the caller's `dropped` list, so that nothing is
//! lost without being counted.
//!
//! Invariants every discipline keeps (its property tests check them):
//! - conservation: every packet enqueued is dequeued, dropped, or still
//!   held, exactly once;
//! - packets of one flow leave in the order they came;
//! - the backlog never exceeds the limit it was given.

pub mod bottleneck;
pub mod codel;
pub mod droptail;
pub mod fq_codel;

/// What a discipline needs to know of a packet.
pub trait Packet {
    /// Bytes on the wire (the IP packet).
    fn wire_len(&self) -> usize;
    /// The flow's key (a hash of its addresses, ports and protocol); one
    /// flow's packets share it.
    fn flow(&self) -> u64;
    /// Whether the packet's sender negotiated ECN (ECT(0) or ECT(1) in
    /// its IP header): CoDel then marks it Congestion Experienced rather
    /// than dropping it.
    fn ecn_capable(&self) -> bool;
}

/// A packet leaving the queue.
#[derive(Debug, Clone, PartialEq)]
pub struct Dequeued<P> {
    pub packet: P,
    /// Time it spent in the queue.
    pub sojourn_ns: u64,
    /// Whether the discipline marked it Congestion Experienced (the caller
    /// sets the IP header's ECN bits to CE).
    pub marked: bool,
}

/// A queue discipline at the bottleneck.
pub trait Discipline<P: Packet> {
    /// Adds `packet`, arriving at `now_ns`. Packets dropped to make room
    /// (the arriving one, or others) go to `dropped`.
    fn enqueue(&mut self, now_ns: u64, packet: P, dropped: &mut Vec<P>);
    /// The next packet to send at `now_ns`, if any. Packets the discipline
    /// drops on the way out go to `dropped`.
    fn dequeue(&mut self, now_ns: u64, dropped: &mut Vec<P>) -> Option<Dequeued<P>>;
    /// Bytes held.
    fn backlog_bytes(&self) -> u64;
    /// Packets held.
    fn backlog_packets(&self) -> usize;
}

/// A discipline chosen at run time (the emulator's, from the link's
/// profile).
impl<P: Packet, D: Discipline<P> + ?Sized> Discipline<P> for Box<D> {
    fn enqueue(&mut self, now_ns: u64, packet: P, dropped: &mut Vec<P>) {
        (**self).enqueue(now_ns, packet, dropped)
    }
    fn dequeue(&mut self, now_ns: u64, dropped: &mut Vec<P>) -> Option<Dequeued<P>> {
        (**self).dequeue(now_ns, dropped)
    }
    fn backlog_bytes(&self) -> u64 {
        (**self).backlog_bytes()
    }
    fn backlog_packets(&self) -> usize {
        (**self).backlog_packets()
    }
}

/// A packet with its arrival time, as the disciplines hold it.
#[derive(Debug, Clone)]
pub(crate) struct Stamped<P> {
    pub packet: P,
    pub arrived_ns: u64,
}

#[cfg(test)]
pub(crate) mod testing {
    //! Synthetic packets and a driver shared by the disciplines' tests.
    use super::*;

    #[derive(Debug, Clone, PartialEq)]
    pub struct TestPacket {
        pub id: u64,
        pub flow: u64,
        pub len: usize,
        pub ect: bool,
    }

    impl TestPacket {
        /// A packet whose sender does not do ECN.
        pub fn plain(id: u64, flow: u64, len: usize) -> TestPacket {
            TestPacket {
                id,
                flow,
                len,
                ect: false,
            }
        }
    }

    impl Packet for TestPacket {
        fn wire_len(&self) -> usize {
            self.len
        }
        fn flow(&self) -> u64 {
            self.flow
        }
        fn ecn_capable(&self) -> bool {
            self.ect
        }
    }

    /// One event of a synthetic run: an arrival, or the link asking for
    /// the next packet.
    #[derive(Debug, Clone)]
    pub enum Event {
        Arrive(TestPacket),
        Send,
    }

    /// Random runs: at each 200 µs step an arrival (two in three) of one of
    /// `flows` flows, 40 to 1500 bytes, ECN-capable at random when `ecn`,
    /// or a send.
    pub fn random_events(
        flows: u64,
        ecn: bool,
    ) -> impl proptest::strategy::Strategy<Value = Vec<(u64, Event)>> {
        use proptest::prelude::*;
        proptest::collection::vec((0u8..3, 0..flows, 40usize..1500, any::<bool>()), 0..600)
            .prop_map(move |steps| {
                steps
                    .into_iter()
                    .enumerate()
                    .map(|(i, (kind, flow, len, ect))| {
                        let event = if kind < 2 {
                            Event::Arrive(TestPacket {
                                ect: ecn && ect,
                                ..TestPacket::plain(i as u64, flow, len)
                            })
                        } else {
                            Event::Send
                        };
                        (i as u64 * 200_000, event)
                    })
                    .collect()
            })
    }

    /// What a run did, packet by packet.
    #[derive(Debug, Default)]
    pub struct Run {
        pub sent: Vec<(u64, Dequeued<TestPacket>)>,
        pub dropped: Vec<(u64, TestPacket)>,
        pub max_backlog_packets: usize,
        pub max_backlog_bytes: u64,
    }

    /// Drives `d` through `events`, each `(time, event)` in time order.
    pub fn drive<D: Discipline<TestPacket>>(d: &mut D, events: &[(u64, Event)]) -> Run {
        let mut run = Run::default();
        let mut dropped = Vec::new();
        for (now, event) in events {
            match event {
                Event::Arrive(p) => d.enqueue(*now, p.clone(), &mut dropped),
                Event::Send => {
                    if let Some(out) = d.dequeue(*now, &mut dropped) {
                        run.sent.push((*now, out));
                    }
                }
            }
            run.dropped.extend(dropped.drain(..).map(|p| (*now, p)));
            run.max_backlog_packets = run.max_backlog_packets.max(d.backlog_packets());
            run.max_backlog_bytes = run.max_backlog_bytes.max(d.backlog_bytes());
        }
        run
    }

    /// Every packet enqueued is sent, dropped or still held, once.
    pub fn assert_conserved<D: Discipline<TestPacket>>(d: &D, events: &[(u64, Event)], run: &Run) {
        let arrived: Vec<u64> = events
            .iter()
            .filter_map(|(_, e)| match e {
                Event::Arrive(p) => Some(p.id),
                Event::Send => None,
            })
            .collect();
        let mut out: Vec<u64> = run
            .sent
            .iter()
            .map(|(_, d)| d.packet.id)
            .chain(run.dropped.iter().map(|(_, p)| p.id))
            .collect();
        out.sort_unstable();
        let before = out.len();
        out.dedup();
        assert_eq!(before, out.len(), "a packet left twice");
        assert_eq!(
            arrived.len(),
            out.len() + d.backlog_packets(),
            "sent {} + dropped {} + held {} != arrived {}",
            run.sent.len(),
            run.dropped.len(),
            d.backlog_packets(),
            arrived.len()
        );
    }

    /// Packets of each flow were sent in the order they arrived.
    pub fn assert_flow_order(run: &Run) {
        let mut last: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
        for (_, d) in &run.sent {
            if let Some(before) = last.insert(d.packet.flow, d.packet.id) {
                assert!(
                    before < d.packet.id,
                    "flow {} sent {} after {}",
                    d.packet.flow,
                    d.packet.id,
                    before
                );
            }
        }
    }
}
