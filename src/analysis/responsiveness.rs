//! Responsiveness under working conditions, as draft-ietf-ippm-responsiveness
//! (-06, the working group's text in github.com/network-quality/
//! draft-ietf-ippm-responsiveness) computes it: the test's parameters by
//! the draft's names and defaults, the single-sided trimmed mean, RPM
//! (round trips per minute) from foreign and self probes, the stability
//! rule that declares goodput and then responsiveness saturated, the
//! confidence of a result, the draft's four tiers, and the bufferbloat
//! grade (A+ to F) from the latency added under load, with DSLReports'
//! thresholds (www.dslreports.com/faq/17930, the grades Waveform's and
//! LibreQoS's tests use too).
//!
//! Pure arithmetic over samples in milliseconds and per-interval figures;
//! the experiment measures, this module reads.

/// The draft this module implements.
pub const DRAFT: &str = "draft-ietf-ippm-responsiveness-06";

/// The test's parameters ("Test Parameters" in the draft), by its names;
/// records carry them as run.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Params {
    /// MAD: Moving Average Distance, intervals in a moving average.
    pub mad: usize,
    /// ID: Interval Duration, seconds between stability checks.
    pub id_s: f64,
    /// TMP: Trimmed Mean Percentage kept (the top 5% trimmed).
    pub tmp: f64,
    /// SDT: Standard Deviation Tolerance for stability.
    pub sdt: f64,
    /// INP: load-generating connections at the start.
    pub inp: usize,
    /// INC: connections added each interval.
    pub inc: usize,
    /// MNP: Maximum Number of Parallel load-generating connections.
    pub mnp: usize,
    /// MPS: Maximum Probes per Second (pairs of foreign and self probes).
    pub mps: u32,
    /// PTC: Percentage of Total Capacity the probes may use.
    pub ptc: f64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            mad: 4,
            id_s: 1.0,
            tmp: 0.95,
            sdt: 0.05,
            inp: 1,
            inc: 1,
            mnp: 16,
            mps: 100,
            ptc: 0.05,
        }
    }
}

/// The draft's estimate of the bytes a foreign probe exchanges (TCP and
/// TLS overheads included) and of a self probe's.
pub const FOREIGN_PROBE_BYTES: f64 = 5000.0;
pub const SELF_PROBE_BYTES: f64 = 1000.0;

impl Params {
    /// Probe pairs per second on a path of `capacity_bps`: MPS, or fewer
    /// where the pairs would take more than PTC of the capacity.
    pub fn probe_pairs_per_s(&self, capacity_bps: f64) -> f64 {
        let by_capacity = self.ptc * capacity_bps / 8.0 / (FOREIGN_PROBE_BYTES + SELF_PROBE_BYTES);
        f64::from(self.mps).min(by_capacity.max(0.0))
    }
}

/// The single-sided trimmed mean: the mean of the samples at or below the
/// `keep` percentile (the largest `1 - keep` trimmed, whole samples only,
/// at least one kept). None for no samples.
pub fn trimmed_mean(samples: &[f64], keep: f64) -> Option<f64> {
    if samples.is_empty() {
        return None;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let kept = ((sorted.len() as f64 * keep).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[..kept].iter().sum::<f64>() / kept as f64)
}

/// Round trips per minute of a round trip of `ms` milliseconds.
pub fn rpm_of_ms(ms: f64) -> f64 {
    60_000.0 / ms
}

/// RPM as the draft computes it without TLS ("For the TCP-Only Case").
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rpm {
    /// 60000 / ((TM(tcp_f) + TM(http_f)) / 2): new connections.
    pub foreign: f64,
    /// 60000 / TM(http_l): requests on the loaded connections.
    pub loaded: f64,
    /// (foreign + loaded) / 2: the responsiveness.
    pub combined: f64,
}

/// The trimmed means of each probe's times, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeMeans {
    /// TM(tcp_f): a foreign probe's TCP handshake.
    pub tcp_f: f64,
    /// TM(http_f): a foreign probe's request and response.
    pub http_f: f64,
    /// TM(http_l): a self probe's request and response.
    pub http_l: f64,
}

impl ProbeMeans {
    /// The trimmed means of the samples (ms); None when a kind has none.
    pub fn of(tcp_f: &[f64], http_f: &[f64], http_l: &[f64], keep: f64) -> Option<ProbeMeans> {
        Some(ProbeMeans {
            tcp_f: trimmed_mean(tcp_f, keep)?,
            http_f: trimmed_mean(http_f, keep)?,
            http_l: trimmed_mean(http_l, keep)?,
        })
    }

    pub fn rpm(&self) -> Rpm {
        let foreign = rpm_of_ms((self.tcp_f + self.http_f) / 2.0);
        let loaded = rpm_of_ms(self.http_l);
        Rpm {
            foreign,
            loaded,
            combined: (foreign + loaded) / 2.0,
        }
    }
}

/// The draft's responsiveness categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    /// Under 300 RPM (a working round trip over 200 ms).
    Poor,
    /// 300 to 1000 RPM (60 to 200 ms).
    Fair,
    /// 1000 to 6000 RPM (10 to 60 ms).
    Good,
    /// 6000 RPM and over (10 ms and under).
    Excellent,
}

impl Tier {
    pub fn of_rpm(rpm: f64) -> Tier {
        if rpm >= 6000.0 {
            Tier::Excellent
        } else if rpm >= 1000.0 {
            Tier::Good
        } else if rpm >= 300.0 {
            Tier::Fair
        } else {
            Tier::Poor
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Tier::Poor => "Poor",
            Tier::Fair => "Fair",
            Tier::Good => "Good",
            Tier::Excellent => "Excellent",
        }
    }
}

/// A bufferbloat grade, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Grade {
    APlus,
    A,
    B,
    C,
    D,
    F,
}

/// Each grade's bound on the latency added under load (ms, exclusive):
/// A+ under 5, A under 30, B under 60, C under 200, D under 400, F beyond
/// (DSLReports' bufferbloat grades; there is no E).
pub const GRADE_BOUNDS_MS: [(Grade, f64); 5] = [
    (Grade::APlus, 5.0),
    (Grade::A, 30.0),
    (Grade::B, 60.0),
    (Grade::C, 200.0),
    (Grade::D, 400.0),
];

impl Grade {
    /// The grade of `added_ms`, the working latency less the idle one.
    pub fn of_added_ms(added_ms: f64) -> Grade {
        GRADE_BOUNDS_MS
            .iter()
            .find(|(_, bound)| added_ms < *bound)
            .map_or(Grade::F, |(grade, _)| *grade)
    }

    pub fn name(self) -> &'static str {
        match self {
            Grade::APlus => "A+",
            Grade::A => "A",
            Grade::B => "B",
            Grade::C => "C",
            Grade::D => "D",
            Grade::F => "F",
        }
    }

    /// How many grades better `self` is than `other` (negative: worse).
    pub fn steps_above(self, other: Grade) -> i32 {
        other as i32 - self as i32
    }
}

/// The mean of the last `mad` values (fewer at the start).
pub fn moving_average(values: &[f64], mad: usize) -> Option<f64> {
    let window = &values[values.len().saturating_sub(mad.max(1))..];
    (!window.is_empty()).then(|| window.iter().sum::<f64>() / window.len() as f64)
}

/// The draft's stability rule over a series of per-interval values (the
/// moving averages of goodput, or the responsiveness of each interval):
/// stable once the standard deviation (population) of the last MAD values
/// is within SDT of the latest.
#[derive(Debug, Clone, Default)]
pub struct Stability {
    values: Vec<f64>,
}

impl Stability {
    pub fn push(&mut self, value: f64) {
        self.values.push(value);
    }

    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// Whether the last MAD values are within SDT of the latest.
    pub fn stable(&self, params: &Params) -> bool {
        let mad = params.mad.max(1);
        if self.values.len() < mad {
            return false;
        }
        let window = &self.values[self.values.len() - mad..];
        let current = *window.last().expect("MAD values");
        let mean = window.iter().sum::<f64>() / mad as f64;
        let variance = window.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / mad as f64;
        variance.sqrt() < params.sdt * current.abs()
    }

    /// The draft's confidence in a stage that ran these intervals.
    pub fn confidence(&self, params: &Params) -> Confidence {
        if self.values.len() < params.mad.max(1) {
            Confidence::Low
        } else if self.stable(params) {
            Confidence::High
        } else {
            Confidence::Medium
        }
    }
}

/// The draft's confidence in a result ("Confidence of Test-Results").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Confidence {
    /// Fewer than MAD intervals ran: the moving average is not full.
    Low,
    /// MAD intervals or more, never stable within SDT.
    Medium,
    /// Stable within SDT.
    High,
}

impl Confidence {
    pub fn name(self) -> &'static str {
        match self {
            Confidence::Low => "Low",
            Confidence::Medium => "Medium",
            Confidence::High => "High",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_trimmed_mean_drops_only_the_top_five_percent() {
        // 20 samples: the largest (an outlier) is trimmed.
        let mut samples: Vec<f64> = (1..=19).map(f64::from).collect();
        samples.push(1000.0);
        assert_eq!(trimmed_mean(&samples, 0.95), Some(10.0));
        // 10 samples: 5% is half a sample, nothing trimmed.
        let ten: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(trimmed_mean(&ten, 0.95), Some(5.5));
        // Single-sided: a low outlier stays.
        let mut low: Vec<f64> = vec![0.001];
        low.extend(std::iter::repeat_n(10.0, 19));
        assert!(trimmed_mean(&low, 0.95).unwrap() < 10.0);
        assert_eq!(trimmed_mean(&[7.0], 0.95), Some(7.0));
        assert_eq!(trimmed_mean(&[], 0.95), None);
    }

    proptest! {
        #[test]
        fn the_trimmed_mean_lies_between_the_least_sample_and_the_mean(
            samples in proptest::collection::vec(0.01f64..10_000.0, 1..300),
        ) {
            let tm = trimmed_mean(&samples, 0.95).unwrap();
            let mean = samples.iter().sum::<f64>() / samples.len() as f64;
            let least = samples.iter().copied().fold(f64::INFINITY, f64::min);
            prop_assert!(tm >= least - 1e-9 && tm <= mean + 1e-9, "{tm} not in {least}..{mean}");
        }
    }

    #[test]
    fn rpm_follows_the_draft_s_tcp_only_formula() {
        let means = ProbeMeans {
            tcp_f: 10.0,
            http_f: 20.0,
            http_l: 50.0,
        };
        let rpm = means.rpm();
        assert_eq!(rpm.foreign, 4000.0); // 60000 / ((10 + 20) / 2)
        assert_eq!(rpm.loaded, 1200.0); // 60000 / 50
        assert_eq!(rpm.combined, 2600.0);
        assert_eq!(rpm_of_ms(200.0), 300.0);
    }

    #[test]
    fn tiers_and_grades_at_their_thresholds() {
        assert_eq!(Tier::of_rpm(299.9), Tier::Poor);
        assert_eq!(Tier::of_rpm(300.0), Tier::Fair);
        assert_eq!(Tier::of_rpm(999.0), Tier::Fair);
        assert_eq!(Tier::of_rpm(1000.0), Tier::Good);
        assert_eq!(Tier::of_rpm(5999.0), Tier::Good);
        assert_eq!(Tier::of_rpm(6000.0), Tier::Excellent);
        for (ms, grade) in [
            (0.0, "A+"),
            (4.99, "A+"),
            (5.0, "A"),
            (29.9, "A"),
            (30.0, "B"),
            (59.9, "B"),
            (60.0, "C"),
            (199.0, "C"),
            (200.0, "D"),
            (399.0, "D"),
            (400.0, "F"),
            (5000.0, "F"),
        ] {
            assert_eq!(Grade::of_added_ms(ms).name(), grade, "{ms} ms");
        }
        assert_eq!(Grade::B.steps_above(Grade::D), 2);
        assert_eq!(Grade::F.steps_above(Grade::APlus), -5);
    }

    #[test]
    fn stability_needs_mad_values_within_sdt_of_the_latest() {
        let params = Params::default();
        let mut s = Stability::default();
        for v in [100.0, 100.0, 100.0] {
            s.push(v);
        }
        // Three values: the moving window is not full.
        assert!(!s.stable(&params));
        assert_eq!(s.confidence(&params), Confidence::Low);
        s.push(101.0);
        assert!(s.stable(&params));
        assert_eq!(s.confidence(&params), Confidence::High);
        // Still climbing by 20% an interval: not saturated.
        let mut ramp = Stability::default();
        for v in [10.0, 12.0, 14.4, 17.3, 20.7, 24.9] {
            ramp.push(v);
        }
        assert!(!ramp.stable(&params));
        assert_eq!(ramp.confidence(&params), Confidence::Medium);
    }

    proptest! {
        #[test]
        fn a_series_within_a_percent_of_its_level_is_stable(level in 1.0f64..1e9, wobble in proptest::collection::vec(-0.01f64..0.01, 4..20)) {
            let mut s = Stability::default();
            for w in &wobble {
                s.push(level * (1.0 + w));
            }
            prop_assert!(s.stable(&Params::default()));
        }
    }

    #[test]
    fn probes_take_at_most_ptc_of_a_slow_path() {
        let params = Params::default();
        // 50 Mbit/s: 5% is 312,500 B/s, 52 pairs of 6000 bytes.
        let pairs = params.probe_pairs_per_s(50e6);
        assert!((pairs - 52.08).abs() < 0.01, "{pairs}");
        // 10 Gbit/s: MPS caps it.
        assert_eq!(params.probe_pairs_per_s(10e9), 100.0);
        assert_eq!(moving_average(&[1.0, 2.0, 3.0, 4.0, 5.0], 4), Some(3.5));
        assert_eq!(moving_average(&[2.0], 4), Some(2.0));
        assert_eq!(moving_average(&[], 4), None);
    }
}
