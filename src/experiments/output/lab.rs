//! output's share of the lab: 1987's text typed to a terminal through
//! each of netlab's relay designs and the real servers beside them, per KB.

use super::cell::{OutputMeasure, OutputPlan};
use super::record::OutputParams;
use super::report;
use crate::controller::lab::{Across, Lab, LabError, LabPart, Profile, where_run};
use crate::endpoint::login::host::{Dialect, Target};
use crate::record::testbed::Placement;
use crate::testbed::netns::has_net_admin;
use crate::units::format_size;

/// The lab's terminal-output cells.
#[derive(Debug, Clone)]
pub struct OutputLab {
    pub plan: OutputPlan,
    pub cells: Vec<OutputParams>,
    /// What was left out, and why.
    pub skipped: Vec<String>,
}

impl OutputLab {
    pub fn new(profile: Profile) -> OutputLab {
        let plan = profile.pick(OutputPlan::smoke(), OutputPlan::quick(), OutputPlan::full());
        let mut cells = plan.cells();
        // The real servers this host has, over TELNET.
        let real: Vec<Target> = Target::servers_here()
            .into_iter()
            .filter(|(t, _)| t.relay().is_none())
            .map(|(t, _)| t)
            .collect();
        cells.extend(
            OutputPlan {
                relays: real,
                protocols: vec![Dialect::Telnet],
                ..plan.clone()
            }
            .cells(),
        );
        // Over a 10 Mbit/s Ethernet too, one design over rlogin.
        if has_net_admin() {
            cells.extend(
                OutputPlan {
                    relays: vec![Target::Epoll],
                    protocols: vec![Dialect::Rlogin],
                    placements: vec![Placement::ether10()],
                    ..plan.clone()
                }
                .cells(),
            );
        }
        OutputLab {
            plan,
            cells,
            skipped: Vec::new(),
        }
    }

    pub fn boxed(profile: Profile) -> Box<dyn LabPart> {
        Box::new(Self::new(profile))
    }
}

impl LabPart for OutputLab {
    /// netlab's own designs where both ends allow output; the real servers
    /// (whose presence on an agent's host this host cannot see) are left
    /// out, with the command that runs them.
    fn across(&mut self, across: &Across) {
        self.skipped = across.not_served("output");
        self.cells = if self.skipped.is_empty() {
            self.skipped.push(format!(
                "telnetd and sshd across agents (this host cannot see whether the agent's host has them): netlab output --relay telnetd,sshd --from {} --to {}",
                across.from, across.to
            ));
            OutputPlan {
                placements: vec![across.path()],
                ..self.plan.clone()
            }
            .cells()
        } else {
            Vec::new()
        };
    }

    fn run(&self, lab: &mut Lab) -> Result<(), LabError> {
        for note in &self.skipped {
            lab.skipped(note.clone())?;
        }
        if self.cells.is_empty() {
            return Ok(());
        }
        eprintln!(
            "lab: output, {} typed through each relay design",
            self.plan.size
        );
        let records = lab.runner.grid(&mut OutputMeasure, &self.cells)?;
        lab.measured(format!(
            "netlab output: {} of text typed through each design (unpaced), {}\n{}",
            format_size(self.plan.size),
            where_run(records.iter().map(|r| &r.data.params.placement)),
            report::output_table(&records)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_megabyte_quick_and_only_the_path_across_hosts() {
        let mut part = OutputLab::new(Profile::Quick);
        assert_eq!(part.plan.size, 1 << 20);
        assert!(!part.cells.is_empty());
        part.across(&Across {
            from: "a:5310",
            to: "b:5310",
            serves: &|_, _| true,
        });
        let remote = Placement::Remote {
            from: "a:5310".into(),
            to: "b:5310".into(),
        };
        assert!(!part.cells.is_empty());
        assert!(part.cells.iter().all(|c| c.placement == remote));
        let mut part = OutputLab::new(Profile::Quick);
        part.across(&Across {
            from: "a:5310",
            to: "b:5310",
            serves: &|_, experiment| experiment != "output",
        });
        assert!(part.cells.is_empty());
        assert_eq!(
            part.skipped.len(),
            2,
            "one note per end: {:?}",
            part.skipped
        );
    }
}
