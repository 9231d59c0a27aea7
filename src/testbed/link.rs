//! Link profiles: the rate, delay, jitter, loss, MTU and queue of the
//! emulated link between two namespaces, by name or by parameters.
//!
//! Named profiles:
//!
//! | name | rate | one-way delay | MTU | queue | stands for |
//! |---|---|---|---|---|---|
//! | `ether10` | 10 Mbit/s | 0 | 1500 | 16 KB (about 10 frames) | a 1989 Ethernet with a LANCE-style small buffer pool |
//! | `ether100` | 100 Mbit/s | 0 | 1500 | 64 KB | Fast Ethernet |
//! | `gige` | 1 Gbit/s | 0 | 1500 | 256 KB | Gigabit Ethernet |
//! | `wan` | 50 Mbit/s | 20 ms | 1500 | 512 KB (about one BDP) | a long-haul path |
//!
//! Parameters given with a name override the named value. Validation
//! happens here, before anything is created: MTU 576..=65535 (576 is the
//! smallest datagram every IPv4 host must accept, RFC 791), loss 0..=100%,
//! rates from 1 kbit/s to 100 Gbit/s, delays and jitter up to 10 s, jitter
//! no larger than the delay.

use crate::record::testbed::LinkProfile;
use crate::record::testbed::{
    DelayDistribution, FourStateLoss, FqCodelQueue, Framing, Impairments, LossModel,
    QueueDiscipline, QueueLimit, Slot,
};
use crate::units::parse_duration;
use std::time::Duration;
use thiserror::Error;

impl Default for LinkProfile {
    fn default() -> Self {
        LinkProfile {
            name: None,
            rate_bps: None,
            delay_us: 0,
            jitter_us: 0,
            loss_pct: 0.0,
            mtu: 1500,
            queue_bytes: None,
            offloads: Vec::new(),
            impair: Default::default(),
            emulator: Default::default(),
        }
    }
}

#[derive(Debug, Error, PartialEq)]
pub enum LinkError {
    #[error("unknown link profile \"{0}\" (known: ether10, ether100, gige, wan)")]
    UnknownProfile(String),
    #[error("rate \"{0}\" is not valid: {1}")]
    Rate(String, String),
    #[error("{what} \"{text}\" is not valid: {reason}")]
    Time {
        what: &'static str,
        text: String,
        reason: String,
    },
    #[error("loss \"{0}\" is not valid: give a percentage from 0 to 100, e.g. 1% or 0.5")]
    Loss(String),
    #[error("MTU {0} is out of range: it must be from 576 to 65535")]
    Mtu(u32),
    #[error("queue \"{0}\" is not valid: {1}")]
    Queue(String, String),
    #[error("jitter {jitter_us} µs exceeds the delay {delay_us} µs; delays cannot be negative")]
    JitterAboveDelay { jitter_us: u64, delay_us: u64 },
    /// A netem impairment that netem (or tc) would refuse, or that makes no sense.
    #[error("--netem: {0}")]
    Netem(String),
    #[error("{0}")]
    Invalid(String),
}

const MAX_DELAY: Duration = Duration::from_secs(10);
pub const MIN_RATE: u64 = 1_000;
const MAX_RATE: u64 = 100_000_000_000;

impl LinkProfile {
    /// The named profile, or an error naming the known ones.
    pub fn named(name: &str) -> Result<LinkProfile, LinkError> {
        let (rate, delay_ms, queue) = match name {
            "ether10" => (10_000_000, 0, 16 << 10),
            "ether100" => (100_000_000, 0, 64 << 10),
            "gige" => (1_000_000_000, 0, 256 << 10),
            "wan" => (50_000_000, 20, 512 << 10),
            other => return Err(LinkError::UnknownProfile(other.to_string())),
        };
        let mut profile = LinkProfile {
            name: Some(name.to_string()),
            rate_bps: Some(rate),
            delay_us: delay_ms * 1000,
            queue_bytes: Some(queue),
            ..Default::default()
        };
        // The Ethernets count what their wire carries beyond the IP packet:
        // header, FCS, minimum frame, preamble and the 9.6 µs gap at 10 Mbit/s.
        if name != "wan" {
            profile.impair.framing = Some(Framing::Ethernet);
        }
        Ok(profile)
    }

    /// Whether delay, jitter or loss must be emulated (netem or netlab's emulator).
    pub fn needs_impairment(&self) -> bool {
        // Ethernet framing alone is tbf's overhead on a veth; netem's
        // overheads and cells are not.
        let plain = Impairments {
            framing: self.impair.framing.filter(|f| *f == Framing::Ethernet),
            ..Impairments::default()
        };
        self.delay_us > 0 || self.jitter_us > 0 || self.loss_pct > 0.0 || *self.impair != plain
    }

    /// Checks the whole profile.
    pub fn validate(&self) -> Result<(), LinkError> {
        if !(576..=65535).contains(&self.mtu) {
            return Err(LinkError::Mtu(self.mtu));
        }
        if self.jitter_us > self.delay_us {
            return Err(LinkError::JitterAboveDelay {
                jitter_us: self.jitter_us,
                delay_us: self.delay_us,
            });
        }
        if let Some(rate) = self.rate_bps
            && rate < u64::from(self.mtu) * 8
        {
            return Err(LinkError::Invalid(format!(
                "rate {} is below one {}-byte packet per second",
                format_rate(rate),
                self.mtu
            )));
        }
        if let Some(queue) = self.queue_bytes
            && queue < u64::from(self.mtu)
        {
            return Err(LinkError::Invalid(format!(
                "queue of {queue} B cannot hold one {}-byte packet",
                self.mtu
            )));
        }
        let i = &self.impair;
        if i.distribution != DelayDistribution::Uniform
            && (self.delay_us == 0 || self.jitter_us == 0)
        {
            return Err(LinkError::Netem(
                "distribution specified but no latency and jitter values".into(),
            ));
        }
        if i.reorder_gap > 0 && i.reorder_pct == 0.0 {
            return Err(LinkError::Netem(
                "gap specified without reorder probability".into(),
            ));
        }
        if i.reorder_pct > 0.0 && self.delay_us == 0 {
            return Err(LinkError::Netem(
                "reordering not possible without specifying some delay".into(),
            ));
        }
        if let Some(slot) = i.slot
            && slot.min_us > slot.max_us
        {
            return Err(LinkError::Netem(
                "slot min delay greater than max delay".into(),
            ));
        }
        if let Some(LossModel::FourState(s)) = i.loss_model
            && (s.p13_pct + s.p14_pct > 100.0 || s.p31_pct + s.p32_pct > 100.0)
        {
            return Err(LinkError::Netem(
                "loss state: a state's outgoing probabilities add up to more than 100% (p13 + p14, p31 + p32)".into(),
            ));
        }
        if i.loss_model.is_some() && self.loss_pct > 0.0 {
            return Err(LinkError::Invalid(
                "--loss and a netem loss model (state, gemodel) both given: give one".into(),
            ));
        }
        if (i.tx_queue.is_some() || i.tx_service_us > 0 || i.rx_min_gap_us > 0)
            && self.rate_bps.is_none()
        {
            return Err(LinkError::Invalid(
                "--tx-queue, --tx-service and --rx-min-gap model an interface on a wire: give a rate (--link ether10 or --link-rate)".into(),
            ));
        }
        if i.tx_queue == Some(0) {
            return Err(LinkError::Invalid(
                "--tx-queue 0: the interface must hold at least one frame".into(),
            ));
        }
        if i.tx_service_us > 0 && i.tx_queue.is_none() {
            return Err(LinkError::Invalid(
                "--tx-service needs --tx-queue (the service time is spent when the interface's queue is full)".into(),
            ));
        }
        Ok(())
    }

    /// A one-line description, e.g. `ether10: 10 Mbit/s, MTU 1500, queue 16 KB`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        parts.push(match self.rate_bps {
            Some(r) => format_rate(r),
            None => "unshaped".into(),
        });
        if self.delay_us > 0 {
            parts.push(format!("delay {} ms", self.delay_us as f64 / 1000.0));
        }
        if self.jitter_us > 0 {
            parts.push(format!("jitter ±{} ms", self.jitter_us as f64 / 1000.0));
        }
        if self.loss_pct > 0.0 {
            parts.push(format!("loss {}%", self.loss_pct));
        }
        parts.extend(describe_impairments(&self.impair));
        parts.push(format!("MTU {}", self.mtu));
        match self.impair.queue_discipline {
            Some(discipline) => parts.push(describe_discipline(&discipline)),
            None => {
                if let Some(q) = self.queue_bytes {
                    parts.push(format!("queue {} KB", q / 1024));
                }
            }
        }
        match &self.name {
            Some(name) => format!("{name}: {}", parts.join(", ")),
            None => parts.join(", "),
        }
    }
}

/// Formats bits per second as `10 Mbit/s`, `1 Gbit/s`, `3.5 Mbit/s`.
pub fn format_rate(bps: u64) -> String {
    let (value, unit) = if bps >= 1_000_000_000 {
        (bps as f64 / 1e9, "Gbit/s")
    } else if bps >= 1_000_000 {
        (bps as f64 / 1e6, "Mbit/s")
    } else {
        (bps as f64 / 1e3, "kbit/s")
    };
    format!("{} {unit}", (value * 1000.0).round() / 1000.0)
}

/// Parses a rate in bits per second: `10mbit`, `10M`, `1gbit`, `512kbit`,
/// `1500000` (bare number: bit/s). Decimal factors, as link rates are.
pub fn parse_rate(text: &str) -> Result<u64, LinkError> {
    let err = |reason: &str| LinkError::Rate(text.to_string(), reason.to_string());
    let lower = text.trim().to_ascii_lowercase();
    if lower.starts_with('-') {
        return Err(err("rates cannot be negative"));
    }
    let split = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(lower.len());
    let (number, suffix) = lower.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| err("expected a number with an optional unit (kbit, mbit, gbit)"))?;
    // `mbps` is deliberately refused: tc reads it as megabytes per second.
    let factor = match suffix.trim_end_matches("/s") {
        "" | "bit" | "b" => 1.0,
        "k" | "kbit" => 1e3,
        "m" | "mbit" => 1e6,
        "g" | "gbit" => 1e9,
        _ => return Err(err("unknown unit (use kbit, mbit or gbit)")),
    };
    let bps = value * factor;
    if !bps.is_finite() || bps < MIN_RATE as f64 || bps > MAX_RATE as f64 {
        return Err(err("must be from 1 kbit/s to 100 Gbit/s"));
    }
    Ok(bps.round() as u64)
}

/// Parses a delay or jitter (`10ms`, `0`, `1.5ms`), at most 10 s.
pub fn parse_delay(what: &'static str, text: &str) -> Result<u64, LinkError> {
    let err = |reason: String| LinkError::Time {
        what,
        text: text.to_string(),
        reason,
    };
    let trimmed = text.trim();
    if trimmed.starts_with('-') {
        return Err(err("cannot be negative".into()));
    }
    if trimmed == "0" {
        return Ok(0);
    }
    // humantime has no fractions; accept "1.5ms" by scaling to µs.
    let duration = if let Some(ms) = trimmed.strip_suffix("ms").filter(|m| m.contains('.')) {
        let v: f64 = ms.parse().map_err(|_| err("not a number".into()))?;
        Duration::from_secs_f64(v / 1000.0)
    } else {
        parse_duration(trimmed).map_err(|e| err(e.to_string()))?
    };
    if duration > MAX_DELAY {
        return Err(err("must be at most 10 s".into()));
    }
    Ok(duration.as_micros() as u64)
}

/// Parses a loss probability: `1%`, `0.5`, `100%`.
pub fn parse_loss(text: &str) -> Result<f64, LinkError> {
    let value: f64 = text
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| LinkError::Loss(text.to_string()))?;
    if !(0.0..=100.0).contains(&value) {
        return Err(LinkError::Loss(text.to_string()));
    }
    Ok(value)
}

/// A bottleneck queue as given: bytes (`16K`), packets (`1000p`) or the
/// time it takes to send at the link's rate (`200ms`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum QueueSize {
    Bytes(u64),
    Packets(u32),
    Time { us: u64 },
}

/// The most packets a queue may be given (Linux's fq_codel takes 10240 by
/// default; a million is far past any real buffer).
const MAX_QUEUE_PACKETS: u32 = 1_000_000;

/// Parses `--queue`: bytes (`16K`, `64000`), packets (`1000p`,
/// `1000packets`) or time at the link's rate (`200ms`).
pub fn parse_queue_size(text: &str) -> Result<QueueSize, LinkError> {
    let err = |reason: &str| LinkError::Queue(text.to_string(), reason.to_string());
    let trimmed = text.trim();
    if trimmed.starts_with('-') {
        return Err(err("a queue cannot be negative"));
    }
    let lower = trimmed.to_ascii_lowercase();
    let number_end = lower
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(lower.len());
    let (number, unit) = lower.split_at(number_end);
    if number.parse::<f64>().is_ok_and(|v| v == 0.0) {
        return Err(err(
            "a queue of 0 holds nothing: give at least one packet (1p), bytes (16K) or time (50ms)",
        ));
    }
    match unit.trim() {
        "p" | "pkt" | "pkts" | "packet" | "packets" => {
            let packets: u32 = number
                .parse()
                .map_err(|_| err("give a whole number of packets, e.g. 1000p"))?;
            if packets > MAX_QUEUE_PACKETS {
                return Err(err("at most 1000000 packets"));
            }
            Ok(QueueSize::Packets(packets))
        }
        "ms" | "s" | "us" | "µs" => Ok(QueueSize::Time {
            us: parse_delay("queue", trimmed)?,
        }),
        _ => Ok(QueueSize::Bytes(parse_queue(text)?)),
    }
}

/// The bottleneck queue's discipline by name, with its RFC's defaults
/// (and Linux's limits) and the queue `size` when one was given, at
/// `rate_bps` with packets of `mtu`.
pub fn queue_discipline(
    name: &str,
    size: Option<QueueSize>,
    rate_bps: u64,
    mtu: u32,
) -> Result<QueueDiscipline, LinkError> {
    let bytes_of = |size: QueueSize| -> Result<u64, LinkError> {
        match size {
            QueueSize::Bytes(b) => Ok(b),
            QueueSize::Packets(n) => Ok(u64::from(n) * u64::from(mtu)),
            QueueSize::Time { us } => time_queue_bytes(us, rate_bps, mtu),
        }
    };
    let packets_of = |default: u32| -> Result<u32, LinkError> {
        Ok(match size {
            None => default,
            Some(QueueSize::Packets(n)) => n,
            Some(other) => (bytes_of(other)? / u64::from(mtu)).max(1) as u32,
        })
    };
    let codel = crate::testbed::qdisc::codel::Params::default();
    let fq = crate::testbed::qdisc::fq_codel::Params::default();
    Ok(match name {
        name if name_is_droptail(name) => QueueDiscipline::DropTail {
            limit: match size {
                None => QueueLimit::Packets(DEFAULT_DROPTAIL_PACKETS),
                Some(QueueSize::Packets(n)) => QueueLimit::Packets(n),
                Some(other) => QueueLimit::Bytes(bytes_of(other)?),
            },
        },
        "codel" => QueueDiscipline::Codel {
            limit_packets: packets_of(DEFAULT_CODEL_PACKETS)?,
            target_us: codel.target_ns / 1000,
            interval_us: codel.interval_ns / 1000,
            ecn: codel.ecn,
        },
        "fq_codel" | "fq-codel" => QueueDiscipline::FqCodel(FqCodelQueue {
            limit_packets: packets_of(fq.limit as u32)?,
            flows: fq.flows as u32,
            quantum: fq.quantum,
            target_us: fq.codel.target_ns / 1000,
            interval_us: fq.codel.interval_ns / 1000,
            ecn: fq.codel.ecn,
        }),
        other => {
            return Err(LinkError::Invalid(format!(
                "--queue-discipline \"{other}\" is not one netlab has: droptail, codel (RFC 8289) or fq_codel (RFC 8290)"
            )));
        }
    })
}

fn name_is_droptail(name: &str) -> bool {
    matches!(name, "droptail" | "drop-tail" | "pfifo" | "bfifo")
}

/// A drop-tail queue's default: Linux's txqueuelen and pfifo limit.
pub const DEFAULT_DROPTAIL_PACKETS: u32 = 1000;
/// Linux's `codel` limit.
pub const DEFAULT_CODEL_PACKETS: u32 = 1000;

/// Bytes sent in `us` at `rate_bps`: at least one `mtu`-sized packet.
fn time_queue_bytes(us: u64, rate_bps: u64, mtu: u32) -> Result<u64, LinkError> {
    use crate::testbed::qdisc::droptail::Limit;
    match Limit::of_time(us as f64 / 1000.0, rate_bps, mtu as usize) {
        Ok(Limit::Bytes(bytes)) => Ok(bytes),
        Ok(Limit::Packets(n)) => Ok(n as u64 * u64::from(mtu)),
        Err(e) => Err(LinkError::Queue(
            format!("{} ms", us as f64 / 1000.0),
            e.to_string(),
        )),
    }
}

/// A discipline in words, for the link's description.
fn describe_discipline(d: &QueueDiscipline) -> String {
    let aqm = |target_us: u64, interval_us: u64, ecn: bool| {
        format!(
            "target {} ms, interval {} ms{}",
            target_us as f64 / 1000.0,
            interval_us as f64 / 1000.0,
            if ecn { ", ECN" } else { "" }
        )
    };
    match *d {
        QueueDiscipline::DropTail { limit } => match limit {
            QueueLimit::Packets(n) => format!("drop-tail queue {n} packets"),
            QueueLimit::Bytes(b) => format!("drop-tail queue {} KB", b / 1024),
        },
        QueueDiscipline::Codel {
            limit_packets,
            target_us,
            interval_us,
            ecn,
        } => format!(
            "CoDel (RFC 8289) {limit_packets} packets, {}",
            aqm(target_us, interval_us, ecn)
        ),
        QueueDiscipline::FqCodel(q) => format!(
            "FQ-CoDel (RFC 8290) {} flows, quantum {} B, {} packets, {}",
            q.flows,
            q.quantum,
            q.limit_packets,
            aqm(q.target_us, q.interval_us, q.ecn)
        ),
    }
}

/// Parses a queue size in bytes (`16K`, `64000`).
pub fn parse_queue(text: &str) -> Result<u64, LinkError> {
    let bytes = crate::units::parse_size(text)
        .map_err(|e| LinkError::Queue(text.to_string(), e.to_string()))?;
    if !(1500..=1 << 30).contains(&bytes) {
        return Err(LinkError::Queue(
            text.to_string(),
            "must hold at least one 1500-byte frame and at most 1 GiB".into(),
        ));
    }
    Ok(bytes)
}

/// A percentage, `25%` or `25`, from 0 to 100.
fn parse_pct(what: &str, text: &str) -> Result<f64, LinkError> {
    let value: f64 = text
        .trim_end_matches('%')
        .parse()
        .map_err(|_| LinkError::Netem(format!("{what} \"{text}\" is not a percentage")))?;
    if !(0.0..=100.0).contains(&value) || !value.is_finite() {
        return Err(LinkError::Netem(format!("{what} {text} is outside 0-100%")));
    }
    Ok(value)
}

/// Whether a netem token is a percentage (a bare number or `N%`); times
/// always carry a unit here, so `10ms 2ms 25%` reads as delay, jitter and
/// correlation as tc reads it.
fn is_pct(token: &str) -> bool {
    token.trim_end_matches('%').parse::<f64>().is_ok()
}

fn is_time(token: &str) -> bool {
    token.starts_with(|c: char| c.is_ascii_digit()) && !is_pct(token)
}

/// Applies netem's impairment syntax (tc-netem(8)) to `profile`:
/// `delay TIME [JITTER [CORR]]`, `distribution uniform|normal|pareto|paretonormal`,
/// `loss [random] PCT [CORR]`, `loss state P13 [P31 [P32 [P23 [P14]]]]`,
/// `loss gemodel P [R [1-H [1-K]]]`, `duplicate PCT [CORR]`,
/// `corrupt PCT [CORR]`, `reorder PCT [CORR]`, `gap N`,
/// `rate RATE [PACKETOVERHEAD [CELLSIZE [CELLOVERHEAD]]]`,
/// `slot MIN [MAX] [packets N] [bytes N]`. Defaults as tc's. A value
/// also given by its own option (`--delay` and `delay`) is refused.
pub fn apply_netem(
    profile: &mut LinkProfile,
    text: &str,
    given: &LinkOverrides,
) -> Result<(), LinkError> {
    let mut words = Words {
        tokens: text.split_whitespace().collect(),
        at: 0,
    };
    if words.tokens.is_empty() {
        return Err(LinkError::Netem("nothing given".into()));
    }
    let twice = |what: &str, option: &str| {
        LinkError::Netem(format!("{what} given twice ({option} and --netem {what})"))
    };
    while let Some(word) = words.take() {
        let impair = &mut profile.impair;
        match word {
            "delay" | "latency" => {
                if given.delay.is_some() {
                    return Err(twice("delay", "--delay"));
                }
                profile.delay_us = parse_delay("netem delay", words.next("delay")?)?;
                if let Some(jitter) = words.take_if(is_time) {
                    if given.jitter.is_some() {
                        return Err(twice("jitter", "--jitter"));
                    }
                    profile.jitter_us = parse_delay("netem jitter", jitter)?;
                    if let Some(corr) = words.optional_pct("delay correlation")? {
                        impair.delay_correlation_pct = corr;
                    }
                }
            }
            "distribution" => impair.distribution = distribution(words.next("distribution")?)?,
            "loss" | "drop" => {
                if given.loss.is_some() {
                    return Err(twice("loss", "--loss"));
                }
                netem_loss(&mut words, profile)?;
            }
            "duplicate" => {
                let (pct, corr) = words.pct_and_correlation("duplicate")?;
                impair.duplicate_pct = pct;
                impair.duplicate_correlation_pct = corr.unwrap_or(impair.duplicate_correlation_pct);
            }
            "corrupt" => {
                let (pct, corr) = words.pct_and_correlation("corrupt")?;
                impair.corrupt_pct = pct;
                impair.corrupt_correlation_pct = corr.unwrap_or(impair.corrupt_correlation_pct);
            }
            "reorder" => {
                let (pct, corr) = words.pct_and_correlation("reorder")?;
                impair.reorder_pct = pct;
                impair.reorder_correlation_pct = corr.unwrap_or(impair.reorder_correlation_pct);
            }
            "gap" => impair.reorder_gap = count("gap", words.next("gap")?)?,
            "rate" => {
                if given.rate.is_some() {
                    return Err(twice("rate", "--link-rate"));
                }
                profile.rate_bps = Some(parse_rate(words.next("rate")?)?);
                if let Some(framing) = netem_rate_framing(&mut words)? {
                    profile.impair.framing = Some(framing);
                }
            }
            "slot" => impair.slot = Some(netem_slot(&mut words)?),
            "limit" => {
                return Err(LinkError::Netem(
                    "netem's limit counts packets: give the queue in bytes with --queue".into(),
                ));
            }
            other => {
                return Err(LinkError::Netem(format!(
                    "unknown or unsupported word \"{other}\" (delay, distribution, loss, duplicate, corrupt, reorder, gap, rate, slot)"
                )));
            }
        }
    }
    Ok(())
}

/// The words of a netem specification and how far they have been read.
struct Words<'a> {
    tokens: Vec<&'a str>,
    at: usize,
}

impl<'a> Words<'a> {
    /// The next word, if any.
    fn take(&mut self) -> Option<&'a str> {
        let word = self.tokens.get(self.at).copied()?;
        self.at += 1;
        Some(word)
    }

    /// The next word if it is of the kind `is`.
    fn take_if(&mut self, is: impl Fn(&str) -> bool) -> Option<&'a str> {
        let word = self.tokens.get(self.at).copied().filter(|w| is(w))?;
        self.at += 1;
        Some(word)
    }

    fn peek(&self) -> Option<&'a str> {
        self.tokens.get(self.at).copied()
    }

    /// The value `what` needs.
    fn next(&mut self, what: &str) -> Result<&'a str, LinkError> {
        self.take()
            .ok_or_else(|| LinkError::Netem(format!("{what} needs a value")))
    }

    /// A percentage, if the next word is one.
    fn optional_pct(&mut self, what: &str) -> Result<Option<f64>, LinkError> {
        self.take_if(is_pct).map(|t| parse_pct(what, t)).transpose()
    }

    /// `PCT [CORR]`, as duplicate, corrupt and reorder take them.
    fn pct_and_correlation(&mut self, what: &str) -> Result<(f64, Option<f64>), LinkError> {
        let pct = parse_pct(what, self.next(what)?)?;
        let corr = self.optional_pct(&format!("{what} correlation"))?;
        Ok((pct, corr))
    }
}

fn count(what: &str, text: &str) -> Result<u32, LinkError> {
    text.parse::<u32>()
        .map_err(|_| LinkError::Netem(format!("{what} \"{text}\" is not a count")))
}

fn distribution(name: &str) -> Result<DelayDistribution, LinkError> {
    Ok(match name {
        "uniform" => DelayDistribution::Uniform,
        "normal" => DelayDistribution::Normal,
        "pareto" => DelayDistribution::Pareto,
        "paretonormal" => DelayDistribution::Paretonormal,
        other => {
            return Err(LinkError::Netem(format!(
                "unknown distribution \"{other}\" (uniform, normal, pareto, paretonormal)"
            )));
        }
    })
}

/// `loss [random] PCT [CORR]`, `loss state P13 [P31 [P32 [P23 [P14]]]]` or
/// `loss gemodel P [R [1-H [1-K]]]`, with tc's defaults.
fn netem_loss(words: &mut Words, profile: &mut LinkProfile) -> Result<(), LinkError> {
    let impair = &mut profile.impair;
    match words.peek() {
        Some("state") => {
            words.take();
            let p13 = parse_pct("loss state p13", words.next("loss state")?)?;
            let p31 = words.optional_pct("loss state p31")?.unwrap_or(100.0 - p13);
            let p32 = words.optional_pct("loss state p32")?.unwrap_or(0.0);
            let p23 = words.optional_pct("loss state p23")?.unwrap_or(100.0);
            let p14 = words.optional_pct("loss state p14")?.unwrap_or(0.0);
            impair.loss_model = Some(LossModel::FourState(FourStateLoss {
                p13_pct: p13,
                p31_pct: p31,
                p32_pct: p32,
                p23_pct: p23,
                p14_pct: p14,
            }));
        }
        Some("gemodel") | Some("gmodel") => {
            words.take();
            let p = parse_pct("loss gemodel p", words.next("loss gemodel")?)?;
            let r = words.optional_pct("loss gemodel r")?.unwrap_or(100.0 - p);
            let bad = words.optional_pct("loss gemodel 1-h")?.unwrap_or(100.0);
            let good = words.optional_pct("loss gemodel 1-k")?.unwrap_or(0.0);
            impair.loss_model = Some(LossModel::GilbertElliott {
                p_pct: p,
                r_pct: r,
                bad_loss_pct: bad,
                good_loss_pct: good,
            });
        }
        Some(other) => {
            if other == "random" {
                words.take();
            }
            profile.loss_pct = parse_pct("loss", words.next("loss")?)?;
            if let Some(corr) = words.optional_pct("loss correlation")? {
                profile.impair.loss_correlation_pct = corr;
            }
        }
        None => return Err(LinkError::Netem("loss needs a value".into())),
    }
    Ok(())
}

/// The framing after `rate RATE`: `[PACKETOVERHEAD [CELLSIZE [CELLOVERHEAD]]]`.
fn netem_rate_framing(words: &mut Words) -> Result<Option<Framing>, LinkError> {
    let mut numbers = Vec::new();
    while numbers.len() < 3 {
        match words.take_if(|t| t.parse::<i64>().is_ok()) {
            Some(t) => numbers.push(t.parse::<i64>().expect("checked")),
            None => break,
        }
    }
    if numbers.is_empty() {
        return Ok(None);
    }
    let field = |k: usize| numbers.get(k).copied().unwrap_or(0);
    let to_i32 = |v: i64, what: &str| {
        i32::try_from(v).map_err(|_| LinkError::Netem(format!("{what} {v} is out of range")))
    };
    if field(1) < 0 {
        return Err(LinkError::Netem("a cell size cannot be negative".into()));
    }
    Ok(Some(Framing::Overhead {
        packet: to_i32(field(0), "packet overhead")?,
        cell_size: u32::try_from(field(1))
            .map_err(|_| LinkError::Netem(format!("cell size {} is out of range", field(1))))?,
        cell_overhead: to_i32(field(2), "cell overhead")?,
    }))
}

/// `slot MIN [MAX] [packets N] [bytes N]`.
fn netem_slot(words: &mut Words) -> Result<Slot, LinkError> {
    let min = words.next("slot")?;
    if min == "distribution" {
        return Err(LinkError::Netem(
            "slot distribution is not supported: give slot MIN MAX".into(),
        ));
    }
    let min_us = parse_delay("slot min", min)?;
    let max_us = match words.take_if(is_time) {
        Some(max) => parse_delay("slot max", max)?,
        None => min_us,
    };
    let mut slot = Slot {
        min_us,
        max_us,
        packets: 0,
        bytes: 0,
    };
    loop {
        match words.peek() {
            Some("packets") => {
                words.take();
                slot.packets = count("slot packets", words.next("slot packets")?)?;
            }
            Some("bytes") => {
                words.take();
                slot.bytes = count("slot bytes", words.next("slot bytes")?)?;
            }
            _ => break,
        }
    }
    Ok(slot)
}

/// A loss model's transition percentages in words.
fn loss_model_words(model: Option<LossModel>) -> Option<String> {
    match model {
        Some(LossModel::GilbertElliott {
            p_pct,
            r_pct,
            bad_loss_pct,
            good_loss_pct,
        }) => Some(format!(
            "Gilbert-Elliott loss (p {p_pct}%, r {r_pct}%, 1-h {bad_loss_pct}%, 1-k {good_loss_pct}%)"
        )),
        Some(LossModel::FourState(s)) => Some(format!(
            "4-state loss (p13 {}%, p31 {}%, p32 {}%, p23 {}%, p14 {}%)",
            s.p13_pct, s.p31_pct, s.p32_pct, s.p23_pct, s.p14_pct
        )),
        None => None,
    }
}

/// The link's framing overhead and its slots, in words.
fn framing_and_slot_words(i: &Impairments) -> Vec<String> {
    let mut parts = Vec::new();
    match i.framing {
        Some(Framing::Ethernet) => parts.push("Ethernet framing".into()),
        Some(Framing::Overhead {
            packet,
            cell_size,
            cell_overhead,
        }) => parts.push(format!(
            "overhead {packet} B/packet, cells {cell_size} B + {cell_overhead} B"
        )),
        None => {}
    }
    if let Some(slot) = i.slot {
        parts.push(format!(
            "slots every {}-{} ms (≤ {} packets, ≤ {} B)",
            slot.min_us as f64 / 1000.0,
            slot.max_us as f64 / 1000.0,
            if slot.packets == 0 {
                "any".to_string()
            } else {
                slot.packets.to_string()
            },
            if slot.bytes == 0 {
                "any".to_string()
            } else {
                slot.bytes.to_string()
            },
        ));
    }
    parts
}

/// The impairments in words, for the link's one-line description.
fn describe_impairments(i: &Impairments) -> Vec<String> {
    let mut parts = Vec::new();
    let corr = |c: f64| {
        if c > 0.0 {
            format!(" (corr. {c}%)")
        } else {
            String::new()
        }
    };
    if i.distribution != DelayDistribution::Uniform {
        parts.push(format!("{:?} delays", i.distribution).to_lowercase());
    }
    if i.delay_correlation_pct > 0.0 {
        let rho = i.delay_correlation_pct / 100.0;
        parts.push(format!(
            "delay corr. {}% (netem's correlation: the spread shrinks to {:.0}%)",
            i.delay_correlation_pct,
            ((1.0 - rho) / (1.0 + rho)).sqrt() * 100.0
        ));
    }
    if i.jitter_reorders {
        parts.push("jitter reorders".into());
    }
    if i.loss_correlation_pct > 0.0 {
        parts.push(format!(
            "loss corr. {}% (netem's correlation: the loss rate falls far below the setting, docs/TESTBED.md)",
            i.loss_correlation_pct
        ));
    }
    parts.extend(loss_model_words(i.loss_model));
    if i.duplicate_pct > 0.0 {
        parts.push(format!(
            "duplicate {}%{}",
            i.duplicate_pct,
            corr(i.duplicate_correlation_pct)
        ));
    }
    if i.corrupt_pct > 0.0 {
        parts.push(format!(
            "corrupt {}%{}",
            i.corrupt_pct,
            corr(i.corrupt_correlation_pct)
        ));
    }
    if i.reorder_pct > 0.0 {
        parts.push(format!(
            "reorder {}%{} gap {}",
            i.reorder_pct,
            corr(i.reorder_correlation_pct),
            i.reorder_gap.max(1)
        ));
    }
    parts.extend(framing_and_slot_words(i));
    if let Some(n) = i.tx_queue {
        parts.push(format!("tx queue {n}, service {} µs", i.tx_service_us));
    }
    if i.rx_min_gap_us > 0 {
        parts.push(format!(
            "receiver needs {} µs between frames",
            i.rx_min_gap_us
        ));
    }
    parts
}

/// A link as a user gives it: a named profile (or none) and overrides of
/// its parameters, each as typed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkOverrides {
    pub profile: Option<String>,
    pub rate: Option<String>,
    pub delay: Option<String>,
    pub jitter: Option<String>,
    pub loss: Option<String>,
    pub mtu: Option<i64>,
    pub queue: Option<String>,
    /// The bottleneck queue's discipline: droptail, codel, fq_codel.
    pub queue_discipline: Option<String>,
    /// netem's impairment syntax, e.g. `delay 10ms 2ms 25% distribution normal`.
    pub netem: Option<String>,
    /// Let jitter reorder packets (netem without a rate).
    pub jitter_reorders: bool,
    pub tx_queue: Option<i64>,
    pub tx_service: Option<String>,
    pub rx_min_gap: Option<String>,
    /// The emulator spins instead of sleeping.
    pub emulator_spin: bool,
    /// The emulator's CPU.
    pub emulator_cpu: Option<usize>,
    /// Wire-sized packets through the emulator even when unimpaired.
    pub emulator_wire_packets: bool,
}

impl LinkProfile {
    /// The named profile (or the default link) with each given parameter
    /// replacing its own, validated. A link with neither a name nor a rate
    /// of its own is anonymous.
    pub fn with_overrides(given: &LinkOverrides) -> Result<LinkProfile, LinkError> {
        let mut profile = match &given.profile {
            Some(name) => LinkProfile::named(name)?,
            None => LinkProfile::default(),
        };
        if let Some(rate) = &given.rate {
            profile.rate_bps = Some(parse_rate(rate)?);
        }
        if let Some(delay) = &given.delay {
            profile.delay_us = parse_delay("delay", delay)?;
        }
        if let Some(jitter) = &given.jitter {
            profile.jitter_us = parse_delay("jitter", jitter)?;
        }
        if let Some(loss) = &given.loss {
            profile.loss_pct = parse_loss(loss)?;
        }
        if let Some(mtu) = given.mtu {
            profile.mtu = u32::try_from(mtu)
                .map_err(|_| LinkError::Mtu(if mtu < 0 { 0 } else { u32::MAX }))?;
        }
        let queue = given.queue.as_deref().map(parse_queue_size).transpose()?;
        if let Some(netem) = &given.netem {
            apply_netem(&mut profile, netem, given)?;
        }
        match queue {
            Some(QueueSize::Bytes(bytes)) => profile.queue_bytes = Some(bytes),
            Some(QueueSize::Packets(n)) => {
                profile.queue_bytes = Some(u64::from(n) * u64::from(profile.mtu))
            }
            Some(QueueSize::Time { us }) => {
                let Some(rate) = profile.rate_bps else {
                    return Err(LinkError::Queue(
                        given.queue.clone().unwrap_or_default(),
                        "a queue in time needs the link's rate (--link-rate or a named link)"
                            .into(),
                    ));
                };
                profile.queue_bytes = Some(time_queue_bytes(us, rate, profile.mtu)?);
            }
            None => {}
        }
        if let Some(name) = &given.queue_discipline {
            profile.impair.queue_discipline =
                Some(Self::discipline_of(&mut profile, name, queue, given)?);
        }
        if given.jitter_reorders {
            if profile.jitter_us == 0 {
                return Err(LinkError::Invalid(
                    "--jitter-reorders needs jitter (--jitter, or --netem delay D J)".into(),
                ));
            }
            profile.impair.jitter_reorders = true;
        }
        if let Some(n) = given.tx_queue {
            profile.impair.tx_queue = Some(u32::try_from(n).map_err(|_| {
                LinkError::Invalid(format!(
                    "--tx-queue {n}: give a number of frames, 1 or more"
                ))
            })?);
        }
        if let Some(t) = &given.tx_service {
            profile.impair.tx_service_us = parse_delay("--tx-service", t)?;
        }
        if let Some(t) = &given.rx_min_gap {
            profile.impair.rx_min_gap_us = parse_delay("--rx-min-gap", t)?;
        }
        profile.emulator.spin = given.emulator_spin;
        profile.emulator.wire_packets = given.emulator_wire_packets;
        if let Some(cpu) = given.emulator_cpu {
            let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
            if cpu >= cpus {
                return Err(LinkError::Invalid(format!(
                    "--emulator-cpu {cpu}: this host has CPUs 0 to {}",
                    cpus - 1
                )));
            }
            profile.emulator.cpu = Some(cpu);
        }
        if given.profile.is_none() && given.rate.is_none() {
            profile.name = None;
        }
        profile.validate()?;
        Ok(profile)
    }

    /// `--queue-discipline NAME` on `profile`'s rate: drop-tail takes the
    /// named link's buffer when no `--queue` is given, an AQM its own limit
    /// (and the drop-tail buffer is dropped).
    fn discipline_of(
        profile: &mut LinkProfile,
        name: &str,
        queue: Option<QueueSize>,
        given: &LinkOverrides,
    ) -> Result<QueueDiscipline, LinkError> {
        let Some(rate) = profile.rate_bps else {
            return Err(LinkError::Invalid(format!(
                "--queue-discipline {name}: a queue forms in front of the link's rate; give one (--link-rate or a named link)"
            )));
        };
        if given.tx_queue.is_some() || given.tx_service.is_some() {
            return Err(LinkError::Invalid(
                "--queue-discipline and --tx-queue/--tx-service: the interface's queue would be the discipline's; give one".into(),
            ));
        }
        if name_is_droptail(name) {
            // Without --queue, the named link's buffer is its drop-tail queue.
            let size = queue.or(profile.queue_bytes.map(QueueSize::Bytes));
            queue_discipline(name, size, rate, profile.mtu)
        } else {
            if queue.is_none() {
                // An AQM keeps its own limit in packets, not the named
                // link's drop-tail buffer.
                profile.queue_bytes = None;
            }
            queue_discipline(name, queue, rate, profile.mtu)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_profiles() {
        let e = LinkProfile::named("ether10").unwrap();
        assert_eq!(e.rate_bps, Some(10_000_000));
        assert_eq!(e.mtu, 1500);
        assert!(!e.needs_impairment());
        let w = LinkProfile::named("wan").unwrap();
        assert_eq!(w.delay_us, 20_000);
        assert!(w.needs_impairment());
        assert_eq!(
            LinkProfile::named("token-ring"),
            Err(LinkError::UnknownProfile("token-ring".into()))
        );
        assert_eq!(
            e.describe(),
            "ether10: 10 Mbit/s, Ethernet framing, MTU 1500, queue 16 KB"
        );
        assert_eq!(e.impair.framing, Some(Framing::Ethernet));
        assert_eq!(w.impair.framing, None);
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("10mbit"), Ok(10_000_000));
        assert_eq!(parse_rate("10M"), Ok(10_000_000));
        assert_eq!(parse_rate("1gbit"), Ok(1_000_000_000));
        assert_eq!(parse_rate("3.5mbit"), Ok(3_500_000));
        assert_eq!(parse_rate("512kbit"), Ok(512_000));
        assert_eq!(parse_rate("10mbit/s"), Ok(10_000_000));
        assert!(parse_rate("10Mbps").is_err());
        assert!(parse_rate("-10mbit").is_err());
        assert!(parse_rate("0").is_err());
        assert!(parse_rate("999gbit").is_err());
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("10furlongs").is_err());
    }

    #[test]
    fn delays_loss_queue_mtu() {
        assert_eq!(parse_delay("delay", "10ms"), Ok(10_000));
        assert_eq!(parse_delay("delay", "1.5ms"), Ok(1_500));
        assert_eq!(parse_delay("delay", "0"), Ok(0));
        assert!(parse_delay("delay", "-5ms").is_err());
        assert!(parse_delay("delay", "1h").is_err());
        assert_eq!(parse_loss("1%"), Ok(1.0));
        assert_eq!(parse_loss("0.5"), Ok(0.5));
        assert!(parse_loss("101%").is_err());
        assert!(parse_loss("-1").is_err());
        assert_eq!(parse_queue("16K"), Ok(16384));
        assert!(parse_queue("100").is_err());
        let mut p = LinkProfile {
            mtu: 500,
            ..Default::default()
        };
        assert_eq!(p.validate(), Err(LinkError::Mtu(500)));
        p.mtu = 70000;
        assert_eq!(p.validate(), Err(LinkError::Mtu(70000)));
        p.mtu = 1500;
        p.jitter_us = 10;
        assert!(p.validate().is_err());
        p.delay_us = 10;
        assert!(p.validate().is_ok());
    }

    #[test]
    fn rate_formatting() {
        assert_eq!(format_rate(10_000_000), "10 Mbit/s");
        assert_eq!(format_rate(1_000_000_000), "1 Gbit/s");
        assert_eq!(format_rate(3_500_000), "3.5 Mbit/s");
        assert_eq!(format_rate(512_000), "512 kbit/s");
    }

    #[test]
    fn overrides_replace_the_named_profile_s_values() {
        let given = LinkOverrides {
            profile: Some("ether10".into()),
            delay: Some("5ms".into()),
            mtu: Some(1280),
            ..LinkOverrides::default()
        };
        let p = LinkProfile::with_overrides(&given).unwrap();
        assert_eq!(p.name.as_deref(), Some("ether10"));
        assert_eq!(p.rate_bps, Some(10_000_000));
        assert_eq!((p.delay_us, p.mtu), (5000, 1280));
        // No name and no rate: an anonymous link.
        let p = LinkProfile::with_overrides(&LinkOverrides {
            loss: Some("1%".into()),
            ..LinkOverrides::default()
        })
        .unwrap();
        assert_eq!((p.name, p.loss_pct), (None, 1.0));
        for mtu in [-1, 500, 1 << 40] {
            let given = LinkOverrides {
                mtu: Some(mtu),
                ..LinkOverrides::default()
            };
            assert!(matches!(
                LinkProfile::with_overrides(&given),
                Err(LinkError::Mtu(_))
            ));
        }
    }

    fn netem(spec: &str) -> Result<LinkProfile, LinkError> {
        LinkProfile::with_overrides(&LinkOverrides {
            netem: Some(spec.into()),
            ..LinkOverrides::default()
        })
    }

    #[test]
    fn netem_words_read_as_tc_reads_them() {
        let p = netem("delay 10ms 2ms 25% distribution normal loss 1% 30% duplicate 2% corrupt 0.1% reorder 25% 50% gap 5 rate 10mbit 24 slot 1ms 3ms packets 8 bytes 4000").unwrap();
        assert_eq!((p.delay_us, p.jitter_us), (10_000, 2_000));
        let i = &p.impair;
        assert_eq!(i.delay_correlation_pct, 25.0);
        assert_eq!(i.distribution, DelayDistribution::Normal);
        assert_eq!((p.loss_pct, i.loss_correlation_pct), (1.0, 30.0));
        assert_eq!((i.duplicate_pct, i.corrupt_pct), (2.0, 0.1));
        assert_eq!(
            (i.reorder_pct, i.reorder_correlation_pct, i.reorder_gap),
            (25.0, 50.0, 5)
        );
        assert_eq!(p.rate_bps, Some(10_000_000));
        assert_eq!(
            i.framing,
            Some(Framing::Overhead {
                packet: 24,
                cell_size: 0,
                cell_overhead: 0
            })
        );
        assert_eq!(
            i.slot,
            Some(Slot {
                min_us: 1000,
                max_us: 3000,
                packets: 8,
                bytes: 4000
            })
        );
        // Loss models with tc's defaults: Bernoulli from one parameter.
        let ge = netem("loss gemodel 1%").unwrap();
        assert_eq!(
            ge.impair.loss_model,
            Some(LossModel::GilbertElliott {
                p_pct: 1.0,
                r_pct: 99.0,
                bad_loss_pct: 100.0,
                good_loss_pct: 0.0
            })
        );
        let gi = netem("loss state 2% 30%").unwrap();
        assert_eq!(
            gi.impair.loss_model,
            Some(LossModel::FourState(FourStateLoss {
                p13_pct: 2.0,
                p31_pct: 30.0,
                p32_pct: 0.0,
                p23_pct: 100.0,
                p14_pct: 0.0
            }))
        );
        assert_eq!(netem("loss random 3%").unwrap().loss_pct, 3.0);
        // A netem delay makes the link impaired; Ethernet framing alone does not.
        assert!(netem("delay 1ms").unwrap().needs_impairment());
        assert!(!LinkProfile::named("ether10").unwrap().needs_impairment());
    }

    #[test]
    fn queues_in_bytes_packets_or_time() {
        assert_eq!(parse_queue_size("16K"), Ok(QueueSize::Bytes(16384)));
        assert_eq!(parse_queue_size("1000p"), Ok(QueueSize::Packets(1000)));
        assert_eq!(parse_queue_size("64 packets"), Ok(QueueSize::Packets(64)));
        assert_eq!(
            parse_queue_size("200ms"),
            Ok(QueueSize::Time { us: 200_000 })
        );
        for zero in ["0", "0p", "0ms", "0K"] {
            let e = parse_queue_size(zero).unwrap_err().to_string();
            assert!(e.contains("a queue of 0 holds nothing"), "{zero}: {e}");
        }
        assert!(parse_queue_size("-5p").is_err());
        assert!(parse_queue_size("1.5p").is_err());
        assert!(parse_queue_size("2000000p").is_err());
        let link = |queue: &str, discipline: Option<&str>| {
            LinkProfile::with_overrides(&LinkOverrides {
                rate: Some("50mbit".into()),
                queue: Some(queue.into()),
                queue_discipline: discipline.map(String::from),
                ..LinkOverrides::default()
            })
        };
        // 200 ms at 50 Mbit/s: 1.25 MB.
        assert_eq!(link("200ms", None).unwrap().queue_bytes, Some(1_250_000));
        assert_eq!(link("100p", None).unwrap().queue_bytes, Some(150_000));
        // Less than a packet's time at the rate.
        let e = link("0.1ms", None).unwrap_err().to_string();
        assert!(e.contains("less than one 1500-byte packet"), "{e}");
        // A time needs a rate.
        let e = LinkProfile::with_overrides(&LinkOverrides {
            queue: Some("50ms".into()),
            ..LinkOverrides::default()
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("needs the link's rate"), "{e}");
    }

    #[test]
    fn disciplines_take_their_rfc_defaults_and_the_queue_given() {
        let link = |given: LinkOverrides| LinkProfile::with_overrides(&given);
        let rated = |discipline: &str, queue: Option<&str>| LinkOverrides {
            rate: Some("50mbit".into()),
            queue: queue.map(String::from),
            queue_discipline: Some(discipline.into()),
            ..LinkOverrides::default()
        };
        let d = |p: LinkProfile| p.impair.queue_discipline.unwrap();
        assert_eq!(
            d(link(rated("droptail", None)).unwrap()),
            QueueDiscipline::DropTail {
                limit: QueueLimit::Packets(1000)
            }
        );
        assert_eq!(
            d(link(rated("droptail", Some("250ms"))).unwrap()),
            QueueDiscipline::DropTail {
                limit: QueueLimit::Bytes(1_562_500)
            }
        );
        // The named link's buffer is its drop-tail queue...
        let wan = LinkOverrides {
            profile: Some("wan".into()),
            queue_discipline: Some("droptail".into()),
            ..LinkOverrides::default()
        };
        assert_eq!(
            d(link(wan.clone()).unwrap()),
            QueueDiscipline::DropTail {
                limit: QueueLimit::Bytes(512 << 10)
            }
        );
        // ...but an AQM keeps its own limit.
        let wan_fq = link(LinkOverrides {
            queue_discipline: Some("fq_codel".into()),
            ..wan
        })
        .unwrap();
        assert_eq!(
            d(wan_fq.clone()),
            QueueDiscipline::FqCodel(FqCodelQueue {
                limit_packets: 10_240,
                flows: 1024,
                quantum: 1514,
                target_us: 5000,
                interval_us: 100_000,
                ecn: true
            })
        );
        assert_eq!(wan_fq.queue_bytes, None);
        assert!(
            wan_fq.describe().contains("FQ-CoDel (RFC 8290)"),
            "{}",
            wan_fq.describe()
        );
        assert!(wan_fq.needs_impairment());
        match d(link(rated("codel", Some("300K"))).unwrap()) {
            QueueDiscipline::Codel { limit_packets, .. } => assert_eq!(limit_packets, 204),
            other => panic!("{other:?}"),
        }
        // Refusals name the problem.
        let e = link(rated("red", None)).unwrap_err().to_string();
        assert!(
            e.contains("droptail, codel (RFC 8289) or fq_codel (RFC 8290)"),
            "{e}"
        );
        let e = link(LinkOverrides {
            queue_discipline: Some("fq_codel".into()),
            ..LinkOverrides::default()
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("in front of the link's rate"), "{e}");
        let e = link(LinkOverrides {
            tx_queue: Some(1),
            ..rated("codel", None)
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("--tx-queue"), "{e}");
        let e = link(rated("droptail", Some("0p"))).unwrap_err().to_string();
        assert!(e.contains("a queue of 0"), "{e}");
    }

    #[test]
    fn netem_refusals_name_the_problem() {
        for (spec, message) in [
            ("", "nothing given"),
            ("delay", "delay needs a value"),
            ("delay 10ms distribution normal", "no latency and jitter"),
            ("delay 1ms gap 3", "gap specified without reorder"),
            ("reorder 5%", "without specifying some delay"),
            ("slot 2ms 1ms", "slot min delay greater"),
            ("loss 101%", "outside 0-100%"),
            ("loss lots", "is not a percentage"),
            ("duplicate 5% corrupt", "corrupt needs a value"),
            ("rate 10mbit 24 -1", "cell size cannot be negative"),
            ("limit 1000", "--queue"),
            (
                "slot distribution normal",
                "slot distribution is not supported",
            ),
            ("loss state 80% 10% 10% 100% 30%", "more than 100%"),
            ("ecn", "unknown or unsupported word"),
        ] {
            let e = netem(spec).unwrap_err().to_string();
            assert!(e.contains(message), "{spec:?}: {e}");
        }
        let twice = LinkProfile::with_overrides(&LinkOverrides {
            loss: Some("1%".into()),
            netem: Some("loss 2%".into()),
            ..LinkOverrides::default()
        })
        .unwrap_err();
        assert!(twice.to_string().contains("loss given twice"), "{twice}");
    }

    #[test]
    fn limits_that_no_packet_fits_are_refused() {
        let slow = LinkOverrides {
            rate: Some("10kbit".into()),
            ..LinkOverrides::default()
        };
        let e = LinkProfile::with_overrides(&slow).unwrap_err().to_string();
        assert!(e.contains("below one 1500-byte packet per second"), "{e}");
        let small = LinkOverrides {
            mtu: Some(9000),
            queue: Some("8K".into()),
            ..LinkOverrides::default()
        };
        let e = LinkProfile::with_overrides(&small).unwrap_err().to_string();
        assert!(e.contains("cannot hold one 9000-byte packet"), "{e}");
    }
}
