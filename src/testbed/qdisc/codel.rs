//! CoDel, Controlled Delay (RFC 8289): a FIFO that watches each packet's
//! sojourn time at dequeue. When the minimum sojourn has stayed above
//! TARGET for an INTERVAL, it drops (or ECN-marks) a packet and enters the
//! dropping state, dropping the next ones at times set by the control law,
//! INTERVAL / sqrt(count) apart, until a sojourn falls below TARGET.
//!
//! [`Vars`] is the algorithm's state and its dequeue (RFC 8289 §5, the
//! pseudocode's `dodequeue` and `dequeue`, with the Linux variant of the
//! count's restart that the RFC adopts); [`Codel`] is the RFC's single
//! queue with it. FQ-CoDel keeps one [`Vars`] per flow.
//!
//! Invariants (property tests): no packet is dropped at dequeue before
//! the sojourn time has been at or above TARGET for INTERVAL; none while
//! the queue holds at most one MTU; in the dropping state successive
//! drops are INTERVAL / sqrt(count) apart; an ECN-capable packet is marked
//! where another would be dropped.

use super::{Dequeued, Discipline, Packet, Stamped};
use std::collections::VecDeque;

/// CoDel's parameters (RFC 8289 §4.2-4.4 and §5's constants).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// TARGET: the acceptable standing sojourn time, 5 ms.
    pub target_ns: u64,
    /// INTERVAL: on the order of a worst-case round trip, 100 ms.
    pub interval_ns: u64,
    /// MAXPACKET: below this many bytes queued nothing is dropped (one
    /// MTU: a single packet is no standing queue).
    pub mtu: usize,
    /// Mark ECN-capable packets instead of dropping them.
    pub ecn: bool,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            target_ns: 5_000_000,
            interval_ns: 100_000_000,
            mtu: 1500,
            ecn: true,
        }
    }
}

/// Where CoDel's dequeue takes packets from: the queue, and the bytes
/// still queued after each take (the MAXPACKET check).
pub(crate) trait Source<P> {
    fn pop(&mut self) -> Option<Stamped<P>>;
    fn queued_bytes(&self) -> u64;
}

/// CoDel's state (RFC 8289 §5: `first_above_time_`, `drop_next_`,
/// `count_`, `lastcount_`, `dropping_`).
#[derive(Debug, Clone, Default)]
pub struct Vars {
    first_above_time: Option<u64>,
    drop_next: u64,
    count: u32,
    lastcount: u32,
    dropping: bool,
}

/// `dodequeue`'s result: the packet, and whether the sojourn has been
/// above TARGET for INTERVAL.
struct Taken<P> {
    packet: Option<Stamped<P>>,
    ok_to_drop: bool,
}

impl Vars {
    /// Whether CoDel is in its dropping state.
    pub fn dropping(&self) -> bool {
        self.dropping
    }

    /// The drops (and marks) of the current or last dropping state.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// The control law: the next drop, INTERVAL / sqrt(count) after `t`.
    fn control_law(params: &Params, t: u64, count: u32) -> u64 {
        t + (params.interval_ns as f64 / f64::from(count.max(1)).sqrt()) as u64
    }

    fn dodequeue<P>(&mut self, params: &Params, now: u64, source: &mut impl Source<P>) -> Taken<P> {
        let Some(packet) = source.pop() else {
            self.first_above_time = None;
            return Taken {
                packet: None,
                ok_to_drop: false,
            };
        };
        let sojourn = now.saturating_sub(packet.arrived_ns);
        let mut ok_to_drop = false;
        if sojourn < params.target_ns || source.queued_bytes() <= params.mtu as u64 {
            // Below TARGET, or too little queued to be a standing queue.
            self.first_above_time = None;
        } else {
            match self.first_above_time {
                None => self.first_above_time = Some(now + params.interval_ns),
                Some(at) if now >= at => ok_to_drop = true,
                Some(_) => {}
            }
        }
        Taken {
            packet: Some(packet),
            ok_to_drop,
        }
    }

    /// RFC 8289's `dequeue`: the next packet to send at `now`, dropping
    /// (into `dropped`) or marking as the control law says.
    pub(crate) fn dequeue<P: Packet>(
        &mut self,
        params: &Params,
        now: u64,
        source: &mut impl Source<P>,
        dropped: &mut Vec<P>,
    ) -> Option<Dequeued<P>> {
        let mut r = self.dodequeue(params, now, source);
        let markable = |p: &Stamped<P>| params.ecn && p.packet.ecn_capable();
        if self.dropping {
            if !r.ok_to_drop {
                // The sojourn fell below TARGET: leave the dropping state.
                self.dropping = false;
            }
            // Time for the next drop (or several, when the backlog is
            // large enough that the control law is already behind).
            while self.dropping && now >= self.drop_next {
                let p = r.packet.take().expect("ok_to_drop implies a packet");
                self.count += 1;
                if markable(&p) {
                    self.drop_next = Self::control_law(params, self.drop_next, self.count);
                    return Some(Self::out(now, p, true));
                }
                dropped.push(p.packet);
                r = self.dodequeue(params, now, source);
                if !r.ok_to_drop {
                    self.dropping = false;
                } else {
                    self.drop_next = Self::control_law(params, self.drop_next, self.count);
                }
            }
        } else if r.ok_to_drop {
            // Above TARGET for INTERVAL: drop and enter the dropping state.
            let p = r.packet.take().expect("ok_to_drop implies a packet");
            self.dropping = true;
            // If the last dropping state ended recently, resume near the
            // drop rate that controlled the queue then (RFC 8289 §5, the
            // Linux variant).
            let delta = self.count.saturating_sub(self.lastcount);
            self.count = 1;
            let since_next = now as i128 - self.drop_next as i128;
            if delta > 1 && since_next < 16 * params.interval_ns as i128 {
                self.count = delta;
            }
            self.drop_next = Self::control_law(params, now, self.count);
            self.lastcount = self.count;
            if markable(&p) {
                return Some(Self::out(now, p, true));
            }
            dropped.push(p.packet);
            r = self.dodequeue(params, now, source);
        }
        r.packet.map(|p| Self::out(now, p, false))
    }

    fn out<P>(now: u64, p: Stamped<P>, marked: bool) -> Dequeued<P> {
        Dequeued {
            sojourn_ns: now.saturating_sub(p.arrived_ns),
            packet: p.packet,
            marked,
        }
    }
}

/// A FIFO and its bytes: the single queue CoDel runs on.
#[derive(Debug)]
pub(crate) struct Fifo<P> {
    pub queue: VecDeque<Stamped<P>>,
    pub bytes: u64,
}

impl<P> Default for Fifo<P> {
    fn default() -> Self {
        Fifo {
            queue: VecDeque::new(),
            bytes: 0,
        }
    }
}

impl<P: Packet> Source<P> for Fifo<P> {
    fn pop(&mut self) -> Option<Stamped<P>> {
        let p = self.queue.pop_front()?;
        self.bytes -= p.packet.wire_len() as u64;
        Some(p)
    }

    fn queued_bytes(&self) -> u64 {
        self.bytes
    }
}

/// CoDel on one queue of at most `limit` packets (tail drop beyond it;
/// Linux's `codel` defaults to 1000).
#[derive(Debug)]
pub struct Codel<P> {
    params: Params,
    limit: usize,
    fifo: Fifo<P>,
    vars: Vars,
}

impl<P: Packet> Codel<P> {
    pub fn new(params: Params, limit: usize) -> Self {
        Codel {
            params,
            limit: limit.max(1),
            fifo: Fifo::default(),
            vars: Vars::default(),
        }
    }

    pub fn vars(&self) -> &Vars {
        &self.vars
    }
}

impl<P: Packet> Discipline<P> for Codel<P> {
    fn enqueue(&mut self, now_ns: u64, packet: P, dropped: &mut Vec<P>) {
        if self.fifo.queue.len() >= self.limit {
            dropped.push(packet);
            return;
        }
        self.fifo.bytes += packet.wire_len() as u64;
        self.fifo.queue.push_back(Stamped {
            packet,
            arrived_ns: now_ns,
        });
    }

    fn dequeue(&mut self, now_ns: u64, dropped: &mut Vec<P>) -> Option<Dequeued<P>> {
        self.vars
            .dequeue(&self.params, now_ns, &mut self.fifo, dropped)
    }

    fn backlog_bytes(&self) -> u64 {
        self.fifo.bytes
    }

    fn backlog_packets(&self) -> usize {
        self.fifo.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use proptest::prelude::*;

    const MS: u64 = 1_000_000;

    /// Arrivals every `arrive_every` ns and a send every `send_every` ns
    /// for `for_ns`, one flow of `len`-byte packets.
    fn steady(
        arrive_every: u64,
        send_every: u64,
        for_ns: u64,
        len: usize,
        ect: bool,
    ) -> Vec<(u64, Event)> {
        let mut events = Vec::new();
        let mut id = 0;
        let (mut a, mut s) = (0, send_every);
        while a < for_ns || s < for_ns {
            if a <= s && a < for_ns {
                events.push((
                    a,
                    Event::Arrive(TestPacket {
                        id,
                        flow: 1,
                        len,
                        ect,
                    }),
                ));
                id += 1;
                a += arrive_every;
            } else {
                events.push((s, Event::Send));
                s += send_every;
            }
        }
        events
    }

    /// When the sojourn of a sent packet first reached TARGET, having been
    /// at or above it since (the start of the stretch the first drop ends).
    fn first_stretch_above(run: &Run, target: u64, before: u64) -> Option<u64> {
        let mut since = None;
        for (t, d) in &run.sent {
            if *t >= before {
                break;
            }
            if d.sojourn_ns >= target {
                since.get_or_insert(*t);
            } else {
                since = None;
            }
        }
        since
    }

    proptest! {
        #[test]
        fn conserves_keeps_order_and_its_limit(
            arrive_us in 100u64..2000, send_us in 100u64..2000, len in 64usize..1500, limit in 1usize..200,
        ) {
            let events = steady(arrive_us * 1000, send_us * 1000, 1500 * MS, len, false);
            let mut q = Codel::new(Params::default(), limit);
            let run = drive(&mut q, &events);
            assert_conserved(&q, &events, &run);
            assert_flow_order(&run);
            prop_assert!(run.max_backlog_packets <= limit);
        }

        #[test]
        fn nothing_is_dropped_before_the_sojourn_stayed_above_target_for_an_interval(
            arrive_us in 300u64..1000, send_us in 1000u64..2000,
        ) {
            let events = steady(arrive_us * 1000, send_us * 1000, 2000 * MS, 1500, false);
            let params = Params::default();
            let mut q = Codel::new(params, 100_000);
            let run = drive(&mut q, &events);
            if let Some(&(first_drop, _)) = run.dropped.first() {
                // The sends before the first drop: their sojourn was above
                // TARGET without a break for at least INTERVAL.
                let since = first_stretch_above(&run, params.target_ns, first_drop)
                    .expect("a drop with no sojourn above TARGET before it");
                prop_assert!(first_drop >= since + params.interval_ns,
                    "first drop at {first_drop} ns, sojourn above target since {since} ns");
            }
        }
    }

    #[test]
    fn a_queue_drained_faster_than_it_fills_loses_nothing() {
        // One packet a millisecond, sent every half: no standing queue.
        let events = steady(MS, MS / 2, 5000 * MS, 1500, false);
        let mut q = Codel::new(Params::default(), 1000);
        let run = drive(&mut q, &events);
        assert!(run.dropped.is_empty());
        assert!(!q.vars().dropping());
    }

    #[test]
    fn one_packet_is_never_a_standing_queue() {
        // A packet that waits a second alone is not dropped (MAXPACKET).
        let mut q = Codel::new(Params::default(), 1000);
        let mut dropped = Vec::new();
        for i in 0..20u64 {
            let p = TestPacket::plain(i, 1, 1500);
            q.enqueue(i * 1000 * MS, p, &mut dropped);
            let out = q
                .dequeue(i * 1000 * MS + 999 * MS, &mut dropped)
                .expect("the packet");
            assert_eq!(out.packet.id, i);
        }
        assert!(dropped.is_empty());
    }

    #[test]
    fn the_control_law_spaces_drops_by_interval_over_the_root_of_count() {
        // Twice the arrivals the link sends: a standing queue that grows;
        // drops come ever closer, at INTERVAL / sqrt(count).
        let params = Params::default();
        let events = steady(MS / 2, MS, 3000 * MS, 1500, false);
        let mut q = Codel::new(params, 100_000);
        let run = drive(&mut q, &events);
        let drops: Vec<u64> = run.dropped.iter().map(|(t, _)| *t).collect();
        assert!(drops.len() > 10, "{} drops", drops.len());
        for (k, pair) in drops.windows(2).take(8).enumerate() {
            // Drop k+1 came at the law's time after drop k: count was k.
            let count = (k + 1) as f64;
            let expected = params.interval_ns as f64 / count.sqrt();
            let gap = (pair[1] - pair[0]) as f64;
            // Drops happen at a send: within one send (1 ms) of the law.
            assert!(
                (gap - expected).abs() <= MS as f64 + 1.0,
                "drop {} to {}: {gap} ns apart, the law says {expected}",
                k + 1,
                k + 2
            );
        }
        assert!(q.vars().dropping());
    }

    #[test]
    fn ecn_capable_packets_are_marked_where_others_are_dropped() {
        let events = steady(MS / 2, MS, 3000 * MS, 1500, true);
        let mut q = Codel::new(Params::default(), 100_000);
        let run = drive(&mut q, &events);
        assert!(run.dropped.is_empty(), "{} dropped", run.dropped.len());
        let marked = run.sent.iter().filter(|(_, d)| d.marked).count();
        assert!(marked > 10, "{marked} marked");
        // Without ECN the same run drops instead.
        let mut q = Codel::new(
            Params {
                ecn: false,
                ..Params::default()
            },
            100_000,
        );
        let run = drive(&mut q, &events);
        assert!(run.sent.iter().all(|(_, d)| !d.marked));
        assert!(run.dropped.len() > 10);
    }
}
