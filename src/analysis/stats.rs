//! Summaries of repeated measurements: every figure netlab prints from more
//! than one run carries its spread.

use crate::record::stats::Spread;
use statrs::distribution::{ContinuousCDF, StudentsT};

/// Indices drawn for a bootstrap by a fixed xorshift generator, so a report
/// rebuilt from the same records draws the same resamples.
pub struct Draws(u64);

impl Default for Draws {
    fn default() -> Self {
        Draws(0x2545_F491_4F6C_DD1D)
    }
}

impl Draws {
    /// An index below `n` (which must not be 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

use crate::record::stats::median_interval;

/// The interval's half-width relative to the median, e.g. 0.05 for ±5%.
pub fn relative_half_width(samples: &[f64], level: f64) -> Option<f64> {
    let (lo, hi) = median_interval(samples, level)?;
    let median = Spread::of(samples)?.median;
    (median > 0.0).then(|| (hi - lo) / 2.0 / median)
}

/// The mean of `samples` and the half-width of its Student's t confidence
/// interval at `level` (0.99 for 99%): netperf's `-I`. None for fewer than
/// two samples.
pub fn mean_interval(samples: &[f64], level: f64) -> Option<(f64, f64)> {
    let n = samples.len();
    if n < 2 || !(level > 0.0 && level < 1.0) {
        return None;
    }
    let mean = samples.iter().sum::<f64>() / n as f64;
    let variance = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let t = StudentsT::new(0.0, 1.0, (n - 1) as f64)
        .ok()?
        .inverse_cdf(1.0 - (1.0 - level) / 2.0);
    Some((mean, t * (variance / n as f64).sqrt()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mean_interval_is_students_t() {
        // 10, 12, 14: mean 12, s = 2, s/sqrt(3) = 1.1547; t(0.975, 2) = 4.3027.
        let (mean, half) = mean_interval(&[10.0, 12.0, 14.0], 0.95).unwrap();
        assert!((mean - 12.0).abs() < 1e-12);
        assert!((half - 4.3027 * 2.0 / 3f64.sqrt()).abs() < 1e-3, "{half}");
        assert_eq!(mean_interval(&[5.0], 0.95), None);
        assert_eq!(mean_interval(&[5.0, 5.0], 0.99), Some((5.0, 0.0)));
    }

    #[test]
    fn the_median_interval_takes_the_order_statistics_the_binomial_allows() {
        // Five runs cannot give 95%: even min..max covers the median with
        // probability 1 - 2/32 = 93.75%.
        assert_eq!(median_interval(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.95), None);
        assert_eq!(
            median_interval(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.90),
            Some((1.0, 5.0))
        );
        // Six: P(B <= 0) = 1/64 <= 2.5%, P(B <= 1) = 7/64 > 2.5%: min..max.
        let six = [6.0, 1.0, 5.0, 2.0, 4.0, 3.0];
        assert_eq!(median_interval(&six, 0.95), Some((1.0, 6.0)));
        // Twenty: P(B <= 5) = 2.07% <= 2.5% < P(B <= 6) = 5.77%: the 6th
        // smallest and the 6th largest (Le Boudec's table: n = 20, 6..15).
        let twenty: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(median_interval(&twenty, 0.95), Some((6.0, 15.0)));
        // Relative half-width: (15 - 6) / 2 / 10.5.
        let w = relative_half_width(&twenty, 0.95).unwrap();
        assert!((w - 4.5 / 10.5).abs() < 1e-12);
        assert_eq!(median_interval(&[f64::NAN; 8], 0.95), None);
        assert_eq!(median_interval(&[], 0.95), None);
    }

    #[test]
    fn odd_even_and_empty() {
        let s = Spread::of(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.min, s.median, s.max, s.n), (1.0, 2.0, 3.0, 3));
        let s = Spread::of(&[4.0, 1.0, 2.0, 3.0]).unwrap();
        assert_eq!(s.median, 2.5);
        assert!(Spread::of(&[]).is_none());
        assert_eq!(Spread::of(&[f64::NAN, 5.0]).unwrap().n, 1);
        assert!(
            (Spread::of(&[90.0, 100.0, 110.0])
                .unwrap()
                .relative_spread_pct()
                - 10.0)
                .abs()
                < 1e-9
        );
    }
}
