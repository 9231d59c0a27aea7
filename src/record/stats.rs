//! The spread of repeated measurements: min, median, max, and the median's
//! 95% interval where the runs allow one. One type for every figure netlab
//! prints from more than one run, in records, `--json` and the report.

use serde::{Deserialize, Serialize};
use statrs::distribution::{Binomial, DiscreteCDF};

/// Minimum, median and maximum of a set of runs, and the median's 95%
/// interval ([`median_interval`]; none with fewer than 6 runs, and in
/// records before 2026-12-03).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub n: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<[f64; 2]>,
}

/// A distribution-free confidence interval for the median of what was
/// sampled: the k-th smallest and the k-th largest of the n samples, k the
/// largest with P(Binomial(n, 1/2) < k) <= (1 - level) / 2 (the order
/// statistics interval: Le Boudec, *Performance Evaluation of Computer and
/// Communication Systems*, 2010, Theorem 2.1). It assumes only independent
/// runs, not a normal distribution, which run times rarely follow. None
/// when n is too small for the level (fewer than 6 runs at 95%) or a
/// sample is not a number.
pub fn median_interval(samples: &[f64], level: f64) -> Option<(f64, f64)> {
    let n = samples.len();
    if n == 0 || samples.iter().any(|x| x.is_nan()) || !(level > 0.0 && level < 1.0) {
        return None;
    }
    let tail = (1.0 - level) / 2.0;
    let binomial = Binomial::new(0.5, n as u64).ok()?;
    // P(B < k) = P(B <= k - 1); the largest k (1-based) whose tail fits.
    let k = (1..=n / 2)
        .take_while(|&k| binomial.cdf(k as u64 - 1) <= tail)
        .last()?;
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    Some((sorted[k - 1], sorted[n - k]))
}

impl Spread {
    /// `None` for an empty set; non-finite values are ignored.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = crate::measure::median_of_sorted(&v)?;
        Some(Spread {
            min: v[0],
            median,
            max: v[n - 1],
            n,
            interval: median_interval(&v, 0.95).map(|(lo, hi)| [lo, hi]),
        })
    }

    /// Every field multiplied by `factor` (a unit's change; positive).
    pub fn scaled(self, factor: f64) -> Spread {
        Spread {
            min: self.min * factor,
            median: self.median * factor,
            max: self.max * factor,
            n: self.n,
            interval: self.interval.map(|[lo, hi]| [lo * factor, hi * factor]),
        }
    }

    /// The interval a reader should hold the median to: its 95% interval,
    /// or with too few runs for one, their range.
    pub fn bounds(&self) -> [f64; 2] {
        self.interval.unwrap_or([self.min, self.max])
    }

    /// Half the range relative to the median, in percent: a quick noise figure.
    pub fn relative_spread_pct(&self) -> f64 {
        if self.median == 0.0 {
            0.0
        } else {
            50.0 * (self.max - self.min) / self.median.abs()
        }
    }
}
