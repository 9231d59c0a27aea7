//! The lab: every landed experiment's share ([`LabPart`], in its folder's
//! `lab.rs`), in the order the registry lists them (`experiments::LAB`),
//! in its smoke, quick or full profile, run part by part through one runner;
//! each finished section goes to the caller to print. What the lab runs
//! depends on this host (root for the netns placement, telnetd and sshd
//! where they are installed); what it leaves out is listed with the
//! reason. This module names no experiment.

pub mod report;

use crate::controller::lab::{Across, Lab, LabError, LabPart, Profile, Section};
use crate::controller::runner::Runner;

/// Everything a lab run measures, in the order it runs.
pub struct LabPlan {
    pub parts: Vec<Box<dyn LabPart>>,
    /// A stored calibration of this host's packet cost (`--calibration`),
    /// for the parts that emulate a 1989-class host; None: measured now.
    pub calibration: Option<std::path::PathBuf>,
}

impl LabPlan {
    /// Every registered part in `profile`.
    pub fn new(profile: Profile) -> LabPlan {
        LabPlan {
            parts: crate::experiments::LAB
                .iter()
                .map(|part| part(profile))
                .collect(),
            calibration: None,
        }
    }

    /// Every cell of the quick profile with fewer repetitions and shorter
    /// windows, about a minute and a half on a 2-core machine: a check that
    /// this host and build run everything (the tests' lab).
    pub fn smoke() -> LabPlan {
        Self::new(Profile::Smoke)
    }

    /// About two minutes on a 2-core machine.
    pub fn quick() -> LabPlan {
        Self::new(Profile::Quick)
    }

    /// The source documents' repetition counts and longer runs.
    pub fn full() -> LabPlan {
        Self::new(Profile::Full)
    }

    /// [`LabPlan::across`] with what the agents reached said they serve.
    pub fn across_agents(self, from: &str, to: &str) -> LabPlan {
        let agents = crate::controller::remote::facts();
        let serves = |end: &str, experiment: &str| {
            end == "local"
                || agents
                    .iter()
                    .any(|a| a.agent == end && a.allow.iter().any(|e| e == experiment))
        };
        self.across(from, to, &serves)
    }

    /// The same lab across a real path: the sending, calling and typing
    /// ends at `from`, the receiving and serving ends at `to`, each
    /// `local` or an agent; each part moves itself (see [`LabPart::across`]).
    pub fn across(mut self, from: &str, to: &str, serves: &dyn Fn(&str, &str) -> bool) -> LabPlan {
        let across = Across { from, to, serves };
        for part in &mut self.parts {
            part.across(&across);
        }
        self
    }
}

/// Runs the plan, part by part, through `runner`, handing each finished
/// section to `show` (which prints it) before the next starts. Every
/// part's check passes before any part runs.
pub fn run(
    plan: &LabPlan,
    runner: &mut Runner,
    show: &mut dyn FnMut(Section) -> Result<(), LabError>,
) -> Result<(), LabError> {
    for part in &plan.parts {
        part.check()?;
    }
    let mut lab = Lab::new(runner, show);
    lab.calibration = plan.calibration.clone();
    for part in &plan.parts {
        part.run(&mut lab)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::costmodel::CostModel;
    use crate::measure::host::HostFacts;

    /// A part that shows its name and what an earlier part found, leaves a
    /// finding, and may refuse to run.
    struct Named(&'static str, bool);

    impl LabPart for Named {
        fn across(&mut self, across: &Across) {
            self.0 = if across.to == "b" { "moved" } else { self.0 };
        }
        fn check(&self) -> Result<(), LabError> {
            if self.1 {
                return Ok(());
            }
            Err(LabError::Plan {
                part: self.0,
                why: "does not fit".into(),
            })
        }
        fn run(&self, lab: &mut Lab) -> Result<(), LabError> {
            let found = lab.findings.cost_model.is_some();
            lab.findings.cost_model = Some(CostModel {
                fixed: 1e-6,
                per_byte: 1e-9,
                r_squared: 1.0,
                max_relative_residual: 0.0,
                points: 2,
            });
            lab.measured(format!("{} found {found}", self.0))
        }
    }

    fn run_parts(plan: &LabPlan) -> (Result<(), LabError>, Vec<String>) {
        let mut runner = Runner::new(HostFacts::default(), None);
        let mut shown = Vec::new();
        let result = run(plan, &mut runner, &mut |section| {
            shown.push(section.text());
            Ok(())
        });
        (result, shown)
    }

    #[test]
    fn parts_run_in_order_and_pass_their_findings_on() {
        let plan = LabPlan {
            parts: vec![Box::new(Named("one", true)), Box::new(Named("two", true))],
            calibration: None,
        };
        let (result, shown) = run_parts(&plan);
        result.unwrap();
        assert_eq!(shown, ["one found false", "two found true"]);
        let plan = plan.across("a", "b", &|_, _| true);
        assert_eq!(
            run_parts(&plan).1,
            ["moved found false", "moved found true"]
        );
    }

    #[test]
    fn nothing_runs_when_a_later_part_could_not() {
        let plan = LabPlan {
            parts: vec![Box::new(Named("one", true)), Box::new(Named("two", false))],
            calibration: None,
        };
        let (result, shown) = run_parts(&plan);
        assert_eq!(result.unwrap_err().to_string(), "two: does not fit");
        assert!(shown.is_empty(), "{shown:?}");
    }

    #[test]
    fn every_registered_part_is_built_in_every_profile() {
        assert_eq!(LabPlan::smoke().parts.len(), crate::experiments::LAB.len());
        assert_eq!(LabPlan::quick().parts.len(), crate::experiments::LAB.len());
        assert_eq!(LabPlan::full().parts.len(), crate::experiments::LAB.len());
    }
}
