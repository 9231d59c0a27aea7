//! Where a throughput-vs-size curve stops paying for bigger units of work.
//!
//! Method: the knee is the **smallest size whose throughput reaches a stated
//! fraction (default 90%) of the plateau**, the plateau being the highest
//! throughput measured. It is chosen over a curvature (second-difference)
//! method because measured curves are noisy and often not monotone (cache
//! effects make loopback throughput fall again at large records); a
//! threshold on the measured values is robust to both, needs no smoothing,
//! and reads directly as Van Jacobson's rule of thumb: units of work should be
//! the smallest that amortise the fixed cost; beyond the knee a bigger unit
//! buys at most `1 - fraction` more throughput.
//!
//! For the cost model `time(R) = a + b·R` the throughput is `R / (a + b·R)`,
//! the plateau `1/b`, and the fraction-`f` point `R = f/(1-f) · a/b`
//! (9·a/b at 90%); the tests check the function against that closed form.

use serde::{Deserialize, Serialize};

/// The default fraction of the plateau that defines the knee.
pub const DEFAULT_FRACTION: f64 = 0.9;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Knee {
    /// The size at the knee.
    pub size: f64,
    /// The throughput measured at that size.
    pub throughput: f64,
    /// The highest throughput measured (the plateau).
    pub plateau: f64,
    /// Size at which the plateau was measured.
    pub plateau_size: f64,
    /// The fraction of the plateau that defined the knee.
    pub fraction: f64,
}

/// Finds the knee of `(size, throughput)` points (any order). `None` when
/// there are fewer than two points or no positive throughput.
pub fn find_knee(points: &[(f64, f64)], fraction: f64) -> Option<Knee> {
    let mut sorted: Vec<(f64, f64)> = points
        .iter()
        .copied()
        .filter(|(s, t)| s.is_finite() && t.is_finite())
        .collect();
    if sorted.len() < 2 {
        return None;
    }
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let &(plateau_size, plateau) = sorted.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
    if plateau <= 0.0 {
        return None;
    }
    let &(size, throughput) = sorted.iter().find(|(_, t)| *t >= fraction * plateau)?;
    Some(Knee {
        size,
        throughput,
        plateau,
        plateau_size,
        fraction,
    })
}

/// The knee from the fitted cost model: the size at which a record's
/// fixed cost has fallen to `1 - fraction` of its time (so throughput is
/// `fraction` of the peak), `f/(1-f) · fixed/per_byte`, with an interval
/// from the repetitions.
///
/// Why the model rather than the measured curve: the threshold on measured
/// points picks whichever size happens to clear it first, so one outlier
/// (a dip at 32-64K, a jump at 1M) moves the knee across decades; the
/// model uses every size at once, weighted by relative error
/// ([`crate::analysis::costmodel`]), and its knee moves only as far as the
/// repetitions let the fit move. The interval is a percentile bootstrap
/// (Efron and Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 13):
/// each resample draws, for every size, its runs with replacement and
/// takes their median; the fit's knee over the resamples gives the 2.5th
/// and 97.5th percentiles.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ModelKnee {
    pub size: f64,
    /// 95% bootstrap interval.
    pub low: f64,
    pub high: f64,
    pub fraction: f64,
    pub resamples: usize,
}

/// The model's knee: `f/(1-f) · fixed/per_byte` (None without a positive
/// fixed and per-byte cost).
pub fn model_knee_size(
    model: &crate::analysis::costmodel::CostModel,
    fraction: f64,
) -> Option<f64> {
    (model.fixed > 0.0 && model.per_byte > 0.0 && fraction > 0.0 && fraction < 1.0)
        .then(|| fraction / (1.0 - fraction) * model.fixed / model.per_byte)
}

/// [`ModelKnee`] of `runs`: for each size, the time per record of every
/// repetition. Deterministic (a fixed generator seed).
pub fn model_knee(runs: &[(f64, Vec<f64>)], fraction: f64, resamples: usize) -> Option<ModelKnee> {
    let median = |v: &[f64]| crate::record::stats::Spread::of(v).map(|s| s.median);
    let points: Vec<(f64, f64)> = runs
        .iter()
        .filter_map(|(s, t)| Some((*s, median(t)?)))
        .collect();
    let size = model_knee_size(&crate::analysis::costmodel::fit(&points)?, fraction)?;
    let mut draws = crate::analysis::stats::Draws::default();
    let mut next = |n: usize| draws.below(n);
    let mut knees = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        let resampled: Vec<(f64, f64)> = runs
            .iter()
            .filter(|(_, t)| !t.is_empty())
            .filter_map(|(s, t)| {
                let draw: Vec<f64> = (0..t.len()).map(|_| t[next(t.len())]).collect();
                Some((*s, median(&draw)?))
            })
            .collect();
        if let Some(k) =
            crate::analysis::costmodel::fit(&resampled).and_then(|m| model_knee_size(&m, fraction))
        {
            knees.push(k);
        }
    }
    if knees.is_empty() {
        return None;
    }
    knees.sort_by(f64::total_cmp);
    let at = |q: f64| knees[((knees.len() - 1) as f64 * q).round() as usize];
    Some(ModelKnee {
        size,
        low: at(0.025),
        high: at(0.975),
        fraction,
        resamples: knees.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_knee_matches_the_closed_form_and_ignores_an_outlier() {
        // time = 2 µs + 0.5 ns/byte: the 90% knee is 9 · 2e-6 / 0.5e-9 = 36000 B.
        let time = |s: f64| 2e-6 + 0.5e-9 * s;
        let sizes = [
            64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0,
        ];
        let runs: Vec<(f64, Vec<f64>)> = sizes
            .iter()
            .map(|&s| {
                // Three repetitions, ±2%.
                (s, vec![time(s) * 0.98, time(s), time(s) * 1.02])
            })
            .collect();
        let k = model_knee(&runs, 0.9, 200).unwrap();
        assert!((k.size - 36000.0).abs() / 36000.0 < 0.01, "{k:?}");
        assert!(k.low <= k.size && k.size <= k.high, "{k:?}");
        assert!(
            k.high / k.low < 1.5,
            "a tight interval from tight runs: {k:?}"
        );
        // One repetition of one size far off (a dip): the knee stays, the
        // interval widens, where the threshold rule would jump.
        let mut noisy = runs.clone();
        noisy[5].1[0] *= 3.0;
        let n = model_knee(&noisy, 0.9, 200).unwrap();
        assert!((n.size - k.size).abs() / k.size < 0.2, "{n:?} vs {k:?}");
        assert!(n.high - n.low >= k.high - k.low, "{n:?} vs {k:?}");
    }

    fn model_curve(fixed: f64, per_byte: f64, sizes: &[f64]) -> Vec<(f64, f64)> {
        sizes
            .iter()
            .map(|&r| (r, r / (fixed + per_byte * r)))
            .collect()
    }

    #[test]
    fn matches_the_closed_form_on_a_dense_cost_model_curve() {
        // fixed 5 µs, 0.1 ns/byte: the 90% point is at 9 * 5e-6 / 1e-10 = 450,000 bytes.
        // A last, enormous size makes the measured plateau the model's asymptote 1/b.
        let sizes: Vec<f64> = (1..=2000)
            .map(|k| k as f64 * 1000.0)
            .chain([1e12])
            .collect();
        let knee = find_knee(&model_curve(5e-6, 1e-10, &sizes), 0.9).unwrap();
        assert_eq!(knee.size, 450_000.0);
        let knee = find_knee(&model_curve(5e-6, 1e-10, &sizes), 0.5).unwrap();
        assert_eq!(knee.size, 50_000.0);
    }

    #[test]
    fn geometric_grid_picks_the_first_size_past_the_threshold() {
        let sizes: Vec<f64> = (6..=20).map(|k| (1u64 << k) as f64).collect();
        let knee = find_knee(&model_curve(5e-6, 1e-10, &sizes), 0.9).unwrap();
        assert_eq!(knee.size, 524_288.0); // first power of two above 450,000
    }

    #[test]
    fn non_monotone_curves_use_the_peak_as_plateau() {
        let points = [(64.0, 10.0), (1024.0, 80.0), (65536.0, 100.0), (1e6, 70.0)];
        let knee = find_knee(&points, 0.9).unwrap();
        assert_eq!(knee.size, 65536.0);
        assert_eq!(knee.plateau, 100.0);
        let knee = find_knee(&points, 0.75).unwrap();
        assert_eq!(knee.size, 1024.0);
    }

    #[test]
    fn degenerate_inputs() {
        assert!(find_knee(&[], 0.9).is_none());
        assert!(find_knee(&[(1.0, 1.0)], 0.9).is_none());
        assert!(find_knee(&[(1.0, 0.0), (2.0, 0.0)], 0.9).is_none());
        assert!(find_knee(&[(1.0, f64::NAN), (2.0, 3.0), (4.0, 3.0)], 0.9).is_some());
    }
}
