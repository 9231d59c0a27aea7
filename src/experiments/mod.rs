//! The experiments, each in its own folder over the shared core: its plan
//! and cell, its endpoint role, its record data, its analysis, its report
//! section and its share of the lab. This file is the registry: the one
//! place that names every experiment, one entry each (see
//! `docs/ARCHITECTURE.md`, "Adding an experiment"). The page that joins
//! experiments' records (`page.rs`) sits beside it.

// Each folder's `mod` line is written here rather than made by the
// registry's macro, so that rustfmt (which does not expand macros) sees
// every file.
pub mod ablate;
pub mod broadcast;
pub mod cksum;
pub mod login;
pub mod mesh;
pub mod output;
pub mod page;
pub mod rpc;
pub mod rpm;
pub mod stream;
pub mod stream_section;
pub mod sweep;

use crate::controller::lab::LabEntry;
use crate::endpoint::agent::policy::{RoleCheck, Serve, Served};
use crate::endpoint::role::RoleTable;
use crate::options::Output;
use crate::options::experiment::{Experiment, Recorded, RolePart, count_somes, somes};
use crate::record::profile::Profiled;
use crate::report::html::{ReportSection, Section, section_of};
use serde::{Deserialize, Serialize};

/// Builds the registry from one line per experiment, the type that
/// implements [`Experiment`] (and [`Recorded`] where `records` follows it):
///
/// ```text
/// /// Its line in `netlab --help`.
/// name: Variant(its::Type) records,
/// ```
///
/// and makes of them (the folder's `pub mod` line is written above, for
/// rustfmt): the subcommands ([`Command`]); the endpoint roles
/// ([`ROLES`]); what agents serve ([`SERVED`]); the lab's parts in order
/// ([`LAB`]); the records a report reads, in report order ([`RECORDED`]),
/// as one type ([`RecordData`]: read by the record's `experiment` name,
/// with an accessor per experiment named after it); and each record's
/// section and cell name. Everything else about an experiment is its
/// type's: a line naming a type that is not an experiment, or marked
/// `records` on one that is not [`Recorded`], fails at those bounds.
macro_rules! registry {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident: $Variant:ident($E:ty) $($records:ident)?,
    )*) => {
        const EXPERIMENTS: usize = [$(stringify!($name)),*].len();

        /// Each experiment's role, where it has one, in the registry's order.
        const ROLE_PARTS: [Option<RolePart>; EXPERIMENTS] = [$(<$E as Experiment>::ROLE,)*];

        const TESTBED_ROLES: [RolePart; 2] = [
            RolePart::of::<crate::endpoint::testbed::EmulatorRole>(),
            RolePart::of::<crate::endpoint::testbed::CaptureRole>(),
        ];

        const ALL_ROLES: [Option<RolePart>; 2 + EXPERIMENTS] = {
            let mut all = [None; 2 + EXPERIMENTS];
            all[0] = Some(TESTBED_ROLES[0]);
            all[1] = Some(TESTBED_ROLES[1]);
            let mut i = 0;
            while i < EXPERIMENTS {
                all[2 + i] = ROLE_PARTS[i];
                i += 1;
            }
            all
        };

        const ROLE_COUNT: usize = count_somes(&ALL_ROLES);

        const ROLE_LIST: [RolePart; ROLE_COUNT] = somes(ALL_ROLES, TESTBED_ROLES[0]);

        /// Every role an endpoint process can play: the testbed's helpers,
        /// then each experiment's.
        pub const ROLES: RoleTable = &{
            let mut entries = [TESTBED_ROLES[0].entry; ROLE_COUNT];
            let mut i = 0;
            while i < ROLE_COUNT {
                entries[i] = ROLE_LIST[i].entry;
                i += 1;
            }
            entries
        };

        const ROLE_CHECKS: [RoleCheck; ROLE_COUNT] = {
            let mut checks = [TESTBED_ROLES[0].check; ROLE_COUNT];
            let mut i = 0;
            while i < ROLE_COUNT {
                checks[i] = ROLE_LIST[i].check;
                i += 1;
            }
            checks
        };

        const AGENTS: [Option<(&str, Serve)>; EXPERIMENTS] = [$(
            match <$E as Experiment>::AGENT {
                Some(how) => Some((<$E as Experiment>::NAME, how)),
                None => None,
            },
        )*];

        const SERVED_EXPERIMENTS: [(&str, Serve); count_somes(&AGENTS)] =
            somes(AGENTS, ("", Serve::ByDefault));

        /// What an agent serves: each experiment and how (by default, on
        /// `--allow`, or as another's runs), and the lab's run, which
        /// holds each request to its own experiment.
        pub const SERVED: Served = Served {
            experiments: &SERVED_EXPERIMENTS,
            every: "lab",
            roles: &ROLE_CHECKS,
        };

        const LAB_PARTS: [Option<LabEntry>; EXPERIMENTS] = [$(<$E as Experiment>::LAB,)*];

        /// Each experiment's share of `netlab lab`, in the order the lab
        /// runs them (the registry's).
        pub const LAB: &[LabEntry] = &somes::<_, EXPERIMENTS, { count_somes(&LAB_PARTS) }>(
            LAB_PARTS,
            |_| unreachable!("a filler the registry's lab parts overwrite"),
        );

        registry!(@records $($name $Variant ($E) $($records)?;)*);

        /// Each experiment's subcommand, as the command line lists them.
        #[derive(Debug, clap::Subcommand)]
        pub enum Command {
            $($(#[doc = $doc])* $Variant(<$E as Experiment>::Args),)*
        }

        impl Command {
            /// Runs the experiment's command, printing to `out`.
            pub fn run(self, out: &mut Output) -> anyhow::Result<()> {
                match self {
                    $(Command::$Variant(args) => <$E as Experiment>::run(args, out),)*
                }
            }

            /// Whether it prints JSON (so an error is printed as JSON too).
            pub fn json(&self) -> bool {
                match self {
                    $(Command::$Variant(args) => <$E as Experiment>::json(args),)*
                }
            }
        }

        /// The registry's names are its experiments' own: each line's
        /// subcommand, records and section carry one name.
        #[cfg(test)]
        const NAMES: [(&str, &str); EXPERIMENTS] =
            [$((stringify!($name), <$E as Experiment>::NAME),)*];
    };
    // The recorded experiments alone (those marked `records`), gathered
    // first so that each arm below lists them once.
    (@records $($name:ident $Variant:ident ($E:ty) $($records:ident)?;)*) => {
        registry!(@recorded [] $($name $Variant ($E) $($records)?;)*);
    };
    (@recorded [$($done:tt)*] $name:ident $Variant:ident ($E:ty) records; $($rest:tt)*) => {
        registry!(@recorded [$($done)* ($name $Variant $E)] $($rest)*);
    };
    (@recorded [$($done:tt)*] $name:ident $Variant:ident ($E:ty); $($rest:tt)*) => {
        registry!(@recorded [$($done)*] $($rest)*);
    };
    (@recorded [$(($name:ident $Variant:ident $E:ty))*]) => {
        /// The experiments whose records a report reads, in report order.
        pub const RECORDED: &[&str] = &[$(<$E as Experiment>::NAME,)*];

        /// Any experiment's record data, as a records file holds them side
        /// by side. Written exactly as each experiment writes its own
        /// (`"experiment": NAME` and its fields), read by that name.
        // Records sit in vectors read once for a report; a box per record
        // would buy nothing but an indirection.
        #[allow(clippy::large_enum_variant)]
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(untagged)]
        pub enum RecordData {
            $($Variant(<$E as Recorded>::Data),)*
        }

        impl RecordData {
            /// The experiment's name, as the record carries it.
            pub fn experiment(&self) -> &'static str {
                match self {
                    $(RecordData::$Variant(_) => <$E as Experiment>::NAME,)*
                }
            }

            $(
                pub fn $name(&self) -> Option<&<$E as Recorded>::Data> {
                    match self {
                        RecordData::$Variant(data) => Some(data),
                        _ => None,
                    }
                }
            )*

            /// One record's cell as people name it (without its placement).
            pub fn cell_name(&self) -> String {
                match self {
                    $(RecordData::$Variant(data) => {
                        <<$E as Recorded>::Section as ReportSection>::cell(data)
                    })*
                }
            }
        }

        impl Profiled for RecordData {
            fn role_of(&self, pid: u32) -> Option<&'static str> {
                match self {
                    $(RecordData::$Variant(data) => Profiled::role_of(data, pid), )*
                }
            }

            fn data_path(&self) -> Option<crate::record::profile::DataPath> {
                match self {
                    $(RecordData::$Variant(data) => Profiled::data_path(data), )*
                }
            }
        }

        impl<'de> Deserialize<'de> for RecordData {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                use serde::de::Error;
                let value = serde_json::Value::deserialize(deserializer)?;
                let name = value
                    .get("experiment")
                    .and_then(|v| v.as_str())
                    .ok_or_else(|| D::Error::missing_field("experiment"))?
                    .to_string();
                $(
                    if name == <$E as Experiment>::NAME {
                        return serde_json::from_value::<<$E as Recorded>::Data>(value)
                            .map(RecordData::$Variant)
                            .map_err(D::Error::custom);
                    }
                )*
                Err(D::Error::unknown_variant(&name, RECORDED))
            }
        }

        /// Each experiment's section the records allow, in report order.
        pub fn sections(records: &[Record]) -> Vec<Section> {
            let mut sections = Vec::new();
            $(
                sections.extend(section_of::<<$E as Recorded>::Section>(
                    &records_of(records, RecordData::$name),
                ));
            )*
            sections
        }
    };
}

registry! {
    /// Bulk transfer between two endpoint processes (ttcp-style).
    stream: Stream(stream::Stream) records,
    /// ONC RPC: the 1989 experiment (time per call vs size), cliffs and their causes; `serve`, `ping`.
    rpc: Rpc(rpc::Rpc) records,
    /// Run an experiment over a grid of sizes: throughput vs size, knee, cost model.
    sweep: Sweep(sweep::Sweep),
    /// Internet checksum and copy costs per KB: variants, limits, then vs now, the per-packet budget.
    cksum: Cksum(cksum::Cksum) records,
    /// What-ifs as a full factorial: each feature's effect and their interactions.
    ablate: Ablate(ablate::Ablate),
    /// Remote-login load (the 1989 typing test) and servers on ptys: `serve`.
    login: Login(login::Login) records,
    /// The 1987 terminal-output test: text typed to a terminal through each relay design.
    output: Output(output::Output) records,
    /// The 1990 broadcast storm on an emulated Ethernet: 1990 hosts and Linux, each fix a factor.
    broadcast: Broadcast(broadcast::Broadcast) records,
    /// Responsiveness under working conditions (RPM, draft-ietf-ippm-responsiveness): idle vs working latency, grade, which queue held the delay.
    rpm: Rpm(rpm::Rpm) records,
    /// Every pair of N hosts' agents in rounds of disjoint pairs: throughput, RTT, loss and RPM matrices, bottlenecks, resume; `plan`, `report`, `manifests`.
    mesh: Mesh(mesh::Mesh) records,
}

/// A record of any experiment.
pub type Record = crate::record::Record<RecordData>;

/// The records of one experiment among `records`, as that experiment's own.
pub fn records_of<T: Clone>(
    records: &[Record],
    pick: fn(&RecordData) -> Option<&T>,
) -> Vec<crate::record::Record<T>> {
    records
        .iter()
        .filter_map(|r| pick(&r.data).map(|data| r.with(data.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    /// Each registry line's name is its experiment's `NAME`: the name the
    /// subcommand, records, section and role go by.
    #[test]
    fn each_line_is_named_as_its_experiment() {
        for (line, name) in super::NAMES {
            assert_eq!(line, name);
        }
    }

    /// A request is found by its name among its role's routes, the first
    /// that matches: a name routed twice would leave the second handler
    /// unreachable.
    #[test]
    fn every_role_routes_each_request_name_once() {
        for entry in super::ROLES {
            let names = (entry.requests)();
            assert!(!names.is_empty(), "{} routes no request", entry.role);
            let mut once = names.clone();
            once.sort_unstable();
            once.dedup();
            assert_eq!(
                once.len(),
                names.len(),
                "{} routes a name twice: {names:?}",
                entry.role
            );
        }
    }
}
