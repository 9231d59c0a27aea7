//! The experiments, each in its own folder over the shared core: its plan
//! and cell, its endpoint role, its record data, its analysis and its
//! report section. This file is the registry: the one place that names
//! every experiment.

pub mod ablate;
pub mod cksum;
pub mod login;
pub mod output;
pub mod page;
pub mod rpc;
pub mod stream;
pub mod sweep;

use crate::endpoint::agent::policy::Served;
use crate::endpoint::role::{RoleEntry, RoleTable};
use crate::options::Output;
use crate::record::profile::Profiled;
use serde::{Deserialize, Serialize};

/// Every role an endpoint process can play: the testbed's helpers, then
/// each experiment's.
pub const ROLES: RoleTable = &[
    RoleEntry::of::<crate::endpoint::testbed::EmulatorRole>(),
    RoleEntry::of::<crate::endpoint::testbed::CaptureRole>(),
    RoleEntry::of::<stream::role::StreamRole>(),
    RoleEntry::of::<rpc::role::RpcRole>(),
    RoleEntry::of::<cksum::role::CksumRole>(),
    RoleEntry::of::<login::role::LoginRole>(),
];

/// What an agent serves: every experiment `--allow` takes, those it
/// serves without it (they start no program on its host), the runs that
/// are another's through it, and the lab's run, which holds each request
/// to its own experiment.
pub const SERVED: Served = Served {
    experiments: &["stream", "rpc", "cksum", "login", "output"],
    by_default: &["stream", "rpc", "cksum"],
    runs_as: &[("sweep", "stream")],
    every: "lab",
    roles: ROLES,
};

/// Any experiment's record data, as a records file holds them side by side.
/// Written exactly as each experiment writes its own (`"experiment": NAME`
/// and its fields), read by that name.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum RecordData {
    Stream(stream::record::StreamData),
    Rpc(rpc::record::RpcData),
    Cksum(cksum::record::CksumData),
    Login(login::record::LoginData),
    Output(output::record::OutputData),
}

/// The experiments whose records a report reads, in report order.
pub const RECORDED: [&str; 5] = ["stream", "rpc", "cksum", "login", "output"];

impl RecordData {
    /// The experiment's name, as the record carries it.
    pub fn experiment(&self) -> &'static str {
        match self {
            RecordData::Stream(_) => "stream",
            RecordData::Rpc(_) => "rpc",
            RecordData::Cksum(_) => "cksum",
            RecordData::Login(_) => "login",
            RecordData::Output(_) => "output",
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
        let parsed = match name.as_str() {
            "stream" => serde_json::from_value(value).map(RecordData::Stream),
            "rpc" => serde_json::from_value(value).map(RecordData::Rpc),
            "cksum" => serde_json::from_value(value).map(RecordData::Cksum),
            "login" => serde_json::from_value(value).map(RecordData::Login),
            "output" => serde_json::from_value(value).map(RecordData::Output),
            other => return Err(D::Error::unknown_variant(other, &RECORDED)),
        };
        parsed.map_err(D::Error::custom)
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

impl RecordData {
    pub fn stream(&self) -> Option<&stream::record::StreamData> {
        match self {
            RecordData::Stream(data) => Some(data),
            _ => None,
        }
    }

    pub fn rpc(&self) -> Option<&rpc::record::RpcData> {
        match self {
            RecordData::Rpc(data) => Some(data),
            _ => None,
        }
    }

    pub fn cksum(&self) -> Option<&cksum::record::CksumData> {
        match self {
            RecordData::Cksum(data) => Some(data),
            _ => None,
        }
    }

    pub fn login(&self) -> Option<&login::record::LoginData> {
        match self {
            RecordData::Login(data) => Some(data),
            _ => None,
        }
    }

    pub fn output(&self) -> Option<&output::record::OutputData> {
        match self {
            RecordData::Output(data) => Some(data),
            _ => None,
        }
    }
}

impl Profiled for RecordData {
    fn role_of(&self, pid: u32) -> Option<&'static str> {
        self.stream().and_then(|data| data.role_of(pid))
    }

    fn data_path(&self) -> Option<crate::record::profile::DataPath> {
        self.stream().and_then(|data| data.data_path())
    }
}

/// Each experiment's subcommand, as the command line lists them.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Bulk transfer between two endpoint processes (ttcp-style).
    Stream(stream::options::StreamArgs),
    /// ONC RPC: the 1989 experiment (time per call vs size), cliffs and their causes; `serve`, `ping`.
    Rpc(rpc::options::RpcArgs),
    /// Internet checksum and copy costs per KB: variants, limits, then vs now, the per-packet budget.
    Cksum(cksum::options::CksumArgs),
    /// Run an experiment over a grid of sizes: throughput vs size, knee, cost model.
    Sweep(sweep::options::SweepArgs),
    /// What-ifs as a full factorial: each feature's effect and their interactions.
    Ablate(ablate::options::AblateArgs),
    /// Remote-login load (the 1989 typing test) and servers on ptys: `serve`.
    Login(login::options::LoginArgs),
    /// The 1987 terminal-output test: text typed to a terminal through each relay design.
    Output(output::options::OutputArgs),
}

impl Command {
    /// Runs the experiment's command, printing to `out`.
    pub fn run(self, out: &mut Output) -> anyhow::Result<()> {
        match self {
            Command::Stream(args) => stream::options::run(args, out),
            Command::Rpc(args) => rpc::options::run(args, out),
            Command::Cksum(args) => cksum::options::run(args, out),
            Command::Sweep(args) => sweep::options::run(args, out),
            Command::Ablate(args) => ablate::options::run(args, out),
            Command::Login(args) => login::options::run(args, out),
            Command::Output(args) => output::options::run(args, out),
        }
    }

    /// Whether it prints JSON (so an error is printed as JSON too).
    pub fn json(&self) -> bool {
        match self {
            Command::Stream(a) => a.common.run.json || a.json_stream,
            Command::Sweep(a) => a.json(),
            Command::Ablate(a) => a.json(),
            Command::Rpc(a) => a.command.is_none() && a.experiment.run.json,
            Command::Cksum(a) => a.run.json,
            Command::Login(a) => a.command.is_none() && a.experiment.run.json,
            Command::Output(a) => a.run.json,
        }
    }
}
