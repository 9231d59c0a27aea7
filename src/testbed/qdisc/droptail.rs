//! Drop-tail: one FIFO that refuses an arriving packet when it would pass
//! its limit (in packets or in bytes; a limit in time is turned into bytes
//! at the link's rate by the caller, [`Limit::of_time`]). The deep queue of
//! a bufferbloated home router, and the baseline the AQMs are measured
//! against.

use super::{Dequeued, Discipline, Packet, Stamped};
use std::collections::VecDeque;
use thiserror::Error;

/// How much a drop-tail queue holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Packets(usize),
    Bytes(u64),
}

#[derive(Debug, Error, PartialEq)]
pub enum LimitError {
    #[error("a queue of 0 holds nothing: give it at least one packet")]
    Zero,
    #[error(
        "a queue of {ms} ms at {rate_bps} bit/s holds {bytes} bytes, less than one {mtu}-byte packet"
    )]
    BelowOnePacket {
        ms: f64,
        rate_bps: u64,
        bytes: u64,
        mtu: usize,
    },
}

impl Limit {
    /// A queue that holds `ms` of sending at `rate_bps`.
    pub fn of_time(ms: f64, rate_bps: u64, mtu: usize) -> Result<Limit, LimitError> {
        if ms.is_nan() || ms <= 0.0 || rate_bps == 0 {
            return Err(LimitError::Zero);
        }
        let bytes = (ms / 1000.0 * rate_bps as f64 / 8.0) as u64;
        if bytes < mtu as u64 {
            return Err(LimitError::BelowOnePacket {
                ms,
                rate_bps,
                bytes,
                mtu,
            });
        }
        Ok(Limit::Bytes(bytes))
    }

    /// Checks that the limit holds at least one packet.
    pub fn check(self) -> Result<Limit, LimitError> {
        match self {
            Limit::Packets(0) | Limit::Bytes(0) => Err(LimitError::Zero),
            other => Ok(other),
        }
    }
}

/// A drop-tail FIFO.
#[derive(Debug)]
pub struct DropTail<P> {
    limit: Limit,
    queue: VecDeque<Stamped<P>>,
    bytes: u64,
}

impl<P: Packet> DropTail<P> {
    pub fn new(limit: Limit) -> Self {
        DropTail {
            limit,
            queue: VecDeque::new(),
            bytes: 0,
        }
    }
}

impl<P: Packet> Discipline<P> for DropTail<P> {
    fn enqueue(&mut self, now_ns: u64, packet: P, dropped: &mut Vec<P>) {
        let fits = match self.limit {
            Limit::Packets(n) => self.queue.len() < n,
            Limit::Bytes(n) => self.bytes + packet.wire_len() as u64 <= n,
        };
        if !fits {
            dropped.push(packet);
            return;
        }
        self.bytes += packet.wire_len() as u64;
        self.queue.push_back(Stamped {
            packet,
            arrived_ns: now_ns,
        });
    }

    fn dequeue(&mut self, now_ns: u64, _dropped: &mut Vec<P>) -> Option<Dequeued<P>> {
        let Stamped { packet, arrived_ns } = self.queue.pop_front()?;
        self.bytes -= packet.wire_len() as u64;
        Some(Dequeued {
            packet,
            sojourn_ns: now_ns.saturating_sub(arrived_ns),
            marked: false,
        })
    }

    fn backlog_bytes(&self) -> u64 {
        self.bytes
    }

    fn backlog_packets(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn conserves_keeps_order_and_its_limit(events in random_events(4, false), limit in 1usize..50, in_bytes in any::<bool>()) {
            let limit = if in_bytes { Limit::Bytes(limit as u64 * 1000) } else { Limit::Packets(limit) };
            let mut q = DropTail::new(limit);
            let run = drive(&mut q, &events);
            assert_conserved(&q, &events, &run);
            assert_flow_order(&run);
            match limit {
                Limit::Packets(n) => prop_assert!(run.max_backlog_packets <= n),
                Limit::Bytes(n) => prop_assert!(run.max_backlog_bytes <= n),
            }
            // A FIFO: everything leaves in arrival order, across flows too.
            prop_assert!(run.sent.windows(2).all(|w| w[0].1.packet.id < w[1].1.packet.id));
        }
    }

    #[test]
    fn a_limit_in_time_is_bytes_at_the_rate_and_zero_is_refused() {
        // 100 ms at 50 Mbit/s: 625,000 bytes.
        assert_eq!(
            Limit::of_time(100.0, 50_000_000, 1500),
            Ok(Limit::Bytes(625_000))
        );
        assert_eq!(Limit::Packets(0).check(), Err(LimitError::Zero));
        assert_eq!(Limit::of_time(0.0, 50_000_000, 1500), Err(LimitError::Zero));
        let small = Limit::of_time(0.1, 1_000_000, 1500).unwrap_err();
        assert!(
            small.to_string().contains("less than one 1500-byte packet"),
            "{small}"
        );
    }
}
