//! A model's predictions beside the source's figures: each with the
//! tolerance that decides whether the model reproduces it, and whether
//! the model was fitted to it (its agreement is then the fit's). Shared
//! by every experiment that shows a model of its source (`--stack`).

use serde::Serialize;

/// How far a prediction may be from the source's figure.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tolerance {
    /// A share of the figure (0.15: ±15%).
    Relative(f64),
    /// Percentage points.
    Points(f64),
}

/// One of the source's figures beside the model's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub figure: String,
    pub source: f64,
    pub model: f64,
    pub unit: &'static str,
    pub tolerance: Tolerance,
    /// The model was fitted to this figure: its agreement is the fit's,
    /// not a prediction's.
    pub fitted: bool,
    pub reproduces: bool,
}

impl Check {
    pub fn new(
        figure: String,
        source: f64,
        model: f64,
        unit: &'static str,
        tolerance: Tolerance,
        fitted: bool,
    ) -> Check {
        let reproduces = match tolerance {
            Tolerance::Relative(share) => (model - source).abs() <= share * source.abs(),
            Tolerance::Points(points) => (model - source).abs() <= points,
        };
        Check {
            figure,
            source,
            model,
            unit,
            tolerance,
            fitted,
            reproduces,
        }
    }

    pub fn off(&self) -> String {
        match self.tolerance {
            Tolerance::Relative(t) => format!(
                "{:+.0}% (±{:.0}%)",
                100.0 * (self.model / self.source - 1.0),
                100.0 * t
            ),
            Tolerance::Points(t) => format!("{:+.1} points (±{t:.0})", self.model - self.source),
        }
    }
}

pub fn reproduces_word(c: &Check) -> &'static str {
    match (c.reproduces, c.fitted) {
        (true, true) => "yes (fitted)",
        (true, false) => "yes",
        (false, _) => "NO",
    }
}

/// How many of the predictions (the figures not fitted to) reproduce.
pub fn verdict(checks: &[Check]) -> (usize, usize) {
    let predicted: Vec<&Check> = checks.iter().filter(|c| !c.fitted).collect();
    (
        predicted.iter().filter(|c| c.reproduces).count(),
        predicted.len(),
    )
}

/// The checks as a table: figure, the source's, the model's, how far
/// off against its tolerance, and whether it reproduces; then how many
/// predictions held.
pub fn table(checks: &[Check], source: &str) -> String {
    let rows: Vec<Vec<String>> = checks
        .iter()
        .map(|c| {
            vec![
                c.figure.clone(),
                format!("{:.2} {}", c.source, c.unit),
                format!("{:.2} {}", c.model, c.unit),
                c.off(),
                reproduces_word(c).into(),
            ]
        })
        .collect();
    let mut out =
        super::table::markdown(&["figure", source, "model", "off by", "reproduces"], &rows);
    let (held, of) = verdict(checks);
    out.push_str(&format!(
        "{held} of {of} predicted figures within tolerance ({} fitted, not counted).\n",
        checks.iter().filter(|c| c.fitted).count()
    ));
    out
}

/// How much of `source`'s figures the model reproduces, and what it
/// misses with both figures, from "reproduces".
pub fn reproduction(checks: &[Check], source: &str) -> String {
    let (held, of) = verdict(checks);
    let missed: Vec<String> = checks
        .iter()
        .filter(|c| !c.reproduces)
        .map(|c| format!("{} ({:.2} against {})", c.figure, c.model, c.source))
        .collect();
    format!(
        "reproduces {held} of {source}'s {of} predicted figures within tolerance{}",
        if missed.is_empty() {
            String::new()
        } else {
            format!("; not {}", missed.join(", "))
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tolerance_decides_by_share_or_by_points() {
        // A model's 10 s figure against the source's, within 15%.
        let within_15_pct = |model| {
            Check::new(
                "t".into(),
                10.0,
                model,
                "s",
                Tolerance::Relative(0.15),
                false,
            )
        };
        let relative = within_15_pct(11.4);
        assert!(relative.reproduces);
        let beyond = within_15_pct(11.6);
        assert!(!beyond.reproduces);
        let points = Check::new("p".into(), 30.0, 24.0, "%", Tolerance::Points(5.0), false);
        assert!(!points.reproduces);
        // Fitted figures are not counted among the predictions.
        let fitted = Check::new("f".into(), 1.0, 9.0, "x", Tolerance::Points(1.0), true);
        let checks = [relative, beyond, points, fitted];
        assert_eq!(verdict(&checks), (1, 3));
        let said = reproduction(&checks, "004");
        assert!(said.starts_with("reproduces 1 of 004's 3"), "{said}");
        assert!(said.contains("t (11.60 against 10)"), "{said}");
    }
}
