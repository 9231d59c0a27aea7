//! The spread of repeated measurements: min, median, max.

use serde::{Deserialize, Serialize};

/// Minimum, median and maximum of a set of runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub min: f64,
    pub median: f64,
    pub max: f64,
    pub n: usize,
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
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Some(Spread {
            min: v[0],
            median,
            max: v[n - 1],
            n,
        })
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
