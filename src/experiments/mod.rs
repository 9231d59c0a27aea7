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
use crate::endpoint::agent::policy::{Serve, Served};
use crate::endpoint::role::{RoleEntry, RoleTable, check_of};
use crate::options::Output;
use crate::record::profile::Profiled;
use crate::report::html::{ReportSection, Section, section_of};
use serde::{Deserialize, Serialize};

/// Builds the registry from one entry per experiment:
///
/// ```text
/// /// Its line in `netlab --help`.
/// name: Variant(its clap arguments) {
///     data: its record data, section: its report section,  // if it records
///     role: its endpoint role,                               // if it has one
///     agent: ByDefault | OnAllow | As(other),                // if agents serve it
///     lab: its lab part's constructor,                       // if the lab runs it
/// }
/// ```
///
/// and makes of them (the folder's `pub mod` line is written above, for
/// rustfmt): the subcommands
/// ([`Command`]); the endpoint roles ([`ROLES`]); what agents serve
/// ([`SERVED`]); the lab's parts in order ([`LAB`]); the records a report
/// reads, in report order ([`RECORDED`]), as one type ([`RecordData`]: read
/// by the record's `experiment` name, with an accessor per experiment
/// named after it); and each record's section and cell name.
macro_rules! registry {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident: $Variant:ident($Args:ty) {
            $(data: $Data:ty, section: $Section:ty,)?
            $(role: $Role:ty,)?
            $(agent: $how:ident $(($($as:ident),+))?,)?
            $(lab: $Lab:expr,)?
        }
    )*) => {
        /// Every role an endpoint process can play: the testbed's helpers,
        /// then each experiment's.
        pub const ROLES: RoleTable = &[
            RoleEntry::of::<crate::endpoint::testbed::EmulatorRole>(),
            RoleEntry::of::<crate::endpoint::testbed::CaptureRole>(),
            $($(RoleEntry::of::<$Role>(),)?)*
        ];

        /// What an agent serves: each experiment and how (by default, on
        /// `--allow`, or as another's runs), and the lab's run, which
        /// holds each request to its own experiment.
        pub const SERVED: Served = Served {
            experiments: &[$($((stringify!($name), Serve::$how $((&[$(stringify!($as)),+]))?),)?)*],
            every: "lab",
            roles: &[
                check_of::<crate::endpoint::testbed::EmulatorRole>(),
                check_of::<crate::endpoint::testbed::CaptureRole>(),
                $($(check_of::<$Role>(),)?)*
            ],
        };

        /// Each experiment's share of `netlab lab`, in the order the lab
        /// runs them (the registry's).
        pub const LAB: &[LabEntry] = &[$($($Lab,)?)*];

        /// The experiments whose records a report reads, in report order.
        pub const RECORDED: &[&str] = &[$($(<$Section as ReportSection>::EXPERIMENT,)?)*];

        /// Any experiment's record data, as a records file holds them side
        /// by side. Written exactly as each experiment writes its own
        /// (`"experiment": NAME` and its fields), read by that name.
        // Records sit in vectors read once for a report; a box per record
        // would buy nothing but an indirection.
        #[allow(clippy::large_enum_variant)]
        #[derive(Debug, Clone, PartialEq, Serialize)]
        #[serde(untagged)]
        pub enum RecordData {
            $($($Variant($Data),)?)*
        }

        impl RecordData {
            /// The experiment's name, as the record carries it.
            pub fn experiment(&self) -> &'static str {
                match self {
                    $($(RecordData::$Variant(_) => <$Section as ReportSection>::EXPERIMENT,)?)*
                }
            }

            $($(
                pub fn $name(&self) -> Option<&$Data> {
                    match self {
                        RecordData::$Variant(data) => Some(data),
                        _ => None,
                    }
                }
            )?)*

            /// One record's cell as people name it (without its placement).
            pub fn cell_name(&self) -> String {
                match self {
                    $($(RecordData::$Variant(data) => <$Section as ReportSection>::cell(data),)?)*
                }
            }
        }

        impl Profiled for RecordData {
            fn role_of(&self, pid: u32) -> Option<&'static str> {
                match self {
                    $($(RecordData::$Variant(data) => Profiled::role_of(data as &$Data, pid),)?)*
                }
            }

            fn data_path(&self) -> Option<crate::record::profile::DataPath> {
                match self {
                    $($(RecordData::$Variant(data) => Profiled::data_path(data as &$Data),)?)*
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
                $($(
                    if name == <$Section as ReportSection>::EXPERIMENT {
                        return serde_json::from_value::<$Data>(value)
                            .map(RecordData::$Variant)
                            .map_err(D::Error::custom);
                    }
                )?)*
                Err(D::Error::unknown_variant(&name, RECORDED))
            }
        }

        /// Each experiment's section the records allow, in report order.
        pub fn sections(records: &[Record]) -> Vec<Section> {
            let mut sections = Vec::new();
            $($(
                sections.extend(section_of::<$Section>(&records_of(records, RecordData::$name)));
            )?)*
            sections
        }

        /// Each experiment's subcommand, as the command line lists them.
        #[derive(Debug, clap::Subcommand)]
        pub enum Command {
            $($(#[doc = $doc])* $Variant($Args),)*
        }

        impl Command {
            /// Runs the experiment's command, printing to `out`.
            pub fn run(self, out: &mut Output) -> anyhow::Result<()> {
                match self {
                    $(Command::$Variant(args) => $name::options::run(args, out),)*
                }
            }

            /// Whether it prints JSON (so an error is printed as JSON too).
            pub fn json(&self) -> bool {
                match self {
                    $(Command::$Variant(args) => args.json(),)*
                }
            }
        }
    };
}

registry! {
    /// Bulk transfer between two endpoint processes (ttcp-style).
    stream: Stream(stream::options::StreamArgs) {
        data: stream::record::StreamData, section: stream_section::StreamSection,
        role: stream::role::StreamRole,
        agent: ByDefault,
        lab: stream::lab::StreamLab::boxed,
    }
    /// ONC RPC: the 1989 experiment (time per call vs size), cliffs and their causes; `serve`, `ping`.
    rpc: Rpc(rpc::options::RpcArgs) {
        data: rpc::record::RpcData, section: rpc::report::RpcSection,
        role: rpc::role::RpcRole,
        agent: ByDefault,
        lab: rpc::lab::RpcLab::boxed,
    }
    /// Run an experiment over a grid of sizes: throughput vs size, knee, cost model.
    sweep: Sweep(sweep::options::SweepArgs) {
        agent: As(stream),
        lab: sweep::lab::SweepLab::boxed,
    }
    /// Internet checksum and copy costs per KB: variants, limits, then vs now, the per-packet budget.
    cksum: Cksum(cksum::options::CksumArgs) {
        data: cksum::record::CksumData, section: cksum::report::CksumSection,
        role: cksum::role::CksumRole,
        agent: ByDefault,
        lab: cksum::lab::CksumLab::boxed,
    }
    /// What-ifs as a full factorial: each feature's effect and their interactions.
    ablate: Ablate(ablate::options::AblateArgs) {}
    /// Remote-login load (the 1989 typing test) and servers on ptys: `serve`.
    login: Login(login::options::LoginArgs) {
        data: login::record::LoginData, section: login::report::LoginSection,
        role: login::role::LoginRole,
        agent: OnAllow,
        lab: login::lab::LoginLab::boxed,
    }
    /// The 1987 terminal-output test: text typed to a terminal through each relay design.
    output: Output(output::options::OutputArgs) {
        data: output::record::OutputData, section: output::report::OutputSection,
        agent: OnAllow,
        lab: output::lab::OutputLab::boxed,
    }
    /// The 1990 broadcast storm on an emulated Ethernet: 1990 hosts and Linux, each fix a factor.
    broadcast: Broadcast(broadcast::options::BroadcastArgs) {
        data: broadcast::record::BroadcastData, section: broadcast::report::BroadcastSection,
        role: broadcast::wire::ModelRole,
        lab: broadcast::lab::BroadcastLab::boxed,
    }
    /// Responsiveness under working conditions (RPM, draft-ietf-ippm-responsiveness): idle vs working latency, grade, which queue held the delay.
    rpm: Rpm(rpm::options::RpmArgs) {
        data: rpm::record::RpmData, section: rpm::report::RpmSection,
        role: crate::endpoint::rpm::role::RpmRole,
        agent: ByDefault,
        lab: rpm::lab::RpmLab::boxed,
    }
    /// Every pair of N hosts' agents in rounds of disjoint pairs: throughput, RTT, loss and RPM matrices, bottlenecks, resume; `plan`, `report`, `manifests`.
    mesh: Mesh(mesh::options::MeshArgs) {
        agent: As(stream, rpc, rpm),
    }
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
