//! netlab: a TCP/IP performance laboratory.
//!
//! It runs the classic network performance experiments (Berkeley 1981, Van
//! Jacobson 1988, ...) on today's hosts with real implementations, and says
//! what limits them. The crate is layered; dependencies point down:
//!
//! | module | role |
//! |---|---|
//! | [`checksum`] | the Internet checksum (RFC 1071) variants, fused copy, copy variants |
//! | [`wire`] | byte formats as parse/emit pairs, no I/O: control frames, IPv4/TCP/Ethernet, XDR and ONC RPC, record marks, telnet, rlogin, DNS |
//! | [`units`] | sizes, rates and durations as typed by users |
//! | [`measure`] | rusage, schedstat, /proc/stat, TCP_INFO, kernel and interface counters, host facts, profiles |
//! | [`model`] | deterministic models of historical stacks (SunOS 4 TCP and Sun RPC, 1989), pure code |
//! | [`record`] | the record every measurement becomes (its envelope, each experiment's data beside it), its JSON Lines file, bounded file readers |
//! | [`analysis`] | pure functions over measurements: statistics, knee, cost model, cliffs, the limits verdict, call splits |
//! | [`testbed`] | namespaces, link profiles, the wire emulator, capture, CPU budgets (cgroups) |
//! | [`endpoint`] | the endpoint process and its roles' seam, the protocol libraries under study (ONC RPC, the login servers and relays), data-port guards, the agent's endpoint side (channel, key, policy) |
//! | [`export`] | the formats results go out in, behind one trait: the HTML page, CSV, iperf3's JSON, OpenMetrics, Kubernetes YAML, Prometheus rules |
//! | [`controller`] | the engine every experiment runs on: the runner (cells, records, resume), the launcher and placements, endpoint processes local or through agents, the lab's plumbing, profiles, progress, the doctor |
//! | [`agent`] | `netlab agent serve`: the ends of experiments for controllers on other hosts |
//! | [`report`] | the report's page (sections as a trait) and figure toolkit, text tables |
//! | [`options`] | the command-line option groups every experiment shares, and standard output |
//! | [`experiments`] | one folder per experiment (options, plan and cell, role, record data, analysis, report section) and the registry that lists them |
//! | [`lab`] | `netlab lab`: every experiment in its quick or full profile, one records file, one report |
//! | [`cli`] | the top-level command: the registry's subcommands and the lab, report, testbed, agent, doctor |
//!
//! The table lists the layers from the bottom: a module names only modules
//! listed before it (`tests/suite/layers.rs` checks).

pub mod agent;
pub mod analysis;
pub mod checksum;
pub mod cli;
pub mod controller;
pub mod endpoint;
pub mod experiments;
pub mod export;
pub mod fleet;
pub mod lab;
pub mod measure;
pub mod model;
pub mod options;
pub mod record;
pub mod report;
pub mod testbed;
pub mod units;
pub mod wire;
