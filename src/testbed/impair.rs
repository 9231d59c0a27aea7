//! The link model: what an emulated link does to each packet, as a pure
//! function of the packet's arrival time, its length and a seeded generator.
//! The wire emulator (`testbed::emulator`) feeds it the packets it reads and
//! writes each one out at the time the model gives; tests feed it millions
//! of synthetic packets and check its statistics without a device in sight.
//!
//! Semantics follow netem (`net/sched/sch_netem.c` of Linux 6.18 and
//! tc-netem(8)), so that a profile means the same on a host with netem and
//! on one without:
//! - probabilities are compared as netem does, against 32-bit draws
//!   (`p * 2^32 >= draw`), and a correlation `rho` mixes each draw with the
//!   one before (netem's `get_crandom`: `(draw * (1 - rho) + last * rho)`);
//! - the delay is `tabledist(mu, sigma)`: uniform over `mu ± sigma`, or
//!   `mu + sigma * t / 8192` with `t` drawn from the normal, Pareto or
//!   Pareto-normal table, built here with the formulas iproute2's
//!   `netem/*.c` generators use (a test compares them with iproute2's
//!   installed `.dist` files);
//! - loss is independent (with optional correlation), Gilbert-Elliott or
//!   the 4-state Markov model, state machines as in netem;
//! - a duplicate goes through loss, corruption and delay on its own, as
//!   netem re-enqueues it; a packet that is both duplicated and lost is
//!   delivered once;
//! - corruption flips one bit at a random offset;
//! - reordering sends a packet at once, ahead of delayed ones, once at
//!   least `gap - 1` packets were delayed since the last such packet.
//!
//! Where netlab differs, on purpose, and says so in `docs/TESTBED.md`:
//! - the wire comes first, then the path's delay: a packet is serialised
//!   at the link rate (with its framing: Ethernet's header, FCS, minimum
//!   frame, preamble and 9.6 µs gap, or netem's overheads) behind the
//!   packets before it, then travels for its delay. netem adds the
//!   serialisation after the delay; with a constant delay both give the
//!   same times;
//! - packets keep their order under jitter unless `jitter_reorders` is set
//!   (netem keeps order only when a rate is set);
//! - the sending interface can hold a limited number of frames and take a
//!   service time to be handed the next one (`tx_queue`, `tx_service`:
//!   Sun's one-packet LANCE driver), and the receiver can drop frames that
//!   follow the last one it took too closely (`rx_min_gap`: the Intel
//!   82586), neither of which netem has;
//! - slots: a packet leaves at the first slot at or after its time; a
//!   slot opens `min..max` (uniform) after the one before filled its
//!   packet or byte budget, or after the packet that found no open slot.
//!
//! Invariants: deliveries of packets that keep their order are never
//! earlier than the one before; every admitted packet ends as exactly one
//! of delivered, lost, queue-dropped or dropped by the receiver (a
//! duplicate counts as a packet of its own); the held bytes (admitted, not
//! yet delivered) never exceed the queue.

use crate::record::testbed::{
    DelayDistribution, Framing, Impairments, LinkProfile, LossModel, ModelCounts, Slot,
};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// netem's `NETEM_DIST_SCALE`: table values are in units of 1/8192 sigma.
pub const DIST_SCALE: i64 = 8192;
/// Entries in each of netem's delay tables.
pub const TABLE_SIZE: usize = 4096;

/// One of netem's delay tables, as iproute2's generators make it: the
/// inverse of the distribution's CDF at `TABLE_SIZE` evenly spaced points,
/// in units of sigma / 8192. `None` for the uniform distribution (no table).
pub fn distribution_table(distribution: DelayDistribution) -> Option<Vec<i16>> {
    let clamp = |v: i64| v.clamp(i64::from(i16::MIN), i64::from(i16::MAX)) as i16;
    match distribution {
        DelayDistribution::Uniform => None,
        DelayDistribution::Normal => {
            let inverse = normal_inverse();
            Some(
                (0..TABLE_SIZE)
                    .map(|k| clamp((inverse[4 * k] * DIST_SCALE as f64).round_ties_even() as i64))
                    .collect(),
            )
        }
        DelayDistribution::Pareto => Some(
            (0..TABLE_SIZE)
                .map(|k| clamp(pareto_value(65536 - 16 * k as i64)))
                .collect(),
        ),
        DelayDistribution::Paretonormal => {
            let inverse = normal_inverse();
            Some(
                (0..TABLE_SIZE)
                    .map(|k| {
                        let i = 4 * k;
                        let normal = (inverse[i] * DIST_SCALE as f64).round_ties_even() as i64;
                        let pareto = pareto_value(65536 - 4 * i as i64);
                        // C's integer division truncates toward zero, as Rust's does.
                        clamp((normal + 3 * pareto) / 4)
                    })
                    .collect(),
            )
        }
    }
}

/// iproute2's `normal.c`: `table[i]` is the x whose standard normal CDF,
/// times 16384 and rounded, is `i`, found by walking x from -10 in steps of
/// 0.00005 (the last x to round to `i` wins).
fn normal_inverse() -> Vec<f64> {
    const SIZE: usize = 16384;
    let mut table = vec![f64::NAN; SIZE + 1];
    let mut x = -10.0f64;
    while x < 10.05 {
        let cdf = 0.5 + 0.5 * statrs::function::erf::erf(x / std::f64::consts::SQRT_2);
        let i = (SIZE as f64 * cdf).round_ties_even() as usize;
        table[i] = x;
        x += 0.00005;
    }
    table
}

/// iproute2's Pareto entry for `i / 65536`: shape 3, shifted by its mean
/// (1.5) and scaled by 4/3, at most 32767.
fn pareto_value(i: i64) -> i64 {
    let u = i as f64 / 65536.0;
    let value = ((1.0 / u.powf(1.0 / 3.0)) - 1.5) * (4.0 / 3.0) * DIST_SCALE as f64;
    value.min(32767.0).round_ties_even() as i64
}

/// A probability as netem holds it: a fraction of 2^32 - 1.
fn scaled(pct: f64) -> u32 {
    ((pct / 100.0) * f64::from(u32::MAX)).round() as u32
}

/// netem's correlated random numbers: each draw mixed with the last.
#[derive(Debug, Clone)]
struct Correlated {
    rho: u32,
    last: u32,
}

impl Correlated {
    fn new(correlation_pct: f64, rng: &mut fastrand::Rng) -> Correlated {
        Correlated {
            rho: scaled(correlation_pct),
            last: rng.u32(..),
        }
    }

    fn next(&mut self, rng: &mut fastrand::Rng) -> u32 {
        let value = u64::from(rng.u32(..));
        if self.rho == 0 {
            return value as u32;
        }
        let rho = u64::from(self.rho) + 1;
        let answer = ((value * ((1u64 << 32) - rho) + u64::from(self.last) * rho) >> 32) as u32;
        self.last = answer;
        answer
    }
}

/// Whether an event of probability `p` (scaled) happens: netem's test.
fn happens(p: u32, draw: u32) -> bool {
    p != 0 && p >= draw
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FourState {
    GapTransmit,
    BurstTransmit,
    BurstLost,
    GapLost,
}

#[derive(Debug, Clone)]
enum Loss {
    Random {
        p: u32,
        draws: Correlated,
    },
    GilbertElliott {
        p: u32,
        r: u32,
        h: u32,
        k1: u32,
        bad: bool,
    },
    FourState {
        p13: u32,
        p31: u32,
        p32: u32,
        p23: u32,
        p14: u32,
        state: FourState,
    },
}

impl Loss {
    fn new(profile: &LinkProfile, rng: &mut fastrand::Rng) -> Loss {
        match profile.impair.loss_model {
            None => Loss::Random {
                p: scaled(profile.loss_pct),
                draws: Correlated::new(profile.impair.loss_correlation_pct, rng),
            },
            Some(LossModel::GilbertElliott {
                p_pct,
                r_pct,
                bad_loss_pct,
                good_loss_pct,
            }) => Loss::GilbertElliott {
                p: scaled(p_pct),
                r: scaled(r_pct),
                // netem keeps h, the chance of *not* losing in the bad state.
                h: scaled(100.0 - bad_loss_pct),
                k1: scaled(good_loss_pct),
                bad: false,
            },
            Some(LossModel::FourState(s)) => Loss::FourState {
                p13: scaled(s.p13_pct),
                p31: scaled(s.p31_pct),
                p32: scaled(s.p32_pct),
                p23: scaled(s.p23_pct),
                p14: scaled(s.p14_pct),
                state: FourState::GapTransmit,
            },
        }
    }

    /// netem's `loss_event`.
    fn lost(&mut self, rng: &mut fastrand::Rng) -> bool {
        match self {
            Loss::Random { p, draws } => {
                let draw = draws.next(rng);
                happens(*p, draw)
            }
            Loss::GilbertElliott { p, r, h, k1, bad } => {
                if *bad {
                    if rng.u32(..) < *r {
                        *bad = false;
                    }
                    rng.u32(..) > *h
                } else {
                    if rng.u32(..) < *p {
                        *bad = true;
                    }
                    rng.u32(..) < *k1
                }
            }
            Loss::FourState {
                p13,
                p31,
                p32,
                p23,
                p14,
                state,
            } => {
                // Sums saturate: the parser keeps each state's outgoing
                // probabilities at most 100% together.
                let draw = rng.u32(..);
                let (next, lost) = match *state {
                    FourState::GapTransmit if draw < *p14 => (FourState::GapLost, true),
                    FourState::GapTransmit if draw < p13.saturating_add(*p14) => {
                        (FourState::BurstLost, true)
                    }
                    FourState::GapTransmit => (FourState::GapTransmit, false),
                    FourState::BurstTransmit if draw < *p23 => (FourState::BurstLost, true),
                    FourState::BurstTransmit => (FourState::BurstTransmit, false),
                    FourState::BurstLost if draw < *p32 => (FourState::BurstTransmit, false),
                    FourState::BurstLost if draw < p31.saturating_add(*p32) => {
                        (FourState::GapTransmit, false)
                    }
                    FourState::BurstLost => (FourState::BurstLost, true),
                    FourState::GapLost => (FourState::GapTransmit, false),
                };
                *state = next;
                lost
            }
        }
    }
}

/// What a packet costs on the wire, in byte times, including any gap that
/// must follow it; and the part that is the frame itself.
pub fn wire_bytes(framing: Option<Framing>, len: usize) -> (u64, u64) {
    let len = len as u64;
    match framing {
        None => (len, len),
        Some(Framing::Ethernet) => {
            // Header 14 + FCS 4, padded to 64; preamble and SFD 8; gap 12.
            let frame = (len + 18).max(64) + 8;
            (frame + 12, frame)
        }
        Some(Framing::Overhead {
            packet,
            cell_size,
            cell_overhead,
        }) => {
            let mut bytes = (len as i64 + i64::from(packet)).max(0) as u64;
            if cell_size > 0 {
                let cells = bytes.div_ceil(u64::from(cell_size));
                bytes = cells * (i64::from(cell_size) + i64::from(cell_overhead)).max(0) as u64;
            }
            (bytes, bytes)
        }
    }
}

/// Nanoseconds `bytes` take at `rate_bps`.
fn byte_time_ns(bytes: u64, rate_bps: u64) -> u64 {
    (u128::from(bytes) * 8 * 1_000_000_000 / u128::from(rate_bps.max(1))) as u64
}

/// The sending interface and its wire.
#[derive(Debug)]
struct Wire {
    rate_bps: u64,
    framing: Option<Framing>,
    /// When the medium is free again (after the frame and its gap).
    free_at: u64,
    /// End times of the frames the interface still holds or last held, at
    /// most `slots` of them (only with a `tx_queue`).
    finished: VecDeque<u64>,
    slots: Option<u32>,
    service_ns: u64,
    last_end: Option<u64>,
    gaps: hdrhistogram::Histogram<u64>,
    /// The smallest gap, exact (the histogram rounds).
    gap_min: Option<u64>,
    busy_ns: u64,
}

impl Wire {
    /// Serialises a frame ready at `ready`: (start, end of frame, whether it
    /// waited for the driver's service, whether the wire was busy).
    fn transmit(&mut self, ready: u64, len: usize) -> (u64, u64, bool, bool) {
        let (with_gap, frame) = wire_bytes(self.framing, len);
        let handed = match self.slots {
            Some(slots) if self.finished.len() as u32 >= slots => {
                self.finished[self.finished.len() - slots as usize] + self.service_ns
            }
            _ => 0,
        };
        let busy = self.free_at > ready;
        let start = ready.max(self.free_at).max(handed);
        let waited = handed > ready.max(self.free_at);
        let end = start + byte_time_ns(frame, self.rate_bps);
        self.free_at = start + byte_time_ns(with_gap, self.rate_bps);
        self.busy_ns += self.free_at - start;
        if let Some(slots) = self.slots {
            self.finished.push_back(end);
            while self.finished.len() > slots as usize {
                self.finished.pop_front();
            }
        }
        if let Some(last) = self.last_end
            && (busy || waited)
        {
            let gap = start.saturating_sub(last);
            let _ = self.gaps.record(gap.max(1));
            self.gap_min = Some(self.gap_min.map_or(gap, |m| m.min(gap)));
        }
        self.last_end = Some(end);
        (start, end, waited, busy)
    }
}

/// netem's slots, as described in the module's docs.
#[derive(Debug)]
struct Slots {
    config: Slot,
    open_at: Option<u64>,
    packets_left: i64,
    bytes_left: i64,
}

impl Slots {
    fn budget(&mut self) {
        self.packets_left = if self.config.packets == 0 {
            i64::MAX
        } else {
            i64::from(self.config.packets)
        };
        self.bytes_left = if self.config.bytes == 0 {
            i64::MAX
        } else {
            i64::from(self.config.bytes)
        };
    }

    fn interval(&self, rng: &mut fastrand::Rng) -> u64 {
        let (min, max) = (self.config.min_us * 1000, self.config.max_us * 1000);
        min + ((u128::from(max - min) * u128::from(rng.u32(..))) >> 32) as u64
    }

    fn assign(&mut self, due: u64, len: usize, rng: &mut fastrand::Rng) -> u64 {
        let at = match self.open_at {
            Some(open) if open >= due => open,
            _ => {
                self.budget();
                due + self.interval(rng)
            }
        };
        self.packets_left -= 1;
        self.bytes_left -= len as i64;
        if self.packets_left <= 0 || self.bytes_left <= 0 {
            self.open_at = Some(at + self.interval(rng));
            self.budget();
        } else {
            self.open_at = Some(at);
        }
        at
    }
}

/// One bit to flip: byte offset and mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corruption {
    pub offset: usize,
    pub mask: u8,
}

/// A copy of the packet to deliver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    /// When the packet leaves the link at the far end (ns, the caller's clock).
    pub at_ns: u64,
    pub corrupt: Option<Corruption>,
}

/// What became of one packet: up to two deliveries (a duplicate).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Fate {
    pub deliveries: Vec<Delivery>,
}

/// Whether a link of `profile` does nothing to packets (no delay, loss,
/// duplication, corruption, reordering, rate, slots or slow receiver): the
/// emulator then passes each one on as it comes, without a model.
pub fn passes_untouched(profile: &LinkProfile) -> bool {
    let i = &profile.impair;
    profile.delay_us == 0
        && profile.jitter_us == 0
        && profile.loss_pct == 0.0
        && i.loss_model.is_none()
        && i.duplicate_pct == 0.0
        && i.corrupt_pct == 0.0
        && i.reorder_pct == 0.0
        && i.reorder_gap == 0
        && profile.rate_bps.is_none()
        && i.slot.is_none()
        && i.rx_min_gap_us == 0
}

/// The state of one direction of an emulated link.
pub struct LinkModel {
    rng: fastrand::Rng,
    mu_ns: i64,
    sigma_ns: i64,
    table: Option<Vec<i16>>,
    delay_draws: Correlated,
    loss: Loss,
    duplicate: u32,
    duplicate_draws: Correlated,
    corrupt: u32,
    corrupt_draws: Correlated,
    reorder: u32,
    reorder_draws: Correlated,
    gap: u32,
    counter: u32,
    keep_order: bool,
    last_in_order: u64,
    queue_bytes: u64,
    held: BinaryHeap<Reverse<(u64, u64)>>,
    held_bytes: u64,
    wire: Option<Wire>,
    slots: Option<Slots>,
    rx_min_gap_ns: u64,
    last_taken: Option<u64>,
    counts: ModelCounts,
}

impl LinkModel {
    /// The model of one direction of `profile`, holding at most
    /// `queue_bytes`, its draws seeded with `seed`.
    pub fn new(profile: &LinkProfile, queue_bytes: u64, seed: u64) -> LinkModel {
        let mut rng = fastrand::Rng::with_seed(seed);
        let impair = &profile.impair;
        let delay_draws = Correlated::new(impair.delay_correlation_pct, &mut rng);
        let loss = Loss::new(profile, &mut rng);
        let duplicate_draws = Correlated::new(impair.duplicate_correlation_pct, &mut rng);
        let corrupt_draws = Correlated::new(impair.corrupt_correlation_pct, &mut rng);
        let reorder_draws = Correlated::new(impair.reorder_correlation_pct, &mut rng);
        let wire = profile.rate_bps.map(|rate_bps| Wire {
            rate_bps,
            framing: impair.framing,
            free_at: 0,
            finished: VecDeque::new(),
            slots: impair.tx_queue,
            service_ns: impair.tx_service_us * 1000,
            last_end: None,
            gaps: hdrhistogram::Histogram::new_with_bounds(1, 60_000_000_000, 3)
                .expect("valid histogram bounds"),
            gap_min: None,
            busy_ns: 0,
        });
        LinkModel {
            rng,
            mu_ns: profile.delay_us as i64 * 1000,
            sigma_ns: profile.jitter_us as i64 * 1000,
            table: distribution_table(impair.distribution),
            delay_draws,
            loss,
            duplicate: scaled(impair.duplicate_pct),
            duplicate_draws,
            corrupt: scaled(impair.corrupt_pct),
            corrupt_draws,
            reorder: if impair.reorder_gap > 0 && impair.reorder_pct == 0.0 {
                u32::MAX
            } else {
                scaled(impair.reorder_pct)
            },
            reorder_draws,
            gap: if impair.reorder_pct > 0.0 {
                impair.reorder_gap.max(1)
            } else {
                impair.reorder_gap
            },
            counter: 0,
            keep_order: !impair.jitter_reorders,
            last_in_order: 0,
            queue_bytes,
            held: BinaryHeap::new(),
            held_bytes: 0,
            wire,
            slots: impair.slot.map(|config| Slots {
                config,
                open_at: None,
                packets_left: 0,
                bytes_left: 0,
            }),
            rx_min_gap_ns: impair.rx_min_gap_us * 1000,
            last_taken: None,
            counts: ModelCounts::default(),
        }
    }

    /// netem's `tabledist`: the delay of the next packet.
    fn delay(&mut self) -> i64 {
        if self.sigma_ns == 0 {
            return self.mu_ns;
        }
        let draw = self.delay_draws.next(&mut self.rng);
        match &self.table {
            None => {
                let spread = (2 * self.sigma_ns) as u128;
                self.mu_ns - self.sigma_ns + ((spread * u128::from(draw)) >> 32) as i64
            }
            Some(table) => {
                let t = i64::from(table[draw as usize % table.len()]);
                let x = self.sigma_ns * t;
                let rounded = if x >= 0 {
                    x + DIST_SCALE / 2
                } else {
                    x - DIST_SCALE / 2
                };
                rounded / DIST_SCALE + self.mu_ns
            }
        }
    }

    /// A packet of `len` bytes arrives at the link at `now_ns`.
    pub fn admit(&mut self, now_ns: u64, len: usize) -> Fate {
        self.release_held(now_ns);
        let mut fate = Fate::default();
        self.counts.packets += 1;
        let duplicated = happens(self.duplicate, self.duplicate_draws.next(&mut self.rng));
        let lost = self.loss.lost(&mut self.rng);
        match (duplicated, lost) {
            (false, true) => {
                self.counts.lost += 1;
                return fate;
            }
            // Duplicated and lost: delivered once, as netem does.
            (true, true) => self.counts.lost += 1,
            _ => {}
        }
        self.carry(now_ns, len, &mut fate);
        if duplicated && !lost {
            self.counts.duplicated += 1;
            self.counts.packets += 1;
            // The copy goes through loss on its own, as netem re-enqueues it.
            if self.loss.lost(&mut self.rng) {
                self.counts.lost += 1;
            } else {
                self.carry(now_ns, len, &mut fate);
            }
        }
        fate
    }

    /// Corruption, the queue, the wire, the delay, slots and the receiver
    /// for one copy of a packet.
    fn carry(&mut self, now_ns: u64, len: usize, fate: &mut Fate) {
        let corrupt = if happens(self.corrupt, self.corrupt_draws.next(&mut self.rng)) && len > 0 {
            self.counts.corrupted += 1;
            Some(Corruption {
                offset: self.rng.usize(..len),
                mask: 1 << self.rng.u8(..8),
            })
        } else {
            None
        };
        if self.held_bytes + len as u64 > self.queue_bytes {
            self.counts.queue_drops += 1;
            return;
        }
        let left_wire = match &mut self.wire {
            Some(wire) => {
                let (_, end, waited, busy) = wire.transmit(now_ns, len);
                self.counts.tx_service_waits += u64::from(waited);
                self.counts.back_to_back += u64::from(busy);
                end
            }
            None => now_ns,
        };
        let reorder_now = self.gap > 0
            && self.counter >= self.gap - 1
            && self.reorder >= self.reorder_draws.next(&mut self.rng);
        let mut at = if reorder_now {
            self.counter = 0;
            self.counts.reordered += 1;
            left_wire
        } else {
            self.counter += 1;
            let at = (left_wire as i64 + self.delay()).max(now_ns as i64) as u64;
            if self.keep_order {
                let at = at.max(self.last_in_order);
                self.last_in_order = at;
                at
            } else {
                at
            }
        };
        if let Some(slots) = &mut self.slots {
            at = slots.assign(at, len, &mut self.rng);
        }
        if self.rx_min_gap_ns > 0 {
            if self
                .last_taken
                .is_some_and(|last| at < last + self.rx_min_gap_ns)
            {
                self.counts.rx_gap_drops += 1;
                return;
            }
            self.last_taken = Some(at);
        }
        self.held.push(Reverse((at, len as u64)));
        self.held_bytes += len as u64;
        fate.deliveries.push(Delivery { at_ns: at, corrupt });
    }

    /// Forgets the packets delivered by `now_ns` (they left the queue).
    fn release_held(&mut self, now_ns: u64) {
        while let Some(Reverse((at, len))) = self.held.peek().copied() {
            if at > now_ns {
                break;
            }
            self.held.pop();
            self.held_bytes -= len;
        }
    }

    /// Bytes admitted and not yet delivered as of the last admission.
    pub fn held_bytes(&self) -> u64 {
        self.held_bytes
    }

    /// What the model did so far.
    pub fn counts(&self) -> ModelCounts {
        let mut counts = self.counts.clone();
        if let Some(wire) = &self.wire {
            if let Some(min) = wire.gap_min {
                counts.wire_gap_us_min = min as f64 / 1000.0;
                counts.wire_gap_us_p50 = wire.gaps.value_at_quantile(0.5) as f64 / 1000.0;
            }
            counts.wire_busy_ms = wire.busy_ns as f64 / 1e6;
        }
        counts
    }
}

/// What the one-packet driver allows: a frame of `ip_len` bytes every wire
/// time plus service time (the interframe gap hidden in the service when
/// the service is longer), as bytes of IP packet per second.
pub fn one_packet_driver_bytes_per_s(
    ip_len: usize,
    rate_bps: u64,
    framing: Option<Framing>,
    service_us: u64,
) -> f64 {
    let (with_gap, frame) = wire_bytes(framing, ip_len);
    let frame_ns = byte_time_ns(frame, rate_bps);
    let period_ns = (frame_ns + service_us * 1000).max(byte_time_ns(with_gap, rate_bps));
    ip_len as f64 * 1e9 / period_ns as f64
}

/// The service time under which the one-packet driver moves `goal_bytes_per_s`
/// of IP packets of `ip_len` bytes (µs; 0 when the wire alone is slower).
pub fn service_for_throughput(
    ip_len: usize,
    rate_bps: u64,
    framing: Option<Framing>,
    goal_bytes_per_s: f64,
) -> f64 {
    let (_, frame) = wire_bytes(framing, ip_len);
    let period_ns = ip_len as f64 * 1e9 / goal_bytes_per_s;
    ((period_ns - byte_time_ns(frame, rate_bps) as f64) / 1000.0).max(0.0)
}

/// The share of packets the 4-state model loses in the long run, from its
/// stationary distribution (power iteration on the transition matrix).
pub fn four_state_loss_rate(p13: f64, p31: f64, p32: f64, p23: f64, p14: f64) -> f64 {
    // States: 0 gap-transmit, 1 burst-transmit, 2 burst-lost, 3 gap-lost.
    let m = [
        [1.0 - p13 - p14, 0.0, p13, p14],
        [0.0, 1.0 - p23, p23, 0.0],
        [p31, p32, 1.0 - p31 - p32, 0.0],
        [1.0, 0.0, 0.0, 0.0],
    ];
    let mut pi = [0.25f64; 4];
    for _ in 0..100_000 {
        let mut next = [0.0f64; 4];
        for (from, row) in m.iter().enumerate() {
            for (to, p) in row.iter().enumerate() {
                next[to] += pi[from] * p;
            }
        }
        pi = next;
    }
    pi[2] + pi[3]
}

/// The share the Gilbert-Elliott model loses in the long run.
pub fn gilbert_elliott_loss_rate(p: f64, r: f64, bad_loss: f64, good_loss: f64) -> f64 {
    let bad = p / (p + r);
    (1.0 - bad) * good_loss + bad * bad_loss
}

/// Why a plain netem qdisc on veth cannot carry these impairments, if it
/// cannot: the quirks of 1989's interfaces are netlab's own.
pub fn beyond_netem(impair: &Impairments) -> Option<&'static str> {
    if impair.tx_queue.is_some() || impair.tx_service_us > 0 {
        Some("netem has no one-packet driver (--tx-queue, --tx-service)")
    } else if impair.rx_min_gap_us > 0 {
        Some("netem has no slow receiver (--rx-min-gap)")
    } else if impair.queue_discipline.is_some() {
        Some("netem has no queue discipline of its own (--queue-discipline)")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEED: u64 = 0x5eed_1989;

    fn profile() -> LinkProfile {
        LinkProfile::default()
    }

    /// Packets of `len` bytes, `every_ns` apart, through a fresh model.
    fn run(
        profile: &LinkProfile,
        packets: usize,
        len: usize,
        every_ns: u64,
    ) -> (LinkModel, Vec<Fate>) {
        let mut model = LinkModel::new(profile, u64::MAX, SEED);
        let fates = (0..packets)
            .map(|i| model.admit(i as u64 * every_ns, len))
            .collect();
        (model, fates)
    }

    /// Whether `count` of `n` is inside the 99.9% normal-approximation
    /// interval of a binomial with probability `p`.
    fn within_binomial(count: u64, n: u64, p: f64) -> bool {
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        (count as f64 - n as f64 * p).abs() <= 3.29 * sd + 1.0
    }

    /// Loss indicators in batches: (mean, half-width of a 99.9% interval
    /// of the batch means), for processes with memory.
    fn batch_interval(lost: &[bool], batches: usize) -> (f64, f64) {
        let size = lost.len() / batches;
        let means: Vec<f64> = lost
            .chunks(size)
            .take(batches)
            .map(|c| c.iter().filter(|&&l| l).count() as f64 / c.len() as f64)
            .collect();
        let mean = means.iter().sum::<f64>() / batches as f64;
        let var = means.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (batches - 1) as f64;
        (mean, 3.29 * (var / batches as f64).sqrt())
    }

    fn installed_table(name: &str) -> Option<Vec<i16>> {
        let dirs = [
            "/usr/lib/x86_64-linux-gnu/tc",
            "/usr/lib/aarch64-linux-gnu/tc",
            "/usr/lib/tc",
            "/usr/lib64/tc",
        ];
        let text = dirs
            .iter()
            .find_map(|d| std::fs::read_to_string(format!("{d}/{name}.dist")).ok())?;
        Some(
            text.lines()
                .filter(|l| !l.starts_with('#'))
                .flat_map(|l| l.split_whitespace().map(|v| v.parse::<i16>().unwrap()))
                .collect(),
        )
    }

    #[test]
    fn the_tables_are_iproute2_s() {
        // scripts/test installs iproute2, whose tc ships the tables netem loads.
        for (name, distribution) in [
            ("normal", DelayDistribution::Normal),
            ("pareto", DelayDistribution::Pareto),
            ("paretonormal", DelayDistribution::Paretonormal),
        ] {
            let ours = distribution_table(distribution).unwrap();
            let theirs = installed_table(name).unwrap_or_else(|| {
                panic!("iproute2's {name}.dist is not installed (scripts/test installs iproute2)")
            });
            assert_eq!(ours.len(), TABLE_SIZE);
            assert_eq!(theirs.len(), TABLE_SIZE, "{name}");
            // Rounding at a boundary may differ by one unit where libm's
            // erf and statrs' differ in the last place.
            let off: Vec<(usize, i16, i16)> = ours
                .iter()
                .zip(&theirs)
                .enumerate()
                .filter(|(_, (a, b))| a != b)
                .map(|(i, (a, b))| (i, *a, *b))
                .collect();
            assert!(
                off.len() <= 8
                    && off
                        .iter()
                        .all(|(_, a, b)| (i32::from(*a) - i32::from(*b)).abs() <= 1),
                "{name}: {} entries differ: {:?}",
                off.len(),
                &off[..off.len().min(10)]
            );
        }
        assert!(distribution_table(DelayDistribution::Uniform).is_none());
    }

    /// The delay of every packet of a run without a rate, kept in order or not.
    fn delays(profile: &LinkProfile, packets: usize) -> Vec<f64> {
        let every = 1_000_000u64;
        let (_, fates) = run(profile, packets, 100, every);
        fates
            .iter()
            .enumerate()
            .map(|(i, f)| (f.deliveries[0].at_ns - i as u64 * every) as f64 / 1000.0)
            .collect()
    }

    fn quantile(sorted: &[f64], q: f64) -> f64 {
        sorted[((sorted.len() - 1) as f64 * q).round() as usize]
    }

    #[test]
    fn delay_quantiles_match_each_distribution() {
        let (mu, sigma) = (20_000.0f64, 4_000.0f64);
        for distribution in [
            DelayDistribution::Uniform,
            DelayDistribution::Normal,
            DelayDistribution::Pareto,
            DelayDistribution::Paretonormal,
        ] {
            let mut p = profile();
            p.delay_us = mu as u64;
            p.jitter_us = sigma as u64;
            p.impair.distribution = distribution;
            p.impair.jitter_reorders = true;
            let mut d = delays(&p, 200_000);
            d.sort_by(f64::total_cmp);
            let table = distribution_table(distribution);
            for q in [0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99] {
                // The distribution's own quantile: uniform's, or the table's
                // entry at q (each table is the inverse CDF at even steps).
                let want = match &table {
                    None => mu - sigma + 2.0 * sigma * q,
                    Some(t) => mu + sigma * f64::from(t[(q * TABLE_SIZE as f64) as usize]) / 8192.0,
                };
                let got = quantile(&d, q);
                assert!(
                    (got - want).abs() <= 0.05 * want.abs() && (got - want).abs() <= 0.1 * sigma,
                    "{distribution:?} q{q}: {got:.0} µs, the distribution's {want:.0}"
                );
            }
        }
    }

    #[test]
    fn order_is_kept_under_jitter_unless_asked() {
        let mut p = profile();
        p.delay_us = 1000;
        p.jitter_us = 900;
        let (_, fates) = run(&p, 100_000, 100, 10_000);
        let times: Vec<u64> = fates.iter().map(|f| f.deliveries[0].at_ns).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]));
        p.impair.jitter_reorders = true;
        let (_, fates) = run(&p, 100_000, 100, 10_000);
        let overtaken = fates
            .windows(2)
            .filter(|w| w[1].deliveries[0].at_ns < w[0].deliveries[0].at_ns)
            .count();
        assert!(overtaken > 10_000, "{overtaken} overtakings");
    }

    #[test]
    fn delay_correlation_makes_neighbours_alike() {
        let mut p = profile();
        p.delay_us = 10_000;
        p.jitter_us = 5_000;
        p.impair.jitter_reorders = true;
        let lag1 = |d: &[f64]| {
            let m = d.iter().sum::<f64>() / d.len() as f64;
            let var = d.iter().map(|x| (x - m).powi(2)).sum::<f64>();
            d.windows(2).map(|w| (w[0] - m) * (w[1] - m)).sum::<f64>() / var
        };
        let plain = lag1(&delays(&p, 100_000));
        p.impair.delay_correlation_pct = 75.0;
        let correlated = lag1(&delays(&p, 100_000));
        assert!(plain.abs() < 0.02, "{plain}");
        // netem's mixing draw*(1-rho) + last*rho has lag-1 correlation rho.
        assert!((correlated - 0.75).abs() < 0.02, "{correlated}");
    }

    #[test]
    fn netem_s_correlation_narrows_what_it_correlates() {
        // The price of netem's generator (docs/TESTBED.md): a correlated
        // 1% loss loses almost nothing, a correlated delay loses spread.
        let mut p = profile();
        p.loss_pct = 1.0;
        p.impair.loss_correlation_pct = 25.0;
        let (model, _) = run(&p, 1_000_000, 100, 1000);
        assert!(
            model.counts().lost < 100,
            "{} lost of a million",
            model.counts().lost
        );
        let mut p = profile();
        p.delay_us = 10_000;
        p.jitter_us = 5_000;
        p.impair.jitter_reorders = true;
        p.impair.delay_correlation_pct = 75.0;
        let d = delays(&p, 200_000);
        let mean = d.iter().sum::<f64>() / d.len() as f64;
        let sd = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / d.len() as f64).sqrt();
        // Uniform ±5 ms has sd 2887 µs; times sqrt(0.25 / 1.75).
        let want = 5000.0 / 3f64.sqrt() * (0.25f64 / 1.75).sqrt();
        assert!(
            (sd / want - 1.0).abs() < 0.03,
            "sd {sd:.0} µs, expected {want:.0}"
        );
    }

    #[test]
    fn only_a_link_that_does_nothing_passes_packets_untouched() {
        assert!(passes_untouched(&profile()));
        let mut p = profile();
        p.emulator.spin = true;
        assert!(
            passes_untouched(&p),
            "how the emulator waits changes no packet"
        );
        assert!(!passes_untouched(&LinkProfile::named("ether10").unwrap()));
        p.impair.corrupt_pct = 0.1;
        assert!(!passes_untouched(&p));
    }

    #[test]
    fn random_loss_is_binomial() {
        for pct in [0.1, 1.0, 10.0] {
            let mut p = profile();
            p.loss_pct = pct;
            let (model, _) = run(&p, 200_000, 100, 1000);
            let c = model.counts();
            assert!(
                within_binomial(c.lost, 200_000, pct / 100.0),
                "{pct}%: {} lost",
                c.lost
            );
        }
    }

    #[test]
    fn gilbert_elliott_loss_and_bursts() {
        let mut p = profile();
        // Simple Gilbert: all lost in the bad state, none in the good.
        p.impair.loss_model = Some(LossModel::GilbertElliott {
            p_pct: 1.0,
            r_pct: 25.0,
            bad_loss_pct: 100.0,
            good_loss_pct: 0.0,
        });
        let (_, fates) = run(&p, 400_000, 100, 1000);
        let lost: Vec<bool> = fates.iter().map(|f| f.deliveries.is_empty()).collect();
        let (mean, half) = batch_interval(&lost, 100);
        let want = gilbert_elliott_loss_rate(0.01, 0.25, 1.0, 0.0);
        assert!((mean - want).abs() <= half, "{mean} vs {want} ± {half}");
        // Bursts: geometric with mean 1/r = 4 packets.
        let mut bursts = Vec::new();
        let mut run_len = 0;
        for l in &lost {
            if *l {
                run_len += 1;
            } else if run_len > 0 {
                bursts.push(run_len);
                run_len = 0;
            }
        }
        let mean_burst = bursts.iter().sum::<u32>() as f64 / bursts.len() as f64;
        assert!((mean_burst - 4.0).abs() < 0.2, "mean burst {mean_burst}");
        // With losses in both states.
        p.impair.loss_model = Some(LossModel::GilbertElliott {
            p_pct: 2.0,
            r_pct: 20.0,
            bad_loss_pct: 60.0,
            good_loss_pct: 0.5,
        });
        let (_, fates) = run(&p, 400_000, 100, 1000);
        let lost: Vec<bool> = fates.iter().map(|f| f.deliveries.is_empty()).collect();
        let (mean, half) = batch_interval(&lost, 100);
        let want = gilbert_elliott_loss_rate(0.02, 0.2, 0.6, 0.005);
        assert!((mean - want).abs() <= half, "{mean} vs {want} ± {half}");
    }

    #[test]
    fn four_state_loss_matches_its_stationary_rate() {
        let mut p = profile();
        let (p13, p31, p32, p23, p14) = (0.02, 0.3, 0.1, 0.05, 0.01);
        p.impair.loss_model = Some(LossModel::FourState(
            crate::record::testbed::FourStateLoss {
                p13_pct: p13 * 100.0,
                p31_pct: p31 * 100.0,
                p32_pct: p32 * 100.0,
                p23_pct: p23 * 100.0,
                p14_pct: p14 * 100.0,
            },
        ));
        let (_, fates) = run(&p, 400_000, 100, 1000);
        let lost: Vec<bool> = fates.iter().map(|f| f.deliveries.is_empty()).collect();
        let (mean, half) = batch_interval(&lost, 100);
        let want = four_state_loss_rate(p13, p31, p32, p23, p14);
        assert!((mean - want).abs() <= half, "{mean} vs {want} ± {half}");
        // Isolated losses (gap period) are single: a lost packet from the
        // gap state is always followed by a delivered one.
        assert!(want > 0.02 && want < 0.2, "{want}");
    }

    #[test]
    fn duplication_and_corruption_are_binomial() {
        let mut p = profile();
        p.impair.duplicate_pct = 2.0;
        p.impair.corrupt_pct = 1.0;
        let (model, fates) = run(&p, 200_000, 1000, 1000);
        let c = model.counts();
        assert!(
            within_binomial(c.duplicated, 200_000, 0.02),
            "{}",
            c.duplicated
        );
        let copies: usize = fates.iter().map(|f| f.deliveries.len()).sum();
        assert_eq!(copies as u64, 200_000 + c.duplicated);
        // Each copy is corrupted on its own: n = originals + duplicates.
        assert!(
            within_binomial(c.corrupted, 200_000 + c.duplicated, 0.01),
            "{}",
            c.corrupted
        );
        let flips: Vec<Corruption> = fates
            .iter()
            .flat_map(|f| f.deliveries.iter().filter_map(|d| d.corrupt))
            .collect();
        assert_eq!(flips.len() as u64, c.corrupted);
        assert!(
            flips
                .iter()
                .all(|c| c.offset < 1000 && c.mask.count_ones() == 1)
        );
        // Offsets spread over the packet: each tenth gets about a tenth.
        let first_tenth = flips.iter().filter(|c| c.offset < 100).count();
        assert!(within_binomial(first_tenth as u64, flips.len() as u64, 0.1));
    }

    #[test]
    fn reordering_sends_packets_ahead_as_netem_does() {
        let mut p = profile();
        p.delay_us = 10_000;
        p.impair.reorder_pct = 25.0;
        p.impair.reorder_gap = 5;
        let (model, fates) = run(&p, 200_000, 100, 100_000);
        let c = model.counts();
        // Every 4 delayed packets, the next is a candidate: a quarter of
        // the candidates go at once. Candidates: one per (4 + 1/0.25 - 1)...
        // measured directly: reordered packets have no delay.
        let immediate = fates
            .iter()
            .enumerate()
            .filter(|(i, f)| f.deliveries[0].at_ns == *i as u64 * 100_000)
            .count() as u64;
        assert_eq!(immediate, c.reordered);
        // Between two reordered packets at least gap - 1 = 4 are delayed;
        // after 4 each next packet goes at once with probability 1/4: a
        // cycle is 4 + geometric(1/4) packets, mean 8, so 1/8 are reordered.
        assert!(
            within_binomial(c.reordered, 200_000, 0.125 * 1.0),
            "{}",
            c.reordered
        );
        // Overtaking: packets delivered before the one sent before them.
        let overtakes = fates
            .windows(2)
            .filter(|w| w[1].deliveries[0].at_ns < w[0].deliveries[0].at_ns)
            .count() as u64;
        assert_eq!(overtakes, c.reordered);
    }

    #[test]
    fn ethernet_framing_runs_at_ten_megabits_on_the_wire() {
        let mut p = profile();
        p.rate_bps = Some(10_000_000);
        p.impair.framing = Some(Framing::Ethernet);
        // 1500-byte packets offered faster than the wire: back to back.
        let (model, fates) = run(&p, 100_000, 1500, 1);
        // Each frame: (1500 + 18 + 8) * 0.8 µs, then 9.6 µs of gap.
        let per_frame_ns = (1500 + 18 + 8 + 12) * 800;
        for (i, fate) in fates.iter().enumerate() {
            assert_eq!(
                fate.deliveries[0].at_ns,
                i as u64 * per_frame_ns + (1500 + 18 + 8) * 800
            );
        }
        let c = model.counts();
        assert_eq!(c.wire_gap_us_min, 9.6);
        assert_eq!(c.back_to_back, 99_999);
        // Offered at 1.5 Mbit/s, 1500-byte packets wait for nothing.
        let (model, _) = run(&p, 100_000, 1500, 8_000_000);
        assert_eq!(model.counts().back_to_back, 0);
        // Minimum frames: a 40-byte ACK is padded to 64 bytes.
        assert_eq!(
            wire_bytes(Some(Framing::Ethernet), 40),
            (64 + 8 + 12, 64 + 8)
        );
    }

    #[test]
    fn the_one_packet_driver_waits_out_its_service_time() {
        for service_us in [150u64, 1300] {
            let mut p = profile();
            p.rate_bps = Some(10_000_000);
            p.impair.framing = Some(Framing::Ethernet);
            p.impair.tx_queue = Some(1);
            p.impair.tx_service_us = service_us;
            let (model, fates) = run(&p, 100_000, 1448, 1);
            let span = fates.last().unwrap().deliveries[0].at_ns - fates[0].deliveries[0].at_ns;
            let measured = 99_999.0 * 1448.0 * 1e9 / span as f64;
            let predicted = one_packet_driver_bytes_per_s(
                1448,
                10_000_000,
                Some(Framing::Ethernet),
                service_us,
            );
            assert!(
                (measured / predicted - 1.0).abs() < 0.001,
                "{measured} vs {predicted}"
            );
            assert_eq!(model.counts().wire_gap_us_min, service_us as f64);
            // A deeper queue: back to back again, the barrier gone.
            p.impair.tx_queue = Some(32);
            let (model, _) = run(&p, 100_000, 1448, 1);
            assert_eq!(model.counts().wire_gap_us_min, 9.6);
        }
        // 1988's barrier: 550 KB/s of 1408-byte payloads in 1448-byte packets.
        let service = service_for_throughput(
            1448,
            10_000_000,
            Some(Framing::Ethernet),
            550.0 * 1024.0 * 1448.0 / 1408.0,
        );
        // 400 packets a second: 2500 µs each, 1179.2 of them on the wire.
        assert!((service - 1320.8).abs() < 0.5, "{service}");
    }

    #[test]
    fn a_slow_receiver_drops_frames_that_follow_too_closely() {
        let mut p = profile();
        p.rate_bps = Some(10_000_000);
        p.impair.framing = Some(Framing::Ethernet);
        // Back-to-back 1500-byte frames arrive 1230.4 µs apart: a receiver
        // needing 1300 µs takes every other one.
        p.impair.rx_min_gap_us = 1300;
        let (model, fates) = run(&p, 10_000, 1500, 1);
        let c = model.counts();
        assert_eq!(c.rx_gap_drops, 5_000);
        assert_eq!(
            fates.iter().filter(|f| f.deliveries.is_empty()).count(),
            5_000
        );
        // Spaced out by the sender (Van Jacobson's DELAY), none are lost.
        let (model, _) = run(&p, 10_000, 1500, 1_400_000);
        assert_eq!(model.counts().rx_gap_drops, 0);
    }

    #[test]
    fn slots_deliver_in_bursts() {
        let mut p = profile();
        p.impair.slot = Some(Slot {
            min_us: 1000,
            max_us: 3000,
            packets: 8,
            bytes: 0,
        });
        let (_, fates) = run(&p, 100_000, 100, 20_000);
        let times: Vec<u64> = fates.iter().map(|f| f.deliveries[0].at_ns).collect();
        let mut slots: Vec<(u64, usize)> = Vec::new();
        for t in times {
            match slots.last_mut() {
                Some((at, n)) if *at == t => *n += 1,
                _ => slots.push((t, 1)),
            }
        }
        assert!(slots.iter().all(|(_, n)| *n <= 8));
        let gaps: Vec<f64> = slots
            .windows(2)
            .map(|w| (w[1].0 - w[0].0) as f64 / 1000.0)
            .collect();
        assert!(
            gaps.iter().all(|g| (1000.0..=3000.0).contains(g)),
            "a gap outside the slot interval"
        );
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        assert!((mean - 2000.0).abs() < 25.0, "{mean}");
    }

    #[test]
    fn the_queue_bounds_what_is_held() {
        let mut p = profile();
        p.rate_bps = Some(10_000_000);
        let mut model = LinkModel::new(&p, 16 << 10, SEED);
        // 1500-byte packets every 100 µs into a 1.2 ms/packet wire.
        let mut delivered = 0;
        for i in 0..10_000u64 {
            delivered += model.admit(i * 100_000, 1500).deliveries.len();
            assert!(model.held_bytes() <= 16 << 10);
        }
        let c = model.counts();
        assert_eq!(delivered as u64 + c.queue_drops, 10_000);
        assert!(c.queue_drops > 8_000);
    }
}
