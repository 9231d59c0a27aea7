//! sweep's share of the lab: 1988's throughput against record size, its
//! knee and its fitted cost per record, which it leaves in the lab's
//! findings for the checksum costs to split.

use super::cell::{self as sweep, Precision, SweepConfig};
use super::report;
use crate::controller::lab::{Across, Lab, LabError, LabPart, Profile};
use crate::endpoint::bulk::types::Amount;
use crate::experiments::stream::cell::StreamMeasure;
use crate::units::format_size;

/// The lab's sweep.
#[derive(Debug, Clone)]
pub struct SweepLab {
    pub sweep: SweepConfig,
    /// The precision target (the full profile: ±5%, in 10 minutes).
    pub precision: Option<Precision>,
}

impl SweepLab {
    pub fn new(profile: Profile) -> SweepLab {
        SweepLab {
            sweep: profile.pick(
                SweepConfig::smoke(),
                SweepConfig::quick(),
                SweepConfig::full(),
            ),
            // Each point's median within ±5% (95%), the sweep within ten
            // minutes, at most 20 runs a size.
            precision: profile.pick(
                None,
                None,
                Some(Precision {
                    half_width: 0.05,
                    level: 0.95,
                    budget: std::time::Duration::from_secs(600),
                    max_runs: 20,
                }),
            ),
        }
    }

    pub fn boxed(profile: Profile) -> Box<dyn LabPart> {
        Box::new(Self::new(profile))
    }
}

impl LabPart for SweepLab {
    fn across(&mut self, across: &Across) {
        self.sweep.base.placement = across.path();
    }

    fn run(&self, lab: &mut Lab) -> Result<(), LabError> {
        let sweep = &self.sweep;
        let first = sweep.records.first().copied().unwrap_or(0);
        let sizes = format!(
            "{}..{}",
            format_size(first),
            format_size(sweep.records.last().copied().unwrap_or(first))
        );
        eprintln!(
            "lab: sweep stream over {sizes} ({} s per run, {} runs per size)",
            match sweep.base.amount {
                Amount::Seconds(s) => s,
                Amount::Bytes(_) => 0.0,
            },
            sweep.repeat
        );
        let swept = sweep::run(
            lab.runner,
            &mut StreamMeasure::default(),
            sweep,
            self.precision.as_ref(),
        )?;
        // The per-byte cost later parts set against a copy's: the terms'
        // (each size's calls, segments and wake-ups priced apart), else the
        // one-slope fit's.
        lab.findings.cost_model = match swept.summary.terms.as_ref().filter(|_| {
            // A per-byte term the sweep did not resolve is no figure to
            // set a copy's cost against.
            swept.summary.resolved(0) && swept.summary.resolved(3)
        }) {
            Some(t) => Some(crate::analysis::costmodel::CostModel {
                fixed: t.per_call,
                per_byte: t.per_byte,
                r_squared: t.r_squared,
                max_relative_residual: t.max_relative_residual,
                points: t.points,
            }),
            None => swept.summary.model,
        };
        let title = format!("record sizes {sizes}; each point {}", sweep.base.describe());
        let mut text = report::sweep_table(&title, &swept.summary, &swept.records);
        if let Some(precision) = &swept.precision {
            text.push_str(&report::precision_text(precision));
        }
        lab.measured(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::testbed::Placement;

    #[test]
    fn profiles_and_the_path() {
        let quick = SweepLab::new(Profile::Quick);
        assert_eq!(quick.sweep.records.first(), Some(&64));
        assert_eq!(quick.sweep.records.last(), Some(&(1 << 20)));
        assert!(quick.precision.is_none());
        let full = SweepLab::new(Profile::Full);
        assert_eq!(full.sweep.records.first(), Some(&16));
        assert_eq!(full.sweep.records.last(), Some(&(4 << 20)));
        assert!(full.precision.is_some());
        let mut part = quick;
        part.across(&Across {
            from: "a:5310",
            to: "b:5310",
            serves: &|_, _| true,
        });
        assert_eq!(
            part.sweep.base.placement,
            Placement::Remote {
                from: "a:5310".into(),
                to: "b:5310".into()
            }
        );
    }

    #[test]
    fn doubling_ends_at_the_top() {
        assert_eq!(sweep::doubling(64, 512), [64, 128, 256, 512]);
    }
}
