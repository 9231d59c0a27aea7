//! What an experiment is to the rest of netlab: one type that implements
//! [`Experiment`] (its command's arguments and run, the role its endpoints
//! play, how agents serve it, its share of the lab) and, when it writes
//! records of its own, [`Recorded`] (its record data and report section).
//! The registry (`experiments/mod.rs`) lists these types and nothing else:
//! an entry that is not an experiment, or whose section reads another
//! type than its records, fails at these traits' bounds.
//!
//! Invariants: an experiment's [`Experiment::NAME`] is its subcommand's
//! name, the `experiment` its records carry and its report section's
//! anchor; its role (when it has one) is its own, answering requests by
//! that name.

use crate::controller::lab::LabEntry;
use crate::endpoint::agent::policy::{RoleCheck, Serve};
use crate::endpoint::role::{Role, RoleEntry, check_of};
use crate::options::Output;
use crate::record::profile::Profiled;
use crate::report::html::ReportSection;

/// One experiment, as its command, its endpoints, agents and the lab know
/// it. Everything but the name, arguments and run is optional: an
/// experiment without a role runs its cells in the controller's process,
/// one without [`Experiment::AGENT`] is not served by agents, one without
/// [`Experiment::LAB`] is not part of `netlab lab`.
pub trait Experiment {
    /// The subcommand's name.
    const NAME: &'static str;
    /// Its command-line arguments (the subcommand's, flattened by clap).
    type Args: clap::Args + clap::FromArgMatches;
    /// The endpoint role its cells' processes play, and its agent check.
    const ROLE: Option<RolePart> = None;
    /// How an agent serves it (none: agents refuse its requests).
    const AGENT: Option<Serve> = None;
    /// Its part of `netlab lab`, built for a profile.
    const LAB: Option<LabEntry> = None;
    /// Runs the command, printing to `out`.
    fn run(args: Self::Args, out: &mut Output) -> anyhow::Result<()>;
    /// Whether it prints JSON (so an error is printed as JSON too).
    fn json(args: &Self::Args) -> bool;
}

/// An experiment that writes records of its own, which a report reads
/// back into its section. The section reads exactly the records' type.
pub trait Recorded: Experiment {
    /// One record's data, as the records file holds it under
    /// `"experiment": NAME`.
    type Data: Profiled
        + serde::Serialize
        + serde::de::DeserializeOwned
        + Clone
        + PartialEq
        + std::fmt::Debug;
    /// Its section of the report.
    type Section: ReportSection<Data = Self::Data>;
}

/// A role as the registry holds it: the entry endpoints make it from and
/// the agent's check of its requests.
#[derive(Clone, Copy)]
pub struct RolePart {
    pub entry: RoleEntry,
    pub check: RoleCheck,
}

impl RolePart {
    pub const fn of<R: Role>() -> RolePart {
        RolePart {
            entry: RoleEntry::of::<R>(),
            check: check_of::<R>(),
        }
    }
}

/// The `Some`s of `all`, in order, as an array of exactly `M` (the
/// registry's tables are built with it in const context; a wrong `M` is
/// a compile-time error). `fill` only sizes the array before it is
/// written over.
pub const fn somes<T: Copy, const N: usize, const M: usize>(
    all: [Option<T>; N],
    fill: T,
) -> [T; M] {
    let mut out = [fill; M];
    let mut i = 0;
    let mut j = 0;
    while i < N {
        if let Some(x) = all[i] {
            assert!(j < M, "more entries than the table's length");
            out[j] = x;
            j += 1;
        }
        i += 1;
    }
    assert!(j == M, "fewer entries than the table's length");
    out
}

/// How many of `all` are `Some` (the length [`somes`] is given).
pub const fn count_somes<T: Copy, const N: usize>(all: &[Option<T>; N]) -> usize {
    let mut i = 0;
    let mut n = 0;
    while i < N {
        if all[i].is_some() {
            n += 1;
        }
        i += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn somes_keeps_the_present_entries_in_order() {
        const ALL: [Option<u8>; 5] = [None, Some(3), None, Some(1), Some(2)];
        const KEPT: [u8; count_somes(&ALL)] = somes(ALL, 0);
        assert_eq!(KEPT, [3, 1, 2]);
        const NONE: [Option<u8>; 2] = [None, None];
        const EMPTY: [u8; count_somes(&NONE)] = somes(NONE, 0);
        assert!(EMPTY.is_empty());
    }
}
