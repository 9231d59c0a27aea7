//! The analysis of a full factorial experiment (every combination of every
//! factor's levels, each run `reps` times): each factor's main effect and
//! each two-factor interaction as linear contrasts of the cell means, with
//! t intervals from the pooled within-cell variance. This is the standard
//! fixed-effects analysis of a balanced factorial (Montgomery, *Design and
//! Analysis of Experiments*, ch. 5-6), written as contrasts so that factors
//! of more than two levels read the same way: each level against the
//! factor's first.
//!
//! - Main effect of level `j` of factor A: the mean response at A=j minus
//!   at A=first, averaged over every combination of the other factors.
//! - Interaction of A (j against first) and B (k against first): the
//!   difference of differences `m(j,k) - m(j,0) - m(0,k) + m(0,0)` of the
//!   A x B cell means (each averaged over the other factors): how much A's
//!   effect changes when B changes. Van Jacobson's 1988 example (basic 600
//!   KB/s, A alone 520, B alone 530, both 700) has main effects +45 and +55
//!   and an interaction of +250: the interaction dwarfs both, and any
//!   statement "A is good" or "A is bad" is wrong half the time.
//!
//! Invariants: the design is balanced (every cell has the same number of
//! runs, at least one); intervals need at least two runs in some cell.

use statrs::distribution::{ContinuousCDF, StudentsT};
use thiserror::Error;

/// A factor: its name and its levels' names, the first the baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct Factor {
    pub name: String,
    pub levels: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Error)]
pub enum FactorialError {
    #[error("factor {0} has fewer than two levels")]
    OneLevel(String),
    #[error("the cell {0:?} has no run")]
    EmptyCell(Vec<usize>),
    #[error("the design is unbalanced: cells hold {0} and {1} runs")]
    Unbalanced(usize, usize),
    #[error("a run names level {level} of a factor with {levels} levels")]
    NoSuchLevel { level: usize, levels: usize },
}

/// One contrast's estimate: a main effect or an interaction.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Effect {
    /// The factors (one for a main effect, two for an interaction) and
    /// the levels set against each one's first.
    pub factors: Vec<(String, String)>,
    pub estimate: f64,
    /// Half-width of its interval at `level`; `None` with one run a cell.
    pub half_width: Option<f64>,
}

impl Effect {
    /// Whether the interval leaves zero out.
    pub fn significant(&self) -> bool {
        self.half_width.is_some_and(|h| self.estimate.abs() > h)
    }
}

/// What a factorial run found.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Analysis {
    pub runs: usize,
    pub runs_per_cell: usize,
    pub grand_mean: f64,
    /// The pooled within-cell standard deviation and its degrees of freedom.
    pub sigma: Option<f64>,
    pub df: usize,
    pub level: f64,
    /// The t quantile of the intervals (`None` without degrees of freedom).
    pub t: Option<f64>,
    /// Each combination (its levels) and its mean response.
    pub means: Vec<(Vec<usize>, f64)>,
    pub main: Vec<Effect>,
    pub interactions: Vec<Effect>,
    /// Interactions whose interval leaves out zero and that are at least as
    /// large as the smaller of the two factors' main effects, in words.
    pub flags: Vec<String>,
}

impl Analysis {
    /// The mean response of one combination.
    pub fn mean_of(&self, levels: &[usize]) -> Option<f64> {
        self.means
            .iter()
            .find(|(l, _)| l == levels)
            .map(|(_, m)| *m)
    }

    /// One factor at a time from the baseline (every factor at its first
    /// level), as leave-one-out testing measures it: each level's cell
    /// (the others at baseline) against the baseline cell, with the same
    /// pooled interval (a difference of two cell means: `t σ √(2/n)`).
    pub fn one_at_a_time(&self, factors: &[Factor]) -> Vec<Effect> {
        let baseline = vec![0; factors.len()];
        let base = self.mean_of(&baseline).unwrap_or(f64::NAN);
        let half_width = match (self.sigma, self.t) {
            (Some(s), Some(t)) => Some(t * s * (2.0 / self.runs_per_cell as f64).sqrt()),
            _ => None,
        };
        let mut effects = Vec::new();
        for (i, factor) in factors.iter().enumerate() {
            for j in 1..factor.levels.len() {
                let mut levels = baseline.clone();
                levels[i] = j;
                if let Some(mean) = self.mean_of(&levels) {
                    effects.push(Effect {
                        factors: vec![(factor.name.clone(), factor.levels[j].clone())],
                        estimate: mean - base,
                        half_width,
                    });
                }
            }
        }
        effects
    }
}

/// A signed figure to a precision that suits its size.
fn signed(x: f64) -> String {
    match x.abs() {
        a if a >= 100.0 => format!("{x:+.0}"),
        a if a >= 1.0 => format!("{x:+.2}"),
        _ => format!("{x:+.3}"),
    }
}

/// Every combination of the factors' levels, the last factor varying
/// fastest.
pub fn combinations(factors: &[Factor]) -> Vec<Vec<usize>> {
    let mut all = vec![Vec::new()];
    for factor in factors {
        all = all
            .into_iter()
            .flat_map(|prefix: Vec<usize>| {
                (0..factor.levels.len()).map(move |level| {
                    let mut next = prefix.clone();
                    next.push(level);
                    next
                })
            })
            .collect();
    }
    all
}

/// The effects of `runs` (each its levels, one per factor, and its
/// response) at confidence `level` (e.g. 0.95).
pub fn analyse(
    factors: &[Factor],
    runs: &[(Vec<usize>, f64)],
    level: f64,
) -> Result<Analysis, FactorialError> {
    if let Some(f) = factors.iter().find(|f| f.levels.len() < 2) {
        return Err(FactorialError::OneLevel(f.name.clone()));
    }
    let cells = combinations(factors);
    let per_cell = responses_by_cell(factors, &cells, runs)?;
    let n = per_cell[0].len();
    let means: Vec<f64> = per_cell
        .iter()
        .map(|v| v.iter().sum::<f64>() / v.len() as f64)
        .collect();
    let df = cells.len() * (n - 1);
    let sigma = (df > 0).then(|| {
        let ss: f64 = per_cell
            .iter()
            .zip(&means)
            .flat_map(|(v, m)| v.iter().map(move |x| (x - m).powi(2)))
            .sum();
        (ss / df as f64).sqrt()
    });
    let t = (df > 0)
        .then(|| StudentsT::new(0.0, 1.0, df as f64).ok())
        .flatten()
        .map(|d| d.inverse_cdf(0.5 + level / 2.0));
    let contrasts = Contrasts {
        factors,
        cells: &cells,
        means: &means,
        n,
        sigma,
        t,
    };
    let main = contrasts.main_effects();
    let interactions = contrasts.interactions();
    let flags = interaction_flags(&main, &interactions);
    Ok(Analysis {
        runs: runs.len(),
        runs_per_cell: n,
        grand_mean: means.iter().sum::<f64>() / means.len() as f64,
        sigma,
        df,
        level,
        t,
        means: cells.iter().cloned().zip(means.iter().copied()).collect(),
        main,
        interactions,
        flags,
    })
}

/// Each cell's responses, in the order of `cells`; every cell must have
/// as many as the first.
fn responses_by_cell(
    factors: &[Factor],
    cells: &[Vec<usize>],
    runs: &[(Vec<usize>, f64)],
) -> Result<Vec<Vec<f64>>, FactorialError> {
    let index_of = |levels: &[usize]| -> Result<usize, FactorialError> {
        let mut index = 0;
        for (factor, &level) in factors.iter().zip(levels) {
            if level >= factor.levels.len() {
                return Err(FactorialError::NoSuchLevel {
                    level,
                    levels: factor.levels.len(),
                });
            }
            index = index * factor.levels.len() + level;
        }
        Ok(index)
    };
    let mut per_cell: Vec<Vec<f64>> = vec![Vec::new(); cells.len()];
    for (levels, response) in runs {
        per_cell[index_of(levels)?].push(*response);
    }
    let n = per_cell[0].len();
    for (cell, values) in cells.iter().zip(&per_cell) {
        if values.is_empty() {
            return Err(FactorialError::EmptyCell(cell.clone()));
        }
        if values.len() != n {
            return Err(FactorialError::Unbalanced(n, values.len()));
        }
    }
    Ok(per_cell)
}

/// The cells' means and the pooled error: what every effect is a contrast
/// of.
struct Contrasts<'a> {
    factors: &'a [Factor],
    cells: &'a [Vec<usize>],
    means: &'a [f64],
    /// Runs a cell.
    n: usize,
    sigma: Option<f64>,
    /// Student's t at the level, on the error's degrees of freedom.
    t: Option<f64>,
}

impl Contrasts<'_> {
    /// A contrast (coefficients over the cells): its estimate and its
    /// interval's half-width.
    fn contrast(&self, coefficient: &dyn Fn(&[usize]) -> f64) -> (f64, Option<f64>) {
        let mut estimate = 0.0;
        let mut squares = 0.0;
        for (cell, mean) in self.cells.iter().zip(self.means) {
            let c = coefficient(cell);
            estimate += c * mean;
            squares += c * c;
        }
        let half = match (self.sigma, self.t) {
            (Some(s), Some(t)) => Some(t * s * (squares / self.n as f64).sqrt()),
            _ => None,
        };
        (estimate, half)
    }

    /// How many cells each combination of the factors but `skip` spans.
    fn others(&self, skip: &[usize]) -> f64 {
        self.factors
            .iter()
            .enumerate()
            .filter(|(i, _)| !skip.contains(i))
            .map(|(_, f)| f.levels.len() as f64)
            .product()
    }

    /// Each factor's levels against its first.
    fn main_effects(&self) -> Vec<Effect> {
        let mut main = Vec::new();
        for (a, factor) in self.factors.iter().enumerate() {
            let weight = 1.0 / self.others(&[a]);
            for j in 1..factor.levels.len() {
                let (estimate, half_width) = self.contrast(&|cell| {
                    if cell[a] == j {
                        weight
                    } else if cell[a] == 0 {
                        -weight
                    } else {
                        0.0
                    }
                });
                main.push(Effect {
                    factors: vec![(factor.name.clone(), factor.levels[j].clone())],
                    estimate,
                    half_width,
                });
            }
        }
        main
    }

    /// Each pair of factors' levels (against their first) together.
    fn interactions(&self) -> Vec<Effect> {
        let factors = self.factors;
        let mut interactions = Vec::new();
        for a in 0..factors.len() {
            for b in a + 1..factors.len() {
                let weight = 1.0 / self.others(&[a, b]);
                for j in 1..factors[a].levels.len() {
                    for k in 1..factors[b].levels.len() {
                        let sign = |level: usize, high: usize| match level {
                            0 => Some(-1.0),
                            l if l == high => Some(1.0),
                            _ => None,
                        };
                        let (estimate, half_width) =
                            self.contrast(&|cell| match (sign(cell[a], j), sign(cell[b], k)) {
                                (Some(x), Some(y)) => weight * x * y,
                                _ => 0.0,
                            });
                        interactions.push(Effect {
                            factors: vec![
                                (factors[a].name.clone(), factors[a].levels[j].clone()),
                                (factors[b].name.clone(), factors[b].levels[k].clone()),
                            ],
                            estimate,
                            half_width,
                        });
                    }
                }
            }
        }
        interactions
    }
}

/// The interactions that are significant and as large as the smaller of
/// their two main effects, each said as what judging one factor at a time
/// would miss.
fn interaction_flags(main: &[Effect], interactions: &[Effect]) -> Vec<String> {
    let main_of = |name: &(String, String)| {
        main.iter()
            .find(|e| &e.factors[0] == name)
            .map_or(0.0, |e| e.estimate)
    };
    interactions
        .iter()
        .filter(|i| i.significant())
        .filter_map(|i| {
            let (x, y) = (&i.factors[0], &i.factors[1]);
            let (ex, ey) = (main_of(x), main_of(y));
            (i.estimate.abs() >= ex.abs().min(ey.abs())).then(|| {
                format!(
                    "{}={} and {}={} interact: the effect of {}={} changes by {} when {}={} is added, as large as the main effects ({}, {}); judged one at a time, either would be misjudged",
                    x.0,
                    x.1,
                    y.0,
                    y.1,
                    x.0,
                    x.1,
                    signed(i.estimate),
                    y.0,
                    y.1,
                    signed(ex),
                    signed(ey)
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_level(name: &str) -> Factor {
        Factor {
            name: name.into(),
            levels: vec!["off".into(), "on".into()],
        }
    }

    /// Van Jacobson's 1988 example, each cell run twice with ±10 noise.
    #[test]
    fn van_jacobsons_example_has_an_interaction_larger_than_either_effect() {
        let factors = [two_level("A"), two_level("B")];
        let cells = [
            (vec![0, 0], 600.0),
            (vec![1, 0], 520.0),
            (vec![0, 1], 530.0),
            (vec![1, 1], 700.0),
        ];
        let runs: Vec<(Vec<usize>, f64)> = cells
            .iter()
            .flat_map(|(l, y)| [(l.clone(), y - 10.0), (l.clone(), y + 10.0)])
            .collect();
        let a = analyse(&factors, &runs, 0.95).unwrap();
        assert_eq!(a.runs_per_cell, 2);
        assert_eq!(a.df, 4);
        assert!((a.grand_mean - 587.5).abs() < 1e-9);
        // Each main effect averages the two others' levels.
        assert!((a.main[0].estimate - 45.0).abs() < 1e-9, "{:?}", a.main);
        assert!((a.main[1].estimate - 55.0).abs() < 1e-9);
        assert!((a.interactions[0].estimate - 250.0).abs() < 1e-9);
        // sigma = sqrt(2 * 100 / 1) per cell pooled = sqrt(800/4) = 14.14;
        // the interaction's contrast has four unit coefficients over 2 runs.
        let sigma = a.sigma.unwrap();
        assert!((sigma - 200f64.sqrt()).abs() < 1e-9);
        let t = StudentsT::new(0.0, 1.0, 4.0).unwrap().inverse_cdf(0.975);
        let half = a.interactions[0].half_width.unwrap();
        assert!((half - t * sigma * (4.0f64 / 2.0).sqrt()).abs() < 1e-9);
        assert_eq!(a.flags.len(), 1, "{:?}", a.flags);
        // One at a time from the basic system, as leave-one-out sees it:
        // A alone -80, B alone -70; both "bad", yet together +100.
        let alone = a.one_at_a_time(&factors);
        assert!((alone[0].estimate + 80.0).abs() < 1e-9);
        assert!((alone[1].estimate + 70.0).abs() < 1e-9);
        assert_eq!(a.mean_of(&[1, 1]), Some(700.0));
        assert!(
            a.flags[0].contains("A=on and B=on interact"),
            "{}",
            a.flags[0]
        );
    }

    #[test]
    fn additive_factors_have_no_interaction_and_raise_no_flag() {
        // y = 10 + 3 (A) + 5 (B at level 1) + 8 (B at level 2) + 1 (C).
        let factors = [
            two_level("A"),
            Factor {
                name: "B".into(),
                levels: vec!["x".into(), "y".into(), "z".into()],
            },
            two_level("C"),
        ];
        let b = [0.0, 5.0, 8.0];
        let runs: Vec<(Vec<usize>, f64)> = combinations(&factors)
            .into_iter()
            .map(|l| {
                let y = 10.0 + 3.0 * l[0] as f64 + b[l[1]] + l[2] as f64;
                (l, y)
            })
            .collect();
        assert_eq!(runs.len(), 12);
        let a = analyse(&factors, &runs, 0.95).unwrap();
        let estimates: Vec<f64> = a.main.iter().map(|e| e.estimate).collect();
        for (got, want) in estimates.iter().zip([3.0, 5.0, 8.0, 1.0]) {
            assert!((got - want).abs() < 1e-9, "{estimates:?}");
        }
        assert_eq!(a.main[2].factors, vec![("B".to_string(), "z".to_string())]);
        // A x B (2), A x C (1), B x C (2): all zero.
        assert_eq!(a.interactions.len(), 5);
        assert!(a.interactions.iter().all(|i| i.estimate.abs() < 1e-9));
        // One run a cell: no interval, no flag.
        assert!(a.sigma.is_none() && a.main[0].half_width.is_none());
        assert!(a.flags.is_empty());
    }

    #[test]
    fn unbalanced_or_incomplete_designs_are_refused() {
        let factors = [two_level("A"), two_level("B")];
        let runs = vec![(vec![0, 0], 1.0), (vec![1, 0], 1.0), (vec![0, 1], 1.0)];
        assert_eq!(
            analyse(&factors, &runs, 0.95),
            Err(FactorialError::EmptyCell(vec![1, 1]))
        );
        let mut runs = runs;
        runs.push((vec![1, 1], 1.0));
        runs.push((vec![1, 1], 2.0));
        assert_eq!(
            analyse(&factors, &runs, 0.95),
            Err(FactorialError::Unbalanced(1, 2))
        );
        assert_eq!(
            analyse(
                &[
                    two_level("A"),
                    Factor {
                        name: "B".into(),
                        levels: vec!["only".into()]
                    }
                ],
                &[],
                0.95
            ),
            Err(FactorialError::OneLevel("B".into()))
        );
    }
}
