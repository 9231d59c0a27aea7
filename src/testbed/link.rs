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

pub use crate::record::testbed::LinkProfile;
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
}

const MAX_DELAY: Duration = Duration::from_secs(10);
const MIN_RATE: u64 = 1_000;
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
        Ok(LinkProfile {
            name: Some(name.to_string()),
            rate_bps: Some(rate),
            delay_us: delay_ms * 1000,
            queue_bytes: Some(queue),
            ..Default::default()
        })
    }

    /// Whether delay, jitter or loss must be emulated (netem or netlab's emulator).
    pub fn needs_impairment(&self) -> bool {
        self.delay_us > 0 || self.jitter_us > 0 || self.loss_pct > 0.0
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
        parts.push(format!("MTU {}", self.mtu));
        if let Some(q) = self.queue_bytes {
            parts.push(format!("queue {} KB", q / 1024));
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
        if let Some(queue) = &given.queue {
            profile.queue_bytes = Some(parse_queue(queue)?);
        }
        if given.profile.is_none() && given.rate.is_none() {
            profile.name = None;
        }
        profile.validate()?;
        Ok(profile)
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
        assert_eq!(e.describe(), "ether10: 10 Mbit/s, MTU 1500, queue 16 KB");
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
}
