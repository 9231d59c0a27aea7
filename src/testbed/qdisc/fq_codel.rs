//! FQ-CoDel (RFC 8290): packets hashed by flow into 1024 queues, each with
//! CoDel of its own; the queues served by deficit round robin, a quantum
//! of bytes each turn; queues that just became active (new flows) served
//! before the ones that stayed busy (old flows), so that a sparse flow
//! (a keystroke, a DNS query, a probe) overtakes the bulk transfers'
//! backlog instead of waiting behind it.
//!
//! Follows RFC 8290 §4 (enqueue, dequeue, the two lists) with Linux's
//! `sch_fq_codel.c` choices where the RFC leaves room: on overflow the
//! flow with the largest byte backlog loses packets from its head, up to
//! half its backlog or 64 packets; CoDel's MAXPACKET check compares the
//! whole qdisc's backlog; ECN marking is on.
//!
//! Invariants (property tests): conservation and per-flow order; never
//! more than `limit` packets held; over any stretch where two flows stay
//! backlogged their bytes sent differ by at most a quantum plus a packet;
//! a packet of a flow that had nothing queued leaves before the next
//! packet of a flow that stayed backlogged past its quantum.

use super::codel::{self, Source, Vars};
use super::{Dequeued, Discipline, Packet, Stamped};
use std::collections::VecDeque;

/// FQ-CoDel's parameters (RFC 8290 §4 and §5.2's defaults, as Linux).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// Number of flow queues (1024).
    pub flows: usize,
    /// Bytes a queue may send per round (1514: an Ethernet frame).
    pub quantum: u32,
    /// Packets held in all (10240).
    pub limit: usize,
    /// Each queue's CoDel.
    pub codel: codel::Params,
    /// Seed of the flow hash's perturbation.
    pub perturbation: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            flows: 1024,
            quantum: 1514,
            limit: 10_240,
            codel: codel::Params::default(),
            perturbation: 0x9e37_79b9_7f4a_7c15,
        }
    }
}

/// Which of the scheduler's lists a queue is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum List {
    New,
    Old,
}

#[derive(Debug)]
struct Flow<P> {
    fifo: codel::Fifo<P>,
    deficit: i64,
    vars: Vars,
    on: Option<List>,
}

/// One flow's queue as CoDel's source: takes update the qdisc's totals,
/// and MAXPACKET is checked against the whole backlog (as Linux does).
struct FlowSource<'a, P> {
    fifo: &'a mut codel::Fifo<P>,
    total_bytes: &'a mut u64,
    total_packets: &'a mut usize,
}

impl<P: Packet> Source<P> for FlowSource<'_, P> {
    fn pop(&mut self) -> Option<Stamped<P>> {
        let p = self.fifo.pop()?;
        *self.total_bytes -= p.packet.wire_len() as u64;
        *self.total_packets -= 1;
        Some(p)
    }

    fn queued_bytes(&self) -> u64 {
        *self.total_bytes
    }
}

/// The FQ-CoDel scheduler.
#[derive(Debug)]
pub struct FqCodel<P> {
    params: Params,
    flows: Vec<Flow<P>>,
    new_flows: VecDeque<usize>,
    old_flows: VecDeque<usize>,
    bytes: u64,
    packets: usize,
    /// Packets dropped on overflow (from the fattest flow).
    pub overflow_drops: u64,
}

impl<P: Packet> FqCodel<P> {
    pub fn new(params: Params) -> Self {
        let flows = (0..params.flows.max(1))
            .map(|_| Flow {
                fifo: codel::Fifo::default(),
                deficit: 0,
                vars: Vars::default(),
                on: None,
            })
            .collect();
        FqCodel {
            params: Params {
                limit: params.limit.max(1),
                ..params
            },
            flows,
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            bytes: 0,
            packets: 0,
            overflow_drops: 0,
        }
    }

    /// The queue of a flow key: its hash, perturbed, over the queues.
    fn classify(&self, key: u64) -> usize {
        // splitmix64's finaliser: every bit of the key moves the index.
        let mut z = key ^ self.params.perturbation;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z % self.flows.len() as u64) as usize
    }

    /// Overflow: drops from the head of the flow with the most bytes, up
    /// to half its backlog or 64 packets (Linux's `fq_codel_drop`).
    fn drop_from_fattest(&mut self, dropped: &mut Vec<P>) {
        let Some(fattest) = (0..self.flows.len()).max_by_key(|&i| self.flows[i].fifo.bytes) else {
            return;
        };
        let flow = &mut self.flows[fattest];
        let threshold = flow.fifo.bytes / 2;
        let mut freed = 0;
        let mut count = 0;
        while count < 64 && (count == 0 || freed < threshold) {
            let Some(p) = flow.fifo.pop() else { break };
            freed += p.packet.wire_len() as u64;
            count += 1;
            self.bytes -= p.packet.wire_len() as u64;
            self.packets -= 1;
            self.overflow_drops += 1;
            dropped.push(p.packet);
        }
    }
}

impl<P: Packet> Discipline<P> for FqCodel<P> {
    fn enqueue(&mut self, now_ns: u64, packet: P, dropped: &mut Vec<P>) {
        let index = self.classify(packet.flow());
        let len = packet.wire_len() as u64;
        let flow = &mut self.flows[index];
        flow.fifo.bytes += len;
        flow.fifo.queue.push_back(Stamped {
            packet,
            arrived_ns: now_ns,
        });
        self.bytes += len;
        self.packets += 1;
        if flow.on.is_none() {
            flow.on = Some(List::New);
            flow.deficit = i64::from(self.params.quantum);
            self.new_flows.push_back(index);
        }
        if self.packets > self.params.limit {
            self.drop_from_fattest(dropped);
        }
    }

    fn dequeue(&mut self, now_ns: u64, dropped: &mut Vec<P>) -> Option<Dequeued<P>> {
        loop {
            let (index, list) = match (self.new_flows.front(), self.old_flows.front()) {
                (Some(&i), _) => (i, List::New),
                (None, Some(&i)) => (i, List::Old),
                (None, None) => return None,
            };
            let quantum = i64::from(self.params.quantum);
            let flow = &mut self.flows[index];
            if flow.deficit <= 0 {
                // Its turn is spent: a new quantum, at the old list's tail.
                flow.deficit += quantum;
                flow.on = Some(List::Old);
                self.pop_list(list);
                self.old_flows.push_back(index);
                continue;
            }
            let Flow { fifo, vars, .. } = flow;
            let mut source = FlowSource {
                fifo,
                total_bytes: &mut self.bytes,
                total_packets: &mut self.packets,
            };
            match vars.dequeue(&self.params.codel, now_ns, &mut source, dropped) {
                Some(out) => {
                    flow.deficit -= out.packet.wire_len() as i64;
                    return Some(out);
                }
                None => {
                    // Empty: a new queue passes through the old list once
                    // (so it cannot come back as new at once and starve
                    // the old ones); an old one leaves the lists.
                    self.pop_list(list);
                    if list == List::New && !self.old_flows.is_empty() {
                        self.flows[index].on = Some(List::Old);
                        self.old_flows.push_back(index);
                    } else {
                        self.flows[index].on = None;
                    }
                }
            }
        }
    }

    fn backlog_bytes(&self) -> u64 {
        self.bytes
    }

    fn backlog_packets(&self) -> usize {
        self.packets
    }
}

impl<P> FqCodel<P> {
    fn pop_list(&mut self, list: List) {
        match list {
            List::New => self.new_flows.pop_front(),
            List::Old => self.old_flows.pop_front(),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use proptest::prelude::*;

    const MS: u64 = 1_000_000;

    /// Scheduling alone: a TARGET no sojourn reaches.
    fn no_aqm() -> Params {
        Params {
            codel: codel::Params {
                target_ns: u64::MAX / 4,
                ..codel::Params::default()
            },
            ..Params::default()
        }
    }

    proptest! {
        #[test]
        fn conserves_keeps_each_flow_in_order_and_its_limit(events in random_events(6, true), limit in 1usize..100) {
            let mut q = FqCodel::new(Params { limit, ..Params::default() });
            let run = drive(&mut q, &events);
            assert_conserved(&q, &events, &run);
            assert_flow_order(&run);
            prop_assert!(run.max_backlog_packets <= limit);
        }

        #[test]
        fn two_backlogged_flows_share_bytes_within_a_quantum(len_a in 64usize..1500, len_b in 64usize..1500) {
            // Both flows far ahead of the link: every send finds both busy.
            let mut events = Vec::new();
            let mut id = 0;
            for flow in [1u64, 2] {
                for _ in 0..400 {
                    let len = if flow == 1 { len_a } else { len_b };
                    events.push((0, Event::Arrive(TestPacket::plain(id, flow, len))));
                    id += 1;
                }
            }
            for i in 0..200u64 {
                events.push((i * MS, Event::Send));
            }
            let params = no_aqm();
            let mut q = FqCodel::new(params);
            let run = drive(&mut q, &events);
            let (mut a, mut b) = (0i64, 0i64);
            for (_, d) in &run.sent {
                if d.packet.flow == 1 { a += d.packet.len as i64 } else { b += d.packet.len as i64 }
                prop_assert!((a - b).abs() <= i64::from(params.quantum) + 1500,
                    "flow 1 sent {a} B, flow 2 {b} B");
            }
        }
    }

    #[test]
    fn a_sparse_flow_overtakes_the_bulk_backlog() {
        let mut q = FqCodel::new(no_aqm());
        let mut dropped = Vec::new();
        for id in 0..100 {
            q.enqueue(0, TestPacket::plain(id, 1, 1500), &mut dropped);
        }
        // The bulk flow spends its first quantum and moves to the old list.
        for t in 1..=3 {
            assert_eq!(q.dequeue(t * MS, &mut dropped).unwrap().packet.flow, 1);
        }
        q.enqueue(4 * MS, TestPacket::plain(1000, 2, 100), &mut dropped);
        let next = q.dequeue(5 * MS, &mut dropped).unwrap();
        assert_eq!(
            next.packet.id, 1000,
            "the keystroke waited behind the bulk flow"
        );
        assert_eq!(next.sojourn_ns, MS);
        assert!(dropped.is_empty());
    }

    #[test]
    fn overflow_drops_from_the_head_of_the_fattest_flow() {
        let mut q = FqCodel::new(Params {
            limit: 50,
            ..no_aqm()
        });
        let mut dropped = Vec::new();
        q.enqueue(0, TestPacket::plain(0, 2, 100), &mut dropped);
        for id in 1..=60 {
            q.enqueue(0, TestPacket::plain(id, 1, 1500), &mut dropped);
        }
        assert!(!dropped.is_empty());
        assert!(dropped.iter().all(|p| p.flow == 1), "{dropped:?}");
        // From the head: the oldest of the fat flow go first.
        assert_eq!(dropped[0].id, 1);
        assert!(q.backlog_packets() <= 50);
        let first = q.dequeue(MS, &mut dropped).unwrap();
        assert!(first.packet.flow == 2 || first.packet.id > dropped.len() as u64);
    }

    #[test]
    fn each_flow_has_codel_of_its_own_and_ecn_marks() {
        // A bulk flow at twice the link's rate, ECN-capable, beside a
        // sparse one: the bulk flow is marked, the sparse flow is not,
        // and nothing is dropped.
        let mut events = Vec::new();
        let mut next_id = 0..;
        let mut ect = |flow, len| {
            let id = next_id.next().expect("ids to spare");
            Event::Arrive(TestPacket {
                id,
                flow,
                len,
                ect: true,
            })
        };
        for i in 0..6000u64 {
            events.push((i * MS / 2, ect(1, 1500)));
            if i % 100 == 0 {
                events.push((i * MS / 2, ect(2, 80)));
            }
            if i % 2 == 1 {
                events.push((i * MS / 2, Event::Send));
            }
        }
        let mut q = FqCodel::new(Params::default());
        let run = drive(&mut q, &events);
        assert!(run.dropped.is_empty(), "{} dropped", run.dropped.len());
        let marked: Vec<u64> = run
            .sent
            .iter()
            .filter(|(_, d)| d.marked)
            .map(|(_, d)| d.packet.flow)
            .collect();
        assert!(marked.len() > 10, "{} marked", marked.len());
        assert!(marked.iter().all(|&f| f == 1));
        // The sparse flow never waited behind the bulk flow's queue (which
        // marks do not shrink: this source ignores them), at most a round:
        // the bulk flow's quantum (two 1500-byte packets with the deficit
        // left) while the sparse queue was still on the old list.
        let sojourns = |flow: u64| -> Vec<u64> {
            run.sent
                .iter()
                .filter(|(_, d)| d.packet.flow == flow)
                .map(|(_, d)| d.sojourn_ns)
                .collect()
        };
        let sparse_worst = sojourns(2).into_iter().max().unwrap();
        assert!(
            sparse_worst <= 3 * MS,
            "a sparse packet waited {sparse_worst} ns"
        );
        let mut bulk = sojourns(1);
        bulk.sort_unstable();
        assert!(
            bulk[bulk.len() / 2] > 10 * sparse_worst,
            "bulk median {} ns",
            bulk[bulk.len() / 2]
        );
    }
}
