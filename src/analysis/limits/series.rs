//! What the run's samples of the sender's TCP_INFO say, read once for
//! every family: the delivery rate's plateau, the round trip's rise over
//! `min_rtt` while the flow ran, and the share of the run spent in loss
//! recovery. Samples are the user's `--interval`s or the verdict's own
//! (taken at the sender's clock checks, outside its write loop's work).

use super::evidence::*;
use super::thresholds::*;
use std::collections::BTreeMap;

/// The first share of the run is left out of the plateau: slow start or
/// bbr's startup, when the rate is still being found.
pub const SETTLING: f64 = 0.25;

/// A plateau needs at least this many settled samples.
pub const PLATEAU_SAMPLES: usize = 4;

/// The settled samples' interquartile range over their median must be at
/// most this for a plateau.
pub const PLATEAU_SPREAD: f64 = 0.3;

/// The later half of the settled samples may sit at most this much above
/// the earlier half (a rate still rising is no plateau yet).
pub const STILL_RISING: f64 = 1.25;

/// The delivery rate's plateau: the settled samples' median.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plateau {
    pub rate_bps: f64,
    /// Interquartile range over median.
    pub spread: f64,
    pub samples: usize,
}

/// The samples, read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Series {
    /// How many samples there were.
    pub samples: usize,
    pub plateau: Option<Plateau>,
    /// The settled samples' spread, plateau or not.
    pub spread: Option<f64>,
    /// The settled samples' median smoothed RTT, ms.
    pub rtt_median_ms: Option<f64>,
    /// The share of samples (with a `tcpi_ca_state`) taken in recovery
    /// or loss: the share of the run spent recovering.
    pub recovery_share: Option<f64>,
    /// The largest congestion window any sample or the end saw, segments.
    pub max_cwnd: u32,
    /// The settled samples' median window over its round trip, bits/s:
    /// a sawtooth's typical window, where the end's one reading may have
    /// caught it at a peak or just after a cut.
    pub window_rate_bps: Option<f64>,
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let at = q * (sorted.len() - 1) as f64;
    let (low, high) = (at.floor() as usize, at.ceil() as usize);
    sorted[low] + (sorted[high] - sorted[low]) * (at - low as f64)
}

fn median(values: &[f64]) -> Option<f64> {
    crate::record::stats::Spread::of(values).map(|s| s.median)
}

impl Series {
    pub fn of(flow: &FlowEvidence, tcp: &SenderTcp) -> Series {
        let all = flow.series();
        let end = all.iter().map(|s| s.end_s).fold(0.0, f64::max);
        let settled: Vec<&IntervalEvidence> = all
            .iter()
            .filter(|s| s.end_s >= SETTLING * end && s.app_limited != Some(true))
            .collect();
        let rates: Vec<f64> = settled
            .iter()
            .filter_map(|s| s.delivery_rate_bps)
            .filter(|r| r.is_finite() && *r > 0.0)
            .collect();
        let mut sorted = rates.clone();
        sorted.sort_by(f64::total_cmp);
        let spread = (sorted.len() >= 2).then(|| {
            let mid = quantile(&sorted, 0.5).max(1.0);
            (quantile(&sorted, 0.75) - quantile(&sorted, 0.25)) / mid
        });
        let plateau = (rates.len() >= PLATEAU_SAMPLES)
            .then(|| {
                let half = rates.len() / 2;
                let earlier = median(&rates[..half])?;
                let later = median(&rates[half..])?;
                let spread = spread?;
                (spread <= PLATEAU_SPREAD && later <= STILL_RISING * earlier).then(|| Plateau {
                    rate_bps: quantile(&sorted, 0.5),
                    spread,
                    samples: rates.len(),
                })
            })
            .flatten();
        let rtts: Vec<f64> = settled
            .iter()
            .filter_map(|s| s.rtt_us)
            .filter(|&r| r > 0)
            .map(|r| f64::from(r) / 1e3)
            .collect();
        let windows: Vec<f64> = settled
            .iter()
            .filter(|s| s.cwnd > 0 && s.rtt_us.is_some_and(|r| r > 0))
            .map(|s| {
                f64::from(s.cwnd) * f64::from(tcp.snd_mss) * 8.0
                    / (f64::from(s.rtt_us.unwrap_or(1)) / 1e6)
            })
            .collect();
        let states: Vec<u8> = all.iter().filter_map(|s| s.ca_state).collect();
        let recovering = states.iter().filter(|&&s| s >= CA_RECOVERY).count();
        Series {
            samples: all.len(),
            plateau,
            spread,
            rtt_median_ms: median(&rtts),
            recovery_share: (!states.is_empty()).then(|| recovering as f64 / states.len() as f64),
            max_cwnd: all
                .iter()
                .map(|s| s.cwnd)
                .chain([tcp.snd_cwnd])
                .max()
                .unwrap_or(0),
            window_rate_bps: (windows.len() >= PLATEAU_SAMPLES && tcp.snd_mss > 0)
                .then(|| median(&windows))
                .flatten(),
        }
    }

    /// The queueing delay the flow built while it ran: the settled
    /// samples' median RTT over `min_rtt`, ms, when it is at least
    /// [`QUEUE_MIN_MS`] and [`QUEUE_SHARE`] of that RTT.
    pub fn queue_ms(&self, tcp: &SenderTcp) -> Option<f64> {
        let min = f64::from(tcp.min_rtt_us?) / 1e3;
        let rtt = self.rtt_median_ms.unwrap_or(f64::from(tcp.srtt_us) / 1e3);
        let rise = rtt - min;
        (rise >= QUEUE_MIN_MS && rise >= QUEUE_SHARE * rtt).then_some(rise)
    }

    /// The samples' figures, as evidence.
    pub fn evidence(&self, evidence: &mut BTreeMap<String, f64>) {
        if self.samples == 0 {
            return;
        }
        evidence.insert("samples".into(), self.samples as f64);
        if let Some(p) = self.plateau {
            evidence.insert("delivery_rate_plateau_mbit_s".into(), p.rate_bps / 1e6);
        }
        if let Some(s) = self.spread {
            evidence.insert("delivery_rate_spread".into(), s);
        }
        if let Some(r) = self.rtt_median_ms {
            evidence.insert("rtt_median_ms".into(), r);
        }
        if let Some(r) = self.recovery_share {
            evidence.insert("recovery_time_pct".into(), 100.0 * r);
        }
    }
}
