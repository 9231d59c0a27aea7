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

#[cfg(test)]
mod tests {
    use super::*;

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
