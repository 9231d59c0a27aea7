//! cksum's share of the lab: 1988's per-KB costs of copying and
//! checksumming, and the share of a bulk transfer's per-byte cost they
//! explain (when an earlier part fitted one).

use super::analysis::per_byte_costs;
use super::cell::{CksumMeasure, CksumPlan};
use super::report;
use crate::analysis::split::split;
use crate::controller::lab::{Across, Lab, LabError, LabPart, Profile};
use crate::units::format_size;

/// The lab's checksum costs.
#[derive(Debug, Clone)]
pub struct CksumLab {
    pub plan: CksumPlan,
    /// Where they are measured: this host, or an agent.
    pub on: Option<String>,
}

impl CksumLab {
    pub fn new(profile: Profile) -> CksumLab {
        CksumLab {
            plan: profile.pick(CksumPlan::smoke(), CksumPlan::quick(), CksumPlan::full()),
            on: None,
        }
    }

    pub fn boxed(profile: Profile) -> Box<dyn LabPart> {
        Box::new(Self::new(profile))
    }

    fn plan_error(e: impl ToString) -> LabError {
        LabError::Plan {
            part: "cksum",
            why: e.to_string(),
        }
    }
}

impl LabPart for CksumLab {
    /// Measured on the serving end.
    fn across(&mut self, across: &Across) {
        self.on = (across.to != "local").then(|| across.to.to_string());
    }

    /// Its buffers fit this host's memory.
    fn check(&self) -> Result<(), LabError> {
        self.plan.specs().map(drop).map_err(Self::plan_error)
    }

    fn run(&self, lab: &mut Lab) -> Result<(), LabError> {
        let specs = self.plan.specs().map_err(Self::plan_error)?;
        let sizes: Vec<String> = self.plan.sizes.iter().map(|&s| format_size(s)).collect();
        eprintln!("lab: cksum over {}", sizes.join(","));
        let records = lab.runner.grid(
            &mut CksumMeasure {
                on: self.on.clone(),
            },
            &specs,
        )?;
        let mut text = format!(
            "netlab cksum: ns per KB, median of {} batches\n",
            self.plan.batches
        );
        text.push_str(&report::table(&records));
        if let (Some(model), Some((copy, sum))) =
            (&lab.findings.cost_model, per_byte_costs(&records, 65536))
        {
            text.push_str(&format!(
                "the stream sweep's {} (loopback: two copies per byte, no checksum; copy and checksum costs hot at 64 KB)\n",
                split(model.per_byte * 1e9, copy, sum, 2, 0).describe()
            ));
        }
        lab.measured(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_on_the_serving_end_across_hosts() {
        let mut part = CksumLab::new(Profile::Quick);
        assert!(part.check().is_ok(), "the quick sizes fit any test host");
        part.across(&Across {
            from: "a:5310",
            to: "b:5310",
            serves: &|_, _| true,
        });
        assert_eq!(part.on.as_deref(), Some("b:5310"));
        part.across(&Across {
            from: "a:5310",
            to: "local",
            serves: &|_, _| true,
        });
        assert_eq!(part.on, None);
    }

    #[test]
    fn a_plan_that_cannot_fit_is_refused_before_the_lab_runs() {
        let mut part = CksumLab::new(Profile::Quick);
        part.plan.sizes = vec![1 << 50];
        let why = part.check().unwrap_err().to_string();
        assert!(
            why.starts_with("cksum: ") && why.contains("memory"),
            "{why}"
        );
    }
}
