//! The fixed + per-byte cost model: `time(R) = fixed + per_byte · R`.
//!
//! Van Jacobson budgeted per packet this way (a fixed cost per packet plus a
//! variable cost per byte); Hockney called the two numbers n½ and r∞ (the
//! size at which half the peak rate is reached is `fixed / per_byte`, the
//! peak rate `1 / per_byte`).
//!
//! Fit: weighted least squares with weights `1/time²`, i.e. minimising the
//! *relative* residuals. Sizes in a sweep span four or more decades; an
//! ordinary fit would be decided by the largest sizes alone and would
//! estimate the fixed cost, which only small sizes reveal, very poorly.
//! Quality is reported as the weighted R² and the largest relative residual,
//! so a curve that is not linear (cache effects, a cliff) shows up as a poor
//! fit rather than a silently wrong model.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CostModel {
    /// Fixed cost per unit of work (seconds, when times are seconds).
    pub fixed: f64,
    /// Cost per byte.
    pub per_byte: f64,
    /// Weighted coefficient of determination (1 = perfect).
    pub r_squared: f64,
    /// Largest |measured - model| / measured over the points.
    pub max_relative_residual: f64,
    pub points: usize,
}

impl CostModel {
    /// Predicted time for `size` bytes.
    pub fn time(&self, size: f64) -> f64 {
        self.fixed + self.per_byte * size
    }

    /// Peak rate, bytes per unit time (`None` when per-byte cost is not positive).
    pub fn peak_rate(&self) -> Option<f64> {
        (self.per_byte > 0.0).then(|| 1.0 / self.per_byte)
    }

    /// Size at which half the peak rate is reached (Hockney's n½).
    pub fn half_rate_size(&self) -> Option<f64> {
        (self.per_byte > 0.0 && self.fixed > 0.0).then(|| self.fixed / self.per_byte)
    }
}

/// Fits `(size, time)` points. `None` with fewer than two distinct sizes or
/// non-positive times.
pub fn fit(points: &[(f64, f64)]) -> Option<CostModel> {
    let points: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(x, y)| x.is_finite() && y.is_finite() && *y > 0.0)
        .collect();
    if points.len() < 2 {
        return None;
    }
    let (mut sw, mut swx, mut swy, mut swxx, mut swxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(x, y) in &points {
        let w = 1.0 / (y * y);
        sw += w;
        swx += w * x;
        swy += w * y;
        swxx += w * x * x;
        swxy += w * x * y;
    }
    let det = sw * swxx - swx * swx;
    if det.abs() <= f64::EPSILON * sw * swxx {
        return None;
    }
    let per_byte = (sw * swxy - swx * swy) / det;
    let fixed = (swy - per_byte * swx) / sw;
    let mean = swy / sw;
    let (mut ss_res, mut ss_tot, mut max_rel) = (0.0, 0.0, 0.0f64);
    for &(x, y) in &points {
        let w = 1.0 / (y * y);
        let residual = y - (fixed + per_byte * x);
        ss_res += w * residual * residual;
        ss_tot += w * (y - mean) * (y - mean);
        max_rel = max_rel.max((residual / y).abs());
    }
    let r_squared = if ss_tot > 0.0 {
        1.0 - ss_res / ss_tot
    } else {
        1.0
    };
    Some(CostModel {
        fixed,
        per_byte,
        r_squared,
        max_relative_residual: max_rel,
        points: points.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovers_an_exact_line() {
        let points: Vec<(f64, f64)> = (6..=20)
            .map(|k| {
                let r = (1u64 << k) as f64;
                (r, 2e-6 + 3e-10 * r)
            })
            .collect();
        let m = fit(&points).unwrap();
        assert!((m.fixed - 2e-6).abs() < 1e-12, "{m:?}");
        assert!((m.per_byte - 3e-10).abs() < 1e-16, "{m:?}");
        assert!(m.r_squared > 0.999_999);
        assert!(m.max_relative_residual < 1e-9);
        assert!((m.half_rate_size().unwrap() - 2e-6 / 3e-10).abs() < 1e-3);
        assert!((m.peak_rate().unwrap() - 1.0 / 3e-10).abs() / (1.0 / 3e-10) < 1e-9);
    }

    #[test]
    fn small_sizes_still_determine_the_fixed_cost_under_noise() {
        // ±3% alternating noise: the relative weighting keeps the fixed cost within ~5%.
        let points: Vec<(f64, f64)> = (6..=20)
            .map(|k| {
                let r = (1u64 << k) as f64;
                let noise = if k % 2 == 0 { 1.03 } else { 0.97 };
                (r, (1e-6 + 1e-10 * r) * noise)
            })
            .collect();
        let m = fit(&points).unwrap();
        assert!((m.fixed / 1e-6 - 1.0).abs() < 0.05, "{m:?}");
        assert!((m.per_byte / 1e-10 - 1.0).abs() < 0.05, "{m:?}");
        assert!(m.max_relative_residual > 0.02 && m.max_relative_residual < 0.08);
    }

    #[test]
    fn a_curve_that_is_not_a_line_fits_badly_and_says_so() {
        let points: Vec<(f64, f64)> = (1..=12).map(|k| (k as f64, (k * k * k) as f64)).collect();
        let m = fit(&points).unwrap();
        assert!(m.max_relative_residual > 0.5, "{m:?}");
    }

    #[test]
    fn degenerate_inputs() {
        assert!(fit(&[]).is_none());
        assert!(fit(&[(1.0, 1.0)]).is_none());
        assert!(fit(&[(1.0, 1.0), (1.0, 2.0)]).is_none());
        assert!(fit(&[(1.0, 0.0), (2.0, -1.0)]).is_none());
    }
}
