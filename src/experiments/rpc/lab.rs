//! rpc's share of the lab: 1989's Sun RPC time per call against argument
//! size, its cliffs found and explained by reruns.

use super::cell::RpcMeasure;
use super::plan::{RpcPlan, measure_and_explain};
use super::report;
use crate::controller::lab::{Across, Lab, LabError, LabPart, Profile};

/// The lab's RPC grid.
#[derive(Debug, Clone)]
pub struct RpcLab {
    pub plan: RpcPlan,
}

impl RpcLab {
    pub fn new(profile: Profile) -> RpcLab {
        RpcLab {
            plan: profile.pick(RpcPlan::smoke(), RpcPlan::quick(), RpcPlan::full()),
        }
    }

    pub fn boxed(profile: Profile) -> Box<dyn LabPart> {
        Box::new(Self::new(profile))
    }
}

impl LabPart for RpcLab {
    /// RPC's "local" column is both ends on `to`, as in 1989.
    fn across(&mut self, across: &Across) {
        self.plan.placements = vec![across.at_to(), across.path()];
        self.plan.skipped.clear();
    }

    fn run(&self, lab: &mut Lab) -> Result<(), LabError> {
        let plan = &self.plan;
        for note in &plan.skipped {
            lab.skipped(note.clone())?;
        }
        eprintln!(
            "lab: rpc, {} calls x {} reps per cell, {} placement(s)",
            plan.calls,
            plan.reps,
            plan.placements.len()
        );
        let explained = measure_and_explain(lab.runner, &mut RpcMeasure, plan)?;
        lab.measured(format!(
            "{}{}",
            plan.title(),
            report::table(&explained.records, &explained.findings)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::testbed::Placement;

    #[test]
    fn profiles_and_the_1989_local_column_across_hosts() {
        let quick = RpcLab::new(Profile::Quick);
        assert_eq!((quick.plan.calls, quick.plan.reps), (10, 3));
        let full = RpcLab::new(Profile::Full);
        assert_eq!((full.plan.calls, full.plan.reps), (100, 20));
        let smoke = RpcLab::new(Profile::Smoke);
        assert_eq!((smoke.plan.calls, smoke.plan.reps), (10, 2));
        let mut part = quick;
        part.across(&Across {
            from: "a:5310",
            to: "b:5310",
            serves: &|_, _| true,
        });
        let remote = |from: &str, to: &str| Placement::Remote {
            from: from.into(),
            to: to.into(),
        };
        assert_eq!(
            part.plan.placements,
            [remote("b:5310", "b:5310"), remote("a:5310", "b:5310")],
            "1989's local column is both ends on --to"
        );
        assert!(part.plan.skipped.is_empty());
    }
}
