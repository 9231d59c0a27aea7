//! netlab: a TCP/IP performance laboratory.
//!
//! It runs the classic network performance experiments (Berkeley 1981, Van
//! Jacobson 1988, ...) on today's hosts with real implementations, and says
//! what limits them. The crate is layered; dependencies point down:
//!
//! | module | role |
//! |---|---|
//! | [`wire`] | byte formats as parse/emit pairs, no I/O |
//! | [`checksum`] | the Internet checksum (RFC 1071) variants, fused copy, copy variants |
//! | [`units`] | sizes and durations as typed by users |
//! | [`measure`] | rusage, /proc/stat, TCP_INFO, kernel and interface counters, host facts |
//! | [`model`] | deterministic models of historical stacks (SunOS 4 TCP and Sun RPC, 1989), pure code |
//! | [`record`] | the record every measurement becomes: each experiment's data, its JSON Lines file |
//! | [`analysis`] | pure functions over records: statistics, knee, cost model, cliffs, findings |
//! | [`testbed`] | placements: namespaces, link profiles, the wire emulator, capture |
//! | [`endpoint`] | the programs at each end (sender, receiver, servers), run as child processes |
//! | [`experiment`] | plans, the one runner and launcher, each experiment's orchestration and searches |
//! | [`agent`] | `netlab agent serve`: the ends of experiments for controllers on other hosts |
//! | [`report`] | the report's page (sections as a trait) and figure toolkit, text tables, CSV |
//! | [`options`] | the command-line option groups every experiment shares, and standard output |
//! | [`experiments`] | one folder per experiment (options, plan and cell, role, record data, analysis, report section) and the registry that lists them |
//! | [`lab`] | `netlab lab`: every experiment in its quick or full profile, one records file, one report |
//! | [`cli`] | the top-level command: the registry's subcommands and the lab, report, testbed, agent, doctor |
//!
//! The table lists the layers from the bottom: a module names only modules
//! listed before it (`tests/layers.rs` checks).

pub mod agent;
pub mod analysis;
pub mod checksum;
pub mod cli;
pub mod endpoint;
pub mod experiment;
pub mod experiments;
pub mod lab;
pub mod measure;
pub mod model;
pub mod options;
pub mod record;
pub mod report;
pub mod testbed;
pub mod units;
pub mod wire;
