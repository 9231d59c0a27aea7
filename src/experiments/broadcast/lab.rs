//! broadcast's share of the lab: the storm and each fix, a few seconds
//! in all (the storm dies by its TTL of 30 in about a second).

use super::cell::{BroadcastMeasure, check, default_spec};
use super::record::{BroadcastSpec, Fix};
use super::report;
use crate::controller::lab::{Across, Lab, LabError, LabPart, Profile};
use crate::testbed::netns::has_net_admin;

#[derive(Debug, Clone)]
pub struct BroadcastLab {
    pub specs: Vec<BroadcastSpec>,
}

impl BroadcastLab {
    pub fn new(profile: Profile) -> BroadcastLab {
        let max_ms = profile.pick(3_000, 5_000, 20_000);
        BroadcastLab {
            specs: Fix::ALL
                .iter()
                .map(|&fix| default_spec(fix, max_ms))
                .collect(),
        }
    }

    pub fn boxed(profile: Profile) -> Box<dyn LabPart> {
        Box::new(Self::new(profile))
    }
}

impl LabPart for BroadcastLab {
    /// The storm runs on this host's own emulated Ethernet wherever the
    /// rest of the lab runs: nothing of it crosses a real path.
    fn across(&mut self, _: &Across) {}

    fn check(&self) -> Result<(), LabError> {
        for spec in &self.specs {
            check(spec).map_err(|e| LabError::Plan {
                part: "broadcast",
                why: e.to_string(),
            })?;
        }
        Ok(())
    }

    fn run(&self, lab: &mut Lab) -> Result<(), LabError> {
        if !has_net_admin() {
            return lab.skipped(
                "broadcast: the storm needs root (network namespaces, a bridge and TAP devices)",
            );
        }
        eprintln!("lab: broadcast storm, {} runs", self.specs.len());
        let records = lab
            .runner
            .grid(&mut BroadcastMeasure { verbose: false }, &self.specs)?;
        let mut text = "netlab broadcast: one RIP supply to the all-1's broadcast on a 10 Mbit/s Ethernet of 8 hosts\n".to_string();
        text.push_str(&report::table(&records));
        lab.measured(text)
    }
}
