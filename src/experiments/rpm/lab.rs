//! rpm's share of the lab: responsiveness on an emulated 50 Mbit/s link
//! (5 ms each way) with a deep drop-tail queue (1000 packets: 240 ms at
//! the rate) and with FQ-CoDel, side by side: the grade the queue gives
//! and the grade the fix gives back. About half a minute in the quick
//! profile (each run ends once goodput and responsiveness saturate).
//! Across a real path, the path's own responsiveness.

use super::cell::RpmMeasure;
use super::record::RpmParams;
use super::report;
use crate::controller::lab::{Across, Lab, LabError, LabPart, Profile};
use crate::endpoint::rpm::types::{Direction, LoadSockets};
use crate::record::testbed::{LinkVia, Placement};
use crate::testbed::link::LinkOverrides;
use crate::testbed::netns::has_net_admin;

#[derive(Debug, Clone)]
pub struct RpmLab {
    pub cells: Vec<RpmParams>,
    /// Whether the cells are on links netlab builds (they need root).
    pub emulated: bool,
}

/// The lab's cell on `placement` (labelled).
fn cell(placement: Placement, label: &str, seconds: f64) -> RpmParams {
    RpmParams {
        placement,
        direction: Direction::Down,
        max_connections: 16,
        probe_rate: 100,
        max_duration_s: seconds,
        idle_probes: 10,
        sockets: LoadSockets::default(),
        label: Some(label.to_string()),
        design: None,
        irtt: false,
    }
}

/// The 50 Mbit/s link with `discipline`, through netlab's emulator (the
/// same queue code for both, on any kernel).
fn link(discipline: &str) -> Placement {
    let profile = crate::record::testbed::LinkProfile::with_overrides(&LinkOverrides {
        rate: Some("50mbit".into()),
        delay: Some("5ms".into()),
        queue: Some("1000p".into()),
        queue_discipline: Some(discipline.into()),
        ..LinkOverrides::default()
    })
    .expect("the lab's link is valid");
    Placement::Netns {
        link: profile,
        via: LinkVia::Emulator,
        capture: false,
        pcap: None,
        verbose: false,
    }
}

impl RpmLab {
    pub fn new(profile: Profile) -> RpmLab {
        let seconds = profile.pick(4.0, 14.0, 20.0);
        RpmLab {
            cells: ["droptail", "fq_codel"]
                .iter()
                .map(|d| cell(link(d), d, seconds))
                .collect(),
            emulated: true,
        }
    }

    pub fn boxed(profile: Profile) -> Box<dyn LabPart> {
        Box::new(Self::new(profile))
    }
}

impl LabPart for RpmLab {
    /// Across a real path: its own responsiveness, nothing emulated.
    fn across(&mut self, across: &Across) {
        let seconds = self.cells.first().map_or(14.0, |c| c.max_duration_s);
        self.cells = vec![cell(across.path(), "the path", seconds)];
        self.emulated = false;
    }

    fn run(&self, lab: &mut Lab) -> Result<(), LabError> {
        if self.emulated && !has_net_admin() {
            return lab.skipped("rpm: the emulated 50 Mbit/s link needs root (network namespaces)");
        }
        eprintln!("lab: rpm, {} cells", self.cells.len());
        let records = lab.runner.grid(&mut RpmMeasure, &self.cells)?;
        lab.measured(report::table(&records))
    }
}
