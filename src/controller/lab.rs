//! The lab's seam: each experiment's share of `netlab lab` is a
//! [`LabPart`] in its own folder (`lab.rs`), built for a profile (smoke, quick
//! or full), moved onto a real path when the lab runs across hosts, and run
//! through the one runner, handing each finished section to the caller as
//! text. The lab (`crate::lab`) runs the registry's parts in order and
//! names no experiment; this module names none either.
//!
//! Invariants: every part's [`LabPart::check`] passes before any part
//! runs (nothing runs if a later part could not); a part that cannot run
//! here shows a [`Section::Skipped`] with the reason rather than failing
//! the lab; what one part measured that a later one reads goes through
//! [`Findings`], in core types only.

use crate::analysis::costmodel::CostModel;
use crate::controller::runner::Runner;
use crate::controller::{CellError, MeasureError};
use crate::record::testbed::Placement;
use thiserror::Error;

/// How long the lab runs: the quick profile's cells with fewer repetitions
/// and shorter windows (a check that the host and the build run
/// everything, whose figures are rough), about two minutes, or the
/// sources' counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    Smoke,
    Quick,
    Full,
}

impl Profile {
    /// Its flag's name (`--smoke`, `--full`; `quick` has none).
    pub fn name(self) -> &'static str {
        self.pick("smoke", "quick", "full")
    }

    /// The profile `name` names.
    pub fn named(name: &str) -> Option<Profile> {
        [Profile::Smoke, Profile::Quick, Profile::Full]
            .into_iter()
            .find(|p| p.name() == name)
    }

    /// The value for this profile: `smoke`, `quick` or `full`.
    pub fn pick<T>(self, smoke: T, quick: T, full: T) -> T {
        match self {
            Profile::Smoke => smoke,
            Profile::Quick => quick,
            Profile::Full => full,
        }
    }
}

/// The lab across a real path: the sending, calling and typing ends at
/// `from`, the receiving and serving ends at `to` (each `local` or an
/// agent), and what each end serves.
pub struct Across<'a> {
    pub from: &'a str,
    pub to: &'a str,
    /// Whether `end` serves `experiment` (`local` serves everything).
    pub serves: &'a dyn Fn(&str, &str) -> bool,
}

impl Across<'_> {
    /// The path from `from` to `to`.
    pub fn path(&self) -> Placement {
        Placement::Remote {
            from: self.from.to_string(),
            to: self.to.to_string(),
        }
    }

    /// Both ends on `to` (1989's "local" column, on the serving host).
    pub fn at_to(&self) -> Placement {
        Placement::Remote {
            from: self.to.to_string(),
            to: self.to.to_string(),
        }
    }

    /// Why `experiment` cannot run on this path: one note per end that
    /// does not serve it (none when both do).
    pub fn not_served(&self, experiment: &str) -> Vec<String> {
        let (from, to) = (self.from, self.to);
        [from, to]
            .into_iter()
            .filter(|end| !(self.serves)(end, experiment))
            .map(|end| {
                format!(
                    "{experiment} from {from} to {to}: agent {end} does not serve {experiment} (start it with --allow {experiment})"
                )
            })
            .collect()
    }
}

/// What one part measured that a later part reads, in the core's types.
#[derive(Debug, Clone, Default)]
pub struct Findings {
    /// A bulk transfer's cost per record (per call and per byte), fitted
    /// to its throughput over record sizes, when a part measured one.
    pub cost_model: Option<CostModel>,
}

/// One finished step of the lab, as it prints.
#[derive(Debug, Clone, PartialEq)]
pub enum Section {
    /// A note on what was left out and why.
    Skipped(String),
    /// A table (or tables) and its lines, in its source's shape.
    Measured(String),
}

impl Section {
    /// The section as it prints.
    pub fn text(&self) -> String {
        match self {
            Section::Skipped(note) => format!("skipped: {note}\n"),
            Section::Measured(text) => text.clone(),
        }
    }
}

/// Why the lab stopped.
#[derive(Debug, Error)]
pub enum LabError {
    #[error(transparent)]
    Measure(#[from] MeasureError),
    #[error(transparent)]
    Cell(#[from] CellError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A part's plan cannot run on this host (its limits, its options).
    #[error("{part}: {why}")]
    Plan { part: &'static str, why: String },
}

/// What a part runs with: the runner, what earlier parts found, and where
/// finished sections go.
pub struct Lab<'a, 'w> {
    pub runner: &'a mut Runner<'w>,
    pub findings: Findings,
    /// A stored calibration of this host's packet cost, for the parts that
    /// emulate a 1989-class host (None: each measures it now).
    pub calibration: Option<std::path::PathBuf>,
    show: &'a mut dyn FnMut(Section) -> Result<(), LabError>,
}

impl<'a, 'w> Lab<'a, 'w> {
    pub fn new(
        runner: &'a mut Runner<'w>,
        show: &'a mut dyn FnMut(Section) -> Result<(), LabError>,
    ) -> Self {
        Lab {
            runner,
            findings: Findings::default(),
            calibration: None,
            show,
        }
    }

    /// Hands a measured section to the caller.
    pub fn measured(&mut self, text: String) -> Result<(), LabError> {
        (self.show)(Section::Measured(text))
    }

    /// Hands a note on what was left out to the caller.
    pub fn skipped(&mut self, note: impl Into<String>) -> Result<(), LabError> {
        (self.show)(Section::Skipped(note.into()))
    }
}

/// One experiment's share of the lab.
pub trait LabPart {
    /// Moves the part onto a real path (see [`Across`]): nothing emulated,
    /// and only what both ends serve.
    fn across(&mut self, across: &Across);
    /// Whether the part can run on this host, checked for every part
    /// before any runs.
    fn check(&self) -> Result<(), LabError> {
        Ok(())
    }
    /// Runs the part, showing each finished section before the next starts.
    fn run(&self, lab: &mut Lab) -> Result<(), LabError>;
}

/// How the registry lists a part: built for a profile.
pub type LabEntry = fn(Profile) -> Box<dyn LabPart>;

/// Where a section's cells ran, each place once in order: loopback, a
/// netns link by its profile, or from one host to another.
pub fn where_run<'a>(placements: impl IntoIterator<Item = &'a Placement>) -> String {
    let mut places: Vec<String> = Vec::new();
    for placement in placements {
        let place = match placement {
            Placement::Loopback => "loopback".to_string(),
            Placement::Netns { link, .. } => format!(
                "netns over {}",
                link.name.as_deref().unwrap_or("a custom link")
            ),
            Placement::Remote { from, to } => format!("from {from} to {to}"),
        };
        if !places.contains(&place) {
            places.push(place);
        }
    }
    places.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_end_that_does_not_serve_is_named_with_its_fix() {
        let across = Across {
            from: "local",
            to: "b:5310",
            serves: &|end, experiment| end == "local" || experiment != "login",
        };
        assert!(across.not_served("rpc").is_empty());
        let notes = across.not_served("login");
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].contains("agent b:5310") && notes[0].contains("--allow login"));
        assert_eq!(
            across.path(),
            Placement::Remote {
                from: "local".into(),
                to: "b:5310".into()
            }
        );
    }

    #[test]
    fn places_are_named_once_in_order() {
        let remote = Placement::Remote {
            from: "a".into(),
            to: "b".into(),
        };
        assert_eq!(
            where_run([&Placement::Loopback, &remote, &Placement::Loopback]),
            "loopback, from a to b"
        );
    }
}
