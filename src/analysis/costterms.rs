//! A unit of work's time as a sum of terms that each have a physical
//! cause: `time = per_call · calls + per_segment · segments + per_wakeup ·
//! wake-ups + per_byte · bytes`, where the counts are what each size
//! measured (system calls, TCP segments, sleeps per record) rather than
//! assumed from the size.
//!
//! Why not `fixed + per_byte · size` ([`super::costmodel`]): over loopback
//! the number of segments and of wake-ups per record changes with the size
//! (small writes coalesce into large segments; a large write wakes the
//! reader many times), so a single fixed cost plus a per-byte slope cannot
//! follow the measured curve (it levels off where the curve goes on
//! rising). With the counts measured, each coefficient is one mechanism's
//! cost and can be checked against an independent measurement (the per-byte
//! term against a copy's cost, the per-call term against a 1-byte run).
//!
//! Fit: non-negative least squares (a cost cannot be negative), weighted by
//! `1/time²` so every size counts by its relative error, as in
//! [`super::costmodel`]. With four terms the fit tries every subset of
//! terms, solves each subset's normal equations and keeps the best fit
//! whose coefficients are all positive: for non-negative least squares the
//! optimum is the unconstrained fit on its own set of positive terms, so
//! the enumeration finds it exactly.

use serde::{Deserialize, Serialize};

/// The terms, in the order of [`TermPoint::counts`] and [`TermModel::costs`].
pub const TERMS: [Term; 4] = [Term::Call, Term::Segment, Term::WakeUp, Term::Byte];

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Term {
    /// A system call: entering and leaving the kernel, the socket layer.
    Call,
    /// A TCP segment: the protocol's and the device's per-packet work.
    Segment,
    /// A sleep and the wake-up that ends it (a context switch, an IPI).
    WakeUp,
    /// A byte: copying it (and touching it on the way).
    Byte,
}

impl Term {
    pub fn name(self) -> &'static str {
        match self {
            Term::Call => "per call",
            Term::Segment => "per segment",
            Term::WakeUp => "per wake-up",
            Term::Byte => "per byte",
        }
    }
}

/// One size's measured time per unit of work and its counts per unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TermPoint {
    pub size: f64,
    /// Seconds per unit of work.
    pub time: f64,
    pub calls: f64,
    pub segments: f64,
    pub wakeups: f64,
    pub bytes: f64,
}

impl TermPoint {
    pub fn counts(&self) -> [f64; 4] {
        [self.calls, self.segments, self.wakeups, self.bytes]
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TermModel {
    /// Seconds per call, per segment, per wake-up, per byte (zero for a
    /// term the fit left out).
    pub per_call: f64,
    pub per_segment: f64,
    pub per_wakeup: f64,
    pub per_byte: f64,
    /// Weighted coefficient of determination (1 = perfect).
    pub r_squared: f64,
    /// Largest |measured - model| / measured over the points.
    pub max_relative_residual: f64,
    pub points: usize,
}

impl TermModel {
    pub fn costs(&self) -> [f64; 4] {
        [
            self.per_call,
            self.per_segment,
            self.per_wakeup,
            self.per_byte,
        ]
    }

    /// Each term's time per unit of work at `point`.
    pub fn parts(&self, point: &TermPoint) -> [f64; 4] {
        let c = self.costs();
        let n = point.counts();
        [c[0] * n[0], c[1] * n[1], c[2] * n[2], c[3] * n[3]]
    }

    pub fn time(&self, point: &TermPoint) -> f64 {
        self.parts(point).iter().sum()
    }

    /// The term that costs most at `point`, and its share of the model's time.
    pub fn dominant(&self, point: &TermPoint) -> (Term, f64) {
        let parts = self.parts(point);
        let total: f64 = parts.iter().sum();
        let (i, part) = parts
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map_or((3, 0.0), |(i, p)| (i, *p));
        (TERMS[i], if total > 0.0 { part / total } else { 0.0 })
    }
}

/// Fits the four terms to `points` (non-negative, weighted by 1/time²).
/// `None` with fewer points than two or no positive time.
pub fn fit(points: &[TermPoint]) -> Option<TermModel> {
    let points: Vec<TermPoint> = points
        .iter()
        .copied()
        .filter(|p| p.time.is_finite() && p.time > 0.0 && p.counts().iter().all(|c| c.is_finite()))
        .collect();
    if points.len() < 2 {
        return None;
    }
    let mut best: Option<([f64; 4], f64)> = None;
    for subset in 1u32..16 {
        let terms: Vec<usize> = (0..4).filter(|t| subset & (1 << t) != 0).collect();
        if terms.len() > points.len() {
            continue;
        }
        let Some(solution) = weighted_least_squares(&points, &terms) else {
            continue;
        };
        if solution.iter().any(|c| *c <= 0.0) {
            continue;
        }
        let mut costs = [0.0; 4];
        for (&t, &c) in terms.iter().zip(&solution) {
            costs[t] = c;
        }
        let residual = weighted_residual(&points, &costs);
        if best.is_none_or(|(_, r)| residual < r) {
            best = Some((costs, residual));
        }
    }
    let (costs, ss_res) = best?;
    let (sw, swy) = points.iter().fold((0.0, 0.0), |(sw, swy), p| {
        let w = 1.0 / (p.time * p.time);
        (sw + w, swy + w * p.time)
    });
    let mean = swy / sw;
    let ss_tot: f64 = points
        .iter()
        .map(|p| (p.time - mean).powi(2) / (p.time * p.time))
        .sum();
    let model = TermModel {
        per_call: costs[0],
        per_segment: costs[1],
        per_wakeup: costs[2],
        per_byte: costs[3],
        r_squared: if ss_tot > 0.0 {
            1.0 - ss_res / ss_tot
        } else {
            1.0
        },
        max_relative_residual: 0.0,
        points: points.len(),
    };
    let max_relative_residual = points
        .iter()
        .map(|p| ((p.time - model.time(p)) / p.time).abs())
        .fold(0.0, f64::max);
    Some(TermModel {
        max_relative_residual,
        ..model
    })
}

/// Each coefficient's 95% interval over bootstrap resamples of the runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TermIntervals {
    /// Per call, per segment, per wake-up, per byte (seconds), low and high.
    pub low: [f64; 4],
    pub high: [f64; 4],
    pub resamples: usize,
}

/// Fits `resamples` resamples of `runs` (each size's runs, one point per
/// run: one run drawn at random per size, the model fitted to the draws)
/// and returns the fitted models. Deterministic (a fixed seed), so a report
/// rebuilt from records gives the same intervals.
pub fn bootstrap(runs: &[Vec<TermPoint>], resamples: usize) -> Vec<TermModel> {
    let mut draws = super::stats::Draws::default();
    let mut next = |n: usize| draws.below(n);
    (0..resamples)
        .filter_map(|_| {
            let draw: Vec<TermPoint> = runs
                .iter()
                .filter(|r| !r.is_empty())
                .map(|r| r[next(r.len())])
                .collect();
            fit(&draw)
        })
        .collect()
}

/// The 2.5% and 97.5% points of each coefficient over `models`, widened
/// where need be to hold `fit`'s own coefficient. The resamples fit one
/// run a size and the fit every run, and a non-negative fit's terms lean
/// away from zero in the resamples, so the percentile interval can miss
/// the fit it is printed beside (0.962 µs per call against 1.016-1.37 on
/// 2026-12-03): an interval that does not hold its figure would tell a
/// reader the figure is wrong, when it is the resamples that are noisier.
pub fn intervals(models: &[TermModel], fit: Option<&TermModel>) -> Option<TermIntervals> {
    if models.is_empty() {
        return None;
    }
    let mut low = [0.0; 4];
    let mut high = [0.0; 4];
    for t in 0..4 {
        let mut values: Vec<f64> = models.iter().map(|m| m.costs()[t]).collect();
        values.sort_by(f64::total_cmp);
        let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
        low[t] = at(0.025);
        high[t] = at(0.975);
        if let Some(fit) = fit {
            low[t] = low[t].min(fit.costs()[t]);
            high[t] = high[t].max(fit.costs()[t]);
        }
    }
    Some(TermIntervals {
        low,
        high,
        resamples: models.len(),
    })
}

fn weighted_residual(points: &[TermPoint], costs: &[f64; 4]) -> f64 {
    points
        .iter()
        .map(|p| {
            let model: f64 = p.counts().iter().zip(costs).map(|(n, c)| n * c).sum();
            (p.time - model).powi(2) / (p.time * p.time)
        })
        .sum()
}

/// Solves the weighted normal equations `(XᵀWX) c = XᵀWy` for the columns
/// `terms`, by Gaussian elimination with partial pivoting; `None` when the
/// columns are (numerically) dependent.
fn weighted_least_squares(points: &[TermPoint], terms: &[usize]) -> Option<Vec<f64>> {
    let k = terms.len();
    // Columns scaled to comparable magnitude (bytes are 10⁶ times calls),
    // so the pivot test means something.
    let scale: Vec<f64> = terms
        .iter()
        .map(|&t| {
            let max = points
                .iter()
                .map(|p| p.counts()[t].abs())
                .fold(0.0, f64::max);
            if max > 0.0 { max } else { 1.0 }
        })
        .collect();
    let mut a = vec![vec![0.0; k + 1]; k];
    for p in points {
        let w = 1.0 / (p.time * p.time);
        let x: Vec<f64> = terms
            .iter()
            .zip(&scale)
            .map(|(&t, s)| p.counts()[t] / s)
            .collect();
        for i in 0..k {
            for j in 0..k {
                a[i][j] += w * x[i] * x[j];
            }
            a[i][k] += w * x[i] * p.time;
        }
    }
    let norm = a
        .iter()
        .flat_map(|row| row[..k].iter())
        .fold(0.0f64, |m, v| m.max(v.abs()));
    for col in 0..k {
        let pivot = (col..k).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() <= 1e-12 * norm {
            return None;
        }
        a.swap(col, pivot);
        let pivot_row = a[col].clone();
        for (row, values) in a.iter_mut().enumerate() {
            if row != col {
                let f = values[col] / pivot_row[col];
                for (v, p) in values.iter_mut().zip(&pivot_row).skip(col) {
                    *v -= f * p;
                }
            }
        }
    }
    Some((0..k).map(|i| a[i][k] / a[i][i] / scale[i]).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(size: f64, segments: f64, wakeups: f64, costs: [f64; 4]) -> TermPoint {
        let mut p = TermPoint {
            size,
            time: 0.0,
            calls: 1.0,
            segments,
            wakeups,
            bytes: size,
        };
        p.time = p.counts().iter().zip(costs).map(|(n, c)| n * c).sum();
        p
    }

    /// Loopback's shape: small writes coalesce (a fraction of a segment
    /// per record), large ones take many segments and wake the reader
    /// several times.
    fn curve(costs: [f64; 4]) -> Vec<TermPoint> {
        let mut points = Vec::new();
        let mut size: f64 = 64.0;
        while size <= 1048576.0 {
            let segments = (size / 65483.0).max(size / 16384.0).max(0.02);
            let wakeups = (size / 131072.0).max(0.05) + (size / 1e6).powi(2);
            points.push(point(size, segments, wakeups, costs));
            size *= 2.0;
        }
        points
    }

    #[test]
    fn recovers_known_costs_from_exact_points() {
        let costs = [1.5e-6, 3.0e-6, 8.0e-6, 0.12e-9];
        let model = fit(&curve(costs)).unwrap();
        for (got, want) in model.costs().iter().zip(costs) {
            assert!((got - want).abs() < 1e-3 * want, "{model:?}");
        }
        assert!(model.r_squared > 0.999_999, "{model:?}");
        assert!(model.max_relative_residual < 1e-6);
    }

    #[test]
    fn a_term_that_costs_nothing_is_left_out_not_negative() {
        let costs = [2.0e-6, 0.0, 5.0e-6, 0.2e-9];
        // Segments that vary on their own, cost nothing, and come with
        // slightly shorter times: an unconstrained fit prices them below zero.
        let segments = [1.0, 0.1, 2.0, 0.5, 3.0, 0.2, 1.5, 0.05, 2.5, 0.3];
        let points: Vec<TermPoint> = segments
            .iter()
            .enumerate()
            .map(|(i, &s)| {
                let size = 64.0 * f64::powi(2.0, i as i32);
                let mut p = point(size, s, 0.1 + (i % 3) as f64 * 0.2, costs);
                p.time *= 1.0 - 0.04 * s / 3.0;
                p
            })
            .collect();
        let unconstrained = weighted_least_squares(&points, &[0, 1, 2, 3]).unwrap();
        assert!(unconstrained[1] < 0.0, "{unconstrained:?}");
        let model = fit(&points).unwrap();
        assert_eq!(model.per_segment, 0.0, "{model:?}");
        assert!(model.costs().iter().all(|c| *c >= 0.0), "{model:?}");
        assert!((model.per_call - 2.0e-6).abs() < 0.2e-6, "{model:?}");
        assert!(model.max_relative_residual < 0.05, "{model:?}");
    }

    #[test]
    fn the_dominant_term_moves_from_calls_to_bytes() {
        let costs = [1.5e-6, 3.0e-6, 8.0e-6, 0.12e-9];
        let points = curve(costs);
        let model = fit(&points).unwrap();
        assert_eq!(model.dominant(&points[0]).0, Term::Call);
        let last = points.last().unwrap();
        let (term, share) = model.dominant(last);
        assert!(term != Term::Call, "{term:?} {share}");
        let shares: f64 = model.parts(last).iter().sum::<f64>() / model.time(last);
        assert!((shares - 1.0).abs() < 1e-12);
    }

    #[test]
    fn intervals_hold_the_truth_and_are_wide_where_terms_are_confounded() {
        let costs = [1.5e-6, 3.0e-6, 8.0e-6, 0.12e-9];
        // Three runs per size, each off by a few percent.
        let runs: Vec<Vec<TermPoint>> = curve(costs)
            .into_iter()
            .enumerate()
            .map(|(i, p)| {
                [0.97, 1.0, 1.03]
                    .iter()
                    .map(|f| TermPoint {
                        time: p.time * f * if i % 2 == 0 { 1.0 } else { 1.01 },
                        ..p
                    })
                    .collect()
            })
            .collect();
        let models = bootstrap(&runs, 200);
        assert!(models.len() > 150);
        let iv = intervals(&models, None).unwrap();
        for t in [0, 3] {
            assert!(
                iv.low[t] <= costs[t] * 1.1 && costs[t] * 0.9 <= iv.high[t],
                "term {t}: {iv:?}"
            );
            assert!(iv.low[t] <= iv.high[t]);
        }
        assert!(intervals(&[], None).is_none());
        // Widened to hold the fit it is printed beside.
        let mut outside = models[0].clone();
        outside.per_call = iv.high[0] * 2.0;
        let held = intervals(&models, Some(&outside)).unwrap();
        assert_eq!(held.high[0], outside.per_call);
        assert_eq!(held.low[0], iv.low[0]);
    }

    #[test]
    fn too_few_points_or_no_time_fit_nothing() {
        assert!(fit(&[]).is_none());
        let one = point(64.0, 1.0, 1.0, [1e-6, 0.0, 0.0, 0.0]);
        assert!(fit(&[one]).is_none());
        let zero = TermPoint { time: 0.0, ..one };
        assert!(fit(&[zero, zero]).is_none());
    }
}
